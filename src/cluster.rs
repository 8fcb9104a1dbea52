//! `typeahead cluster`: N partitions x R replicas of `typeahead serve` and one
//! `typeahead aggregate`, as real processes on loopback — for development, demos and tests.
//!
//! Every child is this same binary; their addresses are read from the `listening on ADDR` line
//! each prints. Stopping the cluster (SIGTERM, Ctrl-C, or the aggregator exiting) stops every
//! process it started.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::manifest::Manifest;

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
}

/// A started process, stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Process {
    /// What it is, for messages.
    pub name: String,
    /// The child.
    pub child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Drop for Process {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
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

/// Starts this binary with `args` and waits (at most 30 s) for its `listening on ADDR` line; the
/// rest of its stdout is forwarded to ours.
pub fn spawn(name: String, args: &[String]) -> Result<Process> {
    let exe = std::env::current_exe().context("cannot find the typeahead binary")?;
    spawn_exe(&exe, name, args)
}

/// [`spawn`] for another copy of the `typeahead` binary (benches and scripts are not it).
pub fn spawn_exe(exe: &Path, name: String, args: &[String]) -> Result<Process> {
    let mut command = Command::new(exe);
    die_with_parent(&mut command);
    let mut child = command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {name}"))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            match line.strip_prefix("listening on ").and_then(|a| a.parse::<SocketAddr>().ok()) {
                Some(addr) if tx.is_some() => {
                    let _ = tx.take().map(|t| t.send(addr));
                }
                _ => println!("{line}"),
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(addr) => Ok(Process { name, child, addr }),
        Err(_) => {
            stop(&mut child);
            bail!("{name} did not start (see its error above)")
        }
    }
}

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    /// `servers[partition][replica]`.
    pub servers: Vec<Vec<Process>>,
    /// The aggregator.
    pub aggregator: Process,
    _backends: tempfile::NamedTempFile,
}

/// Starts the servers, then the aggregator.
pub fn start(config: &ClusterConfig) -> Result<Cluster> {
    let manifest_path = config.snapshot_dir.join("manifest.json");
    let manifest = Manifest::read(&manifest_path)?;
    let mut servers = Vec::new();
    let mut backends = String::from("# partition replicas (written by typeahead cluster)\n");
    for p in &manifest.partitions {
        let snapshot = config.snapshot_dir.join(&p.file);
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
            replicas.push(process);
        }
        let addrs: Vec<String> = replicas.iter().map(|r| r.addr.to_string()).collect();
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
    Ok(Cluster { servers, aggregator, _backends: file })
}

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
    /// Whether the aggregator process is still running.
    pub fn aggregator_running(&mut self) -> bool {
        matches!(self.aggregator.child.try_wait(), Ok(None))
    }
}
