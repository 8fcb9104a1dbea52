//! Replacing a file so that readers and crashes only ever see the old or the new version.
//!
//! The new content goes to a temporary file in the same directory, is flushed and fsynced, and
//! is then renamed over the target; the directory is fsynced so the rename itself survives a
//! power cut. A crash at any moment leaves the previous file intact, and possibly a stray
//! temporary file.
//!
//! Every write has a temporary file of its own (`.NAME.SECS-PID-N-NONCE.tmp`, created
//! exclusively): two processes replacing the same file at once (servers sharing a blocklist
//! file, each told of a change through its admin endpoint) each rename a complete file of their
//! own, and the last rename wins. With one shared temporary name, the second writer truncated
//! the first one's file between its fsync and its rename, and an empty or half-written list
//! went live. The nonce (the clock's nanoseconds) keeps names apart across hosts and PID
//! namespaces, where every container's process may be PID 1; a name taken anyway is retried.
//!
//! Stray temporary files a crash left are removed by a later write of the same file once they
//! are [`STALE_AFTER`] old by the creation time in their name (no write takes that long, so
//! none of them is still being written). Not by their modification time: a hard link's is
//! its source's ([`replace_with_link`]), so a link being renamed into place looked stale.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How old a temporary file must be before a later write takes it for a crash's leftover.
pub const STALE_AFTER: Duration = Duration::from_secs(3600);

/// Names tried before a write gives up on finding a free one.
const NAME_TRIES: usize = 8;

/// A temporary path for replacing `path`, named after this moment and this process.
fn fresh_temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (secs, nonce, pid) = (now.as_secs(), now.subsec_nanos(), std::process::id());
    path.with_file_name(format!(".{}.{secs}-{pid}-{n}-{nonce}.tmp", file_name(path)))
}

/// `create` at a fresh temporary path of `path`, another one when the name is taken.
fn at_fresh_temp_path<T>(
    path: &Path,
    mut create: impl FnMut(&Path) -> io::Result<T>,
) -> io::Result<(PathBuf, T)> {
    let mut tries = 0;
    loop {
        let tmp = fresh_temp_path(path);
        match create(&tmp) {
            Ok(made) => return Ok((tmp, made)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < NAME_TRIES => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The middle part of `candidate` when it is a temporary file of some write of `path` (any
/// process, any time): digits and dashes only, so the temporary files of `a.b` are never taken
/// for those of `a`; empty for the name releases before per-write names used (`.NAME.tmp`).
fn temp_id<'a>(path: &Path, candidate: &'a str) -> Option<&'a str> {
    if candidate == format!(".{}.tmp", file_name(path)) {
        return Some("");
    }
    let prefix = format!(".{}.", file_name(path));
    candidate
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit() || b == b'-'))
}

/// The temporary files of writes of `path` present now (a crash's leftovers, or writes under
/// way).
pub fn temp_files(path: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(parent_dir(path)) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter(|e| temp_id(path, &e.file_name().to_string_lossy()).is_some())
        .map(|e| e.path())
        .collect()
}

/// When the temporary file `temp` was created: the time in its name, or, for a name without
/// one (an older release's), its modification time.
fn created(temp: &Path, id: &str) -> Option<SystemTime> {
    let fields: Vec<&str> = id.split('-').collect();
    match fields[..] {
        // Checked: the name is whatever is in the directory, and a time past the clock's range
        // must not panic every writer of this path.
        [secs, _, _, _] => {
            secs.parse().ok().and_then(|s| UNIX_EPOCH.checked_add(Duration::from_secs(s)))
        }
        _ => fs::symlink_metadata(temp).and_then(|m| m.modified()).ok(),
    }
}

/// Removes the temporary files of `path` older than [`STALE_AFTER`]: what crashed writes left.
fn remove_stale_temps(path: &Path) {
    for temp in temp_files(path) {
        let name = temp.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Some(at) = temp_id(path, &name).and_then(|id| created(&temp, id)) else { continue };
        if at.elapsed().is_ok_and(|age| age >= STALE_AFTER) {
            let _ = fs::remove_file(&temp);
        }
    }
}

/// A fully written and fsynced temporary file, waiting to replace its target.
///
/// Two-phase replacement lets a caller stage several files and publish them in a chosen order
/// (the builder stages its state, publishes the snapshot, then commits the state). Dropping a
/// `Staged` without committing removes the temporary file.
#[derive(Debug)]
pub struct Staged {
    tmp: PathBuf,
    path: PathBuf,
    committed: bool,
}

impl Staged {
    /// The temporary file, written but not yet in place.
    pub fn temp(&self) -> &Path {
        &self.tmp
    }

    /// The path the temporary file replaces when committed.
    pub fn target(&self) -> &Path {
        &self.path
    }

    /// Renames the temporary file over the target and fsyncs the directory.
    pub fn commit(mut self) -> io::Result<()> {
        fs::rename(&self.tmp, &self.path)?;
        self.committed = true;
        sync_dir(&self.path)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Writes the bytes that `fill` produces to the temporary path of `path` and fsyncs them,
/// without replacing `path` yet.
pub fn stage<T, E: From<io::Error>>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> Result<T, E>,
) -> Result<(T, Staged), E> {
    let (file, staged) = staging_file(path)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let value = fill(&mut out)?;
    let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.sync_all()?;
    Ok((value, staged))
}

/// The temporary file of `path`, created empty, with the guard that commits or removes it: for
/// writers that cannot hand [`stage`] a closure (an async download). The caller writes and
/// fsyncs the file, then commits.
pub fn staging_file(path: &Path) -> io::Result<(File, Staged)> {
    remove_stale_temps(path);
    let (tmp, file) =
        at_fresh_temp_path(path, |tmp| OpenOptions::new().write(true).create_new(true).open(tmp))?;
    Ok((file, Staged { tmp, path: path.to_owned(), committed: false }))
}

/// Allocates `len` bytes for `file` (which becomes that long), so that a download of that
/// many fails at once on a disk without room for it, instead of after gigabytes were fetched
/// (and again at every retry).
///
/// The free space is checked first, and too little fails with [`io::ErrorKind::StorageFull`],
/// naming both figures: `fallocate` itself would take every free block before it failed, and
/// other writers on the disk would find it full meanwhile. The check counts what an
/// unprivileged writer may use (`df`'s "available"): a root process is refused the blocks
/// ext4 reserves for root, which it could have filled. A file system that reports no size
/// (ramfs, some FUSE ones) is not checked, and one that cannot allocate ahead (some network
/// ones) is left to the writes; so is a copy-on-write one, whose writes may need more room
/// than the allocation took.
pub fn reserve(file: &File, len: u64) -> io::Result<()> {
    if let Some(available) = available_bytes(file)?
        && len > available
    {
        let message = format!("No space left on device: {len} bytes needed, {available} available");
        return Err(io::Error::new(io::ErrorKind::StorageFull, message));
    }
    allocate(file, len)
}

/// `fallocate` of `len` bytes from the start of `file`; nothing where it is not supported.
#[cfg(target_os = "linux")]
fn allocate(file: &File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let Ok(len) = libc::off_t::try_from(len) else {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    };
    if len == 0 {
        return Ok(());
    }
    loop {
        // SAFETY: a system call on the descriptor `file` keeps open; it touches no memory.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EOPNOTSUPP | libc::ENOSYS) => return Ok(()),
            _ => return Err(e),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn allocate(_: &File, _: u64) -> io::Result<()> {
    Ok(())
}

/// The bytes an unprivileged writer may still add to the file system that holds `file` (what
/// `df` shows as available); `None` when the file system reports no size.
pub fn available_bytes(file: &File) -> io::Result<Option<u64>> {
    use std::os::fd::AsRawFd;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `fstatvfs` writes the struct it is given, and nothing else.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::fstatvfs(file.as_raw_fd(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: all integers, zeroed, then filled by the successful call above.
    #[allow(unsafe_code)]
    let stat = unsafe { stat.assume_init() };
    // The field types differ between targets (32-bit ones have a narrower block size).
    #[allow(clippy::useless_conversion)]
    let (blocks, available, size) =
        (u64::from(stat.f_blocks), u64::from(stat.f_bavail), u64::from(stat.f_frsize));
    Ok((blocks > 0).then(|| available.saturating_mul(size)))
}

/// Writes `path` atomically with the bytes that `fill` produces.
pub fn write_with<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<T>,
) -> io::Result<T> {
    let (value, staged) = stage(path, fill)?;
    staged.commit()?;
    Ok(value)
}

/// Writes `path` atomically with `bytes`.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_with(path, |out| out.write_all(bytes))
}

/// [`write`] for a file whose name an operator may manage: symbolic links at `path` are
/// followed (a dangling one too), so the file they name is replaced, not the link by a file of
/// this process's own that the managed source no longer reaches; and the new file keeps the
/// old one's permissions and, where this process may give them, its owner and group (a list
/// kept at 0640 for a group does not become world-readable, nor unreadable to that group).
pub fn write_following(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let target = follow_links(path)?;
    let old = fs::metadata(&target).ok();
    write_with(&target, |out| {
        if let Some(old) = &old {
            out.get_ref().set_permissions(old.permissions())?;
            // Best effort: only root may give a file away.
            let _ = std::os::unix::fs::fchown(out.get_ref(), Some(old.uid()), Some(old.gid()));
        }
        out.write_all(bytes)
    })
}

/// The name `path`'s symbolic links lead to, relative links taken from their own directory;
/// the name itself when it is no link (or does not exist).
fn follow_links(path: &Path) -> io::Result<PathBuf> {
    let mut at = path.to_owned();
    for _ in 0..40 {
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&at)?;
                at = at.parent().map_or_else(|| to.clone(), |dir| dir.join(&to));
            }
            Ok(_) => return Ok(at),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(at),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!("{}: too many levels of symbolic links", path.display())))
}

/// Makes `dst` another name of the (complete, fsynced) file `src`, replacing `dst` atomically:
/// readers of `dst` see the old file or the new one, never a partial one. Both paths must be on
/// one file system.
pub fn replace_with_link(src: &Path, dst: &Path) -> io::Result<()> {
    remove_stale_temps(dst);
    let (tmp, ()) = at_fresh_temp_path(dst, |tmp| fs::hard_link(src, tmp))?;
    if let Err(e) = fs::rename(&tmp, dst) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dst)
}

/// Whether a failed write may pass when tried again: a full disk or quota, a call interrupted
/// or out of time, memory or descriptors short, an I/O error. The cases that may pass are
/// listed, not those that may not (as the server's file watch does for reads, where a missing
/// file is the only lasting failure): a read-only file system (a Kubernetes ConfigMap), a file
/// bind-mounted on its own (EBUSY on the rename), a missing directory, no permission, a name
/// too long or a symbolic link loop stay as they are however often the write is tried.
pub fn may_pass(e: &io::Error) -> bool {
    use std::io::ErrorKind::{
        Interrupted, OutOfMemory, QuotaExceeded, StorageFull, TimedOut, WouldBlock,
    };
    let kind = matches!(
        e.kind(),
        StorageFull | QuotaExceeded | Interrupted | WouldBlock | TimedOut | OutOfMemory
    );
    let raw = e.raw_os_error();
    kind || matches!(raw, Some(libc::EIO | libc::ESTALE | libc::EMFILE | libc::ENFILE))
}

/// Fsyncs the directory that holds `path`, so that a rename or a new entry there survives a
/// power cut.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(parent_dir(path))?.sync_all()
}

/// The directory that holds `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file larger than the free space is refused before a block is allocated (the
    /// check stays out of the disk's way); one that fits is allocated whole.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_reservation_is_checked_against_the_free_space_then_allocated() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (file, staged) = staging_file(&dir.path().join("big")).unwrap();
        let free = available_bytes(&file).unwrap().expect("the test's disk reports its size");
        let e = reserve(&file, free.saturating_mul(2).saturating_add(1 << 30)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull, "{e}");
        assert!(may_pass(&e), "{e}");
        assert_eq!(file.metadata().unwrap().blocks(), 0);
        reserve(&file, 1 << 20).unwrap();
        let meta = std::fs::metadata(staged.temp()).unwrap();
        assert_eq!(meta.len(), 1 << 20);
        assert!(meta.blocks() * 512 >= 1 << 20, "{} blocks", meta.blocks());
    }

    /// Only what may pass is worth a retry: a full disk is, a read-only file system is not.
    #[test]
    fn a_write_that_may_pass_is_told_apart() {
        use std::io::{Error, ErrorKind};
        for (e, expected) in [
            (Error::from_raw_os_error(libc::ENOSPC), true),
            (Error::from_raw_os_error(libc::EDQUOT), true),
            (Error::from_raw_os_error(libc::EIO), true),
            (Error::from_raw_os_error(libc::EMFILE), true),
            (Error::from(ErrorKind::Interrupted), true),
            (Error::from_raw_os_error(libc::EROFS), false),
            (Error::from_raw_os_error(libc::EBUSY), false),
            (Error::from_raw_os_error(libc::ENOENT), false),
            (Error::from_raw_os_error(libc::EACCES), false),
            (Error::from_raw_os_error(libc::ENAMETOOLONG), false),
            (Error::from_raw_os_error(libc::ELOOP), false),
            (Error::other("a symbolic link loop"), false),
        ] {
            assert_eq!(may_pass(&e), expected, "{e}");
        }
    }

    #[test]
    fn writing_through_a_link_replaces_its_target_and_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (managed, link) = (dir.path().join("managed.txt"), dir.path().join("list.txt"));
        fs::write(&managed, "old\n").unwrap();
        fs::set_permissions(&managed, fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink(&managed, &link).unwrap();
        write_following(&link, b"new\n").unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "still a link");
        assert_eq!(fs::read(&managed).unwrap(), b"new\n");
        let mode = fs::metadata(&managed).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // A dangling link (its file deleted), relative, is followed too.
        fs::remove_file(&managed).unwrap();
        let relative = dir.path().join("relative.txt");
        std::os::unix::fs::symlink("managed.txt", &relative).unwrap();
        write_following(&relative, b"again\n").unwrap();
        assert!(fs::symlink_metadata(&relative).unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&managed).unwrap(), b"again\n");
        // A name that is no link and no file yet is written as it is.
        let fresh = dir.path().join("fresh.txt");
        write_following(&fresh, b"x").unwrap();
        assert_eq!(fs::read(&fresh).unwrap(), b"x");
    }

    #[test]
    fn replaces_and_cleans_up_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        write(&path, b"one").unwrap();
        write(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let err = write_with(&path, |out| {
            out.write_all(b"partial")?;
            Err::<(), _>(io::Error::other("boom"))
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert!(temp_files(&path).is_empty());
    }

    /// Two writers of one file at once: each commits a complete file of its own. With a
    /// shared temporary name the second one's create truncated the first one's fsynced file,
    /// which then went live empty.
    #[test]
    fn concurrent_writers_never_publish_each_others_partial_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blocklist.txt");
        let (mut a, staged_a) = staging_file(&path).unwrap();
        a.write_all(b"list A, long").unwrap();
        a.sync_all().unwrap();
        let (mut b, staged_b) = staging_file(&path).unwrap();
        staged_a.commit().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"list A, long");
        b.write_all(b"list B").unwrap();
        b.sync_all().unwrap();
        staged_b.commit().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"list B");
        assert!(temp_files(&path).is_empty());
    }

    /// A crash's leftover is removed by a later write once its name says it is old, not while
    /// it may be another writer's (whatever its modification time: a hard link's is its
    /// source's); an older release's `.NAME.tmp` goes by its modification time; other files'
    /// temporary files are left alone.
    #[test]
    fn stale_temporary_files_are_removed_and_only_those() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let then = now - STALE_AFTER.as_secs() - 60;
        let old = dir.path().join(format!(".a.{then}-77-0-5.tmp"));
        let recent = dir.path().join(format!(".a.{now}-78-0-5.tmp"));
        let legacy = dir.path().join(".a.tmp");
        let other = dir.path().join(format!(".a.b.{then}-77-0-5.tmp"));
        let unrelated = dir.path().join(".a.x.tmp");
        for p in [&old, &recent, &legacy, &other, &unrelated] {
            fs::write(p, b"partial").unwrap();
        }
        let long_ago = SystemTime::now() - STALE_AFTER - Duration::from_secs(60);
        for p in [&recent, &legacy, &other, &unrelated] {
            File::options().write(true).open(p).unwrap().set_modified(long_ago).unwrap();
        }
        let mut found = temp_files(&path);
        found.sort();
        let mut want = [old.clone(), recent.clone(), legacy.clone()];
        want.sort();
        assert_eq!(found, want);
        write(&path, b"new").unwrap();
        assert!(!old.exists() && !legacy.exists(), "a crash's leftover stays");
        assert!(recent.exists() && other.exists() && unrelated.exists());
        replace_with_link(&path, &dir.path().join("b")).unwrap();
        assert_eq!(fs::read(dir.path().join("b")).unwrap(), b"new");
    }

    /// A name whose time is past the clock's range is left alone, and writes go on (the time
    /// added to the epoch panicked every writer of the path).
    #[test]
    fn a_temporary_name_from_beyond_the_clock_stops_no_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        let odd = dir.path().join(format!(".a.{}-1-1-1.tmp", u64::MAX));
        fs::write(&odd, b"?").unwrap();
        write(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert!(odd.exists());
    }
}
