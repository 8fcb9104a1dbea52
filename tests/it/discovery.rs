//! `aggregate --backends dns:NAME:PORT` for real: the name is resolved by the system resolver
//! from a hosts file that the test bind-mounts over `/etc/hosts` in a mount namespace of the
//! aggregator's own (`unshare --mount`; needs root, as CI runs). The name has one loopback
//! address per replica (127.0.0.2, 127.0.0.3, ...; every replica on the same port, as pods
//! behind a headless Service are), and the test rewrites the file in place to scale the
//! replicas up and down while a client keeps asking.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::http::{Client, Process};
use crate::support::{BASE_HOUR, log_text, write};

const NAME: &str = "replicas.typeahead.test";

/// A port free on every address of `ips`.
pub(crate) fn common_port(ips: &[&str]) -> u16 {
    loop {
        let port = TcpListener::bind(format!("{}:0", ips[0])).unwrap().local_addr().unwrap().port();
        if ips.iter().all(|ip| TcpListener::bind(format!("{ip}:{port}")).is_ok()) {
            return port;
        }
    }
}

/// Whether this process may make a mount namespace and bind-mount in it (root); CI must.
pub(crate) fn can_unshare() -> bool {
    let ok = Command::new("unshare")
        .args(["--mount", "sh", "-c", "mount --bind /etc/hostname /etc/hostname"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "CI must run the DNS discovery test (as root)");
        eprintln!("no mount namespace here (not root?): DNS discovery test skipped");
    }
    ok
}

/// Rewrites the hosts file in place (same inode: the bind mount shows the new text).
pub(crate) fn set_hosts(hosts: &Path, ips: &[&str]) {
    let mut text = String::from("127.0.0.1 localhost\n");
    for ip in ips {
        text.push_str(&format!("{ip} {NAME}\n"));
    }
    std::fs::write(hosts, text).unwrap();
}

/// `aggregate --manifest MANIFEST --backends dns:NAME:PORT` in a mount namespace whose
/// `/etc/hosts` is `hosts`, with the environment variables `env`.
pub(crate) fn aggregator(
    hosts: &Path,
    manifest: &str,
    port: u16,
    env: &[(&str, String)],
) -> Process {
    let script = format!(
        "mount --bind {} /etc/hosts && exec {} aggregate --manifest {manifest} \
         --backends dns:{NAME}:{port} --listen 127.0.0.1:0 --poll-ms 300",
        hosts.display(),
        env!("CARGO_BIN_EXE_typeahead"),
    );
    Process::start_program("unshare", &["--mount", "sh", "-c", &script], env, "listening on ")
}

/// A server for `snapshot` on `ip:port`.
fn replica(snapshot: &Path, ip: &str, port: u16) -> Process {
    let listen = format!("{ip}:{port}");
    Process::start(
        &["serve", "--snapshot", snapshot.to_str().unwrap(), "--listen", &listen],
        "listening on ",
    )
}

/// The aggregator's healthy replicas per partition.
pub(crate) async fn healthy(c: &Client, aggregator: &Process) -> Vec<u64> {
    let j = c.get(&aggregator.url("/readyz")).await.json();
    j["healthy_replicas"]
        .as_array()
        .map(|a| a.iter().filter_map(|n| n.as_u64()).collect())
        .unwrap_or_default()
}

pub(crate) async fn wait_for(c: &Client, aggregator: &Process, want: &[u64]) {
    if let Err(now) = settle(c, aggregator, want).await {
        panic!("replicas {now:?}, want {want:?}");
    }
}

/// Waits up to 20 s for the aggregator's healthy replicas per partition to be `want`; the
/// counts it last saw if they never were.
pub(crate) async fn settle(c: &Client, aggregator: &Process, want: &[u64]) -> Result<(), Vec<u64>> {
    let started = Instant::now();
    loop {
        let now = healthy(c, aggregator).await;
        if now == want {
            return Ok(());
        }
        if started.elapsed() >= Duration::from_secs(20) {
            return Err(now);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregator_finds_replicas_by_dns_as_they_come_and_go() {
    let _turn = crate::support::HEAVY.lock().await;
    if !can_unshare() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = write(dir.path(), "log.tsv", &log_text(9, BASE_HOUR, 6, 20_000));
    let out = dir.path().join("out");
    crate::cluster::build(log.to_str().unwrap(), &out, Some(2));
    let part = |i: usize| out.join(format!("part-{i:03}.snap"));
    let ips = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"];
    let port = common_port(&ips);
    // Partition 0 on .2 and .4, partition 1 on .3 and .5.
    let mut replicas: Vec<Option<Process>> = vec![
        Some(replica(&part(0), ips[0], port)),
        Some(replica(&part(1), ips[1], port)),
        None,
        None,
    ];
    let hosts = dir.path().join("hosts");
    set_hosts(&hosts, &ips[..2]);
    let manifest = out.join("manifest.json");
    let aggregator = aggregator(&hosts, &manifest.to_string_lossy(), port, &[]);
    let c = Client::new();
    wait_for(&c, &aggregator, &[1, 1]).await;

    // A client asks all along: every answer must be whole.
    let (stop, asked, bad) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let load = {
        let (stop, asked, bad, url) =
            (stop.clone(), asked.clone(), bad.clone(), aggregator.url("/v1/suggest?q="));
        tokio::spawn(async move {
            let c = Client::new();
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut n = 0u32;
            while !stop.load(Relaxed) && Instant::now() < deadline {
                let prefix = ["", "a", "m", "s", "t", "new", "w"][(n % 7) as usize];
                n += 1;
                let r = c.request("GET", &format!("{url}{prefix}"), &[], b"").await;
                asked.fetch_add(1, Relaxed);
                let whole = r.is_ok_and(|r| r.status == 200 && r.json()["partial"] == false);
                if !whole {
                    bad.fetch_add(1, Relaxed);
                }
            }
        })
    };

    // Scale up: two more replicas appear in the name.
    replicas[2] = Some(replica(&part(0), ips[2], port));
    replicas[3] = Some(replica(&part(1), ips[3], port));
    set_hosts(&hosts, &ips);
    wait_for(&c, &aggregator, &[2, 2]).await;

    // A rolling update: a replica leaves the name first, then stops.
    set_hosts(&hosts, &[ips[1], ips[2], ips[3]]);
    wait_for(&c, &aggregator, &[1, 2]).await;
    drop(replicas[0].take());

    // A node lost: a replica dies while the name still lists it; the other one answers.
    replicas[1].as_mut().unwrap().kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    set_hosts(&hosts, &[ips[2], ips[3]]);
    wait_for(&c, &aggregator, &[1, 1]).await;

    stop.store(true, Relaxed);
    load.await.unwrap();
    let (asked, bad) = (asked.load(Relaxed), bad.load(Relaxed));
    eprintln!("discovery: {asked} answers while scaling, {bad} failed or partial");
    assert!(asked > 100, "only {asked} requests");
    assert_eq!(bad, 0, "{bad} of {asked} answers failed or were partial");
}
