//! What a server is serving right now, and how it changes without a failed or slowed request.
//!
//! [`Store::current`] hands out one [`Served`] per request — snapshot, blocklist filter and
//! blocklist together — so a request sees one consistent generation even while a reload or a
//! blocklist update publishes the next one. Every change is built completely off the request path
//! (a niced background thread: open, verify, compute the filter) and then published with one atomic
//! `ArcSwap::store`. A failed change publishes nothing. The previous `Served` is freed (and its
//! snapshot unmapped) when the last request holding it finishes.
//!
//! Changes are serialized by one lock so that a reload and a blocklist update racing each other
//! cannot publish a snapshot with the other's stale filter.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};

use crate::blocklist::Blocklist;
use crate::metrics::Metrics;
use crate::snapshot::{self, Filter, Snapshot};

/// The blocklist in force, with its provenance (for `GET /admin/blocklist` and the audit log).
#[derive(Debug, Clone)]
pub struct ActiveBlocklist {
    /// The parsed list.
    pub list: Blocklist,
    /// Content version: a checksum of the normalized entries.
    pub version: String,
    /// Where it came from (a file path or "admin api").
    pub source: String,
    /// When it was applied, unix seconds.
    pub applied_unix: i64,
}

impl ActiveBlocklist {
    /// Wraps a parsed list.
    pub fn new(list: Blocklist, source: impl Into<String>) -> Self {
        let mut hasher = crc32fast::Hasher::new();
        for e in list.entries() {
            hasher.update(e.as_bytes());
            hasher.update(b"\n");
        }
        ActiveBlocklist {
            version: format!("{:08x}", hasher.finalize()),
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
    /// The blocklist the filter was computed from.
    pub blocklist: Arc<ActiveBlocklist>,
    /// When this snapshot was loaded, unix seconds.
    pub loaded_unix: i64,
}

impl Served {
    /// Top-k suggestions of a normalized prefix, blocked terms hidden.
    pub fn suggest(&self, prefix: &str, k: usize) -> Vec<snapshot::Suggestion> {
        self.snapshot.suggest_filtered(prefix, k, self.filter.as_ref())
    }

    /// Completions the blocklist hides in this snapshot.
    pub fn hidden(&self) -> usize {
        self.filter.as_ref().map_or(0, Filter::blocked_count)
    }
}

/// Why a change was not published.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The new snapshot failed to load or verify.
    #[error(transparent)]
    Snapshot(#[from] snapshot::Error),
    /// The background task died.
    #[error("background load failed: {0}")]
    Task(String),
}

/// The served state and the means to change it.
#[derive(Debug)]
pub struct Store {
    current: ArcSwap<Served>,
    /// The generation before the last reload, kept so an aggregator can finish a rollout on it
    /// (see `version pinning` in ARCHITECTURE.md); replaced at the next reload.
    previous: ArcSwapOption<Served>,
    path: PathBuf,
    change: tokio::sync::Mutex<()>,
    metrics: Arc<Metrics>,
}

use crate::builder::logline::now_unix as unix_now;

fn filter_for(snapshot: &Snapshot, blocklist: &ActiveBlocklist) -> Option<Filter> {
    if blocklist.list.is_empty() {
        return None;
    }
    let filter = Filter::new(snapshot, |key| blocklist.list.blocks(key));
    (filter.blocked_count() > 0).then_some(filter)
}

impl Store {
    /// Loads and verifies the snapshot at `path` (blocking: call before serving).
    pub fn open(
        path: &Path,
        blocklist: ActiveBlocklist,
        metrics: Arc<Metrics>,
    ) -> Result<Store, StoreError> {
        let snapshot = Arc::new(Snapshot::open(path)?);
        let filter = filter_for(&snapshot, &blocklist);
        let served =
            Served { snapshot, filter, blocklist: Arc::new(blocklist), loaded_unix: unix_now() };
        Ok(Store {
            current: ArcSwap::from_pointee(served),
            previous: ArcSwapOption::empty(),
            path: path.to_owned(),
            change: tokio::sync::Mutex::new(()),
            metrics,
        })
    }

    /// The generation to use for one request.
    pub fn current(&self) -> Arc<Served> {
        self.current.load_full()
    }

    /// The generation before the last reload, if any.
    pub fn previous(&self) -> Option<Arc<Served>> {
        self.previous.load_full()
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

    /// Loads, verifies and publishes the snapshot at the store's path. On error nothing changes.
    pub async fn reload(&self) -> Result<Arc<Served>, StoreError> {
        let _change = self.change.lock().await;
        let (path, blocklist) = (self.path.clone(), Arc::clone(&self.current().blocklist));
        let started = std::time::Instant::now();
        let result = in_background(move || -> Result<Served, StoreError> {
            let snapshot = Arc::new(Snapshot::open(&path)?);
            let filter = filter_for(&snapshot, &blocklist);
            Ok(Served { snapshot, filter, blocklist, loaded_unix: unix_now() })
        })
        .await?;
        match result {
            Ok(served) => {
                let served = Arc::new(served);
                // Previous first: a request pinned to the outgoing version always finds it.
                self.previous.store(Some(self.current()));
                self.current.store(Arc::clone(&served));
                self.metrics.swaps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::info!(
                    version = served.snapshot.id(),
                    keys = served.snapshot.len(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    path = %self.path.display(),
                    "snapshot published"
                );
                Ok(served)
            }
            Err(e) => {
                self.metrics.swaps_failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(error = %e, path = %self.path.display(), "snapshot rejected; the previous one keeps serving");
                Err(e)
            }
        }
    }

    /// Computes the filter of `blocklist` for the current snapshot and publishes both.
    pub async fn set_blocklist(
        &self,
        blocklist: ActiveBlocklist,
    ) -> Result<Arc<Served>, StoreError> {
        let _change = self.change.lock().await;
        let (current, previous) = (self.current(), self.previous());
        let started = std::time::Instant::now();
        let blocklist = Arc::new(blocklist);
        let list = Arc::clone(&blocklist);
        let (served, previous) = in_background(move || {
            let refilter = |old: &Served| Served {
                snapshot: Arc::clone(&old.snapshot),
                filter: filter_for(&old.snapshot, &list),
                blocklist: Arc::clone(&list),
                loaded_unix: old.loaded_unix,
            };
            (refilter(&current), previous.map(|p| Arc::new(refilter(&p))))
        })
        .await?;
        let served = Arc::new(served);
        self.previous.store(previous);
        self.current.store(Arc::clone(&served));
        self.metrics.blocklist_updates.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

/// Runs `work` on a fresh thread with a lower CPU priority and awaits its result.
///
/// Loading and verifying a 10M-completion snapshot takes about a second of CPU; at normal
/// priority it competes with the request threads and shows up in their tail latency. A niced
/// thread takes whatever CPU the requests leave.
async fn in_background<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, StoreError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("snapshot-loader".into())
        .spawn(move || {
            lower_thread_priority();
            let _ = tx.send(work());
        })
        .map_err(|e| StoreError::Task(e.to_string()))?;
    rx.await.map_err(|_| StoreError::Task("the loader thread panicked".into()))
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

/// Identity of a file version: replaced files (atomic rename) get a new inode or mtime.
pub fn fingerprint(path: &Path) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

/// Polls `path` every `every` and calls `changed` when its fingerprint changes, until
/// `shutdown` fires. Polling works on every file system and survives atomic renames.
pub async fn watch<F, Fut>(
    path: PathBuf,
    every: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    mut changed: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut last = fingerprint(&path);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let now = fingerprint(&path);
        if now.is_some() && now != last {
            last = now;
            changed().await;
        }
    }
}
