//! One function per subcommand: call the library, print the result.

use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use typeahead::blocklist::Blocklist;
use typeahead::builder::{build, publish};
use typeahead::snapshot::Snapshot;
use typeahead::store::Preloaded;
use typeahead::{aggregator, cluster, cmd, remote, server, synth};

use super::args::{
    AggregateArgs, BuildArgs, Cli, ClusterArgs, Command, EvalArgs, QueryArgs, RollbackArgs,
    ServeArgs,
};

/// Runs the command the person asked for.
pub fn run(cli: Cli) -> Result<()> {
    if cli.command.answers_requests() {
        match typeahead::huge_pages::restrict() {
            Ok(policy) => tracing::info!(?policy, "transparent huge pages restricted"),
            Err(e) => {
                tracing::warn!(error = %e, "cannot turn transparent huge pages off; requests may stall in page faults")
            }
        }
    }
    match cli.command {
        Command::Build(args) => build(args),
        Command::Query(args) => query(args),
        Command::Serve(args) => serve(args),
        Command::Aggregate(args) => aggregate(args),
        Command::Cluster(args) => cluster(args),
        Command::Rollback(args) => rollback(&args),
        Command::Demo(args) => Ok(runtime()?
            .block_on(typeahead::demo::run(args.into(), typeahead::demo::stop_signal()))?),
        Command::Eval(args) => eval(args),
        Command::Inspect(args) => {
            let report = cmd::inspect::report(&open_snapshot(&args.snapshot)?);
            say(report.trim_end_matches('\n'))
        }
    }
}

/// The process exit code for a failed command: a refusal is a verdict, not a failure, and has
/// its own, 3: the regression gate's, from a local build and from one that publishes to a bucket
/// (whose error wraps the build's transparently, so the chain never shows it), and a rollback's
/// to a generation built under older rules (which `--force` publishes).
pub fn exit_code(error: &anyhow::Error) -> ExitCode {
    use remote::bucket::BucketError;
    use remote::build::BucketBuildError;
    let gate = match (error.downcast_ref(), error.downcast_ref()) {
        (Some(e), _) | (_, Some(BucketBuildError::Build(e))) => {
            matches!(e, build::BuildError::GateRefused(_))
        }
        _ => false,
    };
    let rules = matches!(error.downcast_ref(), Some(publish::RollbackError::OlderRules(_)))
        || matches!(error.downcast_ref(), Some(BucketError::OlderRules(_)));
    if gate || rules { ExitCode::from(3) } else { ExitCode::FAILURE }
}

/// Standard output was closed by its reader (`typeahead query ... | head`): not a failure of
/// the command, which exits 0 as other command-line tools do.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct StdoutClosed;

/// An error writing standard output: a closed pipe is [`StdoutClosed`].
fn stdout_error(e: io::Error) -> anyhow::Error {
    if e.kind() == io::ErrorKind::BrokenPipe { StdoutClosed.into() } else { e.into() }
}

/// Prints `text` and a line end. (`println!` panics when the reader has gone; Rust ignores
/// SIGPIPE, so a write to a closed pipe fails instead of ending the process.)
fn say(text: impl std::fmt::Display) -> Result<()> {
    writeln!(io::stdout().lock(), "{text}").map_err(stdout_error)
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

/// Runs a one-shot command's `future` to its end on a runtime of its own, then drops the
/// runtime without waiting for its blocking threads. A local read or write that timed out on a
/// hung mount still holds one, and dropping a runtime waits for them all: the command would
/// hang there, before its error was even shown.
fn block_on<F: std::future::Future>(future: F) -> Result<F::Output> {
    let runtime = runtime()?;
    let output = runtime.block_on(future);
    runtime.shutdown_background();
    Ok(output)
}

/// A snapshot file, or one in object storage (read into memory, verified the same way).
/// One partition of a build answers only for its range: said on standard error, since
/// `query` and `eval` on it quietly give much less than the whole build would.
fn open_snapshot(path: &Path) -> Result<Snapshot> {
    let snapshot = read_snapshot(path)?;
    let meta = snapshot.meta();
    if !meta.range_start.is_empty() || meta.range_end.is_some() {
        tracing::warn!(
            start = %meta.range_start,
            end = meta.range_end.as_deref().unwrap_or("(the end)"),
            "this snapshot is one partition of a build: it answers only for its key range"
        );
    }
    Ok(snapshot)
}

fn read_snapshot(path: &Path) -> Result<Snapshot> {
    if let Some(local) = remote::local_path_of(path) {
        return Snapshot::open(&local)
            .with_context(|| format!("cannot load snapshot {}", local.display()));
    }
    let location = remote::Location::parse(&path.to_string_lossy())?;
    // Read whole, as a snapshot file is: the operator named it, so no cap but memory.
    let fetched = block_on(location.get(u64::MAX))??;
    let (bytes, _) = fetched.with_context(|| format!("no snapshot at {location}"))?;
    // Without a copy when the buffer is not shared: a partition can be gigabytes.
    Snapshot::from_bytes(Vec::from(bytes))
        .with_context(|| format!("cannot load snapshot {location}"))
}

/// `path` itself, or the object it names downloaded to `to`.
fn local_file(path: &Path, to: &Path) -> Result<std::path::PathBuf> {
    if let Some(local) = remote::local_path_of(path) {
        return Ok(local);
    }
    let location = remote::Location::parse(&path.to_string_lossy())?;
    let fetched = block_on(location.download(to))??;
    fetched.then(|| to.to_owned()).with_context(|| format!("no object at {location}"))
}

/// `paths` with every object-store URL among them downloaded under `scratch` first.
fn local_inputs(paths: &[std::path::PathBuf], scratch: &Path) -> Result<Vec<std::path::PathBuf>> {
    let local: Option<Vec<_>> = paths.iter().map(|p| remote::local_path_of(p)).collect();
    if let Some(local) = local {
        return Ok(local);
    }
    Ok(block_on(remote::inputs::fetch(paths, scratch))??)
}

fn build(mut args: BuildArgs) -> Result<()> {
    args.fix_complete_hours();
    // Logs (and the blocklist) in object storage are downloaded here first; deleted when the
    // build is done.
    let scratch = tempfile::tempdir()?;
    args.inputs = local_inputs(&args.inputs, scratch.path())?;
    let blocklist = match &args.blocklist {
        Some(path) => {
            let file = local_file(path, &scratch.path().join("blocklist.txt"))?;
            server::read_blocklist(&file)?.list
        }
        None => Blocklist::empty(),
    };
    // Kept alive until the build is done; deleted on drop.
    let synthetic = if args.synthetic { Some(synthetic_log()?) } else { None };
    let bucket = bucket_build(&args)?;
    let mut opts = args.options(blocklist);
    opts.inputs.extend(synthetic.iter().map(|f| f.path().to_path_buf()));
    if let Some((target, shown)) = bucket {
        let (summary, manifest) = block_on(remote::build::run(opts, &target))??;
        let g = &manifest.generation;
        let done = if summary.unchanged { "kept live generation" } else { "published generation" };
        let at = if summary.unchanged { "at" } else { "to" };
        return say(format!("{summary}\n{done} {g} {at} {shown}"));
    }
    let summary = build::run(&opts)?;
    if opts.min_users > 0 && summary.lines.counted > 0 && summary.snapshot.meta.keys == 0 {
        tracing::warn!(
            "--min-users is set but no served key reached it: do the logs have a user column?"
        );
    }
    let done = if summary.unchanged { "kept" } else { "wrote" };
    say(format!("{summary}\n{done} {}", opts.out.display()))
}

/// Where a build publishes when `--out` is in object storage (and how to show it).
fn bucket_build(args: &BuildArgs) -> Result<Option<(remote::build::BucketBuild, String)>> {
    let state_remote = args.state.as_deref().is_some_and(|s| remote::local_path(s).is_none());
    if remote::local_path(&args.out).is_some() {
        anyhow::ensure!(!state_remote, "a state in object storage needs --out there too");
        return Ok(None);
    }
    let root = remote::Location::parse(&args.out)?;
    let state = match args.state.as_deref() {
        None => None,
        Some(s) => Some(match remote::local_path(s) {
            Some(dir) => remote::build::StateAt::Local(dir),
            None => remote::build::StateAt::Remote(
                remote::Location::parse(s)?.join(typeahead::builder::state::STATE_FILE),
            ),
        }),
    };
    let target = remote::build::BucketBuild {
        out: remote::bucket::Bucket::new(root.clone()),
        state,
        publish_delay: std::time::Duration::from_millis(args.inject_publish_delay_ms),
    };
    Ok(Some((target, root.to_string())))
}

/// The built-in synthetic log, in a temporary file deleted on drop.
fn synthetic_log() -> Result<tempfile::NamedTempFile> {
    let (file, lines) = synth::write_temp_log(2026)?;
    tracing::info!(lines, "generated a SYNTHETIC query log (not real data)");
    Ok(file)
}

fn query(args: QueryArgs) -> Result<()> {
    let snapshot = open_snapshot(&args.snapshot)?;
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let (k, tiers, json) = (args.k, args.tiers, args.json);
    let answered = if args.prefixes.is_empty() {
        let mut input = io::BufReader::with_capacity(1 << 16, io::stdin());
        cmd::query::answer_lines(&snapshot, &mut input, k, tiers, json, &mut out)
    } else {
        args.prefixes
            .iter()
            .try_for_each(|p| cmd::query::answer(&snapshot, p, k, tiers, json, &mut out))
    };
    answered.and_then(|()| out.flush()).map_err(stdout_error)
}

fn eval(mut args: EvalArgs) -> Result<()> {
    let snapshot = open_snapshot(&args.snapshot)?;
    let scratch = tempfile::tempdir()?;
    args.logs = local_inputs(&args.logs, &scratch.path().join("later"))?;
    args.history_logs = local_inputs(&args.history_logs, &scratch.path().join("earlier"))?;
    let (counts, skipped) = typeahead::eval::count_events(&args.logs)?;
    // Figures over no events would be zeros that look measured.
    anyhow::ensure!(
        !counts.is_empty(),
        "no query events in the later logs ({skipped} lines skipped): nothing to evaluate \
         (they must be timestamp<TAB>query[<TAB>user] lines)"
    );
    let mut report = typeahead::eval::evaluate(&snapshot, &counts, skipped);
    if let Some(seed) = args.typos {
        report.typos = Some(typeahead::eval::typos::evaluate(&snapshot, &counts, seed));
    }
    if !args.history_logs.is_empty() {
        let history =
            typeahead::eval::history::evaluate(&snapshot, &args.history_logs, &args.logs)?;
        anyhow::ensure!(
            history.events > 0,
            "no later event names its user: --history-log needs later logs of \
             timestamp<TAB>query<TAB>user lines"
        );
        report.history = Some(Box::new(history));
    }
    if args.json { say(serde_json::to_string(&report)?) } else { say(report) }
}

/// The follower's lock of its partition's files in the cache directory.
fn lock_cache(f: &remote::follow::FollowConfig) -> Result<typeahead::lockfile::Held> {
    f.lock().map_err(|e| match e {
        typeahead::lockfile::LockError::Busy(_) => anyhow::Error::new(e).context(format!(
            "another server follows partition {} into {}: give each its own --cache-dir",
            f.partition,
            f.cache_dir.display()
        )),
        other => other.into(),
    })
}

fn serve(args: ServeArgs) -> Result<()> {
    let admin_token = args.admin_token_file.as_deref().map(server::read_token).transpose()?;
    let (listen, admin_listen) = (args.listen, args.admin_listen);
    let follow = args.follow()?;
    // Held until the server stops.
    let _cache_lock = follow.as_ref().map(lock_cache).transpose()?;
    let mut seen = remote::follow::Seen::default();
    let runtime = runtime()?;
    let (snapshot, loaded) = match (&follow, &args.snapshot) {
        (Some(f), _) => {
            // The first generation before anything is served: the file in the cache directory
            // when it is still the manifest's, else a download. Either way it is verified once,
            // and the store serves what was verified. When the store cannot be read, a
            // verified file in the cache serves until the follower catches up: a restarted
            // replica must not crash-loop through an outage of the store.
            let live = f.live_path();
            f.remove_leftover_download();
            let current = Preloaded::open(&live).ok();
            let id = current.as_ref().map(|c| c.snapshot.id().to_owned());
            let polled = runtime
                .block_on(typeahead::remote::follow::poll_once(f, id.as_deref(), &mut seen))
                .with_context(|| {
                    format!("cannot fetch partition {} of {}", f.partition, f.manifest)
                });
            let kept = f.kept();
            let placed = match (polled, id.as_deref()) {
                (Ok(placed), live) => placed.map(|p| p.commit(&kept, live)).transpose()?,
                (Err(e), Some(id)) => {
                    tracing::warn!(error = format!("{e:#}"), version = %id, "starting with the cached generation; the follower will retry");
                    None
                }
                (Err(e), None) => {
                    // A read still stuck (a FIFO, a hung mount) must not hold up the exit.
                    runtime.shutdown_background();
                    return Err(e);
                }
            };
            let loaded = placed.or(current);
            // The generation kept beside this one before the restart, held again.
            let held = loaded.as_ref().and_then(|l| kept.open_beside(&l.snapshot));
            (live, loaded.map(|l| (l, held)))
        }
        (None, Some(path)) => (path.clone(), None),
        (None, None) => anyhow::bail!("--snapshot or --manifest is required"),
    };
    let mut config = args.config(admin_token, snapshot);
    fit_to_descriptors(&mut config.limits, 1 + usize::from(config.admin_token.is_some()), 0);
    let (loaded, held) = loaded.map_or((None, None), |(l, h)| (Some(l), h));
    let state = server::load_state_with(&config, loaded)?;
    if let Some(held) = held {
        // Not a reason to stay down: the server serves the current generation either way.
        if let Err(e) = state.store.hold_previous(held) {
            tracing::warn!(error = %typeahead::error::chain(&e), "cannot hold the kept generation; serving the current one alone");
        }
    }
    let served = runtime.block_on(async move {
        if let Some(f) = follow {
            let counters = remote::follow::Counters {
                failures: state.metrics.manifest_failures.clone(),
                by_reason: state.metrics.manifest_failures_by_reason.clone(),
                downloaded_bytes: state.metrics.downloaded_bytes.clone(),
            };
            // The first download, made before the metrics existed, counts too.
            counters.downloaded_bytes.inc_by(seen.downloaded_bytes);
            let store = Arc::clone(&state.store);
            let follow = remote::follow::run(f, store, counters, seen, std::future::pending());
            tokio::spawn(follow);
        }
        let public = bind_and_announce(listen, "listening on")?;
        let admin = match config.admin_token {
            Some(_) => Some(bind_and_announce(admin_listen, "admin listening on")?),
            None => None,
        };
        io::stdout().flush()?;
        let snapshot = state.store.current();
        tracing::info!(version = snapshot.snapshot.id(), keys = snapshot.snapshot.len(), "serving");
        drop(snapshot);
        let shutdown = server::shutdown_signal();
        server::run(state, config.limits, config.faults, public, admin, shutdown).await?;
        Ok(())
    });
    stop(runtime);
    served
}

/// Binds `addr` and prints `<label> <bound address>` (with port 0 the real port), which is how
/// tests, scripts and `typeahead cluster` find the process.
fn bind_and_announce(addr: SocketAddr, label: &str) -> Result<tokio::net::TcpListener> {
    let listener =
        typeahead::http::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    println!("{label} {}", listener.local_addr()?);
    Ok(listener)
}

/// A backends file's largest size: a line per replica, thousands of replicas.
const MAX_BACKENDS_BYTES: u64 = 1 << 20;

fn aggregate(args: AggregateArgs) -> Result<()> {
    let backends = match aggregator::discovery::Discovery::parse_dns(&args.backends) {
        Some(dns) => dns?,
        None => {
            // An operator's file: a FIFO or a device there must not hang the start.
            let path = std::path::Path::new(&args.backends);
            let text = typeahead_core::file::read_regular_string(path, MAX_BACKENDS_BYTES)
                .with_context(|| format!("cannot read backends file {}", args.backends))?;
            let fixed = aggregator::backends::parse_backends(&text)
                .with_context(|| format!("backends file {}", args.backends))?;
            aggregator::discovery::Discovery::Fixed(fixed)
        }
    };
    let listen = args.listen;
    let mut config = args.config(backends)?;
    let runtime = runtime()?;
    let (manifest, _) = match runtime.block_on(aggregator::first_manifest(&config.manifest)) {
        Ok(read) => read,
        Err(e) => {
            // A read still stuck (a FIFO, a hung mount) must not hold up the exit.
            runtime.shutdown_background();
            return Err(e.into());
        }
    };
    // A share for clients and one per partition: a request may ask every partition.
    let detached = aggregator::backends::MAX_DETACHED;
    fit_to_descriptors(&mut config.limits, 1 + manifest.partitions.len(), detached);
    let state = aggregator::load(&config, manifest)?;
    let served = runtime.block_on(async move {
        let listener = bind_and_announce(listen, "listening on")?;
        io::stdout().flush()?;
        tracing::info!(generation = %state.generations.active().generation, "aggregating");
        aggregator::run(state, config, listener, server::shutdown_signal()).await?;
        Ok(())
    });
    stop(runtime);
    served
}

/// Stops `runtime` once serving is over, without waiting long for its blocking threads: one
/// stuck in a read that never ends (a FIFO at the manifest's path, a hung mount, a name
/// server that does not answer) would otherwise hold up the exit until the process was
/// killed. (Dropping a runtime waits for every blocking thread.)
fn stop(runtime: tokio::runtime::Runtime) {
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
}

fn cluster(args: ClusterArgs) -> Result<()> {
    let config = cluster::ClusterConfig::from(args);
    // One thread: supervision is a few non-blocking checks a second.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime
        .block_on(cluster::run(&config, server::shutdown_signal()))
        .context("the cluster stopped")
}

fn rollback(args: &RollbackArgs) -> Result<()> {
    let (from, to) = match remote::local_path(&args.out) {
        Some(out) => {
            let done = publish::rollback(&out, args.to.as_deref(), args.force)?;
            (done.from, done.to)
        }
        None => {
            let bucket = remote::bucket::Bucket::new(remote::Location::parse(&args.out)?);
            block_on(bucket.rollback(args.to.as_deref(), args.force))??
        }
    };
    say(format!("rolled back from {from} to {to}"))
}

/// [`http::Limits::fit_to_descriptors`], saying so when it lowered the limits.
fn fit_to_descriptors(limits: &mut typeahead::http::Limits, shares: usize, also: usize) {
    if let Some(connections) = limits.fit_to_descriptors(shares, also) {
        tracing::warn!(
            connections,
            "the open-file limit is low: connections per listener, and requests at once, are capped at this (raise `ulimit -n` for more)"
        );
    }
}
