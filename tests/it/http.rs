//! A real HTTP client and a real `typeahead serve` process for the serving tests.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::support::bin;

/// A response: status, headers, body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

/// A keep-alive HTTP/1.1 client (loopback only).
#[derive(Clone)]
pub struct Client {
    inner: HyperClient<HttpConnector, Full<Bytes>>,
}

impl Client {
    pub fn new() -> Self {
        Client { inner: HyperClient::builder(TokioExecutor::new()).build_http() }
    }

    pub async fn request(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Reply, String> {
        self.request_within(Duration::from_secs(10), method, url, headers, body).await
    }

    /// [`Client::request`] that waits up to `limit` for the answer's head.
    pub async fn request_within(
        &self,
        limit: Duration,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Reply, String> {
        let mut builder = hyper::Request::builder().method(method).uri(url);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let request =
            builder.body(Full::new(Bytes::copy_from_slice(body))).map_err(|e| e.to_string())?;
        let response = tokio::time::timeout(limit, self.inner.request(request))
            .await
            .map_err(|_| "request timed out".to_string())?
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body =
            response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes().to_vec();
        Ok(Reply { status, headers, body })
    }

    pub async fn get(&self, url: &str) -> Reply {
        self.request("GET", url, &[], b"").await.unwrap_or_else(|e| panic!("GET {url}: {e}"))
    }

    /// The value of the unlabelled sample `name` in the text at `url` (a `/metrics`).
    pub async fn metric(&self, url: &str, name: &str) -> f64 {
        let text = String::from_utf8(self.get(url).await.body).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    }

    /// Waits up to 10 s for [`Client::metric`] to reach `at_least`, and returns it: what a
    /// background task (a watcher, a poll) counts happens on its own schedule, later on a
    /// loaded machine.
    pub async fn metric_reaching(&self, url: &str, name: &str, at_least: f64) -> f64 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let value = self.metric(url, name).await;
            if value >= at_least || tokio::time::Instant::now() > deadline {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// Any `typeahead` process that prints `<marker> ADDR` once it listens; killed on drop.
pub struct Process {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Process {
    pub fn start(args: &[&str], marker: &str) -> Process {
        Process::start_with_env(args, &[], marker)
    }

    /// [`Process::start`] with extra environment variables.
    pub fn start_with_env(args: &[&str], env: &[(&str, String)], marker: &str) -> Process {
        let mut command = bin();
        command.args(args).envs(env.iter().map(|(k, v)| (k, v)));
        Process::spawn(command, marker)
    }

    /// Another program that ends up running `typeahead` in its place (`unshare ... exec`),
    /// with extra environment variables.
    pub fn start_program(
        program: &str,
        args: &[&str],
        env: &[(&str, String)],
        marker: &str,
    ) -> Process {
        let mut command = std::process::Command::new(program);
        command.args(args).envs(env.iter().map(|(k, v)| (k, v)));
        Process::spawn(command, marker)
    }

    fn spawn(mut command: std::process::Command, marker: &str) -> Process {
        let mut child =
            command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn typeahead");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        let marker = marker.to_owned();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            // Keep draining stdout so the child never blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(a) = line
                    .strip_prefix(marker.as_str())
                    .and_then(|a| a.trim().parse::<SocketAddr>().ok())
                {
                    let _ = tx.take().map(|t| t.send(a));
                }
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(60)).expect("process printed its address");
        Process { child, addr }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    /// SIGTERM first, so a `typeahead cluster` stops the processes it started; SIGKILL if it
    /// does not exit within 5 s.
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `typeahead serve` process, killed on drop.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    pub admin: Option<SocketAddr>,
}

impl Server {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts the real binary on `snapshot` with extra arguments; waits for its addresses.
    pub fn start(snapshot: &Path, extra: &[&str]) -> Server {
        Server::start_logging(snapshot, extra, Stdio::null())
    }

    /// [`Server::start`] with the server's log (at the default level) sent to `stderr`.
    pub fn start_logging(snapshot: &Path, extra: &[&str], stderr: impl Into<Stdio>) -> Server {
        Server::launch(bin(), snapshot, extra, stderr.into())
    }

    /// [`Server::start`] in a process that may open at most `limit` files (`RLIMIT_NOFILE`,
    /// soft and hard).
    pub fn start_with_open_files(snapshot: &Path, extra: &[&str], limit: u64) -> Server {
        let mut command = bin();
        crate::support::limit_resource(&mut command, libc::RLIMIT_NOFILE, limit);
        Server::launch(command, snapshot, extra, Stdio::null())
    }

    fn launch(
        mut command: std::process::Command,
        snapshot: &Path,
        extra: &[&str],
        stderr: Stdio,
    ) -> Server {
        let mut child = command
            .env_remove("RUST_LOG")
            .args([
                "serve",
                "--snapshot",
                snapshot.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--watch-interval-ms",
                "50",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn typeahead serve");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut addr = None;
        let mut admin = None;
        let wants_admin = extra.contains(&"--admin-token-file");
        while addr.is_none() || (wants_admin && admin.is_none()) {
            let line = lines.next().expect("server printed its address").expect("utf-8 stdout");
            if let Some(a) = line.strip_prefix("listening on ") {
                addr = Some(a.parse().unwrap());
            } else if let Some(a) = line.strip_prefix("admin listening on ") {
                admin = Some(a.parse().unwrap());
            }
        }
        Server { child, addr: addr.unwrap(), admin }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin.expect("admin listener"))
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().expect("wait");
        std::mem::forget(self);
        status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
