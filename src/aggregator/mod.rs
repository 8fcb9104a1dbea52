//! `typeahead aggregate`: one endpoint in front of partitioned servers.
//!
//! For a prefix it asks first the partitions whose key range can hold completions of that prefix
//! (the manifest's ranges), with the tiers the request asked for; only when their prefix matches
//! leave the answer short and a later tier can contribute (a typed word, or a prefix long enough
//! for a typo) does it ask every other partition too, since a words or fuzzy candidate can be in
//! any of them. It merges their answers tier by tier into exactly one snapshot's answer
//! ([`crate::generation::merge_tiers`]), and answers with the same API as a server, so clients
//! cannot tell the difference. Around that:
//!
//! - replicas, hedging, retries and ejection live in [`backends`];
//! - a partition that cannot answer before the deadline is left out and the answer is marked
//!   `partial: true` — never a hang, never a 500;
//! - **version pinning**: every request uses one manifest (generation) and asks each partition
//!   for that generation's snapshot version explicitly. Servers keep their previous snapshot
//!   loaded, so during a rollout the old generation stays answerable until every partition has
//!   the new one; only then does the aggregator switch ([`Generations`]). No answer mixes two;
//! - a bounded cache of hot prefixes, keyed by generation ([`cache`]).

pub mod backends;
mod backends_file;
mod coalesce;
mod detach;
pub mod discovery;
#[cfg(test)]
mod fake;
mod fallback;
mod gauges;
#[cfg(test)]
mod generation_tests;
pub mod latency;
mod routes;
#[cfg(test)]
mod timing_tests;
mod transport;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cache::Cache;
use crate::error::ApiError;
use crate::manifest::{MAX_MANIFEST_BYTES, Manifest};
use crate::metrics::{AggregatorMetrics, HttpMetrics, Registry};
use backends::{Backends, Policy};
use discovery::Discovery;

/// The generation being served, and the one waiting for every partition to load it.
#[derive(Debug)]
pub struct Generations {
    active: ArcSwap<Manifest>,
    pending: ArcSwapOption<Manifest>,
}

impl Generations {
    /// Serving `manifest`, nothing pending.
    pub fn new(manifest: Manifest) -> Self {
        Generations { active: ArcSwap::from_pointee(manifest), pending: ArcSwapOption::empty() }
    }

    /// The generation a request should use (one load per request).
    pub fn active(&self) -> Arc<Manifest> {
        self.active.load_full()
    }

    /// A newer generation not yet available on every partition.
    pub fn pending(&self) -> Option<Arc<Manifest>> {
        self.pending.load_full()
    }

    /// A manifest was (re)read: what it names is the only generation worth switching to. One
    /// other than the active one, with the configured number of partitions, becomes pending
    /// (replacing an older pending one); the active one again (a rollback before the switch)
    /// or an unusable one leaves nothing pending, so a generation the manifest no longer
    /// names is never switched to.
    pub fn announce(&self, manifest: Manifest, partitions: usize) {
        if manifest.generation == self.active().generation {
            self.pending.store(None);
            return;
        }
        if manifest.partitions.len() != partitions {
            tracing::error!(generation = %manifest.generation, partitions = manifest.partitions.len(), "new generation does not match the configured partitions; ignored");
            self.pending.store(None);
            return;
        }
        tracing::info!(generation = %manifest.generation, "new generation announced; waiting for every partition to load it");
        self.pending.store(Some(Arc::new(manifest)));
    }

    /// Switches to the pending generation once every partition has its version loaded on at
    /// least one healthy replica (as last probed). Returns whether it switched.
    pub fn switch_if_ready<T: backends::Transport>(&self, backends: &Backends<T>) -> bool {
        let Some(pending) = self.pending() else { return false };
        let everywhere = served_everywhere(&pending, backends);
        if everywhere {
            self.active.store(Arc::clone(&pending));
            // Only if still the one switched to: a newer one announced meanwhile (the manifest
            // poll runs apart from the probes) stays pending, or it would be lost until the
            // next publication (its manifest's ETag is already seen).
            self.pending.compare_and_swap(&Some(Arc::clone(&pending)), None);
            tracing::info!(generation = %pending.generation, "switched to the new generation");
        }
        everywhere
    }
}

/// Whether every partition of `manifest` has a replica that [`serves`](backends::Replica::serves)
/// its version: what a generation switch waits for, and readiness too.
fn served_everywhere<T: backends::Transport>(manifest: &Manifest, backends: &Backends<T>) -> bool {
    manifest
        .partitions
        .iter()
        .all(|p| backends.replicas(p.index).iter().any(|r| r.serves(&p.checksum)))
}

/// Everything the aggregator's handlers share.
#[derive(Debug)]
pub struct Shared {
    /// Active and pending generations.
    pub generations: Arc<Generations>,
    /// The partition servers.
    pub backends: Arc<Backends>,
    /// Hot-prefix answers.
    pub cache: Cache<Arc<crate::api::SuggestResponse>>,
    /// Answers being made: a miss for one waits for it rather than fanning out again.
    coalesce: coalesce::Coalesce<Arc<crate::api::SuggestResponse>>,
    /// Request and connection metrics (the plumbing both processes share).
    pub http_metrics: Arc<HttpMetrics>,
    /// Cache, backend and generation counters.
    pub metrics: Arc<AggregatorMetrics>,
    /// Everything `/metrics` exports: both sets above and the generation's gauges.
    pub registry: Registry,
    /// Longest an answer may take; partitions slower than this are left out (`partial`).
    pub deadline: Duration,
    /// The search page's settings.
    pub web: crate::web::WebConfig,
    /// Whether [`Shared::ready`] has been true.
    was_ready: std::sync::atomic::AtomicBool,
    /// The kept generations last said to be passed over for their rules
    /// ([`fallback`]), so that the warning is logged when the list changes.
    passed_over: std::sync::Mutex<Vec<String>>,
}

impl Shared {
    /// Whether the aggregator is ready: from the first probe round after which the active
    /// generation is served everywhere ([`served_everywhere`]), for good. Before it the
    /// replicas are unknown (and would meet their first requests cold); after it a partition
    /// without replicas makes answers partial, and taking every aggregator out of its Service
    /// for it (they all see the same) would make them fail instead.
    pub fn ready(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if self.was_ready.load(Relaxed) {
            return true;
        }
        let backends = &self.backends;
        let ready = backends.probed() && served_everywhere(&self.generations.active(), backends);
        if ready {
            self.was_ready.store(true, Relaxed);
        }
        ready
    }
}

/// Handle shared by every request.
pub type AggState = Arc<Shared>;

/// Configuration of `typeahead aggregate`.
#[derive(Debug, Clone)]
pub struct AggregateConfig {
    /// The manifest to follow (a path or an object-store URL).
    pub manifest: crate::remote::Location,
    /// How often the manifest is polled.
    pub manifest_poll: Duration,
    /// Where the replicas are: fixed per partition, or a DNS name.
    pub backends: Discovery,
    /// Answer deadline.
    pub deadline: Duration,
    /// Backend timing and failure policy.
    pub policy: Policy,
    /// Cached answers at most.
    pub cache_entries: usize,
    /// How long a cached answer is reused.
    pub cache_ttl: Duration,
    /// Limits of the public listener.
    pub limits: crate::http::Limits,
    /// The search page's settings.
    pub web: crate::web::WebConfig,
}

/// Why the aggregator cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The manifest is unreadable or malformed.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::Error),
    /// The manifest's store failed.
    #[error(transparent)]
    Remote(Box<crate::remote::RemoteError>),
    /// There is no manifest at the location.
    #[error("no manifest at {0}")]
    NoManifest(String),
    /// The manifest is not one.
    #[error("manifest {location} is malformed: {message}")]
    BadManifest {
        /// Where.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// The manifest and the backends file disagree on the number of partitions.
    #[error("the manifest has {manifest} partitions but the backends file lists {backends}")]
    PartitionCount {
        /// Partitions in the manifest.
        manifest: usize,
        /// Partitions in the backends file.
        backends: usize,
    },
}

/// Starts from `manifest` (read from `config.manifest`), checked against the backends.
pub fn load(config: &AggregateConfig, manifest: Manifest) -> Result<AggState, StartError> {
    let metrics = Arc::new(AggregatorMetrics::default());
    let (policy, partitions) = (config.policy.clone(), manifest.partitions.len());
    let backends = Arc::new(match &config.backends {
        Discovery::Fixed(fixed) if fixed.len() != partitions => {
            return Err(StartError::PartitionCount { manifest: partitions, backends: fixed.len() });
        }
        Discovery::Fixed(fixed) => Backends::new(fixed.clone(), policy, Arc::clone(&metrics)),
        Discovery::Dns { .. } => Backends::discovered(partitions, policy, Arc::clone(&metrics)),
    });
    let generations = Arc::new(Generations::new(manifest));
    let http_metrics = Arc::new(HttpMetrics::default());
    let mut registry = Registry::default();
    http_metrics.register(&mut registry);
    metrics.register(&mut registry);
    registry.register_collector(Box::new(gauges::GenerationGauges::new(
        Arc::clone(&generations),
        Arc::clone(&backends),
    )));
    Ok(Arc::new(Shared {
        generations,
        backends,
        cache: Cache::new(config.cache_entries, config.cache_ttl),
        coalesce: coalesce::Coalesce::default(),
        http_metrics,
        metrics,
        registry,
        deadline: config.deadline,
        web: config.web.clone(),
        was_ready: std::sync::atomic::AtomicBool::new(false),
        passed_over: std::sync::Mutex::default(),
    }))
}

/// The aggregator's routes with the same middleware as a server.
pub fn router(state: AggState, limits: &crate::http::Limits) -> Router {
    let router = routes::router()
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed });
    let metrics = Arc::clone(&state.http_metrics);
    let admission = crate::http::AdmissionLayer::for_limits(limits);
    crate::http::protect(router, routes::probes(), state.web.clone(), admission, metrics)
        .with_state(state)
}

/// Serves until `shutdown`, following the manifest and probing replicas in the background.
pub async fn run(
    state: AggState,
    config: AggregateConfig,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let follower = tokio::spawn(follow_generations(
        Arc::clone(&state),
        Follow {
            manifest: config.manifest.clone(),
            poll: config.manifest_poll,
            probe: config.limits.watch_interval,
            discovery: config.backends.clone(),
        },
        stop_rx.clone(),
    ));
    let app = router(Arc::clone(&state), &config.limits);
    let mut stopped = stop_rx.clone();
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: finishing in-flight requests");
        let _ = stop_tx.send(true);
    });
    let metrics = Arc::clone(&state.http_metrics);
    crate::http::serve(listener, app, config.limits.conn.clone(), metrics, async move {
        let _ = stopped.wait_for(|s| *s).await;
    })
    .await?;
    let _ = follower.await;
    Ok(())
}

/// Longest a manifest read or a name resolution may take before this round gives up on it
/// (as long as a following server's manifest read).
const MANIFEST_READ_TIMEOUT: Duration = crate::remote::follow::MANIFEST_READ_TIMEOUT;

/// What the generation follower watches.
struct Follow {
    manifest: crate::remote::Location,
    /// Between manifest polls (one conditional read each).
    poll: Duration,
    /// Between replica probes.
    probe: Duration,
    /// Where the replicas are.
    discovery: Discovery,
}

/// Reads the manifest at start: its bytes' ETag is the version later polls compare with.
/// Bounded as every later poll is: a store that never answers, or a FIFO or a hung mount at a
/// local path, fails the start with a message instead of hanging it.
pub async fn first_manifest(
    location: &crate::remote::Location,
) -> Result<(Manifest, Option<String>), StartError> {
    use crate::remote::{Fetched, RemoteError};
    let shown = location.to_string();
    let read = tokio::time::timeout(
        MANIFEST_READ_TIMEOUT,
        location.get_if_changed(None, MAX_MANIFEST_BYTES),
    );
    let fetched = read.await.unwrap_or_else(|_| {
        Err(RemoteError::TimedOut {
            location: shown.clone(),
            seconds: MANIFEST_READ_TIMEOUT.as_secs(),
        })
    });
    match fetched.map_err(|e| StartError::Remote(Box::new(e)))? {
        Fetched::Changed(bytes, tag) => Manifest::parse(&bytes)
            .map(|m| (m, tag))
            .map_err(|message| StartError::BadManifest { location: shown, message }),
        Fetched::Unchanged | Fetched::Absent => Err(StartError::NoManifest(shown)),
    }
}

/// Probes replicas, picks up new manifests, and switches generations once every partition has
/// the new one loaded on at least one healthy replica.
///
/// The manifest polls and the name resolutions run on tasks of their own: each may wait up to
/// [`MANIFEST_READ_TIMEOUT`] for a store or a name server that hangs, and the probes must not
/// wait with them, since they are what carries a blocklist change into the answer cache's keys
/// within a second.
async fn follow_generations(state: AggState, follow: Follow, stop: watch::Receiver<bool>) {
    let Follow { manifest, poll, probe, discovery } = follow;
    let probe = probe.max(Duration::from_millis(50));
    // A zero `poll` (a local manifest) means at every probe.
    let polls =
        tokio::spawn(poll_manifest(Arc::clone(&state), manifest, poll.max(probe), stop.clone()));
    let resolutions = match discovery {
        Discovery::Dns { name, port } => {
            Some(tokio::spawn(resolve_members(Arc::clone(&state), name, port, stop.clone())))
        }
        Discovery::Fixed(_) => None,
    };
    let mut tick = ticker(probe);
    let mut stopped = stop;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.wait_for(|s| *s) => break,
        }
        probe_naming_active(&state).await;
        let (active, pending) = (state.generations.active(), state.generations.pending());
        state.backends.assign(|r| {
            discovery::partition_of(&r.versions(), r.range(), &active, pending.as_deref())
        });
        if state.generations.switch_if_ready(&state.backends) {
            state.metrics.generation_flips.inc();
            // Pin the new generation at once: until a probe names it, a replica reloading
            // now would keep the old one (still pinned) and drop the one answered from.
            probe_naming_active(&state).await;
        }
        // Latched here, not only when `/readyz` is asked: a partition lost before the first
        // readiness probe must not keep the aggregator out of its Service.
        state.ready();
    }
    let _ = polls.await;
    if let Some(resolutions) = resolutions {
        let _ = resolutions.await;
    }
}

/// Probes every replica, naming the active generation's versions (which pins them).
async fn probe_naming_active(state: &AggState) {
    state.backends.answer_from(&state.generations.active());
    state.backends.probe_all().await;
}

/// An interval whose first tick is at once and whose missed ticks are skipped, not bunched.
fn ticker(period: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tick
}

/// Reads the manifest every `poll` (a conditional read) and announces each new one.
async fn poll_manifest(
    state: AggState,
    manifest: crate::remote::Location,
    poll: Duration,
    mut stop: watch::Receiver<bool>,
) {
    use crate::remote::Fetched;
    let mut tick = ticker(poll);
    let mut seen: Option<String> = None;
    // Whether the manifest's absence was reported since it was last read: once per
    // disappearance in the log, every poll in the metric.
    let mut gone = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        // A read can hang for its whole timeout (a store that does not answer, a FIFO at a
        // local path): shutdown does not wait for it.
        let once = async {
            let read = tokio::time::timeout(
                MANIFEST_READ_TIMEOUT,
                manifest.get_if_changed(seen.as_deref(), MAX_MANIFEST_BYTES),
            );
            let read = read.await.unwrap_or_else(|_| {
                Err(crate::remote::RemoteError::TimedOut {
                    location: manifest.to_string(),
                    seconds: MANIFEST_READ_TIMEOUT.as_secs(),
                })
            });
            match read {
                Ok(Fetched::Changed(bytes, tag)) => match Manifest::parse(&bytes) {
                    Ok(m) => {
                        (seen, gone) = (tag, false);
                        state.generations.announce(m, state.backends.partition_count());
                    }
                    Err(message) => {
                        state.metrics.manifest_failures.inc();
                        tracing::warn!(%message, %manifest, "manifest rejected; the active generation stays")
                    }
                },
                Ok(Fetched::Unchanged) => gone = false,
                Ok(Fetched::Absent) => {
                    // It was there at startup: a lifecycle rule or a hand deleted it.
                    state.metrics.manifest_failures.inc();
                    if !std::mem::replace(&mut gone, true) {
                        tracing::warn!(%manifest, "the manifest is gone; the active generation stays");
                    }
                }
                Err(e) => {
                    state.metrics.manifest_failures.inc();
                    tracing::warn!(error = %crate::error::chain(&e), "manifest poll failed; the active generation stays")
                }
            }
            fallback::fall_back_if_needed(&state, &manifest, MANIFEST_READ_TIMEOUT).await;
        };
        tokio::select! {
            () = once => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Resolves `name` every [`discovery::RESOLVE_EVERY`] and makes its addresses the replicas.
async fn resolve_members(
    state: AggState,
    name: String,
    port: u16,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = ticker(discovery::RESOLVE_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let resolved = tokio::time::timeout(MANIFEST_READ_TIMEOUT, discovery::resolve(&name, port));
        // Shutdown does not wait for a name server that does not answer.
        let resolved = tokio::select! {
            resolved = resolved => resolved,
            _ = stop.wait_for(|s| *s) => return,
        };
        let resolved = resolved.unwrap_or_else(|_| {
            Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 5 s"))
        });
        match resolved {
            Ok(addrs) => state.backends.set_members(&addrs),
            // The last known replicas keep serving.
            Err(e) => tracing::warn!(%name, error = %e, "cannot resolve the replicas' name"),
        }
    }
}
