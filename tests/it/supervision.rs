//! `typeahead cluster` as a supervisor: a crashed replica is reaped, logged with its exit
//! status and restarted on its address; one that cannot be kept up ends the cluster with a
//! non-zero exit naming it. (Before: the dead replica stayed a zombie, and a dead child made
//! the cluster exit 0.)

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::{BASE_HOUR, bin, log_text, run_ok, write};
use typeahead::manifest::Manifest;

/// `partition P replica R listening on ADDR (pid N)` -> (ADDR, N).
fn replica(line: &str) -> Option<(SocketAddr, u32)> {
    let rest = line.strip_prefix("partition 0 replica 0 listening on ")?;
    let (addr, pid) = rest.split_once(" (pid ")?;
    Some((addr.parse().ok()?, pid.trim_end_matches(')').parse().ok()?))
}

fn kill9(pid: u32) {
    let status = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
    assert!(status.is_ok_and(|s| s.success()));
}

/// Whether `pid` is gone or a zombie nobody reaped.
fn state_of(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next())
}

fn answers(addr: SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

#[test]
fn a_crashed_replica_is_restarted_and_one_that_keeps_crashing_fails_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let log = write(dir.path(), "log.tsv", &log_text(5, BASE_HOUR, 6, 3000));
    let out = dir.path().join("out");
    run_ok(&[
        "build",
        "--input",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--partitions",
        "2",
        "--min-score",
        "0",
    ]);
    let mut cluster = bin()
        .args(["cluster", "--snapshot-dir", out.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = cluster.stdout.take().unwrap();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let stderr = cluster.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx2.send(line);
        }
    });
    let mut seen = Vec::new();
    let mut target = None;
    while !seen.iter().any(|l: &String| l.starts_with("aggregator listening on ")) {
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("cluster started");
        target = target.or_else(|| replica(&line));
        seen.push(line);
    }
    let (addr, pid) = target.expect("partition 0 replica 0 announced");

    // A crash: reaped (no zombie) and restarted on the same address.
    kill9(pid);
    let started = Instant::now();
    loop {
        let restarted = seen.iter().any(|l| l.contains("restarted"));
        if restarted && state_of(pid).is_none() && answers(addr) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "not restarted: {seen:#?}");
        while let Ok(line) = rx.try_recv() {
            seen.push(line);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        seen.iter().any(|l| l.contains("exited") && l.contains("signal: 9")),
        "the exit status is logged: {seen:#?}"
    );
    assert_eq!(cluster.try_wait().unwrap(), None, "one crash does not stop the cluster");

    // A replica that cannot start any more (its snapshot is gone) exhausts the restarts.
    let manifest = Manifest::read(&out.join("manifest.json")).unwrap();
    std::fs::remove_file(out.join(manifest.partitions[0].live_file())).unwrap();
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&format!("--listen\0{addr}")))
        })
        .expect("the restarted replica's process");
    kill9(pid);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = cluster.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the cluster never gave up");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!status.success(), "a cluster that cannot keep a child up must fail: {status}");
    std::thread::sleep(Duration::from_millis(200));
    while let Ok(line) = rx.try_recv() {
        seen.push(line);
    }
    assert!(
        seen.iter().any(|l| l.contains("partition 0 replica 0") && l.contains("giving up")),
        "the reason is printed: {seen:#?}"
    );
}

/// A build directory rebuilt with another number of partitions while the cluster runs: its
/// files are linked where the servers read them, but the aggregator routes by the old ranges
/// (and refuses the new generation). The cluster stops with an error that says to start it
/// again, where it used to go on serving answers that lost whole partitions.
#[test]
fn a_rebuild_with_another_partition_count_stops_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let log = write(dir.path(), "log.tsv", &log_text(6, BASE_HOUR, 4, 2000));
    let out = dir.path().join("out");
    let build = |partitions: &str| {
        let (log, out) = (log.to_str().unwrap(), out.to_str().unwrap());
        run_ok(&["build", "--input", log, "--out", out, "--partitions", partitions, "--force"]);
    };
    build("2");
    let mut cluster = bin()
        .args(["cluster", "--snapshot-dir", out.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kept open to the end: a closed pipe would fail the cluster's own printing.
    let mut stdout = BufReader::new(cluster.stdout.take().unwrap()).lines();
    let started =
        stdout.by_ref().map_while(Result::ok).any(|l| l.starts_with("aggregator listening"));
    assert!(started, "the cluster did not start");
    build("3");
    let since = Instant::now();
    while cluster.try_wait().unwrap().is_none() {
        assert!(since.elapsed() < Duration::from_secs(20), "the cluster went on");
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = cluster.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("now holds a build with 3 partitions"), "{stderr}");
    drop(stdout);
}
