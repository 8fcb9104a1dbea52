//! The command line: every subcommand's arguments, validated by clap value parsers, and turned
//! into the library's configuration types. Nothing here does any work.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use typeahead::builder::logline::{self, Hour};
use typeahead::builder::{build, ema, gate, partition};
use typeahead::matching::Tiers;
use typeahead::snapshot::DEFAULT_TOP_K;
use typeahead::{aggregator, cluster, demo, http, server};

#[derive(Debug, Parser)]
#[command(
    name = "typeahead",
    version = typeahead::RELEASE,
    about = "Search suggestions: the ten most popular queries for what a user typed"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build a snapshot from query logs (incrementally with --state).
    Build(BuildArgs),
    /// Answer prefixes from a snapshot (arguments, or one prefix per stdin line).
    Query(QueryArgs),
    /// Show a snapshot's metadata and size by section.
    Inspect(InspectArgs),
    /// Serve suggestions over HTTP from a snapshot, hot-swapping it when it is replaced.
    Serve(ServeArgs),
    /// Serve one API in front of partitioned servers: fan out, merge, fail over.
    Aggregate(AggregateArgs),
    /// Start N partitions x R replicas and an aggregator as local processes.
    Cluster(ClusterArgs),
    /// Measure suggestion quality of a snapshot on later query logs (MRR@10, success@10, ...).
    Eval(EvalArgs),
    /// Publish an earlier generation again (kept by `build --keep-generations`).
    Rollback(RollbackArgs),
    /// Everything at once on SYNTHETIC data: hourly builds, a cluster, the page; new hours keep coming.
    Demo(DemoArgs),
}

impl Command {
    /// Whether the process answers requests, and so turns transparent huge pages off for itself
    /// but for its snapshots ([`typeahead::huge_pages`]), even where the kernel hands them out
    /// unasked.
    pub fn answers_requests(&self) -> bool {
        matches!(
            self,
            Command::Serve(_) | Command::Aggregate(_) | Command::Cluster(_) | Command::Demo(_)
        )
    }
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the page and the aggregator listen (`127.0.0.1:0` picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Seconds of wall-clock time per synthetic hour (0.1 to 86400).
    #[arg(long, default_value_t = 20.0, value_parser = hour_seconds)]
    pub hour_seconds: f64,
    /// Stop after this many new hours (default: run until Ctrl-C).
    #[arg(long)]
    pub hours: Option<u32>,
    /// Partitions of the local cluster.
    #[arg(long, default_value_t = 2)]
    pub partitions: usize,
    /// Replicas per partition.
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The snapshot to evaluate (built from earlier hours): a file or an object-store URL.
    #[arg(long)]
    pub snapshot: PathBuf,
    /// Later query logs (`timestamp<TAB>query[<TAB>user]`, plain, .gz or .zst; files, directories
    /// or object-store URLs).
    #[arg(long = "log", required = true, num_args = 1..)]
    pub logs: Vec<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also measure one realistic typo per event (the generator is seeded with this; see
    /// `typeahead::eval::typos`): MRR@10 and success@10 with all tiers and with prefix only.
    #[arg(long, value_name = "SEED")]
    pub typos: Option<u64>,
    /// Also replay the later logs with each person's own searches first, their histories
    /// seeded from these earlier logs (both with the user column; see `typeahead::history`).
    #[arg(long = "history-log", value_name = "EARLIER", num_args = 1..)]
    pub history_logs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AggregateArgs {
    /// The manifest of a partitioned build (followed: new generations are picked up): a path
    /// or an object-store URL (`s3://bucket/prefix/manifest.json`, `gs://`, `az://`, `file://`).
    #[arg(long)]
    pub manifest: String,
    /// How often the manifest is polled, in milliseconds (default: at every replica probe for
    /// a local file, 10 s in an object store).
    #[arg(long)]
    pub poll_ms: Option<u64>,
    /// The replicas: a file of lines `INDEX ADDR [ADDR...]` (`#` comments), or `dns:NAME:PORT`
    /// (every address NAME resolves to, resolved again every 2 s; each replica is grouped
    /// under the partition it reports serving).
    #[arg(long)]
    pub backends: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    /// Deadline of an answer, in milliseconds; slower partitions are left out (partial).
    #[arg(long, default_value_t = 100)]
    pub deadline_ms: u64,
    /// Longest one backend try may take, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub try_timeout_ms: u64,
    /// Hedge a backend request on another replica after this many milliseconds.
    #[arg(long, default_value_t = 10)]
    pub hedge_after_ms: u64,
    /// Hedges add at most this share of backend requests (0.1: one per ten on average; 10 may
    /// go out at once over it). Overload makes every try slow, and unbounded hedges would
    /// double it.
    #[arg(long, default_value_t = 0.1, value_parser = share)]
    pub hedge_budget: f64,
    /// Close pooled backend connections idle this long, in milliseconds. Keep it under the
    /// replicas' --header-timeout-ms: a connection the replica is closing would fail a try.
    #[arg(long, default_value_t = 5000)]
    pub backend_idle_ms: u64,
    /// Answers cached for hot prefixes (0 disables the cache).
    #[arg(long, default_value_t = 100_000)]
    pub cache_entries: usize,
    /// How long a cached answer may be reused, in milliseconds (blocklist changes invalidate
    /// it sooner: the key includes the blocklist versions the servers report).
    #[arg(long, default_value_t = 60_000)]
    pub cache_ttl_ms: u64,
    /// Requests served at once; more are answered 503 with Retry-After.
    #[arg(long, default_value_t = 1024)]
    pub max_concurrency: usize,
    #[command(flatten)]
    pub web: WebArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
}

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// Directory of a partitioned build (`typeahead build --partitions N --out DIR`).
    #[arg(long)]
    pub snapshot_dir: PathBuf,
    /// Number of partitions (must match the manifest; read from it when omitted).
    #[arg(long)]
    pub partitions: Option<usize>,
    /// Replicas per partition.
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// The aggregator's address (`127.0.0.1:0` picks a free port).
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    /// Blocklist file for every server.
    #[arg(long)]
    pub blocklist: Option<PathBuf>,
    /// The aggregator's answer deadline, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub deadline_ms: u64,
    /// The aggregator's timeout of one backend try, in milliseconds.
    #[arg(long, default_value_t = 50)]
    pub try_timeout_ms: u64,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Snapshot file; replacing it (atomic rename) publishes the new one.
    #[arg(long, required_unless_present = "manifest", conflicts_with = "manifest")]
    pub snapshot: Option<PathBuf>,
    /// Follow a partitioned build's manifest instead: a path or a URL (`s3://bucket/prefix/
    /// manifest.json`, `gs://`, `az://`, `file://`), polled; the partition's file is downloaded
    /// into --cache-dir, verified, and hot-swapped in.
    #[arg(long, requires_all = ["partition", "cache_dir"])]
    pub manifest: Option<String>,
    /// The partition this server serves (with --manifest): `I`, or `S%N`, slot S of N
    /// partitions (S mod N: a StatefulSet's pod index, so pods 0..N-1 serve partitions
    /// 0..N-1, pods N..2N-1 the same again, and so on). With `S%N`, a manifest of another
    /// number of partitions is refused rather than followed.
    #[arg(long, value_parser = partition_slot, requires = "manifest")]
    pub partition: Option<PartitionSlot>,
    /// Where downloaded snapshots go (with --manifest); the server loads only files it wrote here.
    #[arg(long, requires = "manifest")]
    pub cache_dir: Option<PathBuf>,
    /// Mean time between manifest polls, in milliseconds (each jittered by up to 20%).
    #[arg(long, default_value_t = 10_000, requires = "manifest")]
    pub poll_ms: u64,
    /// Public address (`127.0.0.1:0` picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Blocked terms, re-read when the file changes and rewritten by `PUT /admin/blocklist`.
    #[arg(long)]
    pub blocklist: Option<PathBuf>,
    /// Admin address (only used with --admin-token-file).
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub admin_listen: SocketAddr,
    /// File holding the admin bearer token; without it the admin routes are disabled.
    #[arg(long)]
    pub admin_token_file: Option<PathBuf>,
    /// Requests served at once; more are answered 503 with Retry-After.
    #[arg(long, default_value_t = 512)]
    pub max_concurrency: usize,
    /// Longest a request may take, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub request_timeout_ms: u64,
    /// How often the snapshot and blocklist files are checked, in milliseconds.
    #[arg(long, default_value_t = 250)]
    pub watch_interval_ms: u64,
    /// Longest an admin client may take to send a whole request body, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub admin_body_timeout_ms: u64,
    /// Longest one snapshot load (read and verify) may take before it is abandoned and the
    /// current snapshot keeps serving, in milliseconds.
    #[arg(long, default_value_t = 120_000)]
    pub load_timeout_ms: u64,
    /// Serialized answers kept for hot prefixes (0 disables the cache; about 1 KB each, at most
    /// a few: see `cache::MAX_KEY_BYTES`).
    #[arg(long, default_value_t = 50_000)]
    pub cache_entries: usize,
    #[command(flatten)]
    pub web: WebArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Fault injection for tests and demos: delay every suggestion answer by this many ms.
    #[arg(long, default_value_t = 0, hide = true)]
    pub inject_delay_ms: u64,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Log files or directories (plain, .gz or .zst): `timestamp<TAB>query[<TAB>user]` lines;
    /// or object-store URLs (`s3://bucket/logs/`: every object under it is downloaded first).
    #[arg(long = "input", required_unless_present = "synthetic", num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// Also read a built-in SYNTHETIC log (3 days of generated traffic; for demos, not real data).
    #[arg(long)]
    pub synthetic: bool,
    /// Directory holding the EMA state between hourly builds, or an object-store prefix
    /// (`s3://bucket/state`: the state is `state.bin` under it; needs `--out` in a bucket).
    #[arg(long)]
    pub state: Option<String>,
    /// Snapshot file to write (replaced atomically); a directory with --partitions or
    /// --partition-bytes; or an object-store prefix (`s3://bucket/typeahead`, `gs://`,
    /// `az://`): generations under it and `manifest.json`, replaced by a conditional put.
    #[arg(long)]
    pub out: String,
    /// Split the key space into N prefix ranges of about equal size: DIR/part-NNN.snap files
    /// and DIR/manifest.json.
    #[arg(long, conflicts_with = "partition_bytes")]
    pub partitions: Option<usize>,
    /// Split the key space so that no partition file exceeds this many bytes (the capacity
    /// decides how many partitions there are; a single completion larger than it gets a
    /// partition of its own).
    #[arg(long)]
    pub partition_bytes: Option<u64>,
    /// EMA half-life in hours.
    #[arg(long, default_value_t = ema::DEFAULT_HALF_LIFE_HOURS)]
    pub half_life: f64,
    /// Drop keys whose decayed score is below this (0 keeps everything).
    #[arg(long, default_value_t = ema::DEFAULT_MIN_SCORE, value_parser = non_negative)]
    pub min_score: f64,
    /// Serve a query only once this many distinct users issued it (needs the user column;
    /// at most 64, the number tracked exactly per query).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=64))]
    pub min_users: u64,
    /// Blocked terms: these queries never enter the snapshot (a file or an object-store URL).
    #[arg(long)]
    pub blocklist: Option<PathBuf>,
    /// Suggestions stored per prefix (the largest k served), 1 to 1000.
    #[arg(long, default_value_t = DEFAULT_TOP_K, value_parser = top_k)]
    pub top_k: usize,
    /// The inputs are pre-aggregated `query<TAB>count[<TAB>distinct_users]` lines for this hour
    /// (e.g. `2026-01-05T13` or `2026-01-05 13:00:00`).
    #[arg(long, value_parser = counts_hour)]
    pub hour: Option<Hour>,
    /// Parsing threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Catch-up mode for hourly runs: process only complete hours (before the current UTC
    /// hour); lines of the hour in progress wait for the next run.
    #[arg(long, conflicts_with = "until")]
    pub complete_hours: bool,
    /// Process only hours before this one (e.g. `2026-01-05T13`); later lines wait.
    #[arg(long, value_parser = log_hour)]
    pub until: Option<Hour>,
    /// Generations kept for `typeahead rollback`.
    #[arg(long, default_value_t = 3)]
    pub keep_generations: usize,
    /// Regression gate: refuse to publish when the top-10 of the hottest prefixes changed more
    /// than this share (0..=1) since the live generation.
    #[arg(long, default_value_t = 0.5, value_parser = share)]
    pub max_churn: f64,
    /// Publish even if the regression gate refuses.
    #[arg(long)]
    pub force: bool,
    /// Fault injection for tests: wait this many ms between building and publishing to a
    /// bucket.
    #[arg(long, default_value_t = 0, hide = true)]
    pub inject_publish_delay_ms: u64,
}

/// The search page's settings, shared by `serve` and `aggregate`.
#[derive(Debug, Args)]
pub struct WebArgs {
    /// Public base URL of this service (for the OpenSearch description behind a proxy).
    #[arg(long, value_parser = public_url)]
    pub public_url: Option<String>,
    /// Where picking a suggestion goes: a URL template with {searchTerms} (default: /search),
    /// absolute or relative to the page.
    #[arg(long, value_parser = results_url)]
    pub results_url: Option<String>,
    /// Characters typed before the search page asks for suggestions.
    #[arg(long, default_value_t = 1)]
    pub min_chars: usize,
}

impl WebArgs {
    pub fn config(self) -> typeahead::web::WebConfig {
        typeahead::web::WebConfig {
            public_url: self.public_url,
            results_url: self.results_url,
            min_chars: self.min_chars,
        }
    }
}

/// Connection limits of a listener (slow and idle clients, connection floods).
#[derive(Debug, Args)]
pub struct ConnArgs {
    /// A client must send a whole request head within this many milliseconds; kept-alive
    /// connections idle for longer are closed.
    #[arg(long, default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// Connections open at once; more are closed on accept.
    #[arg(long, default_value_t = 4096)]
    pub max_connections: usize,
}

impl ConnArgs {
    pub fn limits(&self) -> http::ConnLimits {
        http::ConnLimits {
            header_read_timeout: Duration::from_millis(self.header_timeout_ms.max(1)),
            max_connections: self.max_connections.max(1),
            ..http::ConnLimits::default()
        }
    }
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The `--out` of the builds: a snapshot file, the directory of a partitioned build, or
    /// an object-store prefix.
    #[arg(long)]
    pub out: String,
    /// The generation to publish (default: the one before the live one).
    #[arg(long)]
    pub to: Option<String>,
    /// Publish it even when it was built under older normalization and privacy rules than
    /// the live generation (or before rules were recorded): it may hold queries the newer
    /// rules withhold.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// Snapshot file, or an object-store URL (`s3://bucket/prod/generations/.../part-000-....snap`).
    #[arg(long)]
    pub snapshot: PathBuf,
    /// Suggestions per prefix.
    #[arg(long, default_value_t = DEFAULT_TOP_K)]
    pub k: usize,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Which tiers answer: `prefix` (completions starting with the prefix only) or `all`
    /// (then completions holding the typed words, then within a typo or two).
    #[arg(long = "match", default_value = "all", value_parser = parse_tiers)]
    pub tiers: Tiers,
    /// Prefixes; when none are given, every stdin line is one.
    pub prefixes: Vec<String>,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Snapshot file, or an object-store URL.
    pub snapshot: PathBuf,
}

/// `--hour` and `--until`: an hour such as `2026-01-05T13` or `2026-01-05 13:00:00`.
fn hour(s: &str) -> Result<Hour, String> {
    logline::parse_hour(s).ok_or_else(|| format!("{s:?} is not an hour (try 2026-01-05T13)"))
}

/// `--hour`: an hour counts can belong to, refused here rather than line by line after the
/// whole input was read: not after the current UTC hour (every count would be skipped as in
/// the future) and not before 1990 (`13`, an hour of the day, reads as 13 unix seconds).
fn counts_hour(s: &str) -> Result<Hour, String> {
    let at = log_hour(s)?;
    if at > logline::current_hour() {
        return Err(format!("{s:?} is after the current UTC hour: every count would lie ahead"));
    }
    Ok(at)
}

/// 1990-01-01T00 in hours since the Unix epoch (20 years of 365 days and 5 leap days).
const EARLIEST_LOG_HOUR: Hour = (20 * 365 + 5) * 24;

/// An hour of a log (`--hour`, `--until`): not before 1990, which `13`, an hour of the day
/// read as 13 unix seconds, would be (every line would then wait, or be late).
fn log_hour(s: &str) -> Result<Hour, String> {
    let at = hour(s)?;
    if at < EARLIEST_LOG_HOUR {
        let read = logline::format_hour(at);
        return Err(format!("{s:?} reads as {read}, before 1990 (try 2026-01-05T13)"));
    }
    Ok(at)
}

/// `--partition`: the partition's index, and the number of partitions when it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionSlot {
    /// The partition served.
    pub index: usize,
    /// `N` of `S%N`.
    pub of: Option<usize>,
}

/// `--partition`: `I`, or `S%N` (S mod N).
fn partition_slot(s: &str) -> Result<PartitionSlot, String> {
    let number = |t: &str| t.trim().parse::<usize>().ok();
    match s.split_once('%') {
        None => number(s)
            .map(|index| PartitionSlot { index, of: None })
            .ok_or_else(|| format!("{s:?} is not a partition index")),
        Some((slot, n)) => match (number(slot), number(n).filter(|&n| n > 0)) {
            (Some(slot), Some(n)) => Ok(PartitionSlot { index: slot % n, of: Some(n) }),
            _ => Err(format!("{s:?} is not SLOT%PARTITIONS (e.g. 5%4)")),
        },
    }
}

/// A snapshot's top-k: refused here, not after the whole input was read.
fn top_k(s: &str) -> Result<usize, String> {
    let max = typeahead::snapshot::MAX_TOP_K;
    match s.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a whole number from 1 to {max}")),
    }
}

fn parse_tiers(s: &str) -> Result<Tiers, String> {
    match s {
        "prefix" => Ok(Tiers::Prefix),
        "all" => Ok(Tiers::All),
        _ => Err(format!("{s:?} is not a tier choice: use prefix or all")),
    }
}

fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a non-negative number")),
    }
}

fn share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(format!("{s:?} is not a share between 0 and 1")),
    }
}

fn public_url(s: &str) -> Result<String, String> {
    match url::Url::parse(s) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => Ok(s.to_owned()),
        _ => Err(format!("{s:?} is not an http(s) URL")),
    }
}

fn results_url(s: &str) -> Result<String, String> {
    match typeahead::web::resolve(s, "http://127.0.0.1") {
        Ok(_) => Ok(s.to_owned()),
        Err(e) => Err(format!("{s:?} is not a URL: {e}")),
    }
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis.max(1))
}

impl BuildArgs {
    /// Turns `--complete-hours` into `--until` the hour in progress now. Called before any
    /// input is listed: an hour that ended while its logs downloaded would otherwise count as
    /// complete with only what was listed of it, and the rest of it would come too late.
    pub fn fix_complete_hours(&mut self) {
        if self.complete_hours {
            self.until = Some(logline::current_hour());
            self.complete_hours = false;
        }
    }

    /// The build's options; `blocklist` is the parsed `--blocklist` (read by the caller).
    /// `--complete-hours` must have been fixed already ([`BuildArgs::fix_complete_hours`]).
    pub fn options(self, blocklist: typeahead::blocklist::Blocklist) -> build::BuildOptions {
        debug_assert!(!self.complete_hours, "fix_complete_hours was not called");
        let threads = self
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
        let partitioning = match (self.partitions, self.partition_bytes) {
            (Some(n), _) => Some(partition::Partitioning::Count(n)),
            (None, Some(max)) => Some(partition::Partitioning::MaxBytes(max)),
            (None, None) => None,
        };
        let gate = (!self.force)
            .then(|| gate::GateOptions { max_churn: self.max_churn, blocklist: blocklist.clone() });
        build::BuildOptions {
            inputs: self.inputs,
            partitioning,
            until: self.until,
            keep_generations: self.keep_generations,
            gate,
            state_dir: self.state.as_deref().and_then(typeahead::remote::local_path),
            out: typeahead::remote::local_path(&self.out).unwrap_or_default(),
            half_life_hours: self.half_life,
            min_score: self.min_score,
            min_users: self.min_users,
            blocklist,
            top_k: self.top_k,
            counts_hour: self.hour,
            threads,
        }
    }
}

impl ServeArgs {
    /// The listener limits of `serve`.
    pub fn limits(&self) -> http::Limits {
        http::Limits {
            max_concurrency: self.max_concurrency.max(1),
            request_timeout: ms(self.request_timeout_ms),
            watch_interval: Duration::from_millis(self.watch_interval_ms.max(10)),
            admin_body_timeout: ms(self.admin_body_timeout_ms),
            load_timeout: ms(self.load_timeout_ms),
            conn: self.conn.limits(),
        }
    }

    /// What `serve --manifest` follows, if that was asked.
    pub fn follow(
        &self,
    ) -> Result<Option<typeahead::remote::follow::FollowConfig>, typeahead::remote::RemoteError>
    {
        let (Some(manifest), Some(slot), Some(cache_dir)) =
            (&self.manifest, self.partition, &self.cache_dir)
        else {
            return Ok(None);
        };
        Ok(Some(typeahead::remote::follow::FollowConfig {
            manifest: typeahead::remote::Location::parse(manifest)?,
            partition: slot.index,
            partitions: slot.of,
            cache_dir: cache_dir.clone(),
            poll: Duration::from_millis(self.poll_ms.max(10)),
        }))
    }

    /// Everything `serve` was asked to do; `admin_token` is the checked `--admin-token-file`,
    /// `snapshot` the file to serve (`--snapshot`, or the live file of `--manifest`).
    pub fn config(self, admin_token: Option<String>, snapshot: PathBuf) -> server::ServeConfig {
        server::ServeConfig {
            limits: self.limits(),
            snapshot,
            blocklist: self.blocklist,
            admin_token,
            faults: server::Faults { suggest_delay: Duration::from_millis(self.inject_delay_ms) },
            cache_entries: self.cache_entries,
            web: self.web.config(),
        }
    }
}

impl AggregateArgs {
    /// Everything `aggregate` was asked to do; `backends` is the parsed `--backends`.
    pub fn config(
        self,
        backends: aggregator::discovery::Discovery,
    ) -> Result<aggregator::AggregateConfig, typeahead::remote::RemoteError> {
        let manifest = typeahead::remote::Location::parse(&self.manifest)?;
        let manifest_poll = match self.poll_ms {
            Some(ms) => Duration::from_millis(ms.max(10)),
            None if manifest.is_local() => Duration::ZERO,
            None => Duration::from_secs(10),
        };
        Ok(aggregator::AggregateConfig {
            manifest,
            manifest_poll,
            backends,
            deadline: ms(self.deadline_ms),
            policy: aggregator::backends::Policy {
                try_timeout: ms(self.try_timeout_ms),
                hedge_after: ms(self.hedge_after_ms),
                hedge_budget: self.hedge_budget,
                backend_idle: ms(self.backend_idle_ms),
                ..Default::default()
            },
            cache_entries: self.cache_entries,
            cache_ttl: Duration::from_millis(self.cache_ttl_ms),
            limits: http::Limits {
                max_concurrency: self.max_concurrency.max(1),
                conn: self.conn.limits(),
                // Past the answer deadline: cut at a request timeout below it, an answer with a
                // stalled partition would be a 503 instead of the partial answer it is.
                request_timeout: http::Limits::default()
                    .request_timeout
                    .max(ms(self.deadline_ms) + Duration::from_secs(1)),
                ..http::Limits::default()
            },
            web: self.web.config(),
        })
    }
}

impl From<ClusterArgs> for cluster::ClusterConfig {
    fn from(args: ClusterArgs) -> Self {
        let mut serve_args = Vec::new();
        if let Some(b) = &args.blocklist {
            serve_args.extend(["--blocklist".to_owned(), b.display().to_string()]);
        }
        cluster::ClusterConfig {
            snapshot_dir: args.snapshot_dir,
            replicas: args.replicas,
            listen: args.listen,
            serve_args,
            aggregate_args: vec![
                "--deadline-ms".into(),
                args.deadline_ms.to_string(),
                "--try-timeout-ms".into(),
                args.try_timeout_ms.to_string(),
            ],
            expect_partitions: args.partitions,
        }
    }
}

/// A demo hour's length: a finite number of seconds from 0.1 (a rebuild back to back would
/// take a whole core) to a day.
fn hour_seconds(text: &str) -> Result<f64, String> {
    let seconds: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if (0.1..=86_400.0).contains(&seconds) {
        Ok(seconds)
    } else {
        Err("must be between 0.1 and 86400 seconds".into())
    }
}

impl From<DemoArgs> for demo::DemoConfig {
    fn from(args: DemoArgs) -> Self {
        demo::DemoConfig {
            listen: args.listen,
            partitions: args.partitions.max(1),
            replicas: args.replicas.max(1),
            hour_seconds: args.hour_seconds,
            hours: args.hours,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Cli, Command, EARLIEST_LOG_HOUR, PartitionSlot, log_hour, partition_slot};
    use clap::Parser;
    use std::time::Duration;

    /// A deadline past the default request timeout (2 s) moves the timeout past it: cut at
    /// the timeout, an answer waiting for a stalled partition was a 503, not a partial answer.
    #[test]
    fn the_aggregator_request_timeout_lies_past_its_deadline() {
        let timeout = |deadline: &str| {
            let args = ["typeahead", "aggregate", "--manifest", "m.json", "--backends", "b"];
            let cli = Cli::parse_from(args.iter().copied().chain(["--deadline-ms", deadline]));
            let Command::Aggregate(a) = cli.command else { unreachable!("aggregate") };
            let backends = typeahead::aggregator::discovery::Discovery::Fixed(Vec::new());
            a.config(backends).unwrap().limits.request_timeout
        };
        assert_eq!(timeout("100"), Duration::from_secs(2));
        assert_eq!(timeout("3000"), Duration::from_secs(4));
    }

    #[test]
    fn logs_begin_in_1990() {
        let parsed = typeahead::builder::logline::parse_hour("1990-01-01T00");
        assert_eq!(parsed, Some(EARLIEST_LOG_HOUR));
        assert_eq!(log_hour("1990-01-01T00"), Ok(EARLIEST_LOG_HOUR));
        assert!(log_hour("1989-12-31T23").is_err());
    }

    #[test]
    fn a_partition_is_an_index_or_a_slot_of_n() {
        let slot = |index, of| Ok(PartitionSlot { index, of });
        assert_eq!(partition_slot("3"), slot(3, None));
        assert_eq!(partition_slot("0%4"), slot(0, Some(4)));
        assert_eq!(partition_slot("5%4"), slot(1, Some(4)));
        assert_eq!(partition_slot("7%1"), slot(0, Some(1)));
        for bad in ["", "x", "5%0", "5%", "%4", "-1", "1%2%3"] {
            assert!(partition_slot(bad).is_err(), "{bad}");
        }
    }
}
