//! Soak run: a cluster of real processes on loopback (P partitions x R replicas of
//! `typeahead serve`, one `typeahead aggregate`) under a steady open-loop load of typed
//! prefixes for a bounded time, disturbed the way production disturbs it:
//!
//! - new generations are built and published (catch-up builds over the log, a step further
//!   each time) while the load runs;
//! - the blocklist file changes twice, each time blocking the first word of the top global
//!   suggestion, which is sure to be in many answers;
//! - one replica is SIGKILLed and restarted later on its address, another is stopped with
//!   SIGTERM and restarted at once, a third is replaced by a slow one for a while.
//!
//! It reports requests sent, failed (anything but a complete 200 answer, apart from 503
//! shedding), shed (failing the soak past 1% of the requests sent), latency percentiles from each request's scheduled send time (no coordinated
//! omission; overall, and with and without the slow replica), the RSS of every process at 5%,
//! 50% and the end, and blocked-term leaks: answers containing a blocked term to requests sent
//! after the update took effect (every server reports the new blocklist version, plus two
//! aggregator probe intervals). It exits with status 1 when failed, partial or leaked is not 0.
//!
//! Run: `cargo bench --bench soak -- [--duration 300] [--rate 1000] [--partitions 3]
//! [--replicas 2]`. Prefixes and log are real AOL data when `../shared/data` exists, else
//! SYNTHETIC. The processes' logs go to stderr; the report goes to stdout.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use typeahead::blocklist::Blocklist;
use typeahead::builder::logline;
use typeahead::cluster::{Process, spawn_exe};
use typeahead::manifest::Manifest;
use typeahead::normalize;

const EXE: &str = env!("CARGO_BIN_EXE_typeahead");
/// The aggregator probes replicas (and learns their blocklist versions) this often.
const PROBE_INTERVAL: Duration = Duration::from_millis(250);
/// Delay of every answer of the slow replica.
const SLOW_MS: &str = "60";

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let value = std::env::args().skip_while(|a| a != name).nth(1);
    value.and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The log the generations are built from, and the hours of the first build and each step.
struct Data {
    log: PathBuf,
    first_until: u32,
    step_hours: u32,
    source: &'static str,
}

fn data(dir: &Path) -> Data {
    let aol = common::aol_log();
    if aol.exists() {
        let start = logline::parse_timestamp("2006-05-01 00:00:00").unwrap();
        return Data {
            log: aol,
            first_until: (start / 3600) as u32,
            step_hours: 48,
            source: "real AOL log",
        };
    }
    let mut cfg = typeahead::synth::LogConfig::new(7);
    cfg.hours = 240;
    cfg.events_per_hour = 10_000;
    let log = dir.join("synthetic.tsv");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
    typeahead::synth::write_log(&cfg, 0, cfg.hours, &mut out).unwrap();
    out.flush().unwrap();
    let first = (cfg.start_unix / 3600) as u32 + 120;
    Data { log, first_until: first, step_hours: 24, source: "SYNTHETIC log" }
}

/// One catch-up build that publishes a generation into `out`.
fn build(log: &Path, dir: &Path, partitions: usize, until: u32) -> Result<(), String> {
    let out = Command::new(EXE)
        .args(["build", "--input", log.to_str().unwrap()])
        .args(["--state", dir.join("state").to_str().unwrap()])
        .args(["--out", dir.join("serve").to_str().unwrap()])
        .args(["--partitions", &partitions.to_string(), "--max-churn", "1"])
        .args(["--until", &logline::format_hour(until)])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A blocking GET of `path` (Connection: close): status and body.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n")?.1.to_owned()))
}

/// Polls `done` every 20 ms until it holds (true) or `limit` has passed (false).
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn readyz(addr: SocketAddr) -> Option<serde_json::Value> {
    let (status, body) = get(addr, "/readyz")?;
    if status != 200 {
        return None;
    }
    serde_json::from_str(&body).ok()
}

/// One process of the cluster, restarted in place as the script says.
struct Node {
    name: String,
    args: Vec<String>,
    addr: SocketAddr,
    process: Option<Process>,
    /// RSS at 5% and 50% of the run.
    rss_kb: [u64; 2],
    restarts: u32,
}

impl Node {
    fn start(name: String, mut args: Vec<String>) -> Node {
        let process = spawn_exe(Path::new(EXE), name.clone(), &args).expect("process starts");
        let addr = process.addr;
        // Restarts reuse the address, so the aggregator's backend list stays right.
        let listen = args.iter().position(|a| a == "--listen").unwrap() + 1;
        args[listen] = addr.to_string();
        Node { name, args, addr, process: Some(process), rss_kb: [0; 2], restarts: 0 }
    }

    fn pid(&self) -> u32 {
        self.process.as_ref().map_or(0, |p| p.child.id())
    }

    fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }

    /// SIGTERM (graceful: in-flight requests finish) through `Process`'s drop.
    fn stop(&mut self) {
        self.process = None;
    }

    fn restart(&mut self, extra: &[&str]) {
        self.process = None;
        let mut args = self.args.clone();
        args.extend(extra.iter().map(|s| s.to_string()));
        self.process = Some(spawn_exe(Path::new(EXE), self.name.clone(), &args).expect("restart"));
        self.restarts += 1;
    }
}

/// A blocked term and when it was written; answers after `written` that contain it are kept
/// (their send times) to be judged against the moment the update took effect.
struct Blocked {
    term: String,
    list: Blocklist,
    written: Instant,
    effective: Option<Instant>,
    hits: Vec<Instant>,
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    /// When each request was due, in ms since the load started (parallel to `latencies_us`).
    sent_ms: Vec<u32>,
    ok: u64,
    partial: u64,
    shed: u64,
    failed: u64,
    samples: Vec<String>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.latencies_us.extend(other.latencies_us);
        self.sent_ms.extend(other.sent_ms);
        self.ok += other.ok;
        self.partial += other.partial;
        self.shed += other.shed;
        self.failed += other.failed;
        self.samples.extend(other.samples.into_iter().take(5));
    }

    /// Keeps the first few failed or partial answers, with when they were due, for the report.
    fn sample(&mut self, due: Duration, what: &str, prefix: &str) {
        if self.samples.len() < 5 {
            self.samples.push(format!("t={:6.1}s {what}: {prefix:?}", due.as_secs_f64()));
        }
    }
}

/// Open-loop load at `rate` requests/s from `tasks` connections until `stop`.
async fn load(
    base: String,
    prefixes: Arc<Vec<String>>,
    rate: f64,
    tasks: usize,
    stop: Arc<AtomicBool>,
    blocked: Arc<Mutex<Vec<Blocked>>>,
) -> Tally {
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(tasks)
        .build_http::<Empty<Bytes>>();
    let interval = Duration::from_secs_f64(tasks as f64 / rate);
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for t in 0..tasks {
        let (client, base, prefixes) = (client.clone(), base.clone(), Arc::clone(&prefixes));
        let (stop, blocked) = (Arc::clone(&stop), Arc::clone(&blocked));
        set.spawn(async move {
            let mut tally = Tally::default();
            let mut next = start + interval.mul_f64(t as f64 / tasks as f64);
            let mut i = t * 7919;
            while !stop.load(Ordering::Relaxed) {
                // Latency counts from when the request was due; if the generator slept, from when
                // it woke (the timer is coarse: that delay is ours, not the cluster's).
                let scheduled = if Instant::now() < next {
                    tokio::time::sleep_until(next.into()).await;
                    Instant::now()
                } else {
                    next
                };
                next += interval;
                i = (i + 1) % prefixes.len();
                let q: String = form_urlencoded::byte_serialize(prefixes[i].as_bytes()).collect();
                let url = format!("{base}/v1/suggest?q={q}").parse().unwrap();
                let result = match client.get(url).await {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        r.into_body().collect().await.map(|b| (status, b.to_bytes())).ok()
                    }
                    Err(_) => None,
                };
                let waited = scheduled.elapsed().as_micros();
                tally.latencies_us.push(waited.min(u128::from(u32::MAX)) as u32);
                tally.sent_ms.push(scheduled.duration_since(start).as_millis() as u32);
                match result {
                    Some((200, body)) => {
                        let json: serde_json::Value =
                            serde_json::from_slice(&body).unwrap_or_default();
                        if !json["suggestions"].is_array() {
                            // A 200 that is not an answer is a failure, not an empty one.
                            tally.failed += 1;
                            let what = "200 without a suggestions list";
                            tally.sample(scheduled.duration_since(start), what, &prefixes[i]);
                        } else if json["partial"] == true {
                            tally.partial += 1;
                            tally.sample(scheduled.duration_since(start), "partial", &prefixes[i]);
                        } else {
                            tally.ok += 1;
                        }
                        judge(&json, scheduled, &blocked);
                    }
                    Some((503, _)) => tally.shed += 1,
                    other => {
                        tally.failed += 1;
                        let what = format!("failed ({:?})", other.map(|o| o.0));
                        tally.sample(scheduled.duration_since(start), &what, &prefixes[i]);
                    }
                }
            }
            tally
        });
    }
    let mut all = Tally::default();
    while let Some(t) = set.join_next().await {
        all.merge(t.unwrap());
    }
    all
}

/// Records answers that contain a blocked term, sent after the term was written.
fn judge(json: &serde_json::Value, sent: Instant, blocked: &Mutex<Vec<Blocked>>) {
    let Some(list) = json["suggestions"].as_array() else { return };
    let mut blocked = blocked.lock().unwrap();
    for b in blocked.iter_mut().filter(|b| sent >= b.written) {
        let hit = list
            .iter()
            .any(|s| s["text"].as_str().is_some_and(|t| b.list.blocks(&normalize::key(t))));
        if hit {
            b.hits.push(sent);
        }
    }
}

/// The cluster and everything the script does to it.
struct Soak {
    dir: PathBuf,
    data: Data,
    partitions: usize,
    until: u32,
    servers: Vec<Vec<Node>>,
    aggregator: Node,
    blocklist: PathBuf,
    blocked: Arc<Mutex<Vec<Blocked>>>,
    builder: Option<std::thread::JoinHandle<Result<(), String>>>,
    started: Instant,
    generations: u32,
    checks: Vec<String>,
    /// When the slow replica served, in ms since the start.
    slow_ms: (u32, u32),
}

impl Soak {
    fn log(&self, what: impl std::fmt::Display) {
        println!("  t={:>6.1}s  {what}", self.started.elapsed().as_secs_f64());
    }

    fn manifest(&self) -> Manifest {
        Manifest::read(&self.dir.join("serve").join("manifest.json")).unwrap()
    }

    /// Starts a catch-up build one step further; it publishes while the load runs.
    fn publish(&mut self) {
        if self.builder.as_ref().is_some_and(|b| !b.is_finished()) {
            self.log("publish skipped: the previous build is still running");
            return;
        }
        self.finish_build();
        self.until += self.data.step_hours;
        let (log, dir, partitions, until) =
            (self.data.log.clone(), self.dir.clone(), self.partitions, self.until);
        self.builder = Some(std::thread::spawn(move || build(&log, &dir, partitions, until)));
        self.log(format!("build started: generation up to {}", logline::format_hour(self.until)));
    }

    fn finish_build(&mut self) {
        if let Some(b) = self.builder.take() {
            b.join().unwrap().expect("build");
            self.generations += 1;
        }
    }

    fn server_versions(&self, key: &str) -> Vec<Option<String>> {
        let nodes = self.servers.iter().flatten();
        nodes.map(|n| readyz(n.addr).and_then(|j| j[key].as_str().map(str::to_owned))).collect()
    }

    /// Blocks the first word of the top global suggestion, waits until every server applied
    /// it, and records when it took effect for the aggregator.
    fn block_top_word(&mut self) {
        let (_, body) = get(self.aggregator.addr, "/v1/suggest?q=").unwrap_or_default();
        let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let known: Vec<String> =
            self.blocked.lock().unwrap().iter().map(|b| b.term.clone()).collect();
        let term = json["suggestions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["text"].as_str())
            .filter_map(|t| normalize::key(t).split(' ').next().map(str::to_owned))
            .find(|w| !w.is_empty() && !known.contains(w))
            .expect("a word to block");
        let before = self.server_versions("blocklist_version");
        let text: String = known.iter().chain([&term]).map(|t| format!("{t}\n")).collect();
        let written = Instant::now();
        self.blocked.lock().unwrap().push(Blocked {
            term: term.clone(),
            list: Blocklist::parse(&term).unwrap(),
            written,
            effective: None,
            hits: Vec::new(),
        });
        typeahead::atomic::write(&self.blocklist, text.as_bytes()).unwrap();
        let done = wait_until(Duration::from_secs(10), || {
            let now = self.server_versions("blocklist_version");
            now.iter().zip(&before).all(|(n, b)| n.is_some() && n != b)
        });
        assert!(done, "the servers did not apply the blocklist in 10 s");
        let applied = Instant::now();
        if let Some(b) = self.blocked.lock().unwrap().iter_mut().find(|b| b.term == term) {
            b.effective = Some(applied + 2 * PROBE_INTERVAL);
        }
        self.log(format!(
            "blocklist: {term:?} blocked; every server applied it {} ms after the write",
            (applied - written).as_millis()
        ));
    }

    /// After a restart: the replica must serve the generation published last.
    fn check_latest(&mut self, p: usize, r: usize, what: &str) {
        let addr = self.servers[p][r].addr;
        let (mut got, mut want) = (None, None);
        let latest = wait_until(Duration::from_secs(10), || {
            want = self.manifest().partitions.get(p).map(|x| x.checksum.clone());
            got = readyz(addr).and_then(|j| j["version"].as_str().map(str::to_owned));
            got.is_some() && got == want
        });
        self.checks.push(if latest {
            format!("p{p}r{r} {what}: serves the latest generation")
        } else {
            format!("p{p}r{r} {what}: NOT on the latest generation ({got:?}, want {want:?})")
        });
    }

    fn kill(&mut self, p: usize, r: usize) {
        self.servers[p][r].kill();
        self.log(format!("p{p}r{r} killed (SIGKILL)"));
    }

    fn restart(&mut self, p: usize, r: usize, extra: &[&str], what: &str) {
        self.servers[p][r].restart(extra);
        self.log(format!("p{p}r{r} {what}"));
        self.check_latest(p, r, what);
    }
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return; // `cargo test --benches` starts benches without --bench: nothing to do
    }
    let duration = Duration::from_secs_f64(arg("--duration", 300.0));
    let rate: f64 = arg("--rate", 1000.0);
    let partitions: usize = arg("--partitions", 3);
    let replicas: usize = arg("--replicas", 2).max(2);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_owned();
    let data = data(&dir);
    let (prefixes, prefix_source) = common::typed_prefixes(200_000);
    let blocklist = dir.join("blocked.txt");
    std::fs::write(&blocklist, "# soak: terms are added while it runs\n").unwrap();
    let until = data.first_until;
    build(&data.log, &dir, partitions, until).expect("first build");
    let (servers, aggregator) = start_cluster(&dir, replicas, &blocklist);
    // Traffic starts once the aggregator is ready, as a load balancer would send it.
    let ready = wait_until(Duration::from_secs(10), || readyz(aggregator.addr).is_some());
    assert!(ready, "the aggregator was not ready within 10 s");
    println!(
        "== soak: {partitions} partitions x {replicas} replicas + aggregator, {rate:.0} req/s \
         for {:.0} s; log: {}; prefixes: {prefix_source} ==",
        duration.as_secs_f64(),
        data.source
    );
    let mut soak = Soak {
        dir,
        data,
        partitions,
        until,
        servers,
        aggregator,
        blocklist,
        blocked: Arc::default(),
        builder: None,
        started: Instant::now(),
        generations: 1,
        checks: Vec::new(),
        slow_ms: (0, 0),
    };

    let stop = Arc::new(AtomicBool::new(false));
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let load_task = runtime.spawn(load(
        format!("http://{}", soak.aggregator.addr),
        Arc::new(prefixes),
        rate,
        64,
        Arc::clone(&stop),
        Arc::clone(&soak.blocked),
    ));

    // The script; times are shares of the duration.
    let started = soak.started;
    let at = |share: f64| {
        let t = started + duration.mul_f64(share);
        std::thread::sleep(t.saturating_duration_since(Instant::now()));
    };
    let sample_rss = |soak: &mut Soak, i: usize| {
        for node in soak.servers.iter_mut().flatten().chain([&mut soak.aggregator]) {
            node.rss_kb[i] = common::rss_kb(node.pid());
        }
    };
    at(0.05);
    sample_rss(&mut soak, 0);
    let last = partitions - 1;
    at(0.10);
    soak.publish();
    at(0.20);
    soak.kill(0, 0);
    at(0.25);
    soak.publish();
    at(0.30);
    soak.restart(0, 0, &[], "restarted after the kill");
    at(0.40);
    soak.slow_ms.0 = started.elapsed().as_millis() as u32;
    soak.restart(
        last,
        1,
        &["--inject-delay-ms", SLOW_MS],
        &format!("replaced by a slow replica (+{SLOW_MS} ms per answer)"),
    );
    at(0.45);
    soak.block_top_word();
    at(0.50);
    sample_rss(&mut soak, 1);
    soak.publish();
    at(0.60);
    soak.restart(last, 1, &[], "back to normal speed");
    soak.slow_ms.1 = started.elapsed().as_millis() as u32;
    at(0.65);
    soak.servers[1 % partitions][0].stop();
    soak.restart(1 % partitions, 0, &[], "stopped (SIGTERM) and restarted at once");
    at(0.70);
    soak.publish();
    at(0.80);
    soak.block_top_word();
    at(1.0);
    stop.store(true, Ordering::Relaxed);
    let tally = runtime.block_on(load_task).unwrap();
    soak.finish_build();
    report(&soak, tally, duration);
}

fn start_cluster(dir: &Path, replicas: usize, blocklist: &Path) -> (Vec<Vec<Node>>, Node) {
    let serve_dir = dir.join("serve");
    let manifest = Manifest::read(&serve_dir.join("manifest.json")).unwrap();
    let mut servers: Vec<Vec<Node>> = Vec::new();
    let mut backends = String::new();
    for p in &manifest.partitions {
        let snapshot = serve_dir.join(p.live_file()).display().to_string();
        let nodes: Vec<Node> = (0..replicas)
            .map(|r| {
                let args = [
                    "serve",
                    "--snapshot",
                    &snapshot,
                    "--listen",
                    "127.0.0.1:0",
                    "--blocklist",
                    blocklist.to_str().unwrap(),
                    "--watch-interval-ms",
                    "100",
                ];
                Node::start(format!("p{}r{r}", p.index), args.map(String::from).to_vec())
            })
            .collect();
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr.to_string()).collect();
        backends.push_str(&format!("{} {}\n", p.index, addrs.join(" ")));
        servers.push(nodes);
    }
    let backends_file = dir.join("backends.txt");
    std::fs::write(&backends_file, backends).unwrap();
    let manifest = serve_dir.join("manifest.json");
    let args = [
        "aggregate",
        "--manifest",
        manifest.to_str().unwrap(),
        "--backends",
        backends_file.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        // Small enough to fill early: the aggregator's RSS then shows a plateau, not the cache.
        "--cache-entries",
        "20000",
    ];
    (servers, Node::start("aggregator".into(), args.map(String::from).to_vec()))
}

/// p50, p99, p99.9 and max of the latencies (µs) whose send time passes `keep`.
fn quantiles(t: &Tally, keep: impl Fn(u32) -> bool) -> String {
    let mut l: Vec<u32> =
        t.latencies_us.iter().zip(&t.sent_ms).filter(|(_, s)| keep(**s)).map(|(l, _)| *l).collect();
    l.sort_unstable();
    let q = |q: f64| {
        l.get(((l.len() as f64 * q) as usize).min(l.len().saturating_sub(1))).copied().unwrap_or(0)
            as f64
            / 1e3
    };
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms ({} requests)",
        q(0.5),
        q(0.99),
        q(0.999),
        q(1.0),
        l.len()
    )
}

fn report(soak: &Soak, tally: Tally, duration: Duration) {
    let sent = tally.latencies_us.len() as u64;
    println!("== result ==");
    println!(
        "  sent {sent} ({:.0}/s), ok {}, failed {}, partial {}, shed {}",
        sent as f64 / duration.as_secs_f64(),
        tally.ok,
        tally.failed,
        tally.partial,
        tally.shed
    );
    for s in &tally.samples {
        println!("    {s}");
    }
    let (a, b) = soak.slow_ms;
    println!("  latency from scheduled send, all:              {}", quantiles(&tally, |_| true));
    println!(
        "    while no replica was slow:                   {}",
        quantiles(&tally, |s| s < a || s >= b)
    );
    println!(
        "    while a replica answered {SLOW_MS} ms late:         {}",
        quantiles(&tally, |s| s >= a && s < b)
    );
    println!("  generations published: {}", soak.generations);
    let (_, metrics) = get(soak.aggregator.addr, "/metrics").unwrap_or_default();
    let counter = |name: &str| common::metric(&metrics, name).unwrap_or(0.0);
    println!(
        "  hedges: {} sent, {} held back by the budget",
        counter("typeahead_hedged_requests_total"),
        counter("typeahead_hedges_skipped_total")
    );
    let mut leaked = 0;
    for b in soak.blocked.lock().unwrap().iter() {
        let effective = b.effective.unwrap_or(b.written);
        let late = b.hits.iter().filter(|&&t| t >= effective).count();
        let window = b.hits.iter().filter(|&&t| t < effective).count();
        leaked += late;
        println!(
            "  blocked {:?}: {late} leaks after it took effect ({} ms after the write); {window} answers with it inside that window",
            b.term,
            (effective - b.written).as_millis()
        );
    }
    for c in &soak.checks {
        println!("  {c}");
    }
    println!("  memory (RSS, MiB)   at 5%   at 50%   end   (restarts)");
    for n in soak.servers.iter().flatten().chain([&soak.aggregator]) {
        println!(
            "    {:<14} {:>8.1} {:>8.1} {:>6.1}   {}",
            n.name,
            n.rss_kb[0] as f64 / 1024.0,
            n.rss_kb[1] as f64 / 1024.0,
            common::rss_kb(n.pid()) as f64 / 1024.0,
            n.restarts
        );
    }
    let bad_checks = soak.checks.iter().filter(|c| c.contains("NOT on the latest")).count();
    // Shedding is allowed under a slowed replica, not as a way of answering nothing: an
    // aggregator that shed every request would otherwise pass.
    let shed_ok = tally.shed * 100 <= sent;
    if !shed_ok {
        println!("  shed more than 1% of the requests sent");
    }
    let verdict =
        tally.failed == 0 && tally.partial == 0 && leaked == 0 && bad_checks == 0 && shed_ok;
    println!("== soak {} ==", if verdict { "PASSED" } else { "FAILED" });
    if !verdict {
        std::process::exit(1);
    }
}
