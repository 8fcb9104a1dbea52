//! Noticing that a file was replaced: polling its identity (inode, size, mtime), which works
//! on every file system and survives atomic renames. Servers watch their snapshot and
//! blocklist, the aggregator its manifest.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A file version's identity: inode, size and modification time. Writing a file changes its
/// time, replacing it (an atomic rename) its inode; a rename keeps all of them.
pub type Fingerprint = (u64, u64, i64, i64);

/// The identity of the file version at `path` now.
pub fn fingerprint(path: &Path) -> Option<Fingerprint> {
    std::fs::metadata(path).ok().map(|m| identity(&m))
}

/// The identity of the file version `m` describes (from a `stat` of a path, or the `fstat`
/// of a file already open).
pub fn identity(m: &std::fs::Metadata) -> Fingerprint {
    use std::os::unix::fs::MetadataExt;
    (m.ino(), m.len(), m.mtime(), m.mtime_nsec())
}

/// What a [`watch`] callback made of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Applied, or rejected for good (a corrupt file stays corrupt): wait for the next change.
    Done,
    /// Failed in a way that may pass (a load that ran out of time on a busy machine): call
    /// again at the next poll even if the file is still the same. Without it the version would
    /// wait for the next change of the file, an hour later for an hourly build.
    Retry,
}

/// Polls `path` every `every` and calls `changed` when its fingerprint changes (or at the next
/// poll when it asked for a [`Handled::Retry`]), until `shutdown` fires. Polling works on every
/// file system and survives atomic renames. A file that vanishes (or becomes unreadable) is a
/// change too, once: the callback's read fails, and that is logged and counted while the last
/// good version stays in force.
pub async fn watch<F, Fut>(
    path: PathBuf,
    every: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    mut changed: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Handled>,
{
    let mut last = fingerprint(&path);
    let mut retry = false;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let now = fingerprint(&path);
        if now != last || retry {
            last = now;
            retry = changed().await == Handled::Retry;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A change is handled once; one that asked for a retry is handled again at the next poll
    /// although the file stayed the same, and then no more.
    #[tokio::test]
    async fn a_retry_is_called_again_without_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("watched");
        std::fs::write(&path, "a").unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let counted = Arc::clone(&calls);
        let watcher =
            tokio::spawn(watch(path.clone(), Duration::from_millis(10), stopped, move || {
                let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                async move { if n == 1 { Handled::Retry } else { Handled::Done } }
            }));
        let called = |n| {
            let calls = Arc::clone(&calls);
            async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                while calls.load(Ordering::SeqCst) < n && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                calls.load(Ordering::SeqCst)
            }
        };
        // Enough polls for a change to be seen before the file is replaced.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 0, "nothing changed yet");
        crate::atomic::write(&path, b"bb").unwrap();
        assert_eq!(called(2).await, 2, "the change, then its retry");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2, "done: no call until the next change");
        crate::atomic::write(&path, b"ccc").unwrap();
        assert_eq!(called(3).await, 3);
        stop.send(true).unwrap();
        watcher.await.unwrap();
    }
}
