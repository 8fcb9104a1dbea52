//! The partition servers behind an aggregator: replicas, load balancing, per-try timeouts,
//! retries, hedged requests, ejection and probing back.
//!
//! A request for one partition goes to the replica with the lowest expected wait: requests in
//! flight times its recent latency (see [`super::latency`]). If it has not answered after
//! `hedge_after`, the same request also goes to another replica and the first
//! answer wins (this cuts the tail a slow replica would cause); hedges are bounded to a share
//! of the asks (`hedge_budget`), so that overload, which makes every try slow, is not doubled. A failed try is retried on
//! another replica while the deadline allows; a try past its timeout is too, but as it keeps
//! running, that retry spends from a budget of its own (`retry_budget`, twice the hedges'),
//! and so does the retry after a 503 (a replica shedding load: when the whole fleet sheds,
//! a free retry per shed ask would multiply the load; a replica that sheds now and then costs
//! little, as its failures make it look slow and it is picked less). A replica that fails `eject_after` times in a row
//! is left out for `eject_for`, then gets traffic again (and the readiness probe brings it back
//! as soon as it answers). Connections are pooled and kept alive.

mod ask;
mod probe;
mod replica;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::time::Duration;

use crate::snapshot::DEFAULT_TOP_K;

pub use super::backends_file::{BackendsFileError, parse_backends};
pub use super::transport::{
    HttpError, HttpTransport, MAX_DETACHED, MAX_READINESS_BYTES, Transport, answer_limit,
};
use crate::metrics::AggregatorMetrics;
pub use replica::Replica;

/// Timing and failure policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Longest one try may take.
    pub try_timeout: Duration,
    /// Send a second (hedged) request when the first has not answered after this long.
    pub hedge_after: Duration,
    /// Hedges add at most this share of asks to the replicas' load (0.1: one hedge per ten
    /// asks on average). When every replica is slow, as under overload, every try passes
    /// `hedge_after`, and hedging them all would double the load on replicas that can least
    /// take it; bounding hedges to a few percent is what "The Tail at Scale" (Dean and Barroso)
    /// recommends. Each ask earns this much of a hedge, and a hedge spends one.
    pub hedge_budget: f64,
    /// Hedges that may go out at once over the budget (earned hedges are kept up to this many),
    /// so that an aggregator with little traffic still hedges its occasional slow request.
    pub hedge_burst: u32,
    /// The same bound for a retry sent while a try past its timeout still runs (which adds
    /// load as a hedge does, and most under overload), kept apart and more generous: a retry
    /// is what gets an answer at all when a replica stalls, so hedges spent (or turned off)
    /// must not stop it. Finagle's retry budget is 20% of requests.
    pub retry_budget: f64,
    /// As `hedge_burst`, for those retries.
    pub retry_burst: u32,
    /// Consecutive failures that eject a replica.
    pub eject_after: u32,
    /// How long an ejected replica gets no traffic.
    pub eject_for: Duration,
    /// Pooled connections idle this long are closed. It must stay under the replicas' header
    /// timeout (10 s by default), which closes idle connections on their side: reusing a
    /// connection the replica is closing would fail a try.
    pub backend_idle: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            try_timeout: Duration::from_millis(50),
            hedge_after: Duration::from_millis(10),
            hedge_budget: 0.1,
            hedge_burst: 10,
            retry_budget: 0.2,
            retry_burst: 20,
            eject_after: 3,
            eject_for: Duration::from_secs(2),
            backend_idle: Duration::from_secs(5),
        }
    }
}

/// Where a process's epoch count starts ([`Backends::update_epoch`]): its start time in
/// nanoseconds, so that no two processes hand out the same tokens.
fn first_epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn epoch_token(digest: &str, count: u64) -> String {
    format!("{digest}{count:016x}")
}

/// A key range `[start, end)` as a replica reports it (`end: None` is unbounded).
pub type Range = (String, Option<String>);

/// [`Replica::partition`] of a discovered replica not (yet) known to serve a partition.
const UNASSIGNED: usize = usize::MAX;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why a partition could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// No replica answered before the deadline.
    #[error("no replica answered in time")]
    Deadline,
    /// Every replica was tried and failed.
    #[error("every replica failed")]
    AllFailed,
}

/// Every partition's replicas and the transport that reaches them.
///
/// The replicas are either fixed (a backends file: each listed under its partition) or
/// discovered ([`Backends::discovered`]): the set of addresses changes as a DNS name's records
/// do ([`Backends::set_members`]), and each replica is grouped under the partition whose file
/// it reports loaded ([`Backends::assign`]). Requests read the groups through one atomic
/// pointer, so membership changes never block or disturb a request in flight.
#[derive(Debug)]
pub struct Backends<T: Transport = HttpTransport> {
    /// Every known replica.
    members: Mutex<Vec<Arc<Replica>>>,
    /// The replicas of each partition, rebuilt from `members` when they change.
    groups: arc_swap::ArcSwap<Vec<Group>>,
    /// Fixed by a backends file: never regrouped.
    fixed: bool,
    next: AtomicUsize,
    transport: T,
    policy: Policy,
    metrics: Arc<AggregatorMetrics>,
    /// The replicas' blocklist versions as one token, recomputed by each probe round (read on
    /// every request, so it is kept ready rather than assembled per request).
    epoch: arc_swap::ArcSwap<String>,
    /// What `epoch` was made of: the digest of the reports, and the count of epochs so far.
    epoch_source: Mutex<(String, u64)>,
    /// Whether the replicas of each partition report one blocklist ([`Backends::lists_agree`]).
    lists_agree: AtomicBool,
    /// Whether a probe round has completed ([`Backends::probed`]).
    probed: AtomicBool,
    /// The version each partition is answered from ([`Backends::answer_from`]), named in the
    /// probes.
    answered_from: arc_swap::ArcSwap<Vec<String>>,
    /// Per snapshot version, the largest `k` its replicas answer exactly ([`Backends::max_k`]),
    /// kept ready by each probe round as `epoch` is.
    max_ks: arc_swap::ArcSwap<HashMap<String, usize>>,
    /// Hedges earned and not spent ([`Policy::hedge_budget`]).
    hedge_budget: Tokens,
    /// Retries next to a late try earned and not spent ([`Policy::retry_budget`]).
    retry_budget: Tokens,
    /// Early asks of the other partitions earned and not spent ([`Backends::spend_early_ask`]).
    early_asks: Tokens,
}

/// A token bucket of extra tries (hedges, or retries next to a late try), in thousandths of a
/// try: each ask earns `share`, a try spends [`Tokens::HEDGE`], and at most `cap` is kept
/// (the burst).
#[derive(Debug)]
struct Tokens {
    tokens: AtomicU64,
    share: u64,
    cap: u64,
}

impl Tokens {
    const HEDGE: u64 = 1000;

    /// `share` of a try earned per ask, at most `burst` kept; full (a burst's worth) at start.
    fn new(share: f64, burst: u32) -> Self {
        let cap = u64::from(burst) * Self::HEDGE;
        let share = (share.clamp(0.0, 1.0) * Self::HEDGE as f64) as u64;
        Tokens { tokens: AtomicU64::new(cap), share, cap }
    }

    /// Adds `amount`, up to the cap.
    fn add(&self, amount: u64) {
        let add = |tokens: u64| Some(tokens.saturating_add(amount).min(self.cap));
        let _ = self.tokens.fetch_update(Relaxed, Relaxed, add);
    }

    /// One ask's share of a hedge.
    fn earn(&self) {
        self.add(self.share);
    }

    /// Spends one hedge, if one is earned.
    fn spend(&self) -> bool {
        self.tokens.fetch_update(Relaxed, Relaxed, |t| t.checked_sub(Self::HEDGE)).is_ok()
    }
}

impl Backends {
    /// Connects (lazily, over HTTP) to the replicas of each partition.
    pub fn new(
        partitions: Vec<Vec<SocketAddr>>,
        policy: Policy,
        metrics: Arc<AggregatorMetrics>,
    ) -> Self {
        let transport = HttpTransport::new(&policy);
        Backends::with_transport(partitions, policy, metrics, transport)
    }
}

/// The replicas of one partition, as one request sees them.
pub type Group = Arc<[Arc<Replica>]>;

impl Backends {
    /// `partitions` partitions whose replicas are found later ([`Backends::set_members`]).
    pub fn discovered(partitions: usize, policy: Policy, metrics: Arc<AggregatorMetrics>) -> Self {
        let transport = HttpTransport::new(&policy);
        let mut backends =
            Backends::with_transport(vec![Vec::new(); partitions], policy, metrics, transport);
        backends.fixed = false;
        backends
    }
}

impl<T: Transport> Backends<T> {
    /// The replicas of each partition, reached through `transport`.
    pub fn with_transport(
        partitions: Vec<Vec<SocketAddr>>,
        policy: Policy,
        metrics: Arc<AggregatorMetrics>,
        transport: T,
    ) -> Self {
        let count = partitions.len();
        let members: Vec<Arc<Replica>> = partitions
            .into_iter()
            .enumerate()
            .flat_map(|(i, addrs)| addrs.into_iter().map(move |a| Arc::new(Replica::new(a, i))))
            .collect();
        let (no_reports, first) = (crate::http::digest(&[] as &[&str]), first_epoch());
        Backends {
            groups: arc_swap::ArcSwap::from_pointee(group(&members, count)),
            members: Mutex::new(members),
            fixed: true,
            next: AtomicUsize::new(0),
            transport,
            metrics,
            epoch: arc_swap::ArcSwap::from_pointee(epoch_token(&no_reports, first)),
            epoch_source: Mutex::new((no_reports, first)),
            lists_agree: AtomicBool::new(true),
            hedge_budget: Tokens::new(policy.hedge_budget, policy.hedge_burst),
            retry_budget: Tokens::new(policy.retry_budget, policy.retry_burst),
            early_asks: Tokens::new(policy.retry_budget, policy.retry_burst),
            policy,
            probed: AtomicBool::new(false),
            answered_from: arc_swap::ArcSwap::from_pointee(Vec::new()),
            max_ks: arc_swap::ArcSwap::from_pointee(HashMap::new()),
        }
    }

    /// Every known replica.
    fn members(&self) -> Vec<Arc<Replica>> {
        lock(&self.members).clone()
    }

    /// Makes `addrs` the discovered replicas: new ones join unassigned (the next probe tells
    /// which partition they serve), gone ones leave their partition at once (requests in
    /// flight on them finish). No-op for fixed backends.
    pub fn set_members(&self, addrs: &[SocketAddr]) {
        if self.fixed {
            return;
        }
        let mut members = lock(&self.members);
        let before = members.len();
        members.retain(|r| addrs.contains(&r.addr));
        let removed = before - members.len();
        let mut added = 0;
        for &addr in addrs {
            if !members.iter().any(|r| r.addr == addr) {
                members.push(Arc::new(Replica::new(addr, UNASSIGNED)));
                added += 1;
            }
        }
        if added + removed > 0 {
            tracing::info!(added, removed, replicas = members.len(), "replica set changed");
            self.groups.store(Arc::new(group(&members, self.partition_count())));
        }
    }

    /// Groups each discovered replica under the partition `partition_of` names for it (from
    /// what it reported). No-op for fixed backends.
    pub fn assign(&self, partition_of: impl Fn(&Replica) -> Option<usize>) {
        if self.fixed {
            return;
        }
        let members = lock(&self.members);
        let mut changed = false;
        for r in members.iter() {
            let p = partition_of(r).unwrap_or(UNASSIGNED);
            changed |= r.partition.swap(p, Relaxed) != p;
        }
        if changed {
            self.groups.store(Arc::new(group(&members, self.partition_count())));
        }
    }

    /// The blocklist version (and release) each replica reported, as one token
    /// ([`Backends::update_epoch`]): it changes whenever any replica applies a new blocklist or
    /// runs a new release, which is what invalidates cached answers and ETags.
    pub fn blocklist_epoch(&self) -> Arc<String> {
        self.epoch.load_full()
    }

    /// Whether the replicas of each partition that answer probes report one blocklist and one
    /// release (at the last probe round). While they do not (a change spreading, or made on one replica only),
    /// an answer depends on which replica gave it, and a cached one would keep whichever came
    /// first, a term the other replicas block included, for as long as they disagree.
    pub fn lists_agree(&self) -> bool {
        self.lists_agree.load(Relaxed)
    }

    /// An answer that may ask the other partitions early earns its share of an early ask.
    pub fn earn_early_ask(&self) {
        self.early_asks.earn();
    }

    /// Spends one early ask, if one is earned. Asking every other partition because the first
    /// ones have not answered halfway to the deadline adds load as a hedge does, and mostly in
    /// vain when they are only slow (overload), so it is bounded as retries are: the same
    /// share ([`Policy::retry_budget`]), kept apart.
    pub fn spend_early_ask(&self) -> bool {
        self.early_asks.spend()
    }

    /// The largest `k` worth asking for when answering from `manifest`'s snapshots: the
    /// smallest `max_k` replicas reported for them, [`DEFAULT_TOP_K`] before
    /// any report. Per snapshot, not per replica: a server caps `k` by the snapshot it
    /// answers from, and while the aggregator still answers from the previous generation, its
    /// replicas' current one may have been built with a larger `--top-k`; merging more than
    /// each partition sent would make up the tail.
    ///
    /// A snapshot no replica reported a `max_k` for (a server of an older release reports none
    /// for the one it keeps) takes the smallest reported for any, as before versions were told
    /// apart.
    pub fn max_k(&self, manifest: &crate::manifest::Manifest) -> usize {
        let known = self.max_ks.load();
        let fallback = known.values().copied().min();
        manifest
            .partitions
            .iter()
            .filter_map(|p| known.get(&p.checksum).copied().or(fallback))
            .min()
            .unwrap_or(DEFAULT_TOP_K)
    }

    /// Number of partitions configured.
    pub fn partition_count(&self) -> usize {
        self.groups.load().len()
    }

    /// The replicas of a partition (as of now: the set may change for the next call).
    pub fn replicas(&self, partition: usize) -> Group {
        self.groups.load().get(partition).cloned().unwrap_or_else(|| Arc::from([]))
    }

    /// Whether some replica [`serves`](Replica::serves) `version`, whatever partition it is
    /// grouped under (replicas are grouped by the generations the aggregator
    /// knows, and this asks about others too).
    pub fn loaded_anywhere(&self, version: &str) -> bool {
        let members = lock(&self.members);
        members.iter().any(|r| r.serves(version))
    }

    /// Whether a probe round has completed. Before the first one the aggregator knows neither
    /// the replicas' versions (which it pins answers to) nor their blocklist versions (which key
    /// its cache), and no replica has yet served a request, so the first burst of traffic would
    /// meet every replica cold: a replica's first request costs it several milliseconds.
    pub fn probed(&self) -> bool {
        self.probed.load(Acquire)
    }
}

/// The replicas of `members` per partition (`count` of them), in member order.
fn group(members: &[Arc<Replica>], count: usize) -> Vec<Group> {
    (0..count)
        .map(|p| members.iter().filter(|r| r.partition.load(Relaxed) == p).cloned().collect())
        .collect()
}
