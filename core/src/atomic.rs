//! Replacing a file so that readers and crashes only ever see the old or the new version.
//!
//! The new content goes to a temporary file in the same directory, is flushed and fsynced, and
//! is then renamed over the target; the directory is fsynced so the rename itself survives a
//! power cut. A crash at any moment leaves the previous file intact (and possibly a stray
//! temporary file, which the next write replaces).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The temporary path used while `path` is being replaced.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
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
    let tmp = temp_path(path);
    let file = File::create(&tmp)?;
    Ok((file, Staged { tmp, path: path.to_owned(), committed: false }))
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

/// Makes `dst` another name of the (complete, fsynced) file `src`, replacing `dst` atomically:
/// readers of `dst` see the old file or the new one, never a partial one. Both paths must be on
/// one file system.
pub fn replace_with_link(src: &Path, dst: &Path) -> io::Result<()> {
    let tmp = temp_path(dst);
    let _ = fs::remove_file(&tmp);
    fs::hard_link(src, &tmp)?;
    fs::rename(&tmp, dst)?;
    sync_dir(dst)
}

/// Fsyncs the directory that holds `path`, so that a rename or a new entry there survives a
/// power cut.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(!temp_path(&path).exists());
    }
}
