//! Load test of `typeahead serve` over real loopback HTTP, one run, same machine:
//!
//! 1. closed loop on a trivial endpoint (`/healthz`) of the same server: the HTTP ceiling;
//! 2. closed loop on `/v1/suggest` with prefixes sampled from real queries (or synthetic ones);
//! 3. open loop at 50% of (2)'s throughput: latency percentiles measured from each request's
//!    scheduled send time (no coordinated omission);
//! 4. the same open loop while the snapshot file is replaced every second (hot swaps),
//!    alternating with `--swap S2` or, without it, the benchmark data (below) built with another
//!    half-life: the same data as the served snapshot unless `--snapshot` names another.
//!
//! Run: `cargo bench --bench http_load -- [--snapshot S] [--swap S2] [--swap-every SECS]
//! [--duration 5] [--concurrency 32] [--pin] [--cache-entries N] [--match prefix|all]
//! [--server-log FILE]`
//! The prefix stream never repeats within a run (one million prefixes, one cursor shared by
//! every phase), so the server's answer cache (`--cache-entries`, passed to `serve`; 0 turns it
//! off) is measured at the hit rate a real stream gives it, which each phase reports.
//! With `--pin` the server runs on core 1 and the load generator on core 0 (`taskset`).
//! With `--cluster 4x2` the same load then goes to an aggregator over 4 partitions x 2 replicas
//! of the same data (`typeahead cluster`), and the aggregator's cache hit rate is reported.
//! Without `--snapshot` it builds one from `../shared/data` (real AOL queries) if present, else
//! from synthetic data. Traffic goes to 127.0.0.1 only; every phase is bounded in time.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

mod common;

fn arg(name: &str) -> Option<String> {
    std::env::args().skip_while(|a| a != name).nth(1)
}

fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

/// Where the server's log goes: `--server-log FILE` (appended to: when each swap was
/// published and how long its load took), else nowhere.
fn server_log() -> Stdio {
    let Some(path) = arg("--server-log") else { return Stdio::null() };
    let file = std::fs::OpenOptions::new().create(true).append(true).open(&path);
    file.map_or_else(|e| panic!("--server-log {path}: {e}"), Stdio::from)
}

struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(snapshot: &Path, pin: bool, cache: Option<&str>) -> (ServerProcess, String) {
    let bin = env!("CARGO_BIN_EXE_typeahead");
    let mut cmd = if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", "1", bin]);
        c
    } else {
        Command::new(bin)
    };
    let mut child = cmd
        .args([
            "serve",
            "--snapshot",
            snapshot.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--max-concurrency",
            "4096",
        ])
        .args(cache.map(|n| ["--cache-entries", n]).into_iter().flatten())
        .stdout(Stdio::piped())
        .stderr(server_log())
        .spawn()
        .expect("start typeahead serve");
    let stdout = child.stdout.take().unwrap();
    let line = BufReader::new(stdout)
        .lines()
        .find_map(|l| l.ok()?.strip_prefix("listening on ").map(str::to_owned));
    (ServerProcess(child), line.expect("server address"))
}

fn default_snapshot(dir: &Path) -> PathBuf {
    build_into(&dir.join("load.snap"), None, &[])
}

/// What the hot-swap phase alternates the served file with: `--swap S2`, else the benchmark
/// data (as [`build_into`] finds it) built with another half-life. It must differ from the
/// served file: the server publishes a new snapshot only when the file's content (its
/// checksum) changes, so rewriting the same bytes would measure no swap at all.
fn swap_partner(dir: &Path) -> PathBuf {
    arg("--swap")
        .map(PathBuf::from)
        .unwrap_or_else(|| build_into(&dir.join("swap.snap"), None, &["--half-life", "170"]))
}

/// Builds the benchmark data (real AOL log if present, else the synthetic one) into `out`.
fn build_into(out: &Path, partitions: Option<usize>, extra: &[&str]) -> PathBuf {
    let out = out.to_path_buf();
    let log = common::aol_log();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_typeahead"));
    cmd.args(["build", "--out", out.to_str().unwrap()]).args(extra);
    if log.exists() {
        cmd.args(["--input", log.to_str().unwrap()]);
    } else {
        cmd.arg("--synthetic");
    }
    if let Some(n) = partitions {
        cmd.args(["--partitions", &n.to_string()]);
    }
    assert!(cmd.stdout(Stdio::null()).status().unwrap().success());
    out
}

/// Starts `typeahead cluster` on a partitioned build of the benchmark data.
fn start_cluster(dir: &Path, spec: &str) -> (ServerProcess, String) {
    let (parts, replicas) = spec.split_once('x').expect("--cluster PARTITIONSxREPLICAS, e.g. 4x2");
    let out = build_into(&dir.join("parts"), Some(parts.parse().expect("partitions")), &[]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_typeahead"))
        .args([
            "cluster",
            "--snapshot-dir",
            out.to_str().unwrap(),
            "--replicas",
            replicas,
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start typeahead cluster");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let addr = lines
        .find_map(|l| l.ok()?.strip_prefix("aggregator listening on ").map(str::to_owned))
        .expect("aggregator address");
    std::thread::spawn(move || lines.for_each(drop));
    (ServerProcess(child), addr)
}

/// CPU time of groups of processes over one phase, to say where a request's CPU goes: on two
/// cores shared by everything, throughput is two cores divided by the CPU one request costs.
struct CpuSplit {
    groups: Vec<(&'static str, Vec<u32>, f64)>,
}

impl CpuSplit {
    /// Starts counting for each named group of processes.
    fn of(groups: &[(&'static str, Vec<u32>)]) -> CpuSplit {
        let groups = groups
            .iter()
            .map(|(name, pids)| {
                (*name, pids.clone(), pids.iter().map(|&p| common::cpu_seconds(p)).sum())
            })
            .collect();
        CpuSplit { groups }
    }

    /// CPU seconds group `i` has used since [`CpuSplit::of`].
    fn used(&self, i: usize) -> f64 {
        let (_, pids, before) = &self.groups[i];
        pids.iter().map(|&p| common::cpu_seconds(p)).sum::<f64>() - before
    }

    /// Cores group `i` kept busy over `duration`.
    fn busy(&self, i: usize, duration: Duration) -> f64 {
        self.used(i) / duration.as_secs_f64()
    }

    /// Each group's CPU microseconds per request, and their sum, for `requests` answered.
    fn report(&self, requests: f64) -> String {
        let per = |used: f64| used * 1e6 / requests.max(1.0);
        let parts: Vec<String> = (0..self.groups.len())
            .map(|i| format!("{} {:.1} us", self.groups[i].0, per(self.used(i))))
            .collect();
        let total: f64 = (0..self.groups.len()).map(|i| per(self.used(i))).sum();
        format!("{}, total {total:.1} us", parts.join(", "))
    }
}

#[derive(Default)]
struct Stats {
    latencies_us: Vec<u32>,
    errors: u64,
}

fn encode(q: &str) -> String {
    form_urlencoded::byte_serialize(q.as_bytes()).collect()
}

/// Typed prefixes, each sent once: the cursor is shared by every connection and phase. The
/// URIs are built up front, so the generator's time per request goes to HTTP, not formatting.
struct Stream {
    uris: Vec<hyper::Uri>,
    next: AtomicUsize,
}

impl Stream {
    /// `/v1/suggest?q=<prefix><extra>` at `base` for every prefix.
    fn new(base: &str, prefixes: &[String], extra: &str) -> Stream {
        let uris = prefixes
            .iter()
            .map(|p| format!("{base}/v1/suggest?q={}{extra}", encode(p)).parse().unwrap())
            .collect();
        Stream { uris, next: AtomicUsize::new(0) }
    }

    fn uri(&self) -> hyper::Uri {
        self.uris[self.next.fetch_add(1, Ordering::Relaxed) % self.uris.len()].clone()
    }
}

/// `concurrency` connections for `duration`; `rate` (requests/s in all) makes it open-loop.
async fn run_phase(
    base: &str,
    path: Option<Arc<Stream>>,
    concurrency: usize,
    duration: Duration,
    rate: Option<f64>,
) -> (f64, Stats) {
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(concurrency)
        .build_http::<Empty<Bytes>>();
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for t in 0..concurrency {
        let (client, path) = (client.clone(), path.clone());
        let trivial: hyper::Uri = format!("{base}/healthz").parse().unwrap();
        tasks.push(tokio::spawn(async move {
            let mut stats = Stats::default();
            let interval = rate.map(|r| Duration::from_secs_f64(concurrency as f64 / r));
            let mut next = start
                + interval.map_or(Duration::ZERO, |iv| iv.mul_f64(t as f64 / concurrency as f64));
            loop {
                // Latency counts from when the request was due; if the generator had to sleep,
                // from when it woke (the timer is coarse: that delay is ours, not the server's).
                let scheduled = if interval.is_none() {
                    Instant::now()
                } else if Instant::now() < next {
                    tokio::time::sleep_until(next.into()).await;
                    Instant::now()
                } else {
                    next
                };
                if scheduled >= deadline || Instant::now() >= deadline {
                    break;
                }
                let uri = match &path {
                    Some(stream) => stream.uri(),
                    None => trivial.clone(),
                };
                let ok = match client.get(uri).await {
                    Ok(r) => {
                        let good = r.status().is_success();
                        good && r.into_body().collect().await.is_ok()
                    }
                    Err(_) => false,
                };
                stats
                    .latencies_us
                    .push(scheduled.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                stats.errors += u64::from(!ok);
                if let Some(iv) = interval {
                    next += iv;
                }
            }
            stats
        }));
    }
    let mut all = Stats::default();
    for t in tasks {
        let s = t.await.unwrap();
        all.latencies_us.extend(s.latencies_us);
        all.errors += s.errors;
    }
    let secs = start.elapsed().as_secs_f64().min(duration.as_secs_f64()).max(1e-9);
    (all.latencies_us.len() as f64 / secs, all)
}

/// The server's `/metrics` text (empty if it cannot be read).
async fn metrics_text(base: &str) -> String {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let Ok(r) = client.get(format!("{base}/metrics").parse().unwrap()).await else {
        return String::new();
    };
    String::from_utf8(r.into_body().collect().await.unwrap().to_bytes().to_vec())
        .unwrap_or_default()
}

/// One unlabelled counter or gauge of the server's `/metrics` (NaN if missing).
async fn server_metric(base: &str, name: &str) -> f64 {
    common::metric(&metrics_text(base).await, name).unwrap_or(f64::NAN)
}

/// The server's answer cache counters: (hits, misses).
async fn server_cache(base: &str) -> (f64, f64) {
    let text = metrics_text(base).await;
    let value = |name: &str| common::metric(&text, name).unwrap_or(f64::NAN);
    (value("typeahead_answer_cache_hits_total"), value("typeahead_answer_cache_misses_total"))
}

/// The server's own `/v1/suggest` latency histogram (2xx): (bucket bound in seconds, count).
async fn server_histogram(base: &str) -> Vec<(f64, f64)> {
    let text = metrics_text(base).await;
    // Labels are matched as a set: their order is the encoder's choice (it writes `le` first).
    text.lines()
        .filter_map(|l| {
            let (series, count) = l.split_once(' ')?;
            let labels = series.strip_prefix("typeahead_request_duration_seconds_bucket{")?;
            let labels: Vec<&str> = labels.strip_suffix('}')?.split(',').collect();
            if !labels.contains(&"route=\"suggest\"") || !labels.contains(&"status=\"2xx\"") {
                return None;
            }
            let le = labels.iter().find_map(|l| l.strip_prefix("le=\"")?.strip_suffix('"'))?;
            Some((if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? }, count.parse().ok()?))
        })
        .collect()
}

/// The bucket bound under which the server answered quantile `q` of the requests between two
/// histogram readings.
fn server_quantile(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> f64 {
    let delta: Vec<(f64, f64)> = after
        .iter()
        .map(|&(le, n)| (le, n - before.iter().find(|b| b.0 == le).map_or(0.0, |b| b.1)))
        .collect();
    let total = delta.last().map_or(0.0, |d| d.1);
    delta.iter().find(|d| d.1 >= q * total).map_or(f64::NAN, |d| d.0)
}

/// The latency quantiles a process's own histogram recorded between two scrapes of it.
fn inside(who: &str, before: &[(f64, f64)], after: &[(f64, f64)]) -> String {
    let ms = |q| server_quantile(before, after, q) * 1e3;
    format!(
        "inside the {who} (its own histogram): p50 <= {:.3} ms, p99 <= {:.3} ms, p99.9 <= {:.3} ms",
        ms(0.5),
        ms(0.99),
        ms(0.999)
    )
}

fn report(label: &str, rps: f64, mut s: Stats) -> f64 {
    s.latencies_us.sort_unstable();
    let p = |q: f64| {
        s.latencies_us
            .get(
                ((s.latencies_us.len() as f64 * q) as usize)
                    .min(s.latencies_us.len().saturating_sub(1)),
            )
            .copied()
            .unwrap_or(0)
    };
    println!(
        "  {label:<40} {rps:>9.0} req/s  p50 {:>6} us  p99 {:>6} us  p99.9 {:>6} us  errors {}",
        p(0.5),
        p(0.99),
        p(0.999),
        s.errors
    );
    p(0.99) as f64
}

fn main() {
    if !flag("--bench") {
        return; // `cargo test --benches` compiles and starts benches without --bench: nothing to do
    }
    let duration =
        Duration::from_secs_f64(arg("--duration").and_then(|d| d.parse().ok()).unwrap_or(5.0));
    let concurrency: usize = arg("--concurrency").and_then(|c| c.parse().ok()).unwrap_or(32);
    let pin = flag("--pin");
    // The cluster is built from the default data: next to another snapshot its throughput
    // would be compared with a server's on other data.
    assert!(
        arg("--cluster").is_none() || arg("--snapshot").is_none(),
        "--cluster builds its partitions from the default data: leave out --snapshot"
    );
    let dir = tempfile::tempdir().unwrap();
    let source =
        arg("--snapshot").map(PathBuf::from).unwrap_or_else(|| default_snapshot(dir.path()));
    // Both versions the swap phase alternates between, copied beside the served file up front
    // (hard links need one file system; copying a 10M snapshot inside the timed phase, on the
    // load generator's core, put up to 0.8 s of the generator's own delay into its p99).
    let versions =
        [(&source, "a.snap"), (&swap_partner(dir.path()), "b.snap")].map(|(from, name)| {
            let to = dir.path().join(name);
            std::fs::copy(from, &to).unwrap();
            to
        });
    let served = dir.path().join("served.snap");
    std::fs::hard_link(&versions[0], &served).unwrap();
    let (server, addr) = start_server(&served, pin, arg("--cache-entries").as_deref());
    if pin {
        let _ = Command::new("taskset")
            .args(["-pc", "0", &std::process::id().to_string()])
            .stdout(Stdio::null())
            .status();
    }
    let base = format!("http://{addr}");
    let (prefixes, from) = common::typed_prefixes(1_000_000);
    let extra = arg("--match").map(|m| format!("&match={m}")).unwrap_or_default();
    let queries = Arc::new(Stream::new(&base, &prefixes, &extra));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    println!(
        "== http load: {concurrency} connections, {:.0} s per phase, prefixes from {from}, pinned: {pin}, tiers: {} ==",
        duration.as_secs_f64(),
        arg("--match").unwrap_or_else(|| "all".into())
    );
    runtime.block_on(async {
        let _ =
            run_phase(&base, Some(Arc::clone(&queries)), concurrency, Duration::from_secs(1), None)
                .await; // warm-up
        let cpu_before = common::cpu_seconds(server.0.id());
        let (trivial, s) = run_phase(&base, None, concurrency, duration, None).await;
        let busy = (common::cpu_seconds(server.0.id()) - cpu_before) / duration.as_secs_f64();
        report("closed loop, /healthz (trivial)", trivial, s);
        println!("  server CPU during it: {:.0}% of one core", busy * 100.0);
        let cache_before = server_cache(&base).await;
        let cpu = CpuSplit::of(&[("load generator", vec![std::process::id()]), ("server", vec![server.0.id()])]);
        let (max, s) =
            run_phase(&base, Some(Arc::clone(&queries)), concurrency, duration, None).await;
        let single_cpu = cpu.report(max * duration.as_secs_f64());
        report("closed loop, /v1/suggest", max, s);
        // Under 100% the load generator, not the server, set the pace.
        println!(
            "  server CPU during it: {:.0}% of one core; CPU per request: {single_cpu}",
            cpu.busy(1, duration) * 100.0
        );
        let (hits, misses) = server_cache(&base).await;
        let (hits, misses) = (hits - cache_before.0, misses - cache_before.1);
        println!(
            "  suggest / trivial throughput: {:.0}%; answer cache hit rate {:.1}% ({hits:.0} hits, {misses:.0} misses)",
            100.0 * max / trivial,
            100.0 * hits / (hits + misses).max(1.0)
        );
        let before = server_histogram(&base).await;
        let (rps, s) =
            run_phase(&base, Some(Arc::clone(&queries)), concurrency, duration, Some(max * 0.5))
                .await;
        let p99 = report("open loop at 50% of max, /v1/suggest", rps, s);
        let after = server_histogram(&base).await;
        println!("    {}", inside("server", &before, &after));
        let pid = server.0.id();
        let swapper = {
            let (served, staged) = (served.clone(), dir.path().join("staged.snap"));
            let (a, b) = (versions[0].clone(), versions[1].clone());
            let every = Duration::from_secs_f64(
                arg("--swap-every").and_then(|d| d.parse().ok()).unwrap_or(1.0),
            );
            tokio::task::spawn_blocking(move || {
                let end = Instant::now() + duration;
                let (mut n, mut rss_after_two) = (0, None);
                while Instant::now() + every < end {
                    std::thread::sleep(every);
                    // A hard link renamed over the served path: a new file to the server,
                    // and no copying on the load generator's core.
                    let _ = std::fs::remove_file(&staged);
                    std::fs::hard_link(if n % 2 == 0 { &b } else { &a }, &staged).unwrap();
                    std::fs::rename(&staged, &served).unwrap();
                    n += 1;
                    if n == 2 {
                        // Both snapshots have been loaded once: the baseline for growth.
                        std::thread::sleep(every.min(Duration::from_millis(500)));
                        rss_after_two = Some(common::rss_kb(pid));
                    }
                }
                std::thread::sleep(every.min(Duration::from_millis(500)));
                (n, rss_after_two, common::rss_kb(pid))
            })
        };
        let before = server_histogram(&base).await;
        let (rps, s) =
            run_phase(&base, Some(Arc::clone(&queries)), concurrency, duration, Some(max * 0.5))
                .await;
        let (swaps, rss_after_two, rss_end) = swapper.await.unwrap();
        let p99_swap = report(&format!("same, with {swaps} hot swaps"), rps, s);
        let after = server_histogram(&base).await;
        println!("    {}", inside("server", &before, &after));
        println!("  p99 with swaps / without: {:.2}x", p99_swap / p99.max(1.0));
        if let Some(early) = rss_after_two {
            let published = server_metric(&base, "typeahead_snapshot_swaps_total").await;
            println!(
                "  server RSS after 2 swaps: {:.1} MiB, after {swaps}: {:.1} MiB ({published} snapshots published by the server)",
                early as f64 / 1024.0,
                rss_end as f64 / 1024.0
            );
        }
        if let Some(spec) = arg("--cluster") {
            let (cluster, agg) = start_cluster(dir.path(), &spec);
            let base = format!("http://{agg}");
            let queries = Arc::new(Stream::new(&base, &prefixes, &extra));
            println!("== aggregator over a {spec} cluster of the same data, same load generator ==");
            let _ = run_phase(&base, Some(Arc::clone(&queries)), concurrency, Duration::from_secs(1), None).await;
            let members = common::children(cluster.0.id());
            let pids = |role: &str| -> Vec<u32> {
                members.iter().filter(|(_, cmd)| cmd.contains(role)).map(|m| m.0).collect()
            };
            let cpu = CpuSplit::of(&[
                ("load generator", vec![std::process::id()]),
                ("aggregator", pids(" aggregate ")),
                ("replicas", pids(" serve ")),
            ]);
            let (agg_max, s) = run_phase(&base, Some(Arc::clone(&queries)), concurrency, duration, None).await;
            let cluster_cpu = cpu.report(agg_max * duration.as_secs_f64());
            report("closed loop, aggregator /v1/suggest", agg_max, s);
            println!("  aggregator / single server throughput: {:.0}%", 100.0 * agg_max / max);
            println!("  CPU per request: {cluster_cpu} (one server: {single_cpu})");
            let before = server_histogram(&base).await;
            let (rps, s) = run_phase(&base, Some(Arc::clone(&queries)), concurrency, duration, Some(agg_max * 0.5)).await;
            report("open loop at 50% of the aggregator's max", rps, s);
            let after = server_histogram(&base).await;
            println!("    {}", inside("aggregator", &before, &after));
            let text = metrics_text(&base).await;
            let value = |name: &str| common::metric(&text, name).unwrap_or(0.0);
            let (hits, misses) = (value("typeahead_cache_hits_total"), value("typeahead_cache_misses_total"));
            println!(
                "  cache hit rate on the prefix stream: {:.1}% ({hits:.0} hits, {misses:.0} misses), partial answers {:.0}",
                100.0 * hits / (hits + misses).max(1.0),
                value("typeahead_partial_answers_total")
            );
        }
    });
}
