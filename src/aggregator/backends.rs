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

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::time::Duration;

use crate::snapshot::DEFAULT_TOP_K;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::task::JoinSet;

// Tokio's clock: tests run picking, hedging, timeouts and ejection under paused time.
use tokio::time::Instant;

pub use super::backends_file::{BackendsFileError, parse_backends};
use super::latency::Latency;
pub use super::transport::{
    HttpError, HttpTransport, MAX_DETACHED, MAX_READINESS_BYTES, Transport, answer_limit,
};
use crate::api::SuggestResponse;
use crate::metrics::AggregatorMetrics;

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

/// One replica of one partition.
#[derive(Debug)]
pub struct Replica {
    /// Where it listens.
    pub addr: SocketAddr,
    in_flight: AtomicUsize,
    latency: Latency,
    failures: AtomicU32,
    ejected_until: Mutex<Option<Instant>>,
    /// Snapshots it reported loaded, current first.
    versions: Mutex<Vec<Loaded>>,
    /// A version it was asked for and answered from another one, since its last probe: not
    /// asked for again until a probe reports it (it is healthy, so not ejected, and without
    /// this it would be picked first, and answer wrong, on every request).
    answered_other: Mutex<Option<String>>,
    /// Version of the blocklist it reported applying, with the release it reported running:
    /// what its answers depend on besides the snapshot. Replicas of one partition on two
    /// releases (a rolling upgrade) may answer alike requests differently, as on two lists:
    /// answers are then neither cached nor tagged, and the epoch (in ETags and cache keys)
    /// moves once the upgrade is through, so no answer of the old release is revalidated.
    answers_by: Mutex<Option<String>>,
    /// The key range it reported serving.
    range: Mutex<Option<Range>>,
    /// The partition it is grouped under ([`UNASSIGNED`]: none yet).
    partition: AtomicUsize,
    /// Whether the last probe reached it.
    answering: AtomicBool,
    /// Probes in a row that did not reach it.
    missed_probes: AtomicU32,
}

/// A snapshot a replica reported loaded.
#[derive(Debug, Clone)]
struct Loaded {
    version: String,
    /// The largest `k` it answers exactly from it (0: not reported).
    max_k: usize,
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

/// Probes in a row a replica must miss before the cache epoch counts it as silent: one probe
/// past its timeout on a loaded replica must not empty the cache when it is needed most.
const SILENT_AFTER: u32 = 2;

/// A key range `[start, end)` as a replica reports it (`end: None` is unbounded).
pub type Range = (String, Option<String>);

/// [`Replica::partition`] of a discovered replica not (yet) known to serve a partition.
const UNASSIGNED: usize = usize::MAX;

impl Replica {
    fn new(addr: SocketAddr, partition: usize) -> Self {
        Replica {
            addr,
            in_flight: AtomicUsize::new(0),
            latency: Latency::default(),
            failures: AtomicU32::new(0),
            ejected_until: Mutex::new(None),
            versions: Mutex::new(Vec::new()),
            answered_other: Mutex::new(None),
            answers_by: Mutex::new(None),
            range: Mutex::new(None),
            partition: AtomicUsize::new(partition),
            answering: AtomicBool::new(false),
            missed_probes: AtomicU32::new(0),
        }
    }

    /// The snapshot versions it reported loaded, current first.
    pub fn versions(&self) -> Vec<String> {
        lock(&self.versions).iter().map(|l| l.version.clone()).collect()
    }

    /// The key range it reported serving.
    pub fn range(&self) -> Option<Range> {
        lock(&self.range).clone()
    }

    fn ejected(&self, now: Instant) -> bool {
        lock(&self.ejected_until).is_some_and(|until| now < until)
    }

    /// Whether the replica reported `version` loaded (`None`: it has not reported yet).
    pub fn has_version(&self, version: &str) -> Option<bool> {
        if lock(&self.answered_other).as_deref() == Some(version) {
            return Some(false);
        }
        let versions = lock(&self.versions);
        (!versions.is_empty()).then(|| versions.iter().any(|l| l.version == version))
    }

    /// Whether it is serving traffic (not ejected).
    pub fn healthy(&self) -> bool {
        !self.ejected(Instant::now())
    }

    /// Whether the last probe reached it. Ejection takes several failures, and until then
    /// a replica that just died still looks healthy with the versions it reported.
    pub fn answering(&self) -> bool {
        self.answering.load(Relaxed)
    }

    /// Whether it serves `version`: the last probe reached it, it is not ejected, and it has
    /// that version loaded. What a generation switch, readiness, the fallback and the
    /// `typeahead_serving_replicas` gauge all count. ("Not ejected" alone is also true of a
    /// replica never reached, or one that just died still holding the versions it reported,
    /// since ejection takes three failures.)
    pub fn serves(&self, version: &str) -> bool {
        self.healthy() && self.answering() && self.has_version(version) == Some(true)
    }
}

/// What one try asks a replica: the request path, the snapshot version the answer must be
/// from, and the most suggestions it may hold.
#[derive(Clone, Copy)]
struct Asked<'a> {
    path: &'a str,
    version: &'a str,
    max_items: usize,
}

/// Whether a try without an answer was refused by a replica shedding load (503).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Busy {
    Yes,
    No,
}

/// One try on one replica, counted in flight and timed until it ends — however it ends: a try
/// aborted because another replica won (or the deadline passed) must not leave its replica
/// looking busy, and the time it ran says how slow the replica was.
struct Try<'a> {
    replica: &'a Replica,
    started: Instant,
    /// `None` while it runs: a try dropped before it ended was aborted.
    ended: Option<Ended>,
}

#[derive(Clone, Copy)]
enum Ended {
    /// An answer (or a 409): the time it took is the replica's latency.
    Answered,
    /// A failure counts as taking at least this long, so a replica that refuses connections at
    /// once does not look fast.
    Failed(Duration),
}

impl<'a> Try<'a> {
    fn enter(replica: &'a Replica) -> Self {
        replica.in_flight.fetch_add(1, Relaxed);
        Try { replica, started: Instant::now(), ended: None }
    }
}

impl Drop for Try<'_> {
    fn drop(&mut self) {
        self.replica.in_flight.fetch_sub(1, Relaxed);
        let ran = self.started.elapsed();
        let latency = &self.replica.latency;
        match self.ended {
            Some(Ended::Answered) => latency.record(ran),
            Some(Ended::Failed(penalty)) => latency.record(ran.max(penalty)),
            // Lost to a hedge 0.3 ms after it was sent, a try says only that this replica
            // takes at least 0.3 ms: it may raise the estimate, never lower it.
            None => latency.record_at_least(ran),
        }
    }
}

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

    /// Recomputes [`Backends::max_k`]'s table after a probe round: per snapshot version, the
    /// smallest `max_k` any replica reported for it (replicas of one release agree).
    fn update_max_ks(&self) {
        let mut known: HashMap<String, usize> = HashMap::new();
        for replica in self.members() {
            for loaded in lock(&replica.versions).iter().filter(|l| l.max_k > 0) {
                let k = known.entry(loaded.version.clone()).or_insert(loaded.max_k);
                *k = (*k).min(loaded.max_k);
            }
        }
        if **self.max_ks.load() != known {
            self.max_ks.store(Arc::new(known));
        }
    }

    /// Per replica, not the set of versions: with a replica down on the old version (it keeps
    /// what it last reported), the set during a change ({old, new}) was the set after it, so
    /// answers cached while a replica still served the old list outlived the change. (A new
    /// member, a restarted pod's address, changes it too: a cache flush, the price of never
    /// keying an answer by a list some replica answering it may not hold.) Whether probes
    /// reach the replica is part of it: one that stops answering them ([`SILENT_AFTER`] in a
    /// row) may have taken a change it could not report, and what it answered before must not
    /// outlive that.
    ///
    /// Each change gives a new token, never one used before, even when the reports are those
    /// of an earlier epoch (a blocklist changed back, a silent replica back): a probe round
    /// trails the replicas, so answers cached (and ETags sent) under an epoch may have come
    /// from replicas already on the next list, and changed back, a term unblocked in between
    /// would come back from the cache and in 304s. The count starts at the process's start
    /// time, so tokens of an earlier process are not reused either.
    fn update_epoch(&self) {
        let mut lists: HashMap<usize, String> = HashMap::new();
        let mut agree = true;
        let mut versions: Vec<String> = Vec::new();
        for r in &self.members() {
            let silent = r.missed_probes.load(Relaxed) >= SILENT_AFTER;
            let partition = r.partition.load(Relaxed);
            let Some(list) = lock(&r.answers_by).clone() else {
                // Answering, and its list unknown (a release that does not report it): what
                // it answers may hold what the others block, so nothing is kept for everyone.
                agree &= partition == UNASSIGNED || silent || !r.answering();
                continue;
            };
            if partition != UNASSIGNED && !silent {
                agree &= *lists.entry(partition).or_insert_with(|| list.clone()) == list;
            }
            let up = if silent { "silent" } else { "up" };
            versions.push(format!("{} {list} {up}", r.addr));
        }
        self.lists_agree.store(agree, Relaxed);
        versions.sort();
        let digest = crate::http::digest(&versions);
        let mut source = lock(&self.epoch_source);
        if source.0 != digest {
            source.1 = source.1.wrapping_add(1);
            self.epoch.store(Arc::new(epoch_token(&digest, source.1)));
            source.0 = digest;
        }
    }

    /// Number of partitions configured.
    pub fn partition_count(&self) -> usize {
        self.groups.load().len()
    }

    /// The replicas of a partition (as of now: the set may change for the next call).
    pub fn replicas(&self, partition: usize) -> Group {
        self.groups.load().get(partition).cloned().unwrap_or_else(|| Arc::from([]))
    }

    /// The best replica of `replicas` to try next: not yet tried, not ejected, known to have
    /// `version` if any replica reported it, lowest expected wait (in flight x recent
    /// latency), ties in rotation.
    fn pick(&self, replicas: &[Arc<Replica>], version: &str, tried: &[usize]) -> Option<usize> {
        let now = Instant::now();
        let open: Vec<usize> = (0..replicas.len()).filter(|i| !tried.contains(i)).collect();
        let live: Vec<usize> =
            open.iter().copied().filter(|&i| !replicas[i].ejected(now)).collect();
        // When every untried replica is ejected, try one anyway: better than no answer.
        let pool = if live.is_empty() { open } else { live };
        let with_version: Vec<usize> = pool
            .iter()
            .copied()
            .filter(|&i| replicas[i].has_version(version) != Some(false))
            .collect();
        let pool = if with_version.is_empty() { pool } else { with_version };
        if pool.is_empty() {
            return None;
        }
        // Start the scan at a rotating offset so that equally loaded replicas take turns.
        let start = self.next.fetch_add(1, Relaxed) % pool.len();
        let cost = |i: usize| replicas[i].latency.cost(replicas[i].in_flight.load(Relaxed));
        pool.iter()
            .cycle()
            .skip(start)
            .take(pool.len())
            .map(|&i| (i, cost(i)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }

    /// Asks one partition, hedging and retrying across its replicas until `deadline`.
    ///
    /// A try that passes the per-try timeout counts as a failure and makes room for another
    /// replica, but it keeps running: its answer is still taken if it comes before the deadline.
    /// Cutting it would turn "one replica down, the other briefly stalled" into a partial answer
    /// although the stalled one answers in time.
    ///
    /// An answer of more than `max_items` suggestions (the `k` asked for) is no answer: a
    /// replica that sends one is broken or is not what the backends list says, and merged, its
    /// items would be kept for everyone.
    pub async fn ask(
        self: &Arc<Self>,
        partition: usize,
        path: &str,
        version: &str,
        max_items: usize,
        deadline: Instant,
    ) -> Result<SuggestResponse, BackendError> {
        // Past the deadline a try would be dropped at once, and finished in the background.
        if Instant::now() >= deadline {
            return Err(BackendError::Deadline);
        }
        // One view of the partition's replicas for the whole request: indexes stay valid.
        let replicas = self.replicas(partition);
        self.hedge_budget.earn();
        self.retry_budget.earn();
        let mut tried: Vec<usize> = Vec::new();
        // Tries not yet past their timeout: replica index and when the timeout falls.
        let mut timing: Vec<(usize, Instant)> = Vec::new();
        // Per replica: its try passed the timeout, which counted as its failure; the same try
        // failing later must not count again (two slow requests would eject it, not three).
        let counted: Vec<AtomicBool> = replicas.iter().map(|_| AtomicBool::new(false)).collect();
        // Polled by this task, not spawned: a spawned try cost a task and, as often as not, a
        // wake-up of another worker thread per request. Dropping the set aborts what still runs.
        let mut tries = FuturesUnordered::new();
        // Sends a try to replica `i` (picked by the caller, which may first charge a budget).
        let launch = |i: usize,
                      tried: &mut Vec<usize>,
                      timing: &mut Vec<(usize, Instant)>,
                      tries: &mut FuturesUnordered<_>| {
            tried.push(i);
            timing.push((i, Instant::now() + self.policy.try_timeout));
            let (replica, counted) = (&replicas[i], &counted[i]);
            tries.push(async move {
                let asked = Asked { path, version, max_items };
                self.try_once(replica, asked, counted).await.map_err(|busy| (i, busy))
            });
        };
        let Some(first) = self.pick(&replicas, version, &tried) else {
            return Err(BackendError::AllFailed);
        };
        launch(first, &mut tried, &mut timing, &mut tries);
        let mut hedged = false;
        loop {
            let hedge = tokio::time::sleep(self.policy.hedge_after);
            let timeout = timing.iter().map(|t| t.1).min();
            tokio::select! {
                done = tries.next() => match done {
                    Some(Ok(answer)) => return Ok(answer),
                    Some(Err((i, busy))) => {
                        timing.retain(|t| t.0 != i);
                        match self.pick(&replicas, version, &tried) {
                            // A replica shedding load says the fleet may be overloaded: the
                            // retry is charged, or every shed ask came back as R asks.
                            Some(next) if busy == Busy::No || self.retry_budget.spend() => {
                                launch(next, &mut tried, &mut timing, &mut tries);
                            }
                            Some(_) => {
                                self.metrics.retries_skipped.inc();
                            }
                            None => {}
                        }
                        if tries.is_empty() {
                            return Err(BackendError::AllFailed);
                        }
                    }
                    None => return Err(BackendError::AllFailed),
                },
                () = hedge, if !hedged => {
                    hedged = true;
                    // Only a hedge that has a replica to go to is charged (or counted skipped).
                    if let Some(next) = self.pick(&replicas, version, &tried) {
                        if self.hedge_budget.spend() {
                            launch(next, &mut tried, &mut timing, &mut tries);
                            self.metrics.hedges.inc();
                        } else {
                            self.metrics.hedges_skipped.inc();
                        }
                    }
                }
                () = tokio::time::sleep_until(timeout.unwrap_or(deadline)),
                    if timeout.is_some() =>
                {
                    let now = Instant::now();
                    let (late, on_time): (Vec<_>, Vec<_>) = timing.iter().partition(|t| t.1 <= now);
                    timing = on_time;
                    for (i, _) in late {
                        tracing::debug!(replica = %replicas[i].addr, "try timed out");
                        counted[i].store(true, Relaxed);
                        self.failed(&replicas[i]);
                        // The late try keeps running, so another one next to it adds load as a
                        // hedge does, and overload (every try late) is when it would add most.
                        if let Some(next) = self.pick(&replicas, version, &tried) {
                            if self.retry_budget.spend() {
                                launch(next, &mut tried, &mut timing, &mut tries);
                            } else {
                                self.metrics.retries_skipped.inc();
                            }
                        }
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Err(BackendError::Deadline);
                }
            }
        }
    }

    /// One request to one replica, bounded only by the caller (`ask` stops waiting at the
    /// deadline, which aborts it); records the outcome (a failure only when `counted` does not
    /// say the caller already counted this try's timeout). An error: no answer from this
    /// replica, and whether it was shedding load.
    async fn try_once(
        &self,
        replica: &Replica,
        asked: Asked<'_>,
        counted: &AtomicBool,
    ) -> Result<SuggestResponse, Busy> {
        let Asked { path, version, max_items } = asked;
        let failed = || {
            if !counted.load(Relaxed) {
                self.failed(replica);
            }
        };
        let mut attempt = Try::enter(replica);
        let outcome = self.transport.get(replica.addr, path, answer_limit(max_items)).await;
        attempt.ended = Some(if matches!(outcome, Ok((200 | 409, _))) {
            Ended::Answered
        } else {
            Ended::Failed(self.policy.try_timeout)
        });
        drop(attempt);
        match outcome {
            Ok((200, body)) => match serde_json::from_slice::<SuggestResponse>(&body) {
                // Answered from another snapshot than the one asked for (`version=` ignored: a
                // proxy, another release): merged, it would mix generations. Healthy, though,
                // so not a failure, as a 409 is not: the next replica is asked.
                Ok(answer) if answer.version != version => {
                    // Once per probe interval at most: until a probe, it is not asked again.
                    tracing::warn!(replica = %replica.addr, asked = version, answered = %answer.version, "answer of another version");
                    *lock(&replica.answered_other) = Some(version.to_owned());
                    Err(Busy::No)
                }
                Ok(answer) if answer.suggestions.len() > max_items => {
                    let items = answer.suggestions.len();
                    tracing::warn!(replica = %replica.addr, items, max_items, "answer of more suggestions than asked for");
                    failed();
                    Err(Busy::No)
                }
                Ok(answer) => {
                    self.succeeded(replica);
                    Ok(answer)
                }
                Err(e) => {
                    tracing::debug!(replica = %replica.addr, error = %e, "unreadable answer");
                    failed();
                    Err(Busy::No)
                }
            },
            // The replica is healthy but does not have the pinned version (yet, or any more).
            Ok((409, _)) => Err(Busy::No),
            // Shedding load (its admission control's answer, or its request timeout): a
            // failure as any other, but the caller charges the retry it makes.
            Ok((503, _)) => {
                tracing::debug!(replica = %replica.addr, "replica busy");
                failed();
                Err(Busy::Yes)
            }
            Ok((status, _)) => {
                tracing::debug!(replica = %replica.addr, status, "try failed");
                failed();
                Err(Busy::No)
            }
            Err(e) => {
                tracing::debug!(replica = %replica.addr, error = %e, "try failed");
                failed();
                Err(Busy::No)
            }
        }
    }

    fn succeeded(&self, replica: &Replica) {
        replica.failures.store(0, Relaxed);
        *lock(&replica.ejected_until) = None;
    }

    /// A probe reached it: an ejection ends (a restarted replica gets traffic at once), but its
    /// failures in a row stand, since `/readyz` answering says nothing of its answers: one more
    /// failed try ejects it again, not three more between every two probe rounds.
    fn probed_back(&self, replica: &Replica) {
        *lock(&replica.ejected_until) = None;
    }

    /// A try on `replica` failed: counted, and it is ejected after enough in a row.
    fn failed(&self, replica: &Replica) {
        self.metrics.backend_errors.inc();
        self.count_failure(replica);
    }

    /// A probe of `replica` failed: counted apart from requests (a dead replica fails a probe a
    /// second with no traffic at all), and towards its ejection as a failed try is.
    fn probe_failed(&self, replica: &Replica) {
        self.metrics.probe_failures.inc();
        self.count_failure(replica);
    }

    fn count_failure(&self, replica: &Replica) {
        let failures = replica.failures.fetch_add(1, Relaxed) + 1;
        if failures >= self.policy.eject_after {
            let mut until = lock(&replica.ejected_until);
            if until.is_none_or(|u| u <= Instant::now()) {
                self.metrics.ejections.inc();
                tracing::warn!(replica = %replica.addr, failures, "replica ejected");
            }
            *until = Some(Instant::now() + self.policy.eject_for);
        }
    }

    /// Sets the version each partition is answered from (the active generation's), which
    /// the probes name: a replica keeps that version loaded through its reloads while no
    /// probe pins the newer one it serves ([`crate::store::Store::pin`]).
    pub fn answer_from(&self, manifest: &crate::manifest::Manifest) {
        let versions: Vec<String> =
            manifest.partitions.iter().map(|p| p.checksum.clone()).collect();
        if **self.answered_from.load() != versions {
            self.answered_from.store(Arc::new(versions));
        }
    }

    /// Asks every replica's `/readyz` which versions and range it has loaded, naming the
    /// version its partition is answered from. A replica that answers is no longer ejected
    /// (this is how an ejected one is probed back).
    pub async fn probe_all(self: &Arc<Self>) {
        let mut probes = JoinSet::new();
        let answered_from = self.answered_from.load_full();
        for replica in self.members() {
            let me = Arc::clone(self);
            let path = match answered_from.get(replica.partition.load(Relaxed)) {
                // Written into the path as the asks write theirs (`routes::Merged::ask`).
                Some(version) => format!("/readyz?version={version}"),
                None => "/readyz".to_owned(),
            };
            probes.spawn(async move {
                let outcome = tokio::time::timeout(
                    Duration::from_millis(500),
                    me.transport.get(replica.addr, &path, MAX_READINESS_BYTES),
                )
                .await;
                // A 200 whose body is no readiness report says nothing of what the replica
                // holds (its versions, its blocklist): as good as no answer.
                let ready = match outcome {
                    Ok(Ok((200, body))) => {
                        serde_json::from_slice::<crate::api::Readiness>(&body).ok()
                    }
                    _ => None,
                };
                match ready {
                    Some(ready) => {
                        let current = ready.version.map(|v| (v, ready.max_k));
                        let previous = (ready.previous_version)
                            .map(|v| (v, ready.previous_max_k.unwrap_or(0)));
                        *lock(&replica.versions) = current
                            .into_iter()
                            .chain(previous)
                            .map(|(version, max_k)| Loaded { version, max_k })
                            .collect();
                        *lock(&replica.answered_other) = None;
                        *lock(&replica.answers_by) = ready.blocklist_version.map(|list| {
                            ready.release.map_or_else(|| list.clone(), |r| format!("{list} {r}"))
                        });
                        *lock(&replica.range) = ready.range.map(|r| (r.start, r.end));
                        replica.answering.store(true, Relaxed);
                        replica.missed_probes.store(0, Relaxed);
                        me.probed_back(&replica);
                    }
                    None => {
                        replica.answering.store(false, Relaxed);
                        replica.missed_probes.fetch_add(1, Relaxed);
                        me.probe_failed(&replica);
                    }
                }
            });
        }
        while probes.join_next().await.is_some() {}
        self.update_epoch();
        self.update_max_ks();
        // Release, paired with `probed`'s Acquire: whoever sees the round done also sees what it
        // recorded (versions, ranges, the epoch).
        self.probed.store(true, Release);
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
