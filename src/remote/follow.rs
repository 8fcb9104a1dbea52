//! A server that follows a manifest in object storage (`typeahead serve --manifest URL
//! --partition I --cache-dir DIR`): it polls the manifest, downloads its partition's file when
//! the manifest names a new one, verifies it, and only then puts it in place of the file it
//! serves and hands the verified snapshot to the store, which hot-swaps to it without reading
//! the file a second time.
//!
//! The server maps only files it wrote itself into its cache directory: a download goes, in
//! ranged reads, to a temporary file there (fsynced), is opened as a snapshot (every section
//! verified, its id compared with the manifest's checksum), and only then renamed over the live
//! file. A failed or corrupt download changes nothing: the current generation keeps serving, the
//! failure is logged and counted, and the next try waits longer (doubling, up to 16 poll
//! intervals). A file rejected as corrupt is not fetched again while its object is unchanged
//! ([`Seen`]), and a download is adopted only if the manifest still names it when it is done.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::kept::Kept;
use super::{Location, RemoteError};
use crate::atomic::Staged;
use crate::lockfile;
use crate::manifest::{MAX_MANIFEST_BYTES, Manifest, Partition};
use crate::store::{Preloaded, Store, in_background};

/// Why one poll changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The store failed or refused.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// There is no manifest at the location (yet).
    #[error("no manifest at {0}")]
    NoManifest(String),
    /// Reading the manifest took longer than [`MANIFEST_READ_TIMEOUT`].
    #[error("no answer from {0} within {secs} s", secs = MANIFEST_READ_TIMEOUT.as_secs())]
    TimedOut(String),
    /// The manifest is not one.
    #[error("manifest {location} is malformed: {message}")]
    Manifest {
        /// Where.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// The manifest has no such partition.
    #[error("the manifest has no partition {0}")]
    NoPartition(usize),
    /// The manifest splits the keys into another number of partitions than this server was
    /// set up for (`--partition S%N`).
    #[error(
        "the manifest has {found} partitions, this server serves one of {expected}: not followed until they agree"
    )]
    Layout {
        /// `N` of `--partition S%N`.
        expected: usize,
        /// The manifest's.
        found: usize,
    },
    /// The file the manifest names is missing.
    #[error("{0} is missing")]
    Missing(String),
    /// The downloaded file is not the snapshot the manifest names.
    #[error("{location} is not the snapshot the manifest names: {message}")]
    Corrupt {
        /// Where it came from.
        location: String,
        /// What is wrong.
        message: String,
    },
    /// Writing the cache directory failed.
    #[error("cannot write {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl FollowError {
    /// Every [`FollowError::reason`], and `swap` (a verified download the store refused).
    pub const REASONS: [&'static str; 10] = [
        "store",
        "no_manifest",
        "timed_out",
        "malformed_manifest",
        "no_partition",
        "layout",
        "missing_file",
        "corrupt_file",
        "cache_io",
        "swap",
    ];

    /// A stable name of what failed, for the failure counter's `reason` label.
    pub fn reason(&self) -> &'static str {
        match self {
            // A local read past its bound: a hung mount, like a manifest read past its own.
            FollowError::Remote(RemoteError::TimedOut { .. }) => "timed_out",
            FollowError::Remote(_) => "store",
            FollowError::NoManifest(_) => "no_manifest",
            FollowError::TimedOut(_) => "timed_out",
            FollowError::Manifest { .. } => "malformed_manifest",
            FollowError::NoPartition(_) => "no_partition",
            FollowError::Layout { .. } => "layout",
            FollowError::Missing(_) => "missing_file",
            FollowError::Corrupt { .. } => "corrupt_file",
            FollowError::Io { .. } => "cache_io",
        }
    }
}

/// How long one read of the manifest may take.
pub const MANIFEST_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What a server follows.
#[derive(Debug, Clone)]
pub struct FollowConfig {
    /// The manifest's location.
    pub manifest: Location,
    /// Which partition this server serves.
    pub partition: usize,
    /// Of how many, when that was said: a manifest of another layout (the partition count
    /// being changed, a rollback to a generation built with another) is refused, rather than
    /// followed into a range of a layout the fleet around this server was not set up for.
    pub partitions: Option<usize>,
    /// Where downloads go; the live file is in here too.
    pub cache_dir: PathBuf,
    /// Mean time between polls (each one jittered by up to a fifth either way).
    pub poll: Duration,
}

impl FollowConfig {
    /// The file the server serves (and the store watches).
    pub fn live_path(&self) -> PathBuf {
        self.cache_dir.join(format!("partition-{:03}.snap", self.partition))
    }

    /// The generation kept on disk beside the live one ([`Kept`]).
    pub fn kept(&self) -> Kept {
        Kept::beside(&self.live_path())
    }

    /// Takes this partition's lock in the cache directory (creating it), to hold for as long
    /// as the server follows. A second server following the same partition into the same
    /// directory would remove this one's download in progress as a killed download's leftover
    /// ([`FollowConfig::remove_leftover_download`]), and the two would replace each other's
    /// live and kept files. Other partitions have files of their own and may share it.
    pub fn lock(&self) -> Result<lockfile::Held, lockfile::LockError> {
        let io = |source| lockfile::LockError::Io { path: self.cache_dir.clone(), source };
        std::fs::create_dir_all(&self.cache_dir).map_err(io)?;
        let name = format!("partition-{:03}.lock", self.partition);
        lockfile::acquire(&self.cache_dir.join(name), lockfile::WAIT)
    }

    /// Removes what a download cut short by a kill left (its temporary file, as large as a
    /// partition), which would otherwise sit in the cache until the next generation's download.
    pub fn remove_leftover_download(&self) {
        for leftover in crate::atomic::temp_files(&self.live_path()) {
            let _ = std::fs::remove_file(leftover);
        }
    }
}

/// A new generation downloaded and verified beside the live file, not yet in its place.
#[derive(Debug)]
pub struct Placed {
    /// Its version (the snapshot id the manifest names).
    pub version: String,
    /// The snapshot as verified, with the file's identity (which the rename into place keeps):
    /// the store publishes it without reading the file again.
    pub loaded: Preloaded,
    /// The verified download, renamed over the live file by [`Placed::commit`] or by the
    /// store's [`Store::adopt`]; dropped, it is removed.
    pub staged: Staged,
}

impl Placed {
    /// Renames the download over the live file (for a server that is not serving yet: a
    /// serving one hands it to [`Store::adopt`]). The live file, when it held generation
    /// `live` (verified), is kept first ([`Kept`]).
    pub fn commit(self, kept: &Kept, live: Option<&str>) -> Result<Preloaded, FollowError> {
        let path = self.staged.target().to_owned();
        if let Some(live) = live {
            kept.keep_live(live);
        }
        self.staged.commit().map_err(|source| FollowError::Io { path, source })?;
        Ok(self.loaded)
    }
}

/// What a follower remembers from one poll to the next.
#[derive(Debug, Default)]
pub struct Seen {
    /// The last file downloaded and rejected, with its object's ETag then: not downloaded
    /// again while the manifest names it and the object is unchanged. A corrupt object in the
    /// store was otherwise fetched whole at every retry, gigabytes an hour per replica, until
    /// someone replaced it.
    rejected: Option<(String, String)>,
    /// Bytes of snapshots fetched so far (of downloads that failed midway too).
    pub downloaded_bytes: u64,
}

/// The manifest's entry for the partition followed.
async fn partition_entry(cfg: &FollowConfig) -> Result<Partition, FollowError> {
    let shown = cfg.manifest.to_string();
    // Bounded as the aggregator's read is: a store that never answers (or a local manifest
    // path that blocks, a FIFO or a hung mount) must fail a poll, counted and retried, not
    // stall the follower, or a restarting server, for ever.
    let read = tokio::time::timeout(MANIFEST_READ_TIMEOUT, cfg.manifest.get(MAX_MANIFEST_BYTES));
    let (bytes, _) = read
        .await
        .map_err(|_| FollowError::TimedOut(shown.clone()))??
        .ok_or_else(|| FollowError::NoManifest(shown.clone()))?;
    let manifest = Manifest::parse(&bytes)
        .map_err(|message| FollowError::Manifest { location: shown.clone(), message })?;
    let found = manifest.partitions.len();
    if let Some(expected) = cfg.partitions.filter(|&n| n != found) {
        return Err(FollowError::Layout { expected, found });
    }
    manifest
        .partitions
        .into_iter()
        .find(|p| p.index == cfg.partition)
        .ok_or(FollowError::NoPartition(cfg.partition))
}

/// Reads the manifest; when it names another file for the partition than `current` (a
/// snapshot id), downloads it beside the live file and verifies it. Returns it, to be put in
/// place ([`Placed`]), or `None` when nothing changed.
pub async fn poll_once(
    cfg: &FollowConfig,
    current: Option<&str>,
    seen: &mut Seen,
) -> Result<Option<Placed>, FollowError> {
    let part = partition_entry(cfg).await?;
    if current == Some(part.checksum.as_str()) {
        return Ok(None);
    }
    let file = cfg.manifest.sibling(&part.file);
    let shown_file = file.to_string();
    if let Some((rejected, tag)) = &seen.rejected
        && *rejected == shown_file
        && file.e_tag().await?.as_ref() == Some(tag)
    {
        let message = "rejected before and unchanged since, so not downloaded again".to_owned();
        return Err(FollowError::Corrupt { location: shown_file, message });
    }
    let live = cfg.live_path();
    let dir = cfg.cache_dir.clone();
    let made = tokio::task::spawn_blocking(move || std::fs::create_dir_all(dir)).await;
    made.unwrap_or_else(|panicked| Err(std::io::Error::other(panicked)))
        .map_err(|source| FollowError::Io { path: cfg.cache_dir.clone(), source })?;
    let io = |source| FollowError::Io { path: cfg.live_path(), source };
    // Straight to a temporary file beside the live one, in ranged reads: the download never
    // sits whole in memory, and only a verified file is renamed into place. A failure to write
    // it is the cache disk's (full, too large a file), not the store's.
    let (staged, tag) = file
        .download_staged(&live, Some(part.bytes), &mut seen.downloaded_bytes)
        .await
        .map_err(|e| match e {
            RemoteError::Local { path, source } => FollowError::Io { path, source },
            // The object's size is not the one the manifest names: a bad object, not an
            // outage (the `reason` label tells the two apart for alerts). A range answered
            // short is the store's (`RemoteError::Store`).
            e @ RemoteError::WrongSize { .. } => {
                FollowError::Corrupt { location: shown_file.clone(), message: e.to_string() }
            }
            other => FollowError::Remote(other),
        })?
        .ok_or_else(|| FollowError::Missing(shown_file.clone()))?;
    let location = shown_file.clone();
    let corrupt =
        move |message: String| FollowError::Corrupt { location: location.clone(), message };
    let expected = part.checksum.clone();
    // Verifying reads every section: off the async workers, on the store's niced loader
    // thread, as a reload of the file would be (at normal priority it showed in the requests'
    // tail latency).
    let placed = in_background(move || -> Result<Placed, FollowError> {
        // (Of the size the manifest names: `download_staged` refused any other before it
        // fetched a byte, and checked the length of every range.)
        let io = |source| FollowError::Io { path: staged.temp().to_owned(), source };
        // A file this host could not read (EMFILE, EIO) is not a corrupt object: marked
        // rejected, it would not be downloaded again until the next build.
        let loaded = Preloaded::open(staged.temp()).map_err(|e| match e {
            crate::snapshot::Error::Io { source, .. } => io(source),
            other => corrupt(other.to_string()),
        })?;
        let id = loaded.snapshot.id();
        if id != expected {
            return Err(corrupt(format!("id {id}, the manifest says {expected}")));
        }
        Ok(Placed { version: expected, loaded, staged })
    })
    .await
    .map_err(|e| io(std::io::Error::other(e)))?;
    if matches!(placed, Err(FollowError::Corrupt { .. })) {
        seen.rejected = tag.map(|tag| (shown_file, tag));
    }
    placed.map(Some)
}

/// Whether the manifest still names `version` for the partition: a download can take minutes,
/// and a rollback published meanwhile must not be undone by adopting what it retired. A
/// manifest gone, malformed, of another layout (a rollback to a generation built with another
/// partition count) or without the partition names it no longer; only a read that failed (an
/// error, or no answer in time) leaves that unknown.
async fn still_named(cfg: &FollowConfig, version: &str) -> Result<bool, FollowError> {
    match partition_entry(cfg).await {
        Ok(part) => Ok(part.checksum == version),
        Err(
            FollowError::NoManifest(_)
            | FollowError::Manifest { .. }
            | FollowError::Layout { .. }
            | FollowError::NoPartition(_),
        ) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A fraction in [0, 1) that differs between replicas and polls, so replicas started together
/// do not poll the store in step.
fn jitter_fraction() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    f64::from(nanos.wrapping_mul(2_654_435_761) % 1_000_000) / 1e6
}

/// Follows the manifest until `shutdown`: every poll interval (jittered), or after a failure
/// with doubling backoff; each new file is hot-swapped in through `store`.
pub async fn run(
    cfg: FollowConfig,
    store: Arc<Store>,
    counters: Counters,
    mut seen: Seen,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut backoff = 1u32;
    loop {
        let downloaded = seen.downloaded_bytes;
        let jitter = 0.8 + 0.4 * jitter_fraction();
        let wait = cfg.poll.mul_f64(jitter * f64::from(backoff));
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(wait) => {}
        }
        let current = store.current().snapshot.id().to_owned();
        // A download that could not be published fails like a poll: counted and backed off
        // (the next poll downloads the whole partition again).
        let polled = poll_once(&cfg, Some(&current), &mut seen).await;
        counters.downloaded_bytes.inc_by(seen.downloaded_bytes - downloaded);
        let failed = match polled {
            Ok(None) => None,
            Ok(Some(placed)) => (!adopt(&cfg, &store, placed).await).then_some("swap"),
            Err(e) => {
                tracing::warn!(error = %crate::error::chain(&e), manifest = %cfg.manifest, "manifest poll failed; the current generation keeps serving");
                Some(e.reason())
            }
        };
        if let Some(reason) = failed {
            counters.failures.inc();
            counters.by_reason.get_or_create(&[("reason", reason)]).inc();
            backoff = (backoff * 2).min(16);
        } else {
            backoff = 1;
        }
    }
}

/// Failed polls by [`FollowError::reason`].
pub type ByReason = prometheus_client::metrics::family::Family<
    [(&'static str, &'static str); 1],
    prometheus_client::metrics::counter::Counter,
>;

/// What the follower counts: failed polls, in all and by reason, and bytes downloaded.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Polls that changed nothing because something failed.
    pub failures: prometheus_client::metrics::counter::Counter,
    /// The same, by what failed: a refused layout or a corrupt file is not a store outage.
    pub by_reason: ByReason,
    /// Bytes of snapshots fetched (of downloads that failed midway too).
    pub downloaded_bytes: prometheus_client::metrics::counter::Counter,
}

/// Hands a verified download to the store, unless the manifest stopped naming it meanwhile;
/// whether nothing failed.
async fn adopt(cfg: &FollowConfig, store: &Store, placed: Placed) -> bool {
    let Placed { version, loaded, staged } = placed;
    match still_named(cfg, &version).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!(%version, manifest = %cfg.manifest, "the manifest moved on while this generation downloaded; not adopted");
            // A partition's worth of memory to free and of disk to unlink: not on a worker.
            let _ = tokio::task::spawn_blocking(move || drop((loaded, staged))).await;
            return true;
        }
        // It named it a moment ago: not worth downloading the whole file again for.
        Err(e) => {
            tracing::warn!(error = %crate::error::chain(&e), manifest = %cfg.manifest, "cannot re-read the manifest before adopting a download; adopting it");
        }
    }
    tracing::info!(%version, manifest = %cfg.manifest, "downloaded a new generation");
    // The live file holds the current generation (the follower alone writes it): kept before
    // the download replaces it, and once the store has published, every kept file but the
    // generation it held beside the new one is removed.
    let (kept, outgoing) = (cfg.kept(), store.current().snapshot.id().to_owned());
    let (keep, live) = (kept.clone(), outgoing.clone());
    let adopted = store.adopt(loaded, move || {
        keep.keep_live(&live);
        staged.commit()
    });
    let adopted = adopted.await;
    // After a failure the store may still publish the placed file (its watcher reloads it),
    // holding the outgoing generation beside it: nothing is pruned until a publication says
    // what is held. A previous that is not the outgoing one was kept for an aggregator's pin.
    if adopted.is_ok() {
        let held = store.previous().map(|p| p.snapshot.id().to_owned());
        let pinned = held.as_deref().is_some_and(|h| h != outgoing);
        let _ = tokio::task::spawn_blocking(move || kept.prune(held.as_deref(), pinned)).await;
    }
    adopted
        .inspect_err(|e| tracing::warn!(error = %crate::error::chain(e), "the downloaded snapshot was not published"))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::MANIFEST_FORMAT;

    /// A manifest of `n` partitions, partition `i` named by checksum `c{i}`.
    fn manifest(n: usize) -> Vec<u8> {
        let bounds = ["", "g", "n", "t"];
        let partitions = (0..n)
            .map(|i| Partition {
                index: i,
                start: bounds[i].into(),
                end: (i + 1 < n).then(|| bounds[i + 1].into()),
                file: format!("part-{i:03}.snap"),
                bytes: 1,
                checksum: format!("c{i}"),
                keys: 1,
            })
            .collect();
        let (generation, created_unix, watermark_hour, rules) = ("g1".into(), 0, None, None);
        let m = Manifest {
            format: MANIFEST_FORMAT,
            generation,
            created_unix,
            watermark_hour,
            partitions,
            rules,
        };
        m.to_json().unwrap()
    }

    /// A read of a local store past its bound counts as `timed_out`, as a manifest read past
    /// its own does, not as a store outage.
    #[test]
    fn a_local_read_past_its_bound_is_counted_as_timed_out() {
        let late = RemoteError::TimedOut { location: "file:///m/p0.snap".into(), seconds: 60 };
        assert_eq!(FollowError::Remote(late).reason(), "timed_out");
        let failed = RemoteError::Hung { location: "file:///m/p0.snap".into() };
        assert_eq!(FollowError::Remote(failed).reason(), "store");
    }

    /// A download is adopted only while the manifest names it, or while that cannot be known
    /// (a read that failed). A manifest of another layout, one without the partition, a
    /// malformed or missing one names it no longer: such a download was adopted, so a
    /// rollback to a generation built with another partition count was undone by the
    /// download it retired.
    #[tokio::test]
    async fn a_download_the_manifest_no_longer_names_is_not_adopted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.json");
        let cfg = FollowConfig {
            manifest: Location::parse(&format!("file://{}", path.display())).unwrap(),
            partition: 1,
            partitions: Some(2),
            cache_dir: dir.path().join("cache"),
            poll: Duration::from_secs(1),
        };
        std::fs::write(&path, manifest(2)).unwrap();
        assert!(still_named(&cfg, "c1").await.unwrap());
        assert!(!still_named(&cfg, "c0").await.unwrap());
        for (bytes, case) in
            [(manifest(3), "another layout"), (b"{ not a manifest".to_vec(), "malformed")]
        {
            std::fs::write(&path, bytes).unwrap();
            assert!(!still_named(&cfg, "c1").await.unwrap(), "{case}");
        }
        let without = FollowConfig { partitions: None, partition: 3, ..cfg };
        std::fs::write(&path, manifest(2)).unwrap();
        assert!(!still_named(&without, "c3").await.unwrap(), "no such partition");
        std::fs::remove_file(&path).unwrap();
        assert!(!still_named(&without, "c3").await.unwrap(), "gone");
    }
}
