//! The `typeahead` binary: parse arguments, set up logging, call the library.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use typeahead::blocklist::Blocklist;
use typeahead::builder::{build, ema, logline, partition};
use typeahead::snapshot::{DEFAULT_TOP_K, Snapshot};
use typeahead::synth;
use typeahead::{aggregator, cluster, cmd, server};

#[derive(Parser)]
#[command(
    name = "typeahead",
    version,
    about = "Search suggestions: the ten most popular queries for what a user typed"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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

#[derive(Args)]
struct DemoArgs {
    /// Where the page and the aggregator listen (`127.0.0.1:0` picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Seconds of wall-clock time per synthetic hour.
    #[arg(long, default_value_t = 20.0)]
    hour_seconds: f64,
    /// Stop after this many new hours (default: run until Ctrl-C).
    #[arg(long)]
    hours: Option<u32>,
    /// Partitions of the local cluster.
    #[arg(long, default_value_t = 2)]
    partitions: usize,
    /// Replicas per partition.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
}

#[derive(Args)]
struct EvalArgs {
    /// The snapshot to evaluate (built from earlier hours).
    #[arg(long)]
    snapshot: PathBuf,
    /// Later query logs (`timestamp<TAB>query[<TAB>user]`, plain, .gz or .zst; files or directories).
    #[arg(long = "log", required = true, num_args = 1..)]
    logs: Vec<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct AggregateArgs {
    /// The manifest of a partitioned build (followed: new generations are picked up).
    #[arg(long)]
    manifest: PathBuf,
    /// Replicas per partition: lines `INDEX ADDR [ADDR...]`, `#` comments.
    #[arg(long)]
    backends: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// Deadline of an answer, in milliseconds; slower partitions are left out (partial).
    #[arg(long, default_value_t = 100)]
    deadline_ms: u64,
    /// Longest one backend try may take, in milliseconds.
    #[arg(long, default_value_t = 50)]
    try_timeout_ms: u64,
    /// Hedge a backend request on another replica after this many milliseconds.
    #[arg(long, default_value_t = 10)]
    hedge_after_ms: u64,
    /// Close pooled backend connections idle this long, in milliseconds. Keep it under the
    /// replicas' --header-timeout-ms: a connection the replica is closing would fail a try.
    #[arg(long, default_value_t = 5000)]
    backend_idle_ms: u64,
    /// Answers cached for hot prefixes (0 disables the cache).
    #[arg(long, default_value_t = 100_000)]
    cache_entries: usize,
    /// How long a cached answer may be reused, in milliseconds (blocklist changes invalidate
    /// it sooner: the key includes the blocklist versions the servers report).
    #[arg(long, default_value_t = 60_000)]
    cache_ttl_ms: u64,
    /// Requests served at once; more are answered 503 with Retry-After.
    #[arg(long, default_value_t = 1024)]
    max_concurrency: usize,
    #[command(flatten)]
    web: WebArgs,
    #[command(flatten)]
    conn: ConnArgs,
}

#[derive(Args)]
struct ClusterArgs {
    /// Directory of a partitioned build (`typeahead build --partitions N --out DIR`).
    #[arg(long)]
    snapshot_dir: PathBuf,
    /// Number of partitions (must match the manifest; read from it when omitted).
    #[arg(long)]
    partitions: Option<usize>,
    /// Replicas per partition.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// The aggregator's address (`127.0.0.1:0` picks a free port).
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// Blocklist file for every server.
    #[arg(long)]
    blocklist: Option<PathBuf>,
    /// The aggregator's answer deadline, in milliseconds.
    #[arg(long, default_value_t = 100)]
    deadline_ms: u64,
    /// The aggregator's timeout of one backend try, in milliseconds.
    #[arg(long, default_value_t = 50)]
    try_timeout_ms: u64,
}

#[derive(Args)]
struct ServeArgs {
    /// Snapshot file; replacing it (atomic rename) publishes the new one.
    #[arg(long)]
    snapshot: PathBuf,
    /// Public address (`127.0.0.1:0` picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Blocked terms, re-read when the file changes and rewritten by `PUT /admin/blocklist`.
    #[arg(long)]
    blocklist: Option<PathBuf>,
    /// Admin address (only used with --admin-token-file).
    #[arg(long, default_value = "127.0.0.1:8081")]
    admin_listen: SocketAddr,
    /// File holding the admin bearer token; without it the admin routes are disabled.
    #[arg(long)]
    admin_token_file: Option<PathBuf>,
    /// Requests served at once; more are answered 503 with Retry-After.
    #[arg(long, default_value_t = 512)]
    max_concurrency: usize,
    /// Longest a request may take, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    request_timeout_ms: u64,
    /// How often the snapshot and blocklist files are checked, in milliseconds.
    #[arg(long, default_value_t = 250)]
    watch_interval_ms: u64,
    /// Longest an admin client may take to send a whole request body, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    admin_body_timeout_ms: u64,
    /// Longest one snapshot load (read and verify) may take before it is abandoned and the
    /// current snapshot keeps serving, in milliseconds.
    #[arg(long, default_value_t = 120_000)]
    load_timeout_ms: u64,
    #[command(flatten)]
    web: WebArgs,
    #[command(flatten)]
    conn: ConnArgs,
    /// Fault injection for tests and demos: delay every suggestion answer by this many ms.
    #[arg(long, default_value_t = 0, hide = true)]
    inject_delay_ms: u64,
}

#[derive(Args)]
struct BuildArgs {
    /// Log files or directories (plain, .gz or .zst): `timestamp<TAB>query[<TAB>user]` lines.
    #[arg(long = "input", required_unless_present = "synthetic", num_args = 1..)]
    inputs: Vec<PathBuf>,
    /// Also read a built-in SYNTHETIC log (3 days of generated traffic; for demos, not real data).
    #[arg(long)]
    synthetic: bool,
    /// Directory holding the EMA state between hourly builds.
    #[arg(long)]
    state: Option<PathBuf>,
    /// Snapshot file to write (replaced atomically); a directory with --partitions or
    /// --partition-bytes.
    #[arg(long)]
    out: PathBuf,
    /// Split the key space into N prefix ranges of about equal size: DIR/part-NNN.snap files
    /// and DIR/manifest.json.
    #[arg(long, conflicts_with = "partition_bytes")]
    partitions: Option<usize>,
    /// Split the key space so that no partition exceeds this many bytes (the capacity decides
    /// how many partitions there are).
    #[arg(long)]
    partition_bytes: Option<u64>,
    /// EMA half-life in hours.
    #[arg(long, default_value_t = ema::DEFAULT_HALF_LIFE_HOURS)]
    half_life: f64,
    /// Drop keys whose decayed score is below this (0 keeps everything).
    #[arg(long, default_value_t = ema::DEFAULT_MIN_SCORE)]
    min_score: f64,
    /// Serve a query only once this many distinct users issued it (needs the user column;
    /// at most 64, the number tracked exactly per query).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=64))]
    min_users: u64,
    /// Blocked terms: these queries never enter the snapshot.
    #[arg(long)]
    blocklist: Option<PathBuf>,
    /// Suggestions stored per prefix (the largest k served).
    #[arg(long, default_value_t = DEFAULT_TOP_K)]
    top_k: usize,
    /// The inputs are pre-aggregated `query<TAB>count[<TAB>distinct_users]` lines for this hour
    /// (e.g. `2026-01-05T13` or `2026-01-05 13:00:00`).
    #[arg(long)]
    hour: Option<String>,
    /// Parsing threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Catch-up mode for hourly runs: process only complete hours (before the current UTC
    /// hour); lines of the hour in progress wait for the next run.
    #[arg(long, conflicts_with = "until")]
    complete_hours: bool,
    /// Process only hours before this one (e.g. `2026-01-05T13`); later lines wait.
    #[arg(long)]
    until: Option<String>,
    /// Generations kept for `typeahead rollback`.
    #[arg(long, default_value_t = 3)]
    keep_generations: usize,
    /// Regression gate: refuse to publish when the top-10 of the hottest prefixes changed more
    /// than this share (0..=1) since the live generation.
    #[arg(long, default_value_t = 0.5)]
    max_churn: f64,
    /// Publish even if the regression gate refuses.
    #[arg(long)]
    force: bool,
}

/// The search page's settings, shared by `serve` and `aggregate`.
#[derive(Args)]
struct WebArgs {
    /// Public base URL of this service (for the OpenSearch description behind a proxy).
    #[arg(long)]
    public_url: Option<String>,
    /// Where picking a suggestion goes: a URL template with {searchTerms} (default: /search).
    #[arg(long)]
    results_url: Option<String>,
    /// Characters typed before the search page asks for suggestions.
    #[arg(long, default_value_t = 1)]
    min_chars: usize,
}

impl WebArgs {
    fn config(self) -> typeahead::web::WebConfig {
        typeahead::web::WebConfig {
            public_url: self.public_url,
            results_url: self.results_url,
            min_chars: self.min_chars,
        }
    }
}

/// Connection limits of a listener (slow and idle clients, connection floods).
#[derive(Args)]
struct ConnArgs {
    /// A client must send a whole request head within this many milliseconds; kept-alive
    /// connections idle for longer are closed.
    #[arg(long, default_value_t = 10_000)]
    header_timeout_ms: u64,
    /// Connections open at once; more are closed on accept.
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,
}

impl ConnArgs {
    fn limits(&self) -> server::ConnLimits {
        server::ConnLimits {
            header_read_timeout: Duration::from_millis(self.header_timeout_ms.max(1)),
            max_connections: self.max_connections.max(1),
            ..server::ConnLimits::default()
        }
    }
}

#[derive(Args)]
struct RollbackArgs {
    /// The `--out` of the builds: a snapshot file, or the directory of a partitioned build.
    #[arg(long)]
    out: PathBuf,
    /// The generation to publish (default: the one before the live one).
    #[arg(long)]
    to: Option<String>,
}

#[derive(Args)]
struct QueryArgs {
    /// Snapshot file.
    #[arg(long)]
    snapshot: PathBuf,
    /// Suggestions per prefix.
    #[arg(long, default_value_t = DEFAULT_TOP_K)]
    k: usize,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// Prefixes; when none are given, every stdin line is one.
    prefixes: Vec<String>,
}

#[derive(Args)]
struct InspectArgs {
    /// Snapshot file.
    snapshot: PathBuf,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .with_env_filter(
            // Info never carries query text (tests/it/hardening.rs checks); `audit` is the
            // target of admin changes and rejected admin requests.
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                "typeahead=info,typeahead_builder=info,typeahead_core=info,audit=info".into()
            }),
        )
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            // A refusal of the regression gate is a verdict, not a failure: its own exit code.
            match e.downcast_ref::<build::BuildError>() {
                Some(build::BuildError::GateRefused(_)) => ExitCode::from(3),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Build(args) => run_build(args),
        Command::Query(args) => run_query(args),
        Command::Serve(args) => run_serve(args),
        Command::Aggregate(args) => run_aggregate(args),
        Command::Cluster(args) => run_cluster(args),
        Command::Rollback(args) => run_rollback(args),
        Command::Demo(args) => {
            let config = typeahead::demo::DemoConfig {
                listen: args.listen,
                partitions: args.partitions.max(1),
                replicas: args.replicas.max(1),
                hour_seconds: args.hour_seconds.max(0.1),
                hours: args.hours,
            };
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(typeahead::demo::run(config, server::shutdown_signal()))
        }
        Command::Eval(args) => {
            let snapshot = open_snapshot(&args.snapshot)?;
            let (counts, skipped) = typeahead::eval::count_events(&args.logs)?;
            let report = typeahead::eval::evaluate(&snapshot, &counts, skipped);
            if args.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                println!("{report}");
            }
            Ok(())
        }
        Command::Inspect(args) => {
            let snapshot = open_snapshot(&args.snapshot)?;
            print!("{}", cmd::inspect::report(&snapshot));
            Ok(())
        }
    }
}

fn open_snapshot(path: &Path) -> Result<Snapshot> {
    Snapshot::open(path).with_context(|| format!("cannot load snapshot {}", path.display()))
}

fn run_build(args: BuildArgs) -> Result<()> {
    let blocklist = match &args.blocklist {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read blocklist {}", path.display()))?;
            Blocklist::parse(&text)?
        }
        None => Blocklist::empty(),
    };
    let counts_hour = match &args.hour {
        Some(h) => match logline::parse_hour(h) {
            Some(hour) => Some(hour),
            None => bail!("--hour {h:?} is not an hour (try 2026-01-05T13)"),
        },
        None => None,
    };
    if args.top_k == 0 {
        bail!("--top-k must be at least 1");
    }
    if args.min_score.is_nan() || args.min_score < 0.0 {
        bail!("--min-score must be a non-negative number");
    }
    let threads =
        args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let mut inputs = args.inputs;
    // Kept alive until the build is done; deleted on drop.
    let synthetic = if args.synthetic { Some(synthetic_log()?) } else { None };
    if let Some(file) = &synthetic {
        inputs.push(file.path().to_path_buf());
    }
    let partitioning = match (args.partitions, args.partition_bytes) {
        (Some(n), _) => Some(partition::Partitioning::Count(n)),
        (None, Some(max)) => Some(partition::Partitioning::MaxBytes(max)),
        (None, None) => None,
    };
    let until = match (&args.until, args.complete_hours) {
        (Some(h), _) => match logline::parse_hour(h) {
            Some(hour) => Some(hour),
            None => bail!("--until {h:?} is not an hour (try 2026-01-05T13)"),
        },
        (None, true) => Some(logline::current_hour()),
        (None, false) => None,
    };
    let gate = (!args.force).then(|| typeahead::builder::gate::GateOptions {
        max_churn: args.max_churn,
        blocklist: blocklist.clone(),
    });
    let opts = build::BuildOptions {
        inputs,
        partitioning,
        until,
        keep_generations: args.keep_generations,
        gate,
        state_dir: args.state,
        out: args.out,
        half_life_hours: args.half_life,
        min_score: args.min_score,
        min_users: args.min_users,
        blocklist,
        top_k: args.top_k,
        counts_hour,
        threads,
    };
    let summary = build::run(&opts)?;
    if opts.min_users > 0 && summary.lines.counted > 0 && summary.snapshot.meta.keys == 0 {
        tracing::warn!(
            "--min-users is set but no served key reached it: do the logs have a user column?"
        );
    }
    println!("{summary}");
    println!("wrote {}", opts.out.display());
    Ok(())
}

fn run_serve(args: ServeArgs) -> Result<()> {
    let admin_token = args.admin_token_file.as_deref().map(server::read_token).transpose()?;
    let limits = server::Limits {
        max_concurrency: args.max_concurrency.max(1),
        request_timeout: Duration::from_millis(args.request_timeout_ms.max(1)),
        watch_interval: Duration::from_millis(args.watch_interval_ms.max(10)),
        admin_body_timeout: Duration::from_millis(args.admin_body_timeout_ms.max(1)),
        load_timeout: Duration::from_millis(args.load_timeout_ms.max(1)),
        conn: args.conn.limits(),
    };
    let config = server::ServeConfig {
        snapshot: args.snapshot,
        blocklist: args.blocklist,
        admin_token,
        limits: limits.clone(),
        inject_delay: Duration::from_millis(args.inject_delay_ms),
        web: args.web.config(),
    };
    let state = server::load_state(&config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let public = bind_and_announce(args.listen, "listening on").await?;
        let admin = match config.admin_token {
            Some(_) => Some(bind_and_announce(args.admin_listen, "admin listening on").await?),
            None => None,
        };
        io::stdout().flush()?;
        let snapshot = state.store.current();
        tracing::info!(version = snapshot.snapshot.id(), keys = snapshot.snapshot.len(), "serving");
        drop(snapshot);
        server::run(state, limits, public, admin, server::shutdown_signal()).await?;
        Ok(())
    })
}

/// Binds `addr` and prints `<label> <bound address>` (with port 0 the real port), which is how
/// tests, scripts and `typeahead cluster` find the process.
async fn bind_and_announce(addr: SocketAddr, label: &str) -> Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    println!("{label} {}", listener.local_addr()?);
    Ok(listener)
}

fn run_aggregate(args: AggregateArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.backends)
        .with_context(|| format!("cannot read backends file {}", args.backends.display()))?;
    let backends = aggregator::backends::parse_backends(&text)
        .map_err(|e| anyhow::anyhow!("backends file {}: {e}", args.backends.display()))?;
    let limits = server::Limits {
        max_concurrency: args.max_concurrency.max(1),
        conn: args.conn.limits(),
        ..server::Limits::default()
    };
    let config = aggregator::AggregateConfig {
        manifest: args.manifest,
        backends,
        deadline: Duration::from_millis(args.deadline_ms.max(1)),
        policy: aggregator::backends::Policy {
            try_timeout: Duration::from_millis(args.try_timeout_ms.max(1)),
            hedge_after: Duration::from_millis(args.hedge_after_ms.max(1)),
            backend_idle: Duration::from_millis(args.backend_idle_ms.max(1)),
            ..Default::default()
        },
        cache_entries: args.cache_entries,
        cache_ttl: Duration::from_millis(args.cache_ttl_ms),
        limits,
        web: args.web.config(),
    };
    let state = aggregator::load(&config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = bind_and_announce(args.listen, "listening on").await?;
        io::stdout().flush()?;
        tracing::info!(generation = %state.generations.active().generation, "aggregating");
        aggregator::run(state, config, listener, server::shutdown_signal()).await?;
        Ok(())
    })
}

fn run_cluster(args: ClusterArgs) -> Result<()> {
    let manifest = typeahead::manifest::Manifest::read(&args.snapshot_dir.join("manifest.json"))?;
    if let Some(n) = args.partitions
        && n != manifest.partitions.len()
    {
        bail!(
            "--partitions {n} but {} holds a build with {} partitions (rebuild with --partitions {n})",
            args.snapshot_dir.display(),
            manifest.partitions.len()
        );
    }
    let mut serve_args = Vec::new();
    if let Some(b) = &args.blocklist {
        serve_args.extend(["--blocklist".to_owned(), b.display().to_string()]);
    }
    let config = cluster::ClusterConfig {
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
    };
    let mut running = cluster::start(&config)?;
    io::stdout().flush()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let outcome: Result<()> = runtime.block_on(async {
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        let signal = server::shutdown_signal();
        tokio::pin!(signal);
        loop {
            tokio::select! {
                () = &mut signal => return Ok(()),
                _ = tick.tick() => running.supervise()?,
            }
        }
    });
    tracing::info!("stopping every process of the cluster");
    drop(running);
    outcome.context("the cluster stopped")
}

fn run_rollback(args: RollbackArgs) -> Result<()> {
    use typeahead::builder::publish;
    let partitioned = args.out.is_dir();
    let history = publish::history_dir(&args.out, partitioned);
    let kept = publish::generations(&history);
    let live = if partitioned {
        typeahead::manifest::Manifest::read(&args.out.join(publish::MANIFEST_FILE))?.generation
    } else {
        open_snapshot(&args.out)?.id().to_owned()
    };
    let target = match &args.to {
        Some(id) => kept.iter().find(|(name, _)| publish::id_of(name) == id),
        None => {
            let at = kept
                .iter()
                .position(|(name, _)| publish::id_of(name) == live)
                .unwrap_or(kept.len());
            at.checked_sub(1).and_then(|i| kept.get(i))
        }
    };
    let Some((name, dir)) = target else {
        let ids: Vec<&str> = kept.iter().map(|(n, _)| publish::id_of(n)).collect();
        bail!("no generation to roll back to (live {live}; kept: {})", ids.join(", "));
    };
    publish::publish(&args.out, partitioned, dir)?;
    println!("rolled back from {live} to {}", publish::id_of(name));
    Ok(())
}

/// Writes the built-in synthetic log to a temporary file.
fn synthetic_log() -> Result<tempfile::NamedTempFile> {
    let cfg = synth::LogConfig::new(2026);
    let mut file =
        tempfile::Builder::new().prefix("typeahead-synthetic-").suffix(".tsv").tempfile()?;
    let mut out = BufWriter::new(file.as_file_mut());
    let lines = synth::write_log(&cfg, 0, cfg.hours, &mut out)?;
    out.flush()?;
    drop(out);
    tracing::info!(lines, hours = cfg.hours, "generated a SYNTHETIC query log (not real data)");
    Ok(file)
}

fn run_query(args: QueryArgs) -> Result<()> {
    let snapshot = open_snapshot(&args.snapshot)?;
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    if args.prefixes.is_empty() {
        cmd::query::answer_lines(&snapshot, io::stdin().lock(), args.k, args.json, &mut out)?;
    } else {
        for p in &args.prefixes {
            cmd::query::answer(&snapshot, p, args.k, args.json, &mut out)?;
        }
    }
    out.flush()?;
    Ok(())
}
