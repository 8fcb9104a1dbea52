//! How the aggregator reaches a replica: the [`Transport`] trait (one `GET` with a bound on
//! the answer's size), and [`HttpTransport`], its production form over pooled, kept-alive
//! HTTP/1 connections whose abandoned exchanges are finished in the background
//! ([`super::detach`]). Tests swap in an in-memory transport ([`super::fake`]) to drive
//! picking, hedging and ejection on tokio's paused clock.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::backends::Policy;

/// How the aggregator reaches a replica: [`HttpTransport`] in production. Tests drive
/// replica picking, hedging, timeouts and ejection through an in-memory transport whose
/// replicas answer after a delay on tokio's paused clock, so timings are exact.
pub trait Transport: std::fmt::Debug + Send + Sync + 'static {
    /// Why a request got no answer; any error is a failed try.
    type Error: std::error::Error + Send + Sync + 'static;

    /// `GET path` on the replica at `addr`: its status and body, an error when the body is
    /// longer than `max_bytes`.
    fn get(
        &self,
        addr: SocketAddr,
        path: &str,
        max_bytes: usize,
    ) -> impl Future<Output = Result<(u16, Bytes), Self::Error>> + Send;
}

/// Why an HTTP request to a replica got no answer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The address and path do not make a URI.
    #[error("bad request URI")]
    Uri(#[from] hyper::http::uri::InvalidUri),
    /// Connecting or sending failed.
    #[error("request failed")]
    Request(#[from] hyper_util::client::legacy::Error),
    /// The answer's body could not be read, or was longer than the caller allowed
    /// ([`answer_limit`], [`MAX_READINESS_BYTES`]).
    #[error("cannot read the answer")]
    Body(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Longest answer read from a replica asked for `k` suggestions: room for `k` items (at most
/// [`MAX_TOP_K`](crate::snapshot::MAX_TOP_K), whatever a replica reports as its `max_k`) whose
/// texts and keys are as long as the builder makes them, every byte escaped (`\u00XX`), and
/// for the normalized query it echoes (NFKC expands U+FDFA elevenfold, and escaping a quote
/// doubles it). A replica's real answers never come near it. A faulty replica (or whatever a
/// DNS name points at) streaming without end must not fill the aggregator's memory: each try
/// in flight may hold this much, so it follows the `k` asked for (about 100 KiB at 10, under
/// 8 MiB at 1,000) rather than one size for all.
pub fn answer_limit(k: usize) -> usize {
    use typeahead_core::normalize::{MAX_KEY_BYTES, MAX_SURFACE_BYTES};
    const ESCAPED: usize = 6;
    const FIELDS: usize = 128;
    let item = ESCAPED * (MAX_SURFACE_BYTES + MAX_KEY_BYTES) + FIELDS;
    let head = 24 * crate::api::MAX_QUERY_BYTES + 4 * FIELDS;
    head + k.min(crate::snapshot::MAX_TOP_K) * item
}

/// Longest `/readyz` answer read from a replica: a few short fields.
pub const MAX_READINESS_BYTES: usize = 64 << 10;

/// Abandoned exchanges finished in the background at once ([`super::detach`]); past it, one
/// is dropped, which closes its connection. A replica that stalls leaves one behind for each
/// try given up on, each holding a connection (a file descriptor) for up to `backend_idle`;
/// ejection usually stops the asking within a few tries, but nothing else bounds them.
/// Reserved on top of the connection limits ([`crate::http::Limits::fit_to_descriptors`]).
pub const MAX_DETACHED: usize = 256;

/// Pooled, kept-alive HTTP/1 connections to the replicas.
#[derive(Debug)]
pub struct HttpTransport {
    client: Client<HttpConnector, Empty<Bytes>>,
    /// Longest an abandoned exchange is finished for ([`super::detach`]).
    finish_within: Duration,
    /// The abandoned exchanges being finished, at most [`MAX_DETACHED`].
    detached: Arc<tokio::sync::Semaphore>,
}

impl HttpTransport {
    /// A client whose connects give up after the per-try timeout and whose idle connections
    /// close after `backend_idle`.
    pub fn new(policy: &Policy) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(policy.try_timeout));
        // The idle timeout needs a timer to close connections in the background: without it
        // an idle connection goes only when its address is asked again, and one of a replica
        // that left DNS never is.
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(policy.backend_idle)
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .build(connector);
        HttpTransport {
            client,
            finish_within: policy.backend_idle,
            detached: Arc::new(tokio::sync::Semaphore::new(MAX_DETACHED)),
        }
    }
}

impl Transport for HttpTransport {
    type Error = HttpError;

    async fn get(
        &self,
        addr: SocketAddr,
        path: &str,
        max_bytes: usize,
    ) -> Result<(u16, Bytes), HttpError> {
        let uri: hyper::Uri = format!("http://{addr}{path}").parse()?;
        let client = self.client.clone();
        let exchange = async move {
            let response = client.get(uri).await?;
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), max_bytes);
            let body = body.collect().await.map_err(HttpError::Body)?.to_bytes();
            Ok((status, body))
        };
        super::detach::Detach::new(exchange, self.finish_within, &self.detached).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SuggestResponse;
    use std::sync::atomic::Ordering::Relaxed;

    /// Tries abandoned before their answer (here: every one, after 5 ms of a 30 ms answer)
    /// keep their connection: one connection serves them all, where each used to open one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn abandoned_tries_keep_their_connection() {
        use std::sync::atomic::AtomicUsize;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Relaxed);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut head = Vec::new();
                    loop {
                        let Ok(n) = stream.read(&mut buf).await else { return };
                        if n == 0 {
                            return;
                        }
                        head.extend_from_slice(&buf[..n]);
                        while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                            head.drain(..end + 4);
                            tokio::time::sleep(Duration::from_millis(30)).await;
                            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if stream.write_all(answer).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        let transport = HttpTransport::new(&Policy::default());
        for _ in 0..10 {
            let abandoned =
                tokio::time::timeout(Duration::from_millis(5), transport.get(addr, "/x", 1024));
            assert!(abandoned.await.is_err(), "answered within 5 ms");
            // The detached exchange ends, and its connection goes back to the pool.
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        let answer = transport.get(addr, "/x", 1024).await.unwrap();
        assert_eq!(answer, (200, Bytes::from_static(b"ok")));
        // One connection for all; a late pool return on a loaded machine may add one or two.
        let opened = accepted.load(Relaxed);
        assert!(opened <= 3, "{opened} connections opened for 11 exchanges");
    }

    /// An answer longer than what `k` allows ([`answer_limit`]) is a failed try, read no
    /// further (here a replica that claims 1 GiB and sends until the aggregator stops reading).
    #[tokio::test]
    async fn an_endless_answer_is_a_failed_try() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let mut buf = vec![0u8; 4096];
            let _ = stream.read(&mut buf).await;
            let head = b"HTTP/1.1 200 OK\r\ncontent-length: 1073741824\r\n\r\n";
            if stream.write_all(head).await.is_err() {
                return;
            }
            let chunk = vec![b'x'; 64 << 10];
            while stream.write_all(&chunk).await.is_ok() {}
        });
        let transport = HttpTransport::new(&Policy::default());
        let get = transport.get(addr, "/x", answer_limit(10));
        let outcome = tokio::time::timeout(Duration::from_secs(10), get);
        let outcome = outcome.await.expect("gave up within the limit");
        assert!(matches!(outcome, Err(HttpError::Body(_))), "{outcome:?}");
    }

    /// The limit fits an answer of `k` items as long as the builder makes them, and grows with
    /// `k` up to the largest a snapshot allows.
    #[test]
    fn the_answer_limit_fits_the_longest_answer_of_k() {
        use crate::api::Suggestion;
        use crate::matching::Match;
        use typeahead_core::normalize::{MAX_KEY_BYTES, MAX_SURFACE_BYTES};
        // A control character is escaped as six bytes, the most any character takes.
        let item = Suggestion {
            text: "\u{1}".repeat(MAX_SURFACE_BYTES),
            score: f64::MIN_POSITIVE,
            key: Some("\u{1}".repeat(MAX_KEY_BYTES)),
            tier: Match::Fuzzy,
            typos: Some(2),
        };
        let max_query = crate::api::MAX_QUERY_BYTES;
        for k in [1, 10, 1000] {
            let answer = SuggestResponse {
                // The longest a typed text becomes when normalized.
                query: typeahead_core::normalize::prefix(&"\u{FDFA}".repeat(max_query / 3)),
                suggestions: vec![item.clone(); k],
                version: "v".repeat(128),
                partial: false,
                complete: false,
                cut: Some(Match::Words),
            };
            let json = serde_json::to_vec(&answer).unwrap();
            assert!(json.len() <= answer_limit(k), "k {k}: {} > {}", json.len(), answer_limit(k));
        }
        assert!(answer_limit(10) < 128 << 10);
        assert_eq!(answer_limit(usize::MAX), answer_limit(crate::snapshot::MAX_TOP_K));
    }
}
