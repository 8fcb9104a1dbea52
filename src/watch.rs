//! Noticing that a file was replaced: polling its identity (inode, size, mtime), which works
//! on every file system and survives atomic renames. Servers watch their snapshot and
//! blocklist (the aggregator polls its manifest through `remote::Location`). Every poll's
//! `stat` is made by a [`Probe`], off the async workers: see its module for why.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

mod probe;

pub use probe::{Probe, Unanswered};

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

/// Whether reading a watched file failed for a reason of the moment (out of file
/// descriptors or memory, an I/O error, a stale network handle), so reading it again later
/// may succeed without any change to the file: not for a file that is missing, forbidden,
/// not a regular file, or not what it must be (whose next change the watch waits for).
pub fn is_transient_io(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{InvalidData, InvalidInput, NotFound, PermissionDenied};
    !matches!(e.kind(), NotFound | PermissionDenied | InvalidData | InvalidInput)
}

/// What a [`watch`] callback made of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Applied, or rejected for good (a corrupt file stays corrupt): wait for the next change.
    Done,
    /// Failed in a way that may pass (a load that ran out of time on a busy machine): call
    /// again even if the file is still the same, after [`retry_delay`]. Without it the version
    /// would wait for the next change of the file, an hour later for an hourly build.
    Retry,
}

/// The longest wait between retries of an unchanged file.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

/// How long to wait before the `retries`-th retry (from 1) of an unchanged file: twice the
/// poll interval, doubling with each retry, at most [`MAX_RETRY_DELAY`] (or one poll, when
/// polls are further apart). A file that always outlasts the load timeout is otherwise read
/// again the moment each attempt is given up, holding a core and the disk for good.
pub fn retry_delay(every: Duration, retries: u32) -> Duration {
    let doubled = every.saturating_mul(1u32 << retries.min(16));
    doubled.min(MAX_RETRY_DELAY.max(every))
}

/// Polls the file of `probe` every `every` and calls `changed` with its fingerprint when that
/// differs from the last one seen (or, when it asked for a [`Handled::Retry`], again after
/// [`retry_delay`]), until `shutdown` fires. Polling works on every file system and survives
/// atomic renames. A file that vanishes (or becomes unreadable) is a change too, once: the
/// callback's read fails, and that is logged and counted while the last good version stays in
/// force. A poll the file system does not answer ([`Probe`]) changes nothing; it is logged
/// once, and so is the first answer after it.
///
/// `since` is the identity of the version in force, taken before it was read: a file replaced
/// between that read and the start of the watch (a server still verifying its snapshot at
/// startup when the blocklist changed) differs from it and is handled at the first poll.
/// Taking the identity when the watch starts instead would make that version the baseline,
/// and it would never be applied.
pub async fn watch<F, Fut>(
    probe: Arc<Probe>,
    every: Duration,
    since: Option<Fingerprint>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    mut changed: F,
) where
    F: FnMut(Option<Fingerprint>) -> Fut,
    Fut: std::future::Future<Output = Handled>,
{
    let mut last = since;
    let mut unanswered = false;
    // Retries in a row of the unchanged file, and when the next one is due.
    let mut retries = 0u32;
    let mut retry_at: Option<tokio::time::Instant> = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let polled = tokio::select! {
            polled = probe.fingerprint() => polled,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        let now = match polled {
            Ok(now) => now,
            Err(e) => {
                if !std::mem::replace(&mut unanswered, true) {
                    let error = crate::error::chain(&e);
                    tracing::warn!(%error, "watching goes on; what the file held stays in force");
                }
                continue;
            }
        };
        if std::mem::take(&mut unanswered) {
            let path = probe.path().display();
            tracing::info!(%path, "the watched file's file system answers again");
        }
        let due = retry_at.is_some_and(|at| tokio::time::Instant::now() >= at);
        if now != last {
            retries = 0;
        } else if !due {
            continue;
        }
        last = now;
        retry_at = None;
        if changed(now).await == Handled::Retry {
            retries += 1;
            retry_at = Some(tokio::time::Instant::now() + retry_delay(every, retries));
        }
    }
}

/// Whether a watched file has been left alone for a while: what a reader waits for before it
/// trusts a read that may have landed in the middle of an in-place write.
///
/// Two clocks, either of which may say so: the file's modification time (a file written long
/// ago is quiet at once), and how long this watcher has seen the same [`Fingerprint`]. The
/// second is what a modification time in the future needs (a file copied from a host whose
/// clock runs ahead, `touch -d tomorrow`): by the first clock alone such a file would never be
/// quiet until this host's clock caught up, hours later.
#[derive(Debug)]
pub struct Quiet {
    /// The file, stated off the workers.
    probe: Arc<Probe>,
    /// The version last seen, and since when.
    seen: std::sync::Mutex<Option<(Fingerprint, std::time::Instant)>>,
}

impl Quiet {
    /// Nothing seen yet of the file of `probe`.
    pub fn new(probe: Arc<Probe>) -> Self {
        Quiet { probe, seen: std::sync::Mutex::new(None) }
    }

    /// Whether the file has been left alone for `settle`, by either clock, and is still the
    /// version `read_from` (the identity taken before the caller read it). A file that cannot
    /// be read is never quiet, nor is one whose file system does not answer; nor is a read
    /// that began on another version: a copy that restores the old times (`cp -p`) can finish
    /// between a read that caught it half done and this check, and leave a file that looks
    /// long settled.
    pub async fn for_at_least(&self, settle: Duration, read_from: Option<Fingerprint>) -> bool {
        let Ok(stat) = self.probe.metadata().await else {
            return false;
        };
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Ok(meta) = stat else {
            *seen = None;
            return false;
        };
        let now = identity(&meta);
        if read_from != Some(now) {
            return false;
        }
        let since = match *seen {
            Some((seen, since)) if seen == now => since,
            _ => seen.insert((now, std::time::Instant::now())).1,
        };
        let written_long_ago = meta.modified().ok().and_then(|at| at.elapsed().ok());
        since.elapsed() >= settle || written_long_ago.is_some_and(|age| age >= settle)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    /// A file watched every 10 ms by a callback that answers its `n`-th call with `answer(n)`
    /// and records when it was called.
    struct Watched {
        _dir: tempfile::TempDir,
        path: PathBuf,
        calls: Arc<Mutex<Vec<Instant>>>,
        stop: tokio::sync::watch::Sender<bool>,
        watcher: tokio::task::JoinHandle<()>,
    }

    impl Watched {
        const EVERY: Duration = Duration::from_millis(10);

        fn start(answer: fn(usize) -> Handled) -> Watched {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("watched");
            std::fs::write(&path, "a").unwrap();
            let calls = Arc::new(Mutex::new(Vec::new()));
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let recorded = Arc::clone(&calls);
            let since = fingerprint(&path);
            let probe = Arc::new(Probe::new(&path));
            let watcher = tokio::spawn(watch(probe, Self::EVERY, since, stopped, move |_| {
                let n = {
                    let mut calls = recorded.lock().unwrap();
                    calls.push(Instant::now());
                    calls.len()
                };
                async move { answer(n) }
            }));
            Watched { _dir: dir, path, calls, stop, watcher }
        }

        /// When the callback was called, in order.
        fn times(&self) -> Vec<Instant> {
            self.calls.lock().unwrap().clone()
        }

        fn calls(&self) -> usize {
            self.calls.lock().unwrap().len()
        }

        fn replace(&self, bytes: &[u8]) {
            crate::atomic::write(&self.path, bytes).unwrap();
        }

        /// The number of calls once there are `n` (or after 10 s).
        async fn called(&self, n: usize) -> usize {
            let deadline = Instant::now() + Duration::from_secs(10);
            while self.calls() < n && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            self.calls()
        }

        async fn stop(self) {
            self.stop.send(true).unwrap();
            self.watcher.await.unwrap();
        }
    }

    /// A change is handled once; one that asked for a retry is handled again although the
    /// file stayed the same, and then no more.
    #[tokio::test(start_paused = true)]
    async fn a_retry_is_called_again_without_a_change() {
        let w = Watched::start(|n| if n == 1 { Handled::Retry } else { Handled::Done });
        // Enough polls for a change to be seen before the file is replaced.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(w.calls(), 0, "nothing changed yet");
        w.replace(b"bb");
        assert_eq!(w.called(2).await, 2, "the change, then its retry");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(w.calls(), 2, "done: no call until the next change");
        w.replace(b"ccc");
        assert_eq!(w.called(3).await, 3);
        w.stop().await;
    }

    /// The file replaced after the version in force was read, before the watch started (a
    /// server still loading its snapshot): handled at the first poll, once.
    #[tokio::test]
    async fn a_change_before_the_watch_started_is_handled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("watched");
        std::fs::write(&path, "a").unwrap();
        let since = fingerprint(&path);
        crate::atomic::write(&path, b"bb").unwrap();
        let calls = Arc::new(Mutex::new(0));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let counted = Arc::clone(&calls);
        let probe = Arc::new(Probe::new(path));
        let watcher =
            tokio::spawn(watch(probe, Duration::from_millis(10), since, stopped, move |_| {
                *counted.lock().unwrap() += 1;
                async { Handled::Done }
            }));
        let deadline = Instant::now() + Duration::from_secs(10);
        while *calls.lock().unwrap() == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(*calls.lock().unwrap(), 1);
        stop.send(true).unwrap();
        watcher.await.unwrap();
    }

    #[test]
    fn retries_back_off_to_a_ceiling() {
        let every = Duration::from_millis(250);
        let delays: Vec<u64> = (1..=10).map(|n| retry_delay(every, n).as_millis() as u64).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]);
        assert_eq!(retry_delay(every, u32::MAX), MAX_RETRY_DELAY);
        let slow = Duration::from_secs(120);
        assert_eq!(retry_delay(slow, 3), slow, "never sooner than one poll");
    }

    /// A file written long ago is quiet at once; one modified "in the future" once this watcher
    /// has seen it unchanged for the settle time (by its mtime alone it never would be); a
    /// change starts the watcher's clock again.
    #[tokio::test]
    async fn quiet_by_the_files_clock_or_by_what_the_watcher_saw() {
        use std::time::SystemTime;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("list");
        let settle = Duration::from_millis(200);
        let set_mtime = |at: SystemTime| {
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(at).unwrap();
        };
        let fresh = |path: &Path| Quiet::new(Arc::new(Probe::new(path)));
        let read_from = || fingerprint(&path);
        std::fs::write(&path, "a").unwrap();
        set_mtime(SystemTime::now() - Duration::from_secs(3600));
        assert!(fresh(&path).for_at_least(settle, read_from()).await, "written an hour ago");

        let quiet = fresh(&path);
        set_mtime(SystemTime::now() + Duration::from_secs(86_400));
        assert!(!quiet.for_at_least(settle, read_from()).await, "just seen");
        std::thread::sleep(settle);
        assert!(quiet.for_at_least(settle, read_from()).await, "unchanged for the settle time");
        std::fs::write(&path, "bb").unwrap();
        set_mtime(SystemTime::now() + Duration::from_secs(86_400));
        assert!(!quiet.for_at_least(settle, read_from()).await, "changed: the clock starts again");
        let gone = dir.path().join("gone");
        assert!(!fresh(&gone).for_at_least(settle, fingerprint(&gone)).await);

        // A read that began on another version: the file now looks written an hour ago.
        let read_from = fingerprint(&path);
        std::fs::write(&path, "ccc").unwrap();
        set_mtime(SystemTime::now() - Duration::from_secs(3600));
        assert!(!fresh(&path).for_at_least(settle, read_from).await);
    }

    /// What the system refuses for now is tried again; what the file is, is not.
    #[test]
    fn transient_read_errors_are_those_of_the_moment() {
        use std::io::{Error, ErrorKind};
        let emfile = Error::from_raw_os_error(libc::EMFILE);
        assert!(super::is_transient_io(&emfile), "{emfile}");
        assert!(super::is_transient_io(&Error::from_raw_os_error(libc::EIO)));
        for kind in [ErrorKind::NotFound, ErrorKind::PermissionDenied, ErrorKind::InvalidData] {
            assert!(!super::is_transient_io(&Error::from(kind)), "{kind:?}");
        }
    }

    /// A callback that always asks for a retry is called ever less often: each retry comes
    /// at least [`retry_delay`] after the call before. A change of the file is handled at the
    /// next poll all the same, and the retries after it start over from two polls. On tokio's
    /// paused clock, so the upper bounds hold however loaded the machine is.
    #[tokio::test(start_paused = true)]
    async fn retries_of_an_unchanged_file_back_off() {
        let w = Watched::start(|_| Handled::Retry);
        tokio::time::sleep(Duration::from_millis(30)).await;
        w.replace(b"bb");
        // The change and six retries, 20 to 640 ms apart: the next is due 1,280 ms later.
        assert_eq!(w.called(7).await, 7);
        w.replace(b"ccc");
        assert!(w.called(9).await >= 9, "the change and its first retry");
        let times = w.times();
        let gap = |i: usize| times[i + 1] - times[i];
        for i in 0..6 {
            let least = retry_delay(Watched::EVERY, i as u32 + 1);
            assert!(gap(i) >= least, "retry {} came {:?} after the call before", i + 1, gap(i));
        }
        let pending = retry_delay(Watched::EVERY, 7);
        assert!(gap(6) < pending, "the change waited {:?} for the backoff", gap(6));
        let restarted = retry_delay(Watched::EVERY, 6);
        assert!(gap(7) < restarted, "after the change, a retry waited {:?}", gap(7));
        w.stop().await;
    }
}
