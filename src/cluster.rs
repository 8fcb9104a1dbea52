//! `typeahead cluster`: N partitions x R replicas of `typeahead serve` and one
//! `typeahead aggregate`, as real processes on loopback — for development, demos and tests.
//!
//! Every child is this same binary; their addresses are read from the `listening on ADDR` line
//! each prints. Stopping the cluster (SIGTERM, Ctrl-C) stops every process it started.
//!
//! **Supervision** ([`Cluster::supervise`]): a child that exits is reaped (no zombies), logged
//! with its exit status, and restarted on its own address (so the aggregator's backends list
//! stays right) after a backoff that doubles from [`FIRST_BACKOFF`] up to [`MAX_BACKOFF`]; the
//! restart is polled until it listens, never waited for, so a slow one (a large snapshot to
//! load) holds up neither the other children nor a stop. A
//! child that cannot be kept up ([`CRASH_LIMIT`] exits within [`CRASH_WINDOW`]) ends the
//! cluster with an error naming it and its last exit status, so the command exits non-zero and
//! a supervisor above it (systemd, Kubernetes) sees a failure, not a clean stop.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::manifest::Manifest;

/// Why a cluster could not start or could not be kept up.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The build's manifest is unreadable or malformed.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::Error),
    /// The caller expected another number of partitions.
    #[error(
        "--partitions {expected} but {dir} holds a build with {found} partitions (rebuild with --partitions {expected})"
    )]
    PartitionCount {
        /// What the caller asked for.
        expected: usize,
        /// The build directory.
        dir: PathBuf,
        /// What the manifest holds.
        found: usize,
    },
    /// The build directory was rebuilt with another number of partitions while running.
    #[error(
        "{dir} now holds a build with {found} partitions and this cluster serves {serving}; start the cluster again to serve it"
    )]
    LayoutChanged {
        /// The build directory.
        dir: PathBuf,
        /// The partitions the cluster was started with.
        serving: usize,
        /// What the manifest holds now.
        found: usize,
    },
    /// A process could not be started.
    #[error("cannot start {name}")]
    Spawn {
        /// The process.
        name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A process started but never said where it listens.
    #[error("{name} did not start (see its error above)")]
    NotListening {
        /// The process.
        name: String,
    },
    /// A process exited too often.
    #[error("{name} exited {exits} times within {window_s} s (last: {last}); giving up")]
    GaveUp {
        /// The process.
        name: String,
        /// Exits within the window.
        exits: usize,
        /// The window, seconds.
        window_s: u64,
        /// Its last exit status or failure.
        last: String,
    },
    /// Local I/O (the backends file, stdout).
    #[error("cluster I/O")]
    Io(#[from] std::io::Error),
}

type Result<T, E = ClusterError> = std::result::Result<T, E>;

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Directory of a partitioned build (`manifest.json` and the partition files).
    pub snapshot_dir: PathBuf,
    /// Replicas per partition.
    pub replicas: usize,
    /// The aggregator's address.
    pub listen: SocketAddr,
    /// Extra arguments for every `serve` (e.g. `--blocklist FILE`).
    pub serve_args: Vec<String>,
    /// Extra arguments for `aggregate`.
    pub aggregate_args: Vec<String>,
    /// The number of partitions the caller expects; the build's manifest must agree.
    pub expect_partitions: Option<usize>,
}

/// Exits within [`CRASH_WINDOW`] after which a child is given up on.
pub const CRASH_LIMIT: usize = 5;
/// See [`CRASH_LIMIT`].
pub const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// Wait before the first restart of a child; doubled for each exit in the window.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// Longest wait before a restart. (With [`CRASH_LIMIT`] at 5, the longest reached is 2 s.)
pub const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// A started process, stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Process {
    /// What it is, for messages.
    pub name: String,
    /// The child.
    pub child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// How it was started (with `--listen` pinned to `addr` once known), to restart it.
    exe: PathBuf,
    args: Vec<String>,
}

/// A child of the cluster with its restart history.
#[derive(Debug)]
struct Supervised {
    process: Process,
    /// When it exited, within the last [`CRASH_WINDOW`].
    exits: VecDeque<Instant>,
    /// Dead and waiting for its restart at this time.
    restart_at: Option<Instant>,
    /// Restarted, not listening yet.
    starting: Option<Starting>,
}

impl Drop for Process {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// Sends SIGTERM to `child` if it is still running.
fn terminate(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        // The signal itself, not the `kill` program: a distroless image has none.
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) on a child of ours that has not been reaped (try_wait said it
            // is running), so the pid cannot have been reused.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }
}

/// Stops `child`: SIGTERM, then SIGKILL if it is still running a second later.
fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        terminate(child);
        for _ in 0..50 {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// Starts this binary with `args` and waits (at most [`START_TIMEOUT`]) for its `listening on
/// ADDR` line; the rest of its stdout is forwarded to ours.
pub fn spawn(name: String, args: &[String]) -> Result<Process> {
    let exe = std::env::current_exe()
        .map_err(|source| ClusterError::Spawn { name: name.clone(), source })?;
    spawn_exe(&exe, name, args)
}

/// [`spawn`] for another copy of the `typeahead` binary (benches and scripts are not it).
pub fn spawn_exe(exe: &Path, name: String, args: &[String]) -> Result<Process> {
    Starting::launch(exe, name, args)?.wait()
}

/// How long a started process has to say where it listens (loading a large snapshot takes
/// seconds).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A process started and not yet listening. The supervisor polls it rather than wait, so that
/// a slow restart holds up neither the other children's supervision nor a stop (SIGTERM).
#[derive(Debug)]
struct Starting {
    /// Its address is unspecified until it listens; dropping it stops the child.
    process: Process,
    listening: mpsc::Receiver<SocketAddr>,
    by: Instant,
}

impl Starting {
    fn launch(exe: &Path, name: String, args: &[String]) -> Result<Starting> {
        let mut command = Command::new(exe);
        die_with_parent(&mut command);
        let mut child = command
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| ClusterError::Spawn { name: name.clone(), source })?;
        let stdout = child.stdout.take();
        let addr = SocketAddr::from(([0, 0, 0, 0], 0));
        let process = Process { name, child, addr, exe: exe.to_owned(), args: args.to_vec() };
        let stdout =
            stdout.ok_or_else(|| ClusterError::NotListening { name: process.name.clone() })?;
        let (tx, listening) = mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines().map_while(std::result::Result::ok) {
                match line.strip_prefix("listening on ").and_then(|a| a.parse::<SocketAddr>().ok())
                {
                    Some(addr) if tx.is_some() => {
                        let _ = tx.take().map(|t| t.send(addr));
                    }
                    _ => println!("{line}"),
                }
            }
        });
        Ok(Starting { process, listening, by: Instant::now() + START_TIMEOUT })
    }

    /// Blocks until it listens (or cannot).
    fn wait(self) -> Result<Process> {
        let left = self.by.saturating_duration_since(Instant::now());
        match self.listening.recv_timeout(left) {
            Ok(addr) => Ok(self.listens(addr)),
            Err(_) => Err(self.failed()),
        }
    }

    /// Without blocking: the process once it listens, itself while it may still, an error
    /// once it cannot (it exited, or its time is up).
    fn poll(self) -> Result<std::result::Result<Process, Starting>> {
        match self.listening.try_recv() {
            Ok(addr) => Ok(Ok(self.listens(addr))),
            Err(mpsc::TryRecvError::Empty) if Instant::now() < self.by => Ok(Err(self)),
            Err(_) => Err(self.failed()),
        }
    }

    fn listens(self, addr: SocketAddr) -> Process {
        let mut process = self.process;
        process.args = pin_listen(&process.args, addr);
        process.addr = addr;
        process
    }

    /// Stops it (dropping the process does) and says why.
    fn failed(self) -> ClusterError {
        ClusterError::NotListening { name: self.process.name.clone() }
    }
}

/// `args` with the value of `--listen` replaced by `addr`: a restart binds the same address.
fn pin_listen(args: &[String], addr: SocketAddr) -> Vec<String> {
    let mut args = args.to_vec();
    if let Some(value) = args.iter().position(|a| a == "--listen").and_then(|i| args.get_mut(i + 1))
    {
        *value = addr.to_string();
    }
    args
}

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    /// The aggregator. Declared first so that it is dropped (stopped) first: stopping the
    /// servers before it would make its last answers partial.
    aggregator: Supervised,
    /// `servers[partition][replica]`.
    servers: Vec<Vec<Supervised>>,
    _backends: tempfile::NamedTempFile,
}

impl Drop for Cluster {
    /// The aggregator first (stopping the servers before it would make its last answers
    /// partial), then every server told at once: stopped one after another, each given its
    /// second, a large cluster took a second per process to stop.
    fn drop(&mut self) {
        stop(&mut self.aggregator.process.child);
        for server in self.servers.iter_mut().flatten() {
            terminate(&mut server.process.child);
            if let Some(starting) = &mut server.starting {
                terminate(&mut starting.process.child);
            }
        }
    }
}

impl Supervised {
    fn new(process: Process) -> Self {
        Supervised { process, exits: VecDeque::new(), restart_at: None, starting: None }
    }

    /// Reaps an exit, restarts when the backoff has passed, takes a restart that listens; an
    /// error when it cannot be kept up. Never waits for a child.
    fn check(&mut self, now: Instant) -> Result<()> {
        if let Some(starting) = self.starting.take() {
            match starting.poll() {
                Ok(Ok(process)) => {
                    tracing::info!(process = %process.name, addr = %process.addr, pid = process.child.id(), "restarted");
                    self.process = process;
                }
                Ok(Err(starting)) => self.starting = Some(starting),
                // A restart that dies before it listens is one more exit.
                Err(e) => self.exited(now, crate::error::chain(&e))?,
            }
            return Ok(());
        }
        if self.restart_at.is_none() {
            let Ok(Some(status)) = self.process.child.try_wait() else { return Ok(()) };
            self.exited(now, status.to_string())?;
        }
        if self.restart_at.is_some_and(|at| now >= at) {
            self.restart_at = None;
            let Process { name, exe, args, .. } = &self.process;
            match Starting::launch(exe, name.clone(), args) {
                Ok(starting) => self.starting = Some(starting),
                Err(e) => self.exited(now, crate::error::chain(&e))?,
            }
        }
        Ok(())
    }

    /// Records an exit (or a failed restart) and schedules the restart, or gives up.
    fn exited(&mut self, now: Instant, why: String) -> Result<()> {
        self.exits.push_back(now);
        while self.exits.front().is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW) {
            self.exits.pop_front();
        }
        let name = &self.process.name;
        if self.exits.len() >= CRASH_LIMIT {
            return Err(ClusterError::GaveUp {
                name: name.clone(),
                exits: self.exits.len(),
                window_s: CRASH_WINDOW.as_secs(),
                last: why,
            });
        }
        let exponent = u32::try_from(self.exits.len() - 1).unwrap_or(u32::MAX);
        let backoff = FIRST_BACKOFF.saturating_mul(2u32.saturating_pow(exponent)).min(MAX_BACKOFF);
        tracing::error!(process = %name, status = %why, restart_in_ms = backoff.as_millis() as u64, "a cluster process exited; restarting it");
        self.restart_at = Some(now + backoff);
        Ok(())
    }
}

/// Starts the servers, then the aggregator.
pub fn start(config: &ClusterConfig) -> Result<Cluster> {
    let manifest_path = crate::generation::manifest_path(&config.snapshot_dir);
    let manifest = Manifest::read(&manifest_path)?;
    if let Some(n) = config.expect_partitions
        && n != manifest.partitions.len()
    {
        return Err(ClusterError::PartitionCount {
            expected: n,
            dir: config.snapshot_dir.clone(),
            found: manifest.partitions.len(),
        });
    }
    let mut servers = Vec::new();
    let mut backends = String::from("# partition replicas (written by typeahead cluster)\n");
    for p in &manifest.partitions {
        let snapshot = config.snapshot_dir.join(p.live_file());
        let mut replicas = Vec::new();
        for r in 0..config.replicas.max(1) {
            let mut args = serve_args(&snapshot);
            args.extend(config.serve_args.iter().cloned());
            let process = spawn(format!("partition {} replica {r}", p.index), &args)?;
            println!(
                "partition {} replica {r} listening on {} (pid {})",
                p.index,
                process.addr,
                process.child.id()
            );
            replicas.push(Supervised::new(process));
        }
        let addrs: Vec<String> = replicas.iter().map(|r| r.process.addr.to_string()).collect();
        backends.push_str(&format!("{} {}\n", p.index, addrs.join(" ")));
        servers.push(replicas);
    }
    let mut file =
        tempfile::Builder::new().prefix("typeahead-backends-").suffix(".txt").tempfile()?;
    std::io::Write::write_all(&mut file, backends.as_bytes())?;
    let mut args: Vec<String> = ["aggregate", "--manifest"].map(String::from).to_vec();
    args.push(manifest_path.display().to_string());
    args.extend([
        "--backends".to_owned(),
        file.path().display().to_string(),
        "--listen".to_owned(),
        config.listen.to_string(),
    ]);
    args.extend(config.aggregate_args.iter().cloned());
    let aggregator = spawn("aggregator".into(), &args)?;
    println!("aggregator listening on {}", aggregator.addr);
    Ok(Cluster { servers, aggregator: Supervised::new(aggregator), _backends: file })
}

/// Starts the cluster and supervises it until `shutdown` resolves, then stops every process.
/// An error means the cluster could not start, a child could not be kept up, or the build
/// directory now holds another number of partitions.
pub async fn run(config: &ClusterConfig, shutdown: impl Future<Output = ()>) -> Result<()> {
    let mut running = start(config)?;
    std::io::Write::flush(&mut std::io::stdout())?;
    let mut tick = tokio::time::interval(SUPERVISE_EVERY);
    let mut layout = tokio::time::interval(LAYOUT_CHECK_EVERY);
    tokio::pin!(shutdown);
    let outcome = loop {
        tokio::select! {
            () = &mut shutdown => break Ok(()),
            _ = tick.tick() => if let Err(e) = running.supervise() { break Err(e) },
            _ = layout.tick() => if let Err(e) = running.same_layout(&config.snapshot_dir) { break Err(e) },
        }
    };
    tracing::info!("stopping every process of the cluster");
    drop(running);
    outcome
}

/// How often exited children are looked for.
const SUPERVISE_EVERY: Duration = Duration::from_millis(200);

/// How often the build's manifest is read for its number of partitions.
const LAYOUT_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Makes the child receive SIGTERM when this process dies, however it dies (even SIGKILL), so
/// a cluster never leaves orphaned servers behind.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory of the parent;
    // it runs in the forked child before exec, as pre_exec requires.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

fn serve_args(snapshot: &Path) -> Vec<String> {
    ["serve", "--snapshot", &snapshot.display().to_string(), "--listen", "127.0.0.1:0"]
        .map(String::from)
        .to_vec()
}

impl Cluster {
    /// The aggregator's address.
    pub fn aggregator_addr(&self) -> SocketAddr {
        self.aggregator.process.addr
    }

    /// An error when the build in `dir` now has another number of partitions than the servers
    /// started for it. Its files are already linked where the servers read them, so they would
    /// serve ranges the aggregator does not route by (and it refuses such a generation): the
    /// cluster stops and says to start it again. A manifest that cannot be read is left to the
    /// servers and the aggregator, which keep what they have.
    pub fn same_layout(&self, dir: &Path) -> Result<()> {
        let Ok(manifest) = Manifest::read(&crate::generation::manifest_path(dir)) else {
            return Ok(());
        };
        let (serving, found) = (self.servers.len(), manifest.partitions.len());
        if found == serving {
            return Ok(());
        }
        Err(ClusterError::LayoutChanged { dir: dir.to_owned(), serving, found })
    }

    /// Reaps and restarts exited children (see the module docs); call it a few times a second.
    /// An error means a child could not be kept up: stop the cluster and report it.
    pub fn supervise(&mut self) -> Result<()> {
        let now = Instant::now();
        for child in self.servers.iter_mut().flatten() {
            child.check(now)?;
        }
        self.aggregator.check(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell child that says it listens the first time it runs and never again (as a replica
    /// whose restart is slow to load its snapshot).
    fn listens_once(flag: &Path) -> Process {
        let script = format!(
            "if [ -e {f} ]; then exec sleep 30; fi; touch {f}; echo listening on 127.0.0.1:9; exec sleep 30",
            f = flag.display()
        );
        let args = ["-c".to_owned(), script];
        Starting::launch(Path::new("/bin/sh"), "child".into(), &args).unwrap().wait().unwrap()
    }

    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, r)| !r.starts_with('Z')))
    }

    /// The restart is polled on every check, never waited for: a check returns while the
    /// restarted child has not said where it listens (the supervisor's loop also watches for
    /// SIGTERM, which must not wait up to [`START_TIMEOUT`]), and dropping it stops that child.
    #[test]
    fn a_restart_slow_to_listen_is_polled_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let process = listens_once(&dir.path().join("flag"));
        assert_eq!(process.addr, SocketAddr::from(([127, 0, 0, 1], 9)));
        let first = process.child.id();
        let mut supervised = Supervised::new(process);
        // SAFETY: our child, not reaped yet.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(libc::pid_t::try_from(first).unwrap(), libc::SIGKILL);
        }
        let start = Instant::now();
        while supervised.restart_at.is_none() {
            supervised.check(start).unwrap();
            assert!(start.elapsed() < Duration::from_secs(10), "the exit was never reaped");
        }
        supervised.check(start + MAX_BACKOFF).unwrap();
        let restart = supervised.starting.as_ref().expect("restarted").process.child.id();
        assert!(alive(restart));
        for _ in 0..5 {
            supervised.check(Instant::now()).unwrap();
            assert!(supervised.starting.is_some(), "still not listening, still polled");
        }
        assert_eq!(supervised.process.child.id(), first, "the dead one until the restart listens");
        drop(supervised);
        assert!(!alive(restart), "a restart not listening yet is stopped with the cluster");
    }

    #[test]
    fn a_child_that_exits_before_it_listens_is_one_more_exit() {
        let args = ["-c".to_owned(), "exit 3".to_owned()];
        let starting = Starting::launch(Path::new("/bin/sh"), "child".into(), &args).unwrap();
        let err = starting.wait().unwrap_err();
        assert!(matches!(err, ClusterError::NotListening { ref name } if name == "child"), "{err}");
    }
}
