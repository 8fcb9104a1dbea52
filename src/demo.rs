//! `typeahead demo`: the whole system on one machine with nothing but this repository.
//!
//! It generates a SYNTHETIC query log (Zipf-distributed head, long tail, word n-grams, diurnal
//! traffic, queries that trend up and fade, a few malformed lines — see
//! `typeahead_synth`), builds it hour by hour with the EMA state, starts a partitioned
//! cluster with the aggregator and the search page, and then keeps feeding one new synthetic hour
//! every `hour_seconds`, each followed by the hourly build, so a person can watch suggestions
//! change. Everything lives in a temporary directory removed on exit; an hour's log is deleted
//! once a build has taken it into the EMA state, so each build reads only the new hour.
//!
//! The synthetic year ends before today: the builder skips lines stamped after the current
//! hour (a skewed clock must not move its watermark), so a log set in the future would stall.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::blocklist::Blocklist;
use crate::builder::build::{self, BuildOptions};
use crate::builder::gate::GateOptions;
use crate::builder::logline::format_hour;
use crate::builder::partition::Partitioning;
use crate::cluster::{self, ClusterConfig};
use crate::synth::{self, LogConfig};

/// Hours of synthetic history built before serving starts.
const HISTORY_HOURS: u32 = 72;

/// Hours in the demo's synthetic log: the history, then one new hour at a time.
const LOG_HOURS: u32 = 24 * 365;

/// How the demo runs.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Where the aggregator (and the page) listens.
    pub listen: SocketAddr,
    /// Partitions and replicas of the local cluster.
    pub partitions: usize,
    /// Replicas per partition.
    pub replicas: usize,
    /// Wall-clock seconds per synthetic hour (faster than real time).
    pub hour_seconds: f64,
    /// Stop after this many new hours (`None`: until Ctrl-C).
    pub hours: Option<u32>,
}

/// Why the demo stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// Writing the synthetic logs or the demo's files failed.
    #[error("demo I/O")]
    Io(#[from] std::io::Error),
    /// The synthetic log could not be generated.
    #[error("cannot generate the synthetic log")]
    Synth(#[from] crate::synth::Error),
    /// The first build failed (later ones are reported and retried next hour).
    #[error("the first build failed")]
    Build(#[from] build::BuildError),
    /// The cluster could not start or be kept up.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    /// The page's address is taken (checked before anything is generated).
    #[error(
        "cannot listen on {addr} (is another process using it? `--listen 127.0.0.1:0` picks a free port)"
    )]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

type Result<T, E = DemoError> = std::result::Result<T, E>;

struct Demo {
    dir: tempfile::TempDir,
    log: LogConfig,
}

impl Demo {
    fn logs(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    fn serve(&self) -> PathBuf {
        self.dir.path().join("serve")
    }

    /// Writes synthetic hours `[from, from + count)` as one file per hour.
    fn generate(&self, from: u32, count: u32) -> Result<()> {
        for h in from..from + count {
            let path = self.logs().join(format!("hour-{h:04}.tsv"));
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
            synth::write_log(&self.log, h, 1, &mut out)?;
            out.flush()?;
        }
        Ok(())
    }

    /// The hourly build: every complete hour up to `until` (an offset from the log's start),
    /// from the hours not built yet; those are deleted once it succeeds (the state holds them).
    fn build(&self, until: u32, partitions: usize) -> Result<build::BuildSummary> {
        let summary = self.build_pending(until, partitions)?;
        // Built and published: a file left behind is only read again (its lines late).
        let removed: std::io::Result<()> = std::fs::read_dir(self.logs())
            .and_then(|mut dir| dir.try_for_each(|e| std::fs::remove_file(e?.path())));
        if let Err(e) = removed {
            println!("demo: cannot delete the built hours' logs: {e}");
        }
        Ok(summary)
    }

    fn build_pending(&self, until: u32, partitions: usize) -> Result<build::BuildSummary> {
        let start_hour = (self.log.start_unix / 3600) as u32;
        let opts = BuildOptions {
            inputs: vec![self.logs()],
            state_dir: Some(self.dir.path().join("state")),
            out: self.serve(),
            partitioning: Some(Partitioning::Count(partitions)),
            half_life_hours: crate::builder::ema::DEFAULT_HALF_LIFE_HOURS,
            min_score: crate::builder::ema::DEFAULT_MIN_SCORE,
            min_users: 0,
            blocklist: Blocklist::empty(),
            top_k: crate::snapshot::DEFAULT_TOP_K,
            counts_hour: None,
            threads: 1,
            until: Some(start_hour + until),
            keep_generations: 3,
            gate: Some(GateOptions { max_churn: 0.9, blocklist: Blocklist::empty() }),
        };
        Ok(build::run(&opts)?)
    }
}

/// Runs the demo until `stop` resolves (or the configured number of hours has passed).
pub async fn run(config: DemoConfig, stop: impl std::future::Future<Output = ()>) -> Result<()> {
    // Polled once now, so its signal handlers are in place before the (blocking) setup: a
    // Ctrl-C during it then stops the demo after it, with the directory removed, instead of
    // killing the process and leaving it behind.
    tokio::pin!(stop);
    if interrupted(stop.as_mut()).await {
        return Ok(());
    }
    // As the aggregator will bind it (`[::]` takes IPv4 too), which says if it falls back.
    crate::http::bind_std(config.listen)
        .map_err(|source| DemoError::Listen { addr: config.listen, source })?;
    let mut log = LogConfig::new(2026);
    // A year of hours: at the default 20 s an hour, new hours keep coming for two days (a
    // trend is drawn per day of the log, so this is what bounds the generator's memory).
    log.hours = LOG_HOURS;
    log.start_unix = year_ago(crate::clock::now_unix());
    // Real words in common query shapes: "new", "the" and "weather" find what people expect.
    log.text = synth::QueryText::English;
    let demo = Demo { dir: tempfile::Builder::new().prefix("typeahead-demo-").tempdir()?, log };
    std::fs::create_dir_all(demo.logs())?;
    println!(
        "demo: generating {HISTORY_HOURS} hours of SYNTHETIC query logs (not real data) in {}",
        demo.dir.path().display()
    );
    demo.generate(0, HISTORY_HOURS)?;
    let summary = demo.build(HISTORY_HOURS, config.partitions)?;
    if interrupted(stop.as_mut()).await {
        println!("demo: stopping (interrupted)");
        return Ok(());
    }
    println!(
        "demo: built {} completions up to {}",
        summary.snapshot.meta.keys,
        hour_name(summary.watermark)
    );
    let mut running = cluster::start(&ClusterConfig {
        snapshot_dir: demo.serve(),
        replicas: config.replicas,
        listen: config.listen,
        serve_args: Vec::new(),
        aggregate_args: Vec::new(),
        expect_partitions: None,
    })?;
    println!(
        "demo: open http://{}/ (suggestions from SYNTHETIC data; a new hour every {} s)",
        running.aggregator_addr(),
        config.hour_seconds
    );
    std::io::stdout().flush()?;
    let mut next = HISTORY_HOURS;
    let mut supervise = tokio::time::interval(Duration::from_millis(200));
    loop {
        if config.hours.is_some_and(|n| next - HISTORY_HOURS >= n) {
            println!("demo: stopping after {} new hours", next - HISTORY_HOURS);
            break;
        }
        if next >= LOG_HOURS {
            // Past its end the generator writes nothing: say so rather than publish empty hours.
            println!("demo: the synthetic log's {LOG_HOURS} hours are used up; stopping");
            break;
        }
        let hour = tokio::time::sleep(Duration::from_secs_f64(config.hour_seconds));
        tokio::pin!(hour);
        loop {
            tokio::select! {
                () = &mut stop => {
                    println!("demo: stopping (interrupted)");
                    return Ok(());
                }
                () = &mut hour => break,
                _ = supervise.tick() => {
                    if let Err(e) = tokio::task::block_in_place(|| running.supervise()) {
                        println!("demo: stopping: {}", crate::error::chain(&e));
                        return Err(e.into());
                    }
                }
            }
        }
        demo.generate(next, 1)?;
        next += 1;
        match tokio::task::block_in_place(|| demo.build(next, config.partitions)) {
            Ok(s) => println!(
                "demo: hour {} {} generation {} ({} lines, {} completions)",
                hour_name(s.watermark),
                if s.unchanged { "left live" } else { "published as" },
                s.generation,
                s.lines.lines,
                s.snapshot.meta.keys
            ),
            Err(e) => println!("demo: the hourly build failed: {}", crate::error::chain(&e)),
        }
        std::io::stdout().flush()?;
    }
    drop(running);
    Ok(())
}

/// What stops the demo: Ctrl-C, SIGTERM, or SIGHUP (its terminal closed), each of which
/// leaves nothing behind. Under `nohup` (SIGHUP ignored when it starts) a closed terminal
/// does not stop it: a handler would replace the ignoring.
pub async fn stop_signal() {
    #[cfg(unix)]
    let hangup = async {
        if hangup_ignored() {
            return std::future::pending::<()>().await;
        }
        crate::server::unix_signal(tokio::signal::unix::SignalKind::hangup()).await;
    };
    #[cfg(not(unix))]
    let hangup = std::future::pending::<()>();
    tokio::select! {
        () = crate::server::shutdown_signal() => {}
        () = hangup => {}
    }
}

/// Whether SIGHUP is ignored (the demo was started under `nohup`).
#[cfg(unix)]
#[allow(unsafe_code)]
fn hangup_ignored() -> bool {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a null new action makes `sigaction` only write the current one into `old`,
    // which is valid zeroed memory of the right type; it is read only if the call succeeded.
    unsafe {
        libc::sigaction(libc::SIGHUP, std::ptr::null(), old.as_mut_ptr()) == 0
            && old.assume_init().sa_sigaction == libc::SIG_IGN
    }
}

/// Whether `stop` has resolved, without waiting for it.
async fn interrupted(stop: std::pin::Pin<&mut impl std::future::Future<Output = ()>>) -> bool {
    let mut stop = stop;
    std::future::poll_fn(|cx| std::task::Poll::Ready(stop.as_mut().poll(cx).is_ready())).await
}

/// The start of the day a year and a week before `now`: the whole synthetic year lies in the
/// past, starting at midnight (the hourly curve is by hour of day).
fn year_ago(now: i64) -> i64 {
    let start = now - i64::from(LOG_HOURS) * 3600 - 7 * 86_400;
    start - start.rem_euclid(86_400)
}

fn hour_name(h: Option<u32>) -> String {
    h.map_or_else(|| "none".into(), format_hour)
}
