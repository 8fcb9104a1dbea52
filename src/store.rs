//! What a server is serving right now, and how it changes without a failed or slowed request.
//!
//! [`Store::current`] hands out one [`Served`] per request — snapshot, blocklist filter and
//! blocklist together — so a request sees one consistent generation even while a reload or a
//! blocklist update publishes the next one. Every change is built completely off the request path
//! (a niced background thread: read, verify, compute the filter) and then published with one
//! atomic `ArcSwap::store`. A failed change publishes nothing. The previous `Served` is freed when
//! the last request holding it finishes.
//!
//! Three rules keep a bad file from doing harm:
//! - **Loads are bounded.** A snapshot is read (never mapped, never opened blocking: see
//!   `typeahead_core::file`) under [`Store::load_timeout`]; a load past it is cancelled (its
//!   memory freed), fails and is counted, and the file watcher tries it again
//!   ([`StoreError::is_transient`]). Loads are serialized by their own lock and never hold the
//!   publishing lock, so a stuck load cannot hold up a blocklist change or shutdown.
//! - **A reload of the version already served changes nothing** (`touch`, a repeated
//!   `/admin/reload`, a re-sync): the kept previous generation stays what it was.
//! - **Every generation hides the same things.** The live blocklist applies to the previous
//!   generation too, and so do the entries the newest held build blocked: a term a rebuild
//!   removed cannot come back through `version=<previous>`, nor through a rollback to the
//!   generation before that rebuild (while the rebuild's generation is still held).
//!
//! Publishing is serialized by one lock so that a reload and a blocklist update racing each other
//! cannot publish a snapshot with the other's stale filter.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::sync::OwnedMutexGuard;

use crate::blocklist::{self, Blocklist};
use crate::matching::Tiers;
use crate::metrics::ServerMetrics;
use crate::snapshot::{self, Answer, Filter, Snapshot};
use crate::watch::{self, Fingerprint, Probe};

/// The blocklist in force, with its provenance (for `GET /admin/blocklist` and the audit log).
#[derive(Debug, Clone)]
pub struct ActiveBlocklist {
    /// The parsed list.
    pub list: Blocklist,
    /// Content version: a 64-bit FNV-1a hash of the normalized entries, for ETags, cache keys
    /// and `/readyz` (whether a list changed is decided by comparing the entries themselves).
    pub version: String,
    /// Where it came from (a file path or "admin api").
    pub source: String,
    /// When it was applied, unix seconds.
    pub applied_unix: i64,
}

impl ActiveBlocklist {
    /// Wraps a parsed list.
    pub fn new(list: Blocklist, source: impl Into<String>) -> Self {
        ActiveBlocklist {
            version: crate::http::digest(list.entries()),
            list,
            source: source.into(),
            applied_unix: unix_now(),
        }
    }

    /// The empty list.
    pub fn empty() -> Self {
        Self::new(Blocklist::empty(), "none")
    }
}

/// One consistent generation: what a request reads from start to end.
#[derive(Debug)]
pub struct Served {
    /// The snapshot.
    pub snapshot: Arc<Snapshot>,
    /// Blocked positions of this snapshot; `None` when nothing is blocked.
    pub filter: Option<Filter>,
    /// The live blocklist (the filter also hides the newest build's blocked entries).
    pub blocklist: Arc<ActiveBlocklist>,
    /// Version of everything the filter hides: the live list's version, plus a checksum of the
    /// newest build's blocked entries that the live list lacks. ETags and `/readyz` carry it.
    pub hidden_version: String,
    /// When this snapshot was loaded, unix seconds.
    pub loaded_unix: i64,
    /// When an aggregator last said it answers from this version ([`Store::pin`]), as
    /// [`Pinned`] counts time. Decides which generation a reload keeps.
    pinned: Pinned,
}

impl Served {
    /// Top-k suggestions of a normalized prefix, blocked terms hidden.
    pub fn suggest(&self, prefix: &str, k: usize) -> Vec<snapshot::Suggestion> {
        self.snapshot.suggest_filtered(prefix, k, self.filter.as_ref())
    }

    /// The tiered answer ([`crate::matching`]) of a normalized prefix, blocked terms hidden.
    pub fn answer(&self, prefix: &str, k: usize, tiers: Tiers) -> Answer {
        self.snapshot.answer(prefix, k, self.filter.as_ref(), tiers)
    }

    /// Completions the blocklist hides in this snapshot.
    pub fn hidden(&self) -> usize {
        self.filter.as_ref().map_or(0, Filter::blocked_count)
    }

    /// This generation under another live list and newest build's entries, loaded and pinned
    /// when it was ([`Served::new`]).
    fn under(
        &self,
        live: &Arc<ActiveBlocklist>,
        newest_build: &[String],
    ) -> Result<Served, StoreError> {
        let served = Served::new(Arc::clone(&self.snapshot), live, newest_build, self.loaded_unix)?;
        served.pinned.copy(&self.pinned);
        Ok(served)
    }

    /// `snapshot` under the live list plus `newest_build` (the blocked entries of the newest
    /// generation's build); computes the filter, so call it off the request path.
    fn new(
        snapshot: Arc<Snapshot>,
        live: &Arc<ActiveBlocklist>,
        newest_build: &[String],
        loaded_unix: i64,
    ) -> Result<Served, StoreError> {
        let extra: Vec<String> = newest_build
            .iter()
            .filter(|e| live.list.entries().binary_search(e).is_err())
            .cloned()
            .collect();
        let (filter, hidden_version) = if extra.is_empty() {
            (filter_for(&snapshot, &live.list), live.version.clone())
        } else {
            let list = live.list.union(&extra)?;
            (
                filter_for(&snapshot, &list),
                format!("{}+{}", live.version, crate::http::digest(&extra)),
            )
        };
        let pinned = Pinned::default();
        Ok(Served {
            snapshot,
            filter,
            blocklist: Arc::clone(live),
            hidden_version,
            loaded_unix,
            pinned,
        })
    }
}

/// When a generation was last pinned: milliseconds since the process's first pin, plus one
/// (0: never). A pin counts for [`Pinned::FRESH`]: aggregators repeat theirs at every probe
/// (every 250 ms), and one that has gone away, or a client that named a version once, must not
/// decide what a reload keeps for the life of the process.
#[derive(Debug, Default)]
struct Pinned(std::sync::atomic::AtomicU64);

impl Pinned {
    const FRESH: Duration = Duration::from_secs(10);

    fn clock() -> u64 {
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let since = EPOCH.get_or_init(Instant::now).elapsed();
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX - 1) + 1
    }

    /// Pinned now. (Read first: probes from several aggregators and cores write rarely.)
    fn now(&self) {
        let now = Self::clock();
        if self.0.load(Ordering::Relaxed) != now {
            self.0.store(now, Ordering::Relaxed);
        }
    }

    fn is_fresh(&self) -> bool {
        Self::fresh(self.0.load(Ordering::Relaxed), Self::clock())
    }

    /// Whether a pin at `at` still counts at `now` (both as [`Pinned::clock`] counts).
    fn fresh(at: u64, now: u64) -> bool {
        at != 0 && now.saturating_sub(at) < Self::FRESH.as_millis() as u64
    }

    fn copy(&self, from: &Pinned) {
        self.0.store(from.0.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// Why a change was not published.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The new snapshot failed to load or verify.
    #[error(transparent)]
    Snapshot(#[from] snapshot::Error),
    /// The blocklist could not be compiled.
    #[error(transparent)]
    Blocklist(#[from] blocklist::Error),
    /// Loading took longer than the load timeout (a hung file system, a huge file).
    #[error("loading {path} took longer than {timeout:?}; it was cancelled")]
    Timeout {
        /// The snapshot path.
        path: PathBuf,
        /// The load timeout.
        timeout: Duration,
    },
    /// A verified file could not be put at the store's path ([`Store::adopt`]).
    #[error("cannot put the verified file at {path}")]
    Place {
        /// The snapshot path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The loader thread could not start.
    #[error("cannot start a loader thread")]
    Thread(#[source] std::io::Error),
    /// The loader thread died without an answer (it panicked).
    #[error("the loader thread panicked")]
    Panicked,
    /// The file system did not say whether the file changed.
    #[error(transparent)]
    Unanswered(#[from] watch::Unanswered),
}

impl StoreError {
    /// Whether the same change may succeed when tried again: a load that ran out of time
    /// (the machine was busy, the file system slow), a read the system refused for now (out
    /// of file descriptors, an I/O error of a network file system), a loader thread that
    /// could not start or died; not a file that was rejected.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Timeout { .. }
            | StoreError::Thread(_)
            | StoreError::Panicked
            | StoreError::Unanswered(_) => true,
            StoreError::Snapshot(snapshot::Error::Io { source, .. }) => {
                watch::is_transient_io(source)
            }
            _ => false,
        }
    }
}

/// The served state and the means to change it.
#[derive(Debug)]
pub struct Store {
    current: ArcSwap<Served>,
    /// The generation kept beside the current one so an aggregator can finish a rollout on it
    /// (see `version pinning` in ARCHITECTURE.md): the one before the last reload, unless
    /// an aggregator's probes still pin an older one ([`Store::publish`]).
    previous: ArcSwapOption<Served>,
    path: PathBuf,
    /// `stat`s of `path`, off the async workers.
    probe: Arc<Probe>,
    /// One snapshot load at a time, held by the loader thread itself: a load given up on
    /// keeps it until its thread has stopped, so retries never pile up threads (or memory)
    /// behind one stuck in a read. Never held while publishing.
    loading: Arc<tokio::sync::Mutex<()>>,
    /// One publication at a time (reload or blocklist change).
    change: tokio::sync::Mutex<()>,
    /// The file at `path` last verified: its identity taken before it was read, and the id of
    /// the snapshot it held. A reload of that very file (`/admin/reload` of an unchanged file,
    /// the watcher seeing a file the manifest follower verified and put in place) has nothing
    /// to read: at 10M completions a load is a second of CPU.
    verified: std::sync::Mutex<Option<Verified>>,
    load_timeout: Duration,
    metrics: Arc<ServerMetrics>,
}

use crate::clock::now_unix as unix_now;

/// A file that was read and verified: its identity before the read, the snapshot id it held.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verified {
    identity: Fingerprint,
    id: String,
}

/// The build-blocked entries every held generation hides: the newest build's among them (by
/// build time; on a tie, every tied build's). After a rollback the newer generation is still
/// held, so what its build blocked stays out of the older one it rolled back to.
fn newest_build(held: &[&Arc<Snapshot>]) -> Vec<String> {
    let newest = held.iter().map(|s| s.meta().build_time_unix).max();
    let mut entries: Vec<String> = held
        .iter()
        .filter(|s| Some(s.meta().build_time_unix) == newest)
        .flat_map(|s| s.meta().blocklist.iter().cloned())
        .collect();
    entries.sort_unstable();
    entries.dedup();
    entries
}

fn filter_for(snapshot: &Snapshot, blocklist: &Blocklist) -> Option<Filter> {
    if blocklist.is_empty() {
        return None;
    }
    let filter = Filter::new(snapshot, |key| blocklist.blocks(key));
    (filter.blocked_count() > 0).then_some(filter)
}

/// A snapshot read and verified from the file at a store's path, and that file's identity.
#[derive(Debug)]
pub struct Preloaded {
    /// The snapshot.
    pub snapshot: Arc<Snapshot>,
    /// The identity of the file it was read from (its `fstat` when open).
    pub fingerprint: Fingerprint,
}

impl Preloaded {
    /// Reads and verifies the snapshot at `path` (blocking).
    pub fn open(path: &Path) -> Result<Preloaded, snapshot::Error> {
        Self::open_cancellable(path, &AtomicBool::new(false))
    }

    /// [`Preloaded::open`] that gives up once `cancel` is set ([`Snapshot::open_cancellable`]).
    /// The identity is the open file's: a file renamed over the path while it is read is never
    /// taken for the one read.
    pub fn open_cancellable(
        path: &Path,
        cancel: &AtomicBool,
    ) -> Result<Preloaded, snapshot::Error> {
        let (snapshot, metadata) = Snapshot::open_with_metadata(path, cancel)?;
        Ok(Preloaded { snapshot: Arc::new(snapshot), fingerprint: watch::identity(&metadata) })
    }
}

impl Store {
    /// Loads and verifies the snapshot at `path` (blocking: call before serving). Later loads
    /// ([`Store::reload`]) give up after `load_timeout`.
    pub fn open(
        path: &Path,
        blocklist: ActiveBlocklist,
        load_timeout: Duration,
        metrics: Arc<ServerMetrics>,
    ) -> Result<Store, StoreError> {
        Self::with_loaded(path, Preloaded::open(path)?, blocklist, load_timeout, metrics)
    }

    /// [`Store::open`] with the snapshot at `path` already read and verified (a server that
    /// follows a manifest has done so before it starts serving).
    pub fn with_loaded(
        path: &Path,
        loaded: Preloaded,
        blocklist: ActiveBlocklist,
        load_timeout: Duration,
        metrics: Arc<ServerMetrics>,
    ) -> Result<Store, StoreError> {
        let Preloaded { snapshot, fingerprint } = loaded;
        let verified = Some(Verified { identity: fingerprint, id: snapshot.id().to_owned() });
        let build = newest_build(&[&snapshot]);
        let served = Served::new(snapshot, &Arc::new(blocklist), &build, unix_now())?;
        Ok(Store {
            current: ArcSwap::from_pointee(served),
            previous: ArcSwapOption::empty(),
            path: path.to_owned(),
            probe: Arc::new(Probe::new(path)),
            loading: Arc::new(tokio::sync::Mutex::new(())),
            change: tokio::sync::Mutex::new(()),
            verified: std::sync::Mutex::new(verified),
            load_timeout,
            metrics,
        })
    }

    /// Holds `previous` beside the current generation, as a reload to the current one would
    /// have left it: what a restarted follower kept on disk ([`crate::remote::kept`]).
    /// Blocking (it computes the blocklist's filters): call before serving.
    pub fn hold_previous(&self, previous: Preloaded) -> Result<(), StoreError> {
        let current = self.current();
        if previous.snapshot.id() == current.snapshot.id() {
            return Ok(());
        }
        let live = Arc::clone(&current.blocklist);
        let build = newest_build(&[&current.snapshot, &previous.snapshot]);
        let held = Served::new(previous.snapshot, &live, &build, unix_now())?;
        let current = current.under(&live, &build)?;
        self.previous.store(Some(Arc::new(held)));
        self.current.store(Arc::new(current));
        Ok(())
    }

    /// The generation to use for one request.
    pub fn current(&self) -> Arc<Served> {
        self.current.load_full()
    }

    /// The generation before the last reload, if any.
    pub fn previous(&self) -> Option<Arc<Served>> {
        self.previous.load_full()
    }

    /// Marks the generation `version`, if held, as one an aggregator answers from (its probes
    /// say so: `/readyz?version=V`), which a reload then keeps ([`Store::publish`]). Whether it
    /// is held.
    ///
    /// Only the probes pin, not requests naming a version: every client names versions there,
    /// and could name the current one and so drop the one the aggregator answers from at the
    /// next reload. The probe route is open to whoever reaches the replica too, which at worst
    /// gives back the plain rule (keep the outgoing one): the servers belong behind the
    /// aggregators (the Kubernetes NetworkPolicy admits only them and Prometheus).
    pub fn pin(&self, version: &str) -> bool {
        let Some(served) = self.version(version) else { return false };
        served.pinned.now();
        true
    }

    /// The current or previous generation whose snapshot id is `version`.
    pub fn version(&self, version: &str) -> Option<Arc<Served>> {
        let current = self.current();
        if current.snapshot.id() == version {
            return Some(current);
        }
        self.previous().filter(|p| p.snapshot.id() == version)
    }

    /// The snapshot path this store reloads from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `stat`s of [`Store::path`] (one at a time, off the async workers), for its watcher.
    pub fn probe(&self) -> &Arc<Probe> {
        &self.probe
    }

    /// The identity of the file last read and verified at [`Store::path`] (taken before the
    /// read): where a watch of that path starts from.
    pub fn verified_identity(&self) -> Option<Fingerprint> {
        let verified = self.verified.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        verified.as_ref().map(|v| v.identity)
    }

    /// How long one snapshot load may take before it is abandoned.
    pub fn load_timeout(&self) -> Duration {
        self.load_timeout
    }

    /// Loads, verifies and publishes the snapshot at the store's path. On error nothing
    /// changes; when the file holds the version already served, nothing changes either. The
    /// very file last verified (same identity) is not read again when it holds the version
    /// served.
    ///
    /// Loads and adoptions of the file take turns (the load lock is held from the read to the
    /// publication): a load of a file that was replaced meanwhile cannot publish after the
    /// replacement, and a reload that waited for the adoption of the very file it was asked to
    /// read finds it verified.
    pub async fn reload(&self) -> Result<Arc<Served>, StoreError> {
        let started = Instant::now();
        // All of it within the load timeout, the stats that tell whether the file changed too.
        let deadline = tokio::time::Instant::now() + self.load_timeout;
        let loaded = match self.unchanged_by(deadline).await {
            Ok(Some(current)) => return Ok(current),
            Ok(None) => self.load(deadline).await,
            Err(e) => Err(e),
        };
        match loaded {
            Ok(Some((loaded, _loading))) => self.publish_loaded(loaded, started).await,
            Ok(None) => Ok(self.current()),
            Err(e) => {
                let failed = Err(e);
                self.log_reload(&failed, started);
                failed.map(|(served, _)| served)
            }
        }
    }

    /// Puts a file already read and verified at the store's path with `place` (the manifest
    /// follower renames its download into place) and publishes the snapshot it holds: the
    /// reload its appearance triggers has nothing to read. Both happen in one turn of the load
    /// lock, so no load reads the file between them, and a load in progress publishes first.
    pub async fn adopt(
        &self,
        loaded: Preloaded,
        place: impl FnOnce() -> std::io::Result<()> + Send + 'static,
    ) -> Result<Arc<Served>, StoreError> {
        // What is given up is a partition's worth of memory, and a download whose unlink frees
        // as much disk: dropped off the workers ([`retire`]).
        let waited =
            tokio::time::timeout(self.load_timeout, Arc::clone(&self.loading).lock_owned());
        let Ok(_loading) = waited.await else {
            retire((loaded, place));
            return Err(self.expired());
        };
        let started = Instant::now();
        let placed = match in_background(place).await {
            Ok(placed) => placed,
            Err(e) => {
                retire(loaded);
                return Err(e);
            }
        };
        if let Err(source) = placed {
            retire(loaded);
            let failed = Err(StoreError::Place { path: self.path.clone(), source });
            self.log_reload(&failed, started);
            return failed.map(|(served, _)| served);
        }
        self.publish_loaded(loaded, started).await
    }

    /// Publishes `loaded` and remembers its file as verified.
    async fn publish_loaded(
        &self,
        loaded: Preloaded,
        started: Instant,
    ) -> Result<Arc<Served>, StoreError> {
        let published = self.publish(loaded.snapshot).await;
        if let Ok((served, _)) = &published {
            self.remember(loaded.fingerprint, served.snapshot.id());
        }
        self.log_reload(&published, started);
        published.map(|(served, _)| served)
    }

    /// The current generation, when the file at the store's path is the very one verified for
    /// it (a reload then has nothing to read), told by `deadline`.
    async fn unchanged_by(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<Option<Arc<Served>>, StoreError> {
        tokio::time::timeout_at(deadline, self.unchanged()).await.map_err(|_| self.expired())?
    }

    /// [`Store::unchanged_by`] without a deadline of its own (the probe's still bounds it).
    async fn unchanged(&self) -> Result<Option<Arc<Served>>, StoreError> {
        let Some(identity) = self.probe.fingerprint().await? else {
            return Ok(None);
        };
        let current = self.current();
        let verified = self.verified.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let same = verified
            .as_ref()
            .is_some_and(|v| v.identity == identity && v.id == current.snapshot.id());
        drop(verified);
        Ok(same.then(|| {
            tracing::debug!(
                version = current.snapshot.id(),
                "the file is the one verified for the version served; nothing changes"
            );
            current
        }))
    }

    /// A reload (or adoption) out of its time.
    fn expired(&self) -> StoreError {
        StoreError::Timeout { path: self.path.clone(), timeout: self.load_timeout }
    }

    fn remember(&self, identity: Fingerprint, id: &str) {
        let verified = Verified { identity, id: id.to_owned() };
        *self.verified.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(verified);
    }

    fn log_reload(
        &self,
        published: &Result<(Arc<Served>, bool), StoreError>,
        started: std::time::Instant,
    ) {
        match published {
            Ok((served, true)) => tracing::info!(
                version = served.snapshot.id(),
                keys = served.snapshot.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                path = %self.path.display(),
                "snapshot published"
            ),
            Ok((served, false)) => tracing::debug!(
                version = served.snapshot.id(),
                "reloaded the version already served; nothing changes"
            ),
            Err(e) => {
                self.metrics.swaps_failed.inc();
                let (error, path) = (crate::error::chain(e), self.path.display());
                let what = if matches!(e, StoreError::Unanswered(_)) {
                    "cannot tell whether the snapshot file changed"
                } else {
                    "snapshot rejected"
                };
                tracing::warn!(%error, %path, "{what}; the previous one keeps serving");
            }
        }
    }

    /// Reads and verifies the file, within the load timeout, and hands back the load lock
    /// with it, to be held until it is published. `None`: the file turned out to be the one
    /// verified for the version served while this load waited for the lock.
    ///
    /// A load out of time is cancelled: its thread stops at its next check and frees what it
    /// read, and only then may the next load start (a retry never holds a second file's worth
    /// of memory next to it).
    async fn load(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<Option<(Preloaded, OwnedMutexGuard<()>)>, StoreError> {
        let expired = || self.expired();
        // Waiting for an earlier load (or for a cancelled one's thread to stop) counts against
        // this one's time.
        let loading = Arc::clone(&self.loading);
        let loading =
            tokio::time::timeout_at(deadline, loading.lock_owned()).await.map_err(|_| expired())?;
        if self.unchanged_by(deadline).await?.is_some() {
            return Ok(None);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(expired());
        }
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        let (path, flag) = (self.path.clone(), Arc::clone(&cancel.0));
        // The thread owns the lock, and hands it back with what it read: given up on, it
        // keeps the lock until it has stopped.
        let load = in_background(move || (Preloaded::open_cancellable(&path, &flag), loading));
        let (loaded, loading) =
            tokio::time::timeout_at(deadline, load).await.map_err(|_| expired())??;
        Ok(Some((loaded?, loading)))
    }

    /// Publishes a loaded snapshot as the current generation and keeps one other: the
    /// outgoing current one, unless no aggregator has pinned it and one pinned the previous.
    /// Returns whether anything changed.
    ///
    /// That exception is an aggregator still pinned to an older generation, because some other
    /// partition cannot load the newer ones (a corrupt file, one too big for memory): keeping
    /// "the one before the last reload" dropped the generation it answers from at this
    /// partition's second reload, and every answer touching this partition was partial from
    /// then on. Without an aggregator nothing is pinned, and the outgoing one is kept.
    async fn publish(&self, snapshot: Arc<Snapshot>) -> Result<(Arc<Served>, bool), StoreError> {
        let _change = self.change.lock().await;
        let current = self.current();
        if current.snapshot.id() == snapshot.id() {
            // The copy just read (a file touched, or copied again) goes: no worker's to free.
            retire(snapshot);
            return Ok((current, false));
        }
        let pinned_previous = self.previous().filter(|p| {
            p.pinned.is_fresh() && !current.pinned.is_fresh() && p.snapshot.id() != snapshot.id()
        });
        let live = Arc::clone(&current.blocklist);
        let (served, previous) = in_background(move || -> Result<_, StoreError> {
            let kept = pinned_previous.as_deref().unwrap_or(&current);
            let build = newest_build(&[&snapshot, &kept.snapshot]);
            Ok((Served::new(snapshot, &live, &build, unix_now())?, kept.under(&live, &build)?))
        })
        .await??;
        let served = Arc::new(served);
        // Previous first: a request pinned to the outgoing version always finds it.
        let retired = self.previous.swap(Some(Arc::new(previous)));
        let outgoing = self.current.swap(Arc::clone(&served));
        retire((retired, outgoing));
        self.metrics.swaps.inc();
        Ok((served, true))
    }

    /// Computes the filter of `blocklist` for the current snapshot and publishes both (the list
    /// in force again changes nothing).
    pub async fn set_blocklist(
        &self,
        blocklist: ActiveBlocklist,
    ) -> Result<Arc<Served>, StoreError> {
        let _change = self.change.lock().await;
        let (current, previous) = (self.current(), self.previous());
        // The list in force again (a client retrying a change that went through) computes no
        // filter: at 10M completions two of them take over a second, under this lock.
        if current.blocklist.list.entries() == blocklist.list.entries() {
            return Ok(current);
        }
        let started = std::time::Instant::now();
        let live = Arc::new(blocklist);
        let (served, previous) = in_background(move || -> Result<_, StoreError> {
            let mut held = vec![&current.snapshot];
            held.extend(previous.as_ref().map(|p| &p.snapshot));
            let build = newest_build(&held);
            let refilter = |old: &Served| old.under(&live, &build);
            let previous = previous.map(|p| refilter(&p).map(Arc::new)).transpose()?;
            Ok((refilter(&current)?, previous))
        })
        .await??;
        let served = Arc::new(served);
        self.previous.store(previous);
        self.current.store(Arc::clone(&served));
        self.metrics.blocklist_updates.inc();
        tracing::info!(
            target: "audit",
            version = %served.blocklist.version,
            entries = served.blocklist.list.len(),
            source = %served.blocklist.source,
            hidden = served.hidden(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "blocklist applied"
        );
        Ok(served)
    }
}

#[cfg(test)]
mod model_tests;

/// Sets the load's flag when the load stops being awaited, for whatever reason: a timeout, or
/// the waiting task dropped at shutdown.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `work` on a fresh thread with a lower CPU priority and awaits its result.
///
/// Loading and verifying a 10M-completion snapshot takes about a second of CPU; at normal
/// priority it competes with the request threads and shows up in their tail latency. A niced
/// thread takes whatever CPU the requests leave. (`SCHED_IDLE`, which yields to a waking
/// request thread at once, was measured and is not used: see the README's "Hot swap".)
pub(crate) async fn in_background<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, StoreError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("snapshot-loader".into())
        .spawn(move || {
            lower_thread_priority();
            let _ = tx.send(work());
        })
        .map_err(StoreError::Thread)?;
    rx.await.map_err(|_| StoreError::Panicked)
}

/// Drops `retired` on the blocking pool. The last reference to a generation frees its whole
/// snapshot, hundreds of megabytes at 10M completions: tens of milliseconds that no request
/// on an async worker should wait behind. (A request still holding it frees it when done.)
fn retire<T: Send + 'static>(retired: T) {
    drop(tokio::task::spawn_blocking(move || drop(retired)));
}

/// Nice value of background loader threads (0 is normal, 19 the lowest priority).
const LOADER_NICE: i32 = 10;

#[cfg(target_os = "linux")]
fn lower_thread_priority() {
    // SAFETY: setpriority takes plain integers and touches no memory of ours; on Linux, who = 0
    // with PRIO_PROCESS means the calling thread. Failure (e.g. no permission) is harmless.
    #[allow(unsafe_code)]
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, LOADER_NICE);
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_thread_priority() {}
