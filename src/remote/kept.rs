//! The generation a follower keeps on disk beside the live one, so that a restart gives back
//! what the server held before it.
//!
//! A server holds two generations: the current one and one more, which an aggregator may still
//! answer from (it never mixes generations, so while some other partition cannot load the newer
//! ones, every aggregator stays on an older one and pins it; see `Store::publish`).
//! The live file is replaced at every new generation, so a server restarted in that state came
//! back with the current generation alone, and every answer touching its partition was
//! partial until the other partition recovered.
//!
//! So before a download is renamed over the live file, the live file (a generation the server
//! holds) is hard-linked into `partition-NNN.snap.kept/<snapshot id>.snap`: no copy, the same
//! inode. Once the store has published the new one, every kept file but the generation it held
//! beside it is removed, and when that generation is an older one an aggregator pinned (not the
//! outgoing one), a `<snapshot id>.pinned` marker says so. At start the follower opens the kept
//! file beside the live one, verified like any snapshot, and the store holds it again. When a
//! download replaces the live file at start, two may be kept: the marked one is held (the pin
//! is why it was kept), else the outgoing one, as a reload would.
//!
//! The cost is disk: a cache directory holds the live file, the kept one and, during a
//! download, the download (three partitions' worth at most); and memory at start, two
//! generations from the first request on instead of after the first reload.

use std::path::{Path, PathBuf};

use crate::snapshot::Snapshot;
use crate::store::Preloaded;

/// The kept generations of one follower's partition.
#[derive(Debug, Clone)]
pub struct Kept {
    live: PathBuf,
    dir: PathBuf,
}

/// Whether `id` can name a file: snapshot ids are hex checksums, and a kept file is named by
/// its id alone.
fn nameable(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

impl Kept {
    /// The kept generations beside `live` (`partition-NNN.snap` in the cache directory).
    pub fn beside(live: &Path) -> Kept {
        let mut dir = live.to_owned().into_os_string();
        dir.push(".kept");
        Kept { live: live.to_owned(), dir: PathBuf::from(dir) }
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.snap"))
    }

    /// Links the live file, which holds generation `id`, into the kept directory: called just
    /// before a new download is renamed over it. A failure is logged, not returned: the
    /// download is still adopted, only a restart would lose the kept generation.
    pub fn keep_live(&self, id: &str) {
        if !nameable(id) {
            return;
        }
        let to = self.path_of(id);
        let linked = std::fs::create_dir_all(&self.dir).and_then(|()| {
            match std::fs::hard_link(&self.live, &to) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                other => other,
            }
        });
        if let Err(e) = linked {
            tracing::warn!(error = %e, path = %to.display(), "cannot keep the outgoing generation beside the live file; a restart will not hold it");
        }
    }

    /// Removes every kept file but generation `keep`'s, and marks it as kept for an
    /// aggregator's pin when `pinned` (blocking: unlinking a file of gigabytes frees its blocks).
    pub fn prune(&self, keep: Option<&str>, pinned: bool) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let keep = keep.filter(|id| nameable(id));
        let names = keep.map(|id| [format!("{id}.snap"), format!("{id}.pinned")]);
        for entry in entries.flatten() {
            let name = entry.file_name();
            let is = |i: usize| names.as_ref().is_some_and(|n| name.to_str() == Some(&n[i]));
            let marker = pinned && is(1);
            if !is(0) && !marker {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        if let (Some(id), true) = (keep, pinned) {
            let _ = std::fs::write(self.dir.join(format!("{id}.pinned")), b"");
        }
    }

    /// The kept generation to hold beside `current` at start, verified (blocking): the one
    /// marked pinned first, else the newest. Every other kept file is removed. (Its key range
    /// is not compared with the current one's: partition boundaries move from one generation
    /// to the next. A cache directory belongs to one follower, as its live file does.)
    pub fn open_beside(&self, current: &Snapshot) -> Option<Preloaded> {
        let entries = std::fs::read_dir(&self.dir).ok()?;
        let live = format!("{}.snap", current.id());
        let mut kept: Vec<(bool, std::time::SystemTime, PathBuf)> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "snap"))
            .filter(|p| p.file_name().and_then(|n| n.to_str()) != Some(live.as_str()))
            .map(|p| {
                let pinned = p.with_extension("pinned").exists();
                let modified = p.metadata().and_then(|m| m.modified());
                (pinned, modified.unwrap_or(std::time::UNIX_EPOCH), p)
            })
            .collect();
        kept.sort_by_key(|&(pinned, modified, _)| std::cmp::Reverse((pinned, modified)));
        let found = kept.iter().find_map(|(pinned, _, path)| {
            let loaded = Preloaded::open(path).ok()?;
            let named = path.file_stem().and_then(|s| s.to_str()) == Some(loaded.snapshot.id());
            named.then_some((loaded, *pinned))
        });
        if let Some((found, _)) = &found {
            tracing::info!(
                version = found.snapshot.id(),
                "holding the kept generation beside the live one"
            );
        }
        self.prune(
            found.as_ref().map(|(f, _)| f.snapshot.id()),
            found.as_ref().is_some_and(|f| f.1),
        );
        found.map(|(f, _)| f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{BuildInfo, Entry, write};

    fn snapshot_file(path: &Path, word: &str) -> String {
        let entries = [Entry { key: word.into(), display: None, score: 1.0 }];
        let (bytes, _) = write(&entries, &BuildInfo::default()).unwrap();
        std::fs::write(path, bytes).unwrap();
        Preloaded::open(path).unwrap().snapshot.id().to_owned()
    }

    #[test]
    fn the_outgoing_generation_is_kept_and_found_again_and_the_rest_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("partition-000.snap");
        let kept = Kept::beside(&live);
        let open = |path: &Path| Preloaded::open(path).unwrap().snapshot;
        let first = snapshot_file(&live, "first");
        assert!(kept.open_beside(&open(&live)).is_none(), "nothing kept yet");
        kept.keep_live(&first);
        kept.keep_live(&first);
        // The next generation replaces the live file, as a rename would.
        let next = dir.path().join("next");
        let second = snapshot_file(&next, "second");
        std::fs::rename(&next, &live).unwrap();
        kept.keep_live(&second);
        kept.prune(Some(&first), false);
        let names = || {
            let mut n: Vec<String> = std::fs::read_dir(&kept.dir)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            n
        };
        assert_eq!(names(), [format!("{first}.snap")], "only the generation held beside");
        let held = kept.open_beside(&open(&live)).expect("the first generation");
        assert_eq!(held.snapshot.id(), first);
        // A kept file that does not verify, or is not the generation its name says, is not
        // held, and is removed.
        std::fs::write(kept.path_of(&first), b"not a snapshot").unwrap();
        assert!(kept.open_beside(&open(&live)).is_none());
        assert!(names().is_empty());
        std::fs::create_dir_all(&kept.dir).unwrap();
        std::fs::hard_link(&live, kept.path_of("0123")).unwrap();
        assert!(kept.open_beside(&open(&live)).is_none(), "not the generation its name says");
        kept.keep_live(&second);
        assert!(kept.open_beside(&open(&live)).is_none(), "the live generation is not held twice");
    }

    /// At a restart that downloads a new generation, the outgoing live file and the one kept
    /// before can both be there: the one an aggregator pinned is held, else the outgoing one.
    #[test]
    fn a_pinned_generation_is_held_over_the_outgoing_one() {
        for pinned in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let live = dir.path().join("partition-000.snap");
            let next = dir.path().join("next");
            let kept = Kept::beside(&live);
            let older = snapshot_file(&live, "older");
            kept.keep_live(&older);
            let outgoing = snapshot_file(&next, "outgoing");
            std::fs::rename(&next, &live).unwrap();
            // What the follower leaves after the store published `outgoing`, holding `older`
            // beside it only when an aggregator pinned it (else it would hold its predecessor).
            kept.prune(Some(&older), pinned);
            kept.keep_live(&outgoing);
            snapshot_file(&next, "newest");
            std::fs::rename(&next, &live).unwrap();
            let held = kept.open_beside(&Preloaded::open(&live).unwrap().snapshot).unwrap();
            let want = if pinned { &older } else { &outgoing };
            assert_eq!(held.snapshot.id(), want, "pinned: {pinned}");
            let marker = kept.dir.join(format!("{older}.pinned"));
            assert_eq!(marker.exists(), pinned, "the marker stays with the generation held");
            assert_eq!(std::fs::read_dir(&kept.dir).unwrap().count(), 1 + usize::from(pinned));
        }
    }

    #[test]
    fn ids_that_cannot_name_a_file_are_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("partition-000.snap");
        let id = snapshot_file(&live, "one");
        let kept = Kept::beside(&live);
        for bad in ["", "../x", "a/b", &"f".repeat(65)] {
            kept.keep_live(bad);
        }
        assert!(!kept.dir.exists());
        kept.keep_live(&id);
        assert!(kept.path_of(&id).exists());
    }
}
