//! Accepting connections: the limits that keep slow or hostile clients from holding a server.
//!
//! `axum::serve` has no header timeout and no connection cap, so a slowloris client (one that
//! opens many connections and sends a header byte now and then) could hold every socket
//! forever. Servers and the aggregator accept through [`serve`] instead, which drives each
//! connection with hyper's HTTP/1 builder:
//!
//! - the request head (start line and headers) must arrive within `header_read_timeout`, and
//!   hyper restarts that clock while a kept-alive connection waits for its next request, so idle
//!   connections are closed too;
//! - the head may be at most `max_header_bytes` (431 beyond) with at most `max_headers` fields;
//! - at most `max_connections` are open at once on the listener; more are closed on accept and
//!   counted, so a flood of connections cannot exhaust file descriptors;
//! - on shutdown, in-flight requests finish (idle connections are closed at once); connections
//!   still open after `shutdown_grace` are dropped;
//! - a connection closes "lingering", as nginx and Apache do (see [`Lingering`]): the client
//!   gets its FIN at once, and the socket goes when the client closes its side, at most
//!   [`LINGER`] later;
//! - the answers hyper writes by itself for requests it cannot parse (400, 414, 431, sent
//!   before any service runs and with an empty body) get the same JSON error body as every
//!   other error ([`json_error_head`]).
//!
//! Request-level limits (URI and body size, handler timeout, concurrency) live in
//! [`super::protect`] and the admin router.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Sleep;

use crate::metrics::HttpMetrics;

/// Connection-level limits of a listener.
#[derive(Debug, Clone)]
pub struct ConnLimits {
    /// Longest a client may take to send a request head, longest an idle kept-alive
    /// connection stays open, and longest an answer may wait for a client that stopped
    /// reading it ([`Lingering`]).
    pub header_read_timeout: Duration,
    /// Largest request head (start line and headers), in bytes.
    pub max_header_bytes: usize,
    /// Most header fields in one request.
    pub max_headers: usize,
    /// Most connections open at once.
    pub max_connections: usize,
    /// Longest a shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 16 << 10,
            max_headers: 64,
            max_connections: 4096,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Bytes a connection may buffer each way: four request heads at the largest we accept.
const MAX_CONNECTION_BUFFER: usize = 64 << 10;

/// Binds a listener at `addr` (within a tokio runtime).
///
/// The unspecified IPv6 address (`[::]`) takes IPv4 connections too, whatever the host's
/// `net.ipv6.bindv6only` says, so one address serves IPv4, IPv6 and dual-stack clusters alike
/// (a pod's `0.0.0.0` is unreachable in an IPv6 one); on a host without IPv6 it binds
/// `0.0.0.0` instead, and says so. Any other address binds as it is.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let (listener, no_ipv6) = bind_std(addr)?;
    if let Some(e) = no_ipv6 {
        let v4 = listener.local_addr()?;
        tracing::warn!(error = %e, %addr, "no IPv6 on this host; listening on {v4}");
    }
    TcpListener::from_std(listener)
}

/// [`bind`]'s socket, not yet tokio's (so it may be bound outside a runtime, and dropped to
/// check an address), with the error that made `[::]` fall back to `0.0.0.0`: saying so is
/// the caller's.
pub(crate) fn bind_std(addr: SocketAddr) -> io::Result<(std::net::TcpListener, Option<io::Error>)> {
    match addr {
        SocketAddr::V6(v6) if v6.ip().is_unspecified() => match listener(addr, true) {
            Err(e)
                if matches!(e.raw_os_error(), Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL)) =>
            {
                let v4 = SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, addr.port()));
                Ok((listener(v4, false)?, Some(e)))
            }
            bound => Ok((bound?, None)),
        },
        _ => Ok((listener(addr, false)?, None)),
    }
}

/// A non-blocking listening socket at `addr`, for IPv4 as well when `dual_stack`.
fn listener(addr: SocketAddr, dual_stack: bool) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if dual_stack {
        socket.set_only_v6(false)?;
    }
    // As tokio's own `bind`: a restarted process takes its port back while the connections
    // of the one before wait out TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Serves `app` on `listener` until `shutdown` resolves, then finishes in-flight requests.
pub async fn serve(
    listener: TcpListener,
    app: impl Into<super::Front>,
    limits: ConnLimits,
    metrics: Arc<HttpMetrics>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let app = app.into();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes)
        .max_headers(limits.max_headers)
        // hyper's default (~400 KB) lets a client that pipelines requests without reading the
        // answers grow a buffer that large on each of the `max_connections` connections.
        .max_buf_size(MAX_CONNECTION_BUFFER);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // Finished connection tasks are reaped as we go, so the set holds only open ones.
        while connections.try_join_next().is_some() {}
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors or a connection reset before accept: back off
                    // briefly instead of spinning, as hyper's own server does.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(20)) => continue,
                        () = &mut shutdown => break,
                    }
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            metrics.connections_refused.inc();
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let stream = Lingering::new(stream, limits.header_read_timeout);
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        let metrics = Arc::clone(&metrics);
        connections.spawn(async move {
            // Both are released when the task ends or is aborted.
            let _open = metrics.open_connection();
            let _permit = permit;
            if let Err(e) = connection.await {
                if timed_out(&e) {
                    metrics.connections_timed_out.inc();
                }
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.shutdown_grace) => {
            tracing::warn!(grace = ?limits.shutdown_grace, open = connections.len(), "shutdown grace elapsed; closing the remaining connections");
            connections.abort_all();
        }
    }
    Ok(())
}

/// Whether a connection ended because its client was too slow: hyper's own header timer, or
/// a write that waited too long ([`Lingering`]'s `TimedOut`, which hyper passes on as the
/// cause of an I/O error and does not count as a timeout of its own).
fn timed_out(e: &hyper::Error) -> bool {
    use std::error::Error;
    let stalled = e.source().and_then(|s| s.downcast_ref::<io::Error>());
    e.is_timeout() || stalled.is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
}

/// How long a closing connection keeps discarding what the client still sends.
const LINGER: Duration = Duration::from_secs(2);

/// A TCP stream whose shutdown is a lingering close.
///
/// The server may answer before it has read a whole request: a 413 for a declared body over
/// the limit is sent as soon as the head arrives. If the socket were then closed with the
/// client's unread body bytes in its receive buffer, the kernel would send a reset instead of
/// a FIN, and a reset can destroy the 413 in flight: the client, still uploading, sees
/// "connection reset" instead of the answer. So shutdown half-closes (the client reads the
/// answer and then EOF) and discards incoming bytes until the client closes its side, for at
/// most [`LINGER`]. A client that already closed costs nothing: the first read is EOF.
///
/// It also bounds how long a write may wait. hyper's header timer runs only while it reads a
/// request head; a client that pipelines requests and stops reading the answers (its receive
/// window full) would hold the connection, its buffers and its place under the connection
/// limit forever. A write or flush that makes no progress for `stall` fails with `TimedOut`.
struct Lingering {
    stream: TcpStream,
    /// Longest a write may wait for the client ([`ConnLimits::header_read_timeout`]).
    stall: Duration,
    /// Armed when a write or flush has to wait, disarmed by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
    /// Set once the write side is shut down; the linger ends when it fires.
    deadline: Option<Pin<Box<Sleep>>>,
    /// A rewritten automatic error answer being written: its bytes, how many are out, and
    /// the length of hyper's original to report once all are.
    rewritten: Option<(Vec<u8>, usize, usize)>,
}

impl Lingering {
    fn new(stream: TcpStream, stall: Duration) -> Self {
        Lingering { stream, stall, stalled: None, deadline: None, rewritten: None }
    }

    /// `polled` (a write or flush of the stream) with the stall deadline applied: progress
    /// disarms it, waiting arms it (once), and waiting past it is an error.
    fn bounded<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let stall = self.stall;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading its answers",
            )));
        }
        Poll::Pending
    }

    /// Writes the rewritten answer to the end, then reports hyper's bytes as written.
    fn poll_rewritten(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        loop {
            let Some((bytes, done, original)) = &self.rewritten else {
                return Poll::Ready(Ok(0));
            };
            if *done == bytes.len() {
                let original = *original;
                self.rewritten = None;
                return Poll::Ready(Ok(original));
            }
            let polled = Pin::new(&mut self.stream).poll_write(cx, &bytes[*done..]);
            let n = ready!(self.bounded(cx, polled))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            if let Some((_, done, _)) = &mut self.rewritten {
                *done += n;
            }
        }
    }
}

/// hyper's own answer to a request it could not parse is a bare head: a 4xx status,
/// `content-length: 0` and no `content-type` (every answer of ours carries one). Returns that
/// head rewritten with the JSON error body (`{"error": {"code", "message"}}`), or `None` for
/// any other bytes.
fn json_error_head(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let status = text.strip_prefix("HTTP/1.1 4")?;
    if !text.ends_with("\r\n\r\n")
        || !text.contains("\r\ncontent-length: 0\r\n")
        || text.contains("\r\ncontent-type:")
    {
        return None;
    }
    let (code, message) = match status.get(..2)? {
        "14" => ("uri_too_long", "the request URI is too long"),
        "31" => ("headers_too_large", "the request head is too large"),
        _ => ("malformed_request", "the request is not valid HTTP/1.1"),
    };
    let body = crate::error::error_body(code, message);
    let head = text.replacen(
        "\r\ncontent-length: 0\r\n",
        &format!(
            "\r\ncontent-type: application/json\r\nx-content-type-options: nosniff\r\ncontent-length: {}\r\n",
            body.len()
        ),
        1,
    );
    Some([head.as_bytes(), &body].concat())
}

impl AsyncRead for Lingering {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Lingering {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.rewritten.is_none()
            && buf.starts_with(b"HTTP/1.1 4")
            && let Some(bytes) = json_error_head(buf)
        {
            this.rewritten = Some((bytes, 0, buf.len()));
        }
        if this.rewritten.is_some() {
            return this.poll_rewritten(cx);
        }
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.bounded(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // An automatic error head comes alone; anything with a body goes straight through.
        if let Some(first) = bufs.iter().find(|b| !b.is_empty())
            && (self.rewritten.is_some() || first.starts_with(b"HTTP/1.1 4"))
            && bufs.iter().map(|b| b.len()).sum::<usize>() == first.len()
        {
            return self.poll_write(cx, first);
        }
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.bounded(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.stream).poll_flush(cx);
        self.bounded(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let deadline = match &mut this.deadline {
            Some(deadline) => deadline,
            None => {
                ready!(Pin::new(&mut this.stream).poll_shutdown(cx))?;
                this.deadline.insert(Box::pin(tokio::time::sleep(LINGER)))
            }
        };
        let mut scratch = [0u8; 8192];
        loop {
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match ready!(Pin::new(&mut this.stream).poll_read(cx, &mut buf)) {
                Ok(()) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Ok(()) => {}
                // The client reset or vanished: there is nobody left to linger for.
                Err(_) => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[::]` takes connections over IPv4 and IPv6 alike: the address the Kubernetes
    /// manifests listen on, whichever family the cluster gives its pods.
    #[tokio::test]
    async fn the_unspecified_ipv6_address_takes_both_families() {
        let listener = bind("[::]:0".parse().unwrap()).unwrap();
        let port = listener.local_addr().unwrap().port();
        // The IPv6 half where the host has a loopback ::1 (not where `bind` fell back to IPv4,
        // nor where a sysctl disabled IPv6 but `[::]` still binds).
        let ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
        for to in ["127.0.0.1", "::1"].into_iter().take(if ipv6 { 2 } else { 1 }) {
            let ip: std::net::IpAddr = to.parse().unwrap();
            let wait = std::time::Duration::from_secs(10);
            let connected = tokio::time::timeout(wait, TcpStream::connect((ip, port)));
            let connected = connected.await.unwrap().unwrap();
            let (_, from) = tokio::time::timeout(wait, listener.accept()).await.unwrap().unwrap();
            assert_eq!(from.port(), connected.local_addr().unwrap().port(), "{to}");
        }
        let v4 = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(v4.local_addr().unwrap().is_ipv4());
    }
}
