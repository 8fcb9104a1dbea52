//! `stat`s of a watched file, made off the async workers.
//!
//! A `stat` of a file on a network mount whose server went away does not return: for minutes
//! (a soft mount) or until the server is back (a hard one). Made on an async worker, each
//! watcher's poll would take that worker with it, two of them on a two-core machine, and every
//! request would wait. A [`Probe`] makes them on the blocking pool, bounded in time, and at
//! most one at a time: a hung mount holds one blocking thread per watched file, however many
//! polls go by, and the poller (and the server's shutdown) is free to go on.

use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::{Fingerprint, identity};

/// A `stat` of a watched file that did not come back in time. The file system is slow or
/// hung; what the file held last stays in force.
#[derive(Debug, thiserror::Error)]
#[error("the file system holding {path} did not answer a stat within {timeout:?}")]
pub struct Unanswered {
    /// The file.
    pub path: PathBuf,
    /// How long it was given.
    pub timeout: Duration,
}

/// The `stat`s of one path. See the module docs.
#[derive(Debug)]
pub struct Probe {
    path: PathBuf,
    timeout: Duration,
    /// The stat still out, if the last one ran out of time. Behind an async lock: callers
    /// take turns, each within its own time.
    out: tokio::sync::Mutex<Option<JoinHandle<std::io::Result<Metadata>>>>,
    stat: fn(&Path) -> std::io::Result<Metadata>,
}

impl Probe {
    /// How long one `stat` may take: far longer than any a working file system takes, even
    /// a busy network one, and short enough that a poller notices a hang within a few polls.
    pub const TIMEOUT: Duration = Duration::from_secs(10);

    /// The probe of the file at `path` (its links followed, as `open` follows them).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with(path.into(), Self::TIMEOUT, |path| std::fs::metadata(path))
    }

    /// A probe whose stats are `stat` (a test's stand-in for a file system that hangs).
    pub(crate) fn with(
        path: PathBuf,
        timeout: Duration,
        stat: fn(&Path) -> std::io::Result<Metadata>,
    ) -> Self {
        Probe { path, timeout, out: tokio::sync::Mutex::new(None), stat }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's metadata now, or why it has none (missing, forbidden); [`Unanswered`] when
    /// the stat (or one still out from an earlier call) takes longer than the timeout.
    ///
    /// A stat left out by an earlier call is waited for, never doubled: on a hung mount a
    /// thread per poll would pile up without end. What it found is stale by then, so a fresh
    /// stat follows it. Dropping the future (a shutdown) leaves the stat out, for the next call.
    pub async fn metadata(&self) -> Result<std::io::Result<Metadata>, Unanswered> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let unanswered = || Unanswered { path: self.path.clone(), timeout: self.timeout };
        use tokio::time::timeout_at as in_time;
        let mut out = in_time(deadline, self.out.lock()).await.map_err(|_| unanswered())?;
        if let Some(earlier) = out.as_mut() {
            let _stale = in_time(deadline, earlier).await.map_err(|_| unanswered())?;
            *out = None;
        }
        let (path, stat) = (self.path.clone(), self.stat);
        let stat = out.insert(tokio::task::spawn_blocking(move || stat(&path)));
        let answer = in_time(deadline, stat).await.map_err(|_| unanswered())?;
        *out = None;
        // A stat that panicked tells nothing about the file: a failure of the moment.
        Ok(answer.unwrap_or_else(|panicked| Err(std::io::Error::other(panicked))))
    }

    /// The identity of the file version there now (`None`: no file to read).
    pub async fn fingerprint(&self) -> Result<Option<Fingerprint>, Unanswered> {
        Ok(self.metadata().await?.ok().map(|m| identity(&m)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};

    use tokio::sync::watch;

    use super::*;

    /// Set while [`hanging`] stats hang, as on a mount whose server went away.
    static HUNG: AtomicBool = AtomicBool::new(false);
    /// How many [`hanging`] stats hung (found [`HUNG`] set).
    static HELD: AtomicUsize = AtomicUsize::new(0);

    /// A stat that does not return while [`HUNG`] is set (for at most 20 s: a test whose
    /// stat ran on its only worker then fails instead of hanging for good).
    fn hanging(path: &Path) -> std::io::Result<Metadata> {
        let given_up = std::time::Instant::now() + Duration::from_secs(20);
        let mut held = false;
        while HUNG.load(SeqCst) && std::time::Instant::now() < given_up {
            if !std::mem::replace(&mut held, true) {
                HELD.fetch_add(1, SeqCst);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::fs::metadata(path)
    }

    /// What a watch's callback was handed, in order.
    type Seen = Arc<Mutex<Vec<Option<Fingerprint>>>>;

    /// A watch of `path` through `probe` every 5 ms, recording what its callback is handed.
    fn watching(
        probe: Probe,
        since: Option<Fingerprint>,
    ) -> (Seen, watch::Sender<bool>, JoinHandle<()>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = watch::channel(false);
        let record = Arc::clone(&seen);
        let every = Duration::from_millis(5);
        let watcher = tokio::spawn(super::super::watch(probe.into(), every, since, stopped, {
            move |now| {
                record.lock().unwrap().push(now);
                async { super::super::Handled::Done }
            }
        }));
        (seen, stop, watcher)
    }

    /// Waits (at most 10 s) until `done`.
    async fn until(done: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !done() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// While the file system hangs: the watch polls on (its worker is free: this test's
    /// runtime has only the one), no poll starts a second stat, and the watch stops when
    /// told, however long the stat out may take. Once it answers again, a change made
    /// meanwhile is seen.
    #[tokio::test]
    async fn a_hung_file_system_holds_one_thread_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("watched");
        std::fs::write(&path, "a").unwrap();
        let since = crate::watch::fingerprint(&path);
        let probe = Probe::with(path.clone(), Duration::from_millis(30), hanging);
        let (seen, stop, watcher) = watching(probe, since);

        let before = HELD.load(SeqCst);
        HUNG.store(true, SeqCst);
        until(|| HELD.load(SeqCst) > before).await;
        // Changed while the one stat out hangs: nothing else may see it.
        crate::atomic::write(&path, b"bb").unwrap();
        // Many timeouts' worth of polls.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(HELD.load(SeqCst) - before, 1, "one stat out, however many polls");
        assert!(seen.lock().unwrap().is_empty(), "nothing is known of the file meanwhile");

        HUNG.store(false, SeqCst);
        until(|| !seen.lock().unwrap().is_empty()).await;
        let now = crate::watch::fingerprint(&path);
        assert_eq!(*seen.lock().unwrap(), [now], "the change, once the stats come back");
        stop.send(true).unwrap();
        watcher.await.unwrap();

        // A stat given a minute: the watch does not wait for it to stop.
        let probe = Probe::with(path.clone(), Duration::from_secs(60), hanging);
        let (_, stop, watcher) = watching(probe, now);
        let before = HELD.load(SeqCst);
        HUNG.store(true, SeqCst);
        until(|| HELD.load(SeqCst) > before).await;
        stop.send(true).unwrap();
        let stopping = tokio::time::timeout(Duration::from_secs(10), watcher).await;
        HUNG.store(false, SeqCst);
        assert!(stopping.is_ok(), "the watch waited for the stat out to stop");
    }
}
