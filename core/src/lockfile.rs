//! Exclusive ownership of a directory's files by one process at a time: an advisory `flock`
//! on a lock file, held for as long as the returned [`Held`] lives.
//!
//! Two writers of the same files must never run together: two builds of one state would each
//! publish half of the hours, and two servers following one partition into one cache directory
//! would delete each other's downloads as a killed process's leftovers. The lock belongs to the
//! open file, so the kernel releases it when the process dies, however it dies: no stale lock
//! file to clean up after a crash.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long [`acquire`] waits for a lock held by someone else.
///
/// Why wait at all: the lock belongs to the open file, and a process that runs builds
/// in-process while another of its threads spawns children (the demo, the pipeline, tests)
/// lends every child a copy of the descriptor between fork and exec. A holder that ends in
/// that window leaves the lock held for a moment after it is gone, as does a process on its
/// way out when its replacement starts; the next one must not fail for it. A real concurrent
/// holder keeps it far longer than the wait.
pub const WAIT: Duration = Duration::from_secs(2);

/// A lock taken; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct Held {
    _file: File,
}

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Someone else still held it after the wait.
    #[error("{0} is held by another process")]
    Busy(PathBuf),
    /// The lock file could not be opened or locked.
    #[error("cannot lock {path}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Takes the exclusive lock of the file `path` (created if missing; its directory must
/// exist), waiting up to `wait` for another holder to let go.
pub fn acquire(path: &Path, wait: Duration) -> Result<Held, LockError> {
    let io = |source| LockError::Io { path: path.to_owned(), source };
    let file = File::options().create(true).truncate(false).write(true).open(path).map_err(io)?;
    let deadline = Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Held { _file: file }),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(TryLockError::WouldBlock) => return Err(LockError::Busy(path.to_owned())),
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_free_again_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let held = acquire(&path, WAIT).unwrap();
        let started = Instant::now();
        let refused = acquire(&path, Duration::from_millis(50));
        assert!(matches!(refused, Err(LockError::Busy(ref p)) if *p == path), "{refused:?}");
        assert!(started.elapsed() >= Duration::from_millis(50), "it waited");
        drop(held);
        acquire(&path, Duration::ZERO).expect("free once the holder is gone");
    }

    /// What a descriptor copy lent to a spawning child looks like to the next holder.
    #[test]
    fn a_holder_letting_go_during_the_wait_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let held = acquire(&path, WAIT).unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        acquire(&path, WAIT).expect("taken once released within the wait");
        releaser.join().unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_io_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("lock");
        let e = acquire(&path, WAIT).unwrap_err();
        assert!(matches!(e, LockError::Io { path: ref p, .. } if *p == path), "{e:?}");
    }
}
