//! Noticing that a file was replaced: polling its identity (inode, size, mtime), which works
//! on every file system and survives atomic renames. Servers watch their snapshot and
//! blocklist, the aggregator its manifest.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Identity of a file version: replaced files (atomic rename) get a new inode or mtime.
pub fn fingerprint(path: &Path) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

/// Polls `path` every `every` and calls `changed` when its fingerprint changes, until
/// `shutdown` fires. Polling works on every file system and survives atomic renames. A file
/// that vanishes (or becomes unreadable) is a change too, once: the callback's read fails, and
/// that is logged and counted while the last good version stays in force.
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
        if now != last {
            last = now;
            changed().await;
        }
    }
}
