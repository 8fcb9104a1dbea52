//! Publishing snapshot generations where servers pick them up, keeping the last few for
//! rollback.
//!
//! A build writes its files into a new directory of the history first
//! (`OUT/generations/<time>-<id>/` for a partitioned build, `OUT.generations/<time>-<id>/` for a
//! single snapshot file), then publishes them as hard links, each replaced atomically: a
//! partitioned generation's own files (`OUT/part-NNN-<id>.snap`), then the stable names servers
//! follow (`OUT/part-NNN.snap`), and the manifest last ([`publish`]); a single snapshot is `OUT`.
//! Servers watching the live paths reload; the aggregator follows the manifest. Rolling back
//! publishes an older generation's files the same way. Only the newest `keep` generations stay.

use std::io;
use std::path::{Path, PathBuf};

use typeahead_core::atomic;
use typeahead_core::generation::{check_rules, manifest_path, rules_in_force};
use typeahead_core::manifest::{Manifest, Partition};

/// Where the generations of `out` are kept.
pub fn history_dir(out: &Path, partitioned: bool) -> PathBuf {
    if partitioned {
        out.join("generations")
    } else {
        let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        out.with_file_name(format!("{name}.generations"))
    }
}

/// Holds the lock of an output's history ([`lock`]).
#[derive(Debug)]
pub struct OutLock {
    _lock: crate::state::Lock,
}

/// Another build or a rollback holds the output, or its lock cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another build or rollback is publishing to this output.
    #[error("another build or rollback is publishing to {0}; try again when it finishes")]
    Busy(PathBuf),
    /// The lock file cannot be created or locked.
    #[error("cannot lock {path}")]
    Io {
        /// The output.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Takes the lock of `out`'s history directory (a `lock` file in it; waiting as long as a
/// state's lock does, [`crate::state::LOCK_WAIT`]). A build holds it from writing its pending
/// generation to the end of its pruning, a rollback while it publishes. Without it a rollback
/// could delete the generation-named files a build's manifest is about to name, and a build
/// deletes every other pending directory as a killed build's leftovers.
pub fn lock(out: &Path, partitioned: bool) -> Result<OutLock, LockError> {
    crate::state::Lock::acquire(&history_dir(out, partitioned))
        .map(|l| OutLock { _lock: l })
        .map_err(|e| match e {
            crate::state::StateError::Locked(_) => LockError::Busy(out.to_owned()),
            // The lock is the output's, not a state's: its own I/O error says why.
            crate::state::StateError::Io { source, .. } => {
                LockError::Io { path: out.to_owned(), source: Box::new(source) }
            }
            other => LockError::Io { path: out.to_owned(), source: Box::new(other) },
        })
}

/// A directory for a generation being written (renamed once its id is known). The caller
/// holds the output's [`lock`]: every other pending directory is a killed build's.
pub fn pending_dir(out: &Path, partitioned: bool) -> std::io::Result<PathBuf> {
    let history = history_dir(out, partitioned);
    std::fs::create_dir_all(&history)?;
    // A build killed mid-way leaves a pending directory; nothing refers to it.
    for entry in std::fs::read_dir(&history)?.flatten() {
        if entry.file_name().to_string_lossy().ends_with("-pending") {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let dir = history.join(format!("{}-pending", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Gives a published generation its final name `<unix milliseconds>-<id>` (sortable by age),
/// which makes it a kept generation (a `rollback` target).
///
/// The time is the clock's, or one past the newest kept generation's when the clock says less:
/// names are the history's order, which `prune` and `rollback` go by, and after the clock
/// stepped back a generation named by it sorted before its elders (each build then pruned its
/// predecessor and kept the stale ones, and `rollback` found nothing before the live one).
pub fn seal(pending: &Path, id: &str) -> std::io::Result<PathBuf> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let newest = pending.parent().map_or(0, |history| {
        generations(history).iter().filter_map(|(name, _)| time_of(name)).max().unwrap_or(0)
    });
    let at = now.max(newest.saturating_add(1));
    rename_generation(pending, at, id)
}

/// Renames the sealed generation directory `sealed` to sort after a generation named at
/// `newest` (unix milliseconds), unless it already does: a generation published elsewhere (a
/// bucket) is ordered among the generations there, which the local history does not hold.
pub fn seal_after(sealed: &Path, newest: u128) -> std::io::Result<PathBuf> {
    let name = sealed.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match time_of(&name) {
        Some(at) if at > newest => Ok(sealed.to_owned()),
        _ => rename_generation(sealed, newest.saturating_add(1), id_of(&name)),
    }
}

/// Renames `from` to the generation directory name `<at>-<id>`, durably: after a power cut
/// the directory must not come back under its pending name, which the next build deletes (the
/// live files, links of their own, would stay).
fn rename_generation(from: &Path, at: u128, id: &str) -> std::io::Result<PathBuf> {
    let dir = from.with_file_name(format!("{at:015}-{id}"));
    std::fs::rename(from, &dir)?;
    typeahead_core::atomic::sync_dir(&dir)?;
    Ok(dir)
}

/// Publishes the generation in `dir`: a single snapshot becomes the `out` file itself.
///
/// A partitioned generation is published in three steps so that the live manifest only ever
/// names files of its own generation: first its generation-named partition files (new names:
/// nothing live is replaced), then the stable `part-NNN.snap` links path-following servers
/// watch, then the manifest, the commit point. Files of older generations that the new manifest
/// no longer names are removed after it.
pub fn publish(out: &Path, partitioned: bool, dir: &Path) -> io::Result<()> {
    if !partitioned {
        let name = only_file(dir)?;
        return atomic::replace_with_link(&dir.join(name), out);
    }
    let manifest = Manifest::read(&manifest_path(dir)).map_err(io::Error::other)?;
    for p in &manifest.partitions {
        atomic::replace_with_link(&dir.join(&p.file), &out.join(&p.file))?;
    }
    link_live_names(dir, out, &manifest)?;
    atomic::replace_with_link(&manifest_path(dir), &manifest_path(out))?;
    remove_unnamed_partition_files(out, &manifest);
    Ok(())
}

/// Points the stable `part-NNN.snap` names of `out` at the files of its live manifest, where
/// they point elsewhere: a publication or rollback killed between the links and the manifest
/// leaves some at another generation, which the next publication would mend. A build that
/// publishes nothing (its generation is the live one) mends them instead.
pub fn relink_live(out: &Path) -> io::Result<()> {
    let manifest = Manifest::read(&manifest_path(out)).map_err(io::Error::other)?;
    link_live_names(out, out, &manifest)
}

/// Links every partition's stable name in `out` to its file in `dir`, unless it is that file.
fn link_live_names(dir: &Path, out: &Path, manifest: &Manifest) -> io::Result<()> {
    for p in &manifest.partitions {
        let (from, to) = (dir.join(&p.file), out.join(p.live_file()));
        let same = matches!((inode(&from), inode(&to)), (Some(a), Some(b)) if a == b);
        if p.live_file() != p.file && !same {
            atomic::replace_with_link(&from, &to)?;
        }
    }
    Ok(())
}

/// The file identity (device, inode) of `path`: a published file is a link to its kept copy.
fn inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The file that holds a generation's identity in `dir` (a kept generation's directory, or
/// `out` itself): the manifest of a partitioned one, the one snapshot of a single one.
fn identity_file(dir: &Path, partitioned: bool) -> io::Result<PathBuf> {
    if partitioned { Ok(manifest_path(dir)) } else { Ok(dir.join(only_file(dir)?)) }
}

/// The one file of a single-snapshot generation directory.
fn only_file(dir: &Path) -> io::Result<String> {
    std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| !n.starts_with('.'))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "empty generation directory"))
}

/// Removes generation-named partition files (`part-NNN-<id>.snap`) of `out` that `manifest`
/// does not name, and stable names (`part-NNN.snap`) of partitions it does not have: after a
/// build into fewer partitions, `part-002.snap` would otherwise go on holding an old
/// generation's range (blocked keys and all) for any server started on it. Best effort: a
/// leftover goes with the next publication.
fn remove_unnamed_partition_files(out: &Path, manifest: &Manifest) {
    let Ok(entries) = std::fs::read_dir(out) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let named = manifest.partitions.iter().any(|p| p.file == name || p.live_file() == name);
        let partition_file = Partition::is_generation_file(&name) || Partition::is_live_file(&name);
        if partition_file && !named {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// What [`rollback`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolledBack {
    /// The generation that was live.
    pub from: String,
    /// The generation now live.
    pub to: String,
}

/// Why a rollback did nothing.
#[derive(Debug, thiserror::Error)]
pub enum RollbackError {
    /// No kept generation matches, or none of those that do can be read, or the live
    /// generation is unknown and no `--to` says which.
    #[error("no generation to roll back to (live {live}; kept: {kept}); name one with --to")]
    NoTarget {
        /// The live generation.
        live: String,
        /// The kept generations, comma-separated, oldest first (an unreadable one marked so).
        kept: String,
    },
    /// The generation asked for cannot be read: published, no server could load it.
    #[error("generation {id} cannot be rolled back to: it is damaged")]
    Damaged {
        /// The generation.
        id: String,
        /// What is wrong with it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The generation was built under older rules than the live one (see
    /// [`typeahead_core::generation::check_rules`]) and `--force` was not given.
    #[error(transparent)]
    OlderRules(#[from] typeahead_core::generation::OlderRules),
    /// Another build or rollback holds the output.
    #[error(transparent)]
    Locked(#[from] LockError),
    /// Publishing the chosen generation failed.
    #[error("cannot publish generation {id}")]
    Publish {
        /// The generation.
        id: String,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// What [`RolledBack::from`] says when the live generation cannot be read or recognized.
pub const UNREADABLE_LIVE: &str = "an unreadable generation";

/// Publishes generation `to` of `out` again, or by default the newest kept before the live one.
///
/// The generation published is read and verified first (its id must be its directory's):
/// publishing a damaged one left servers nothing they could load. By default a damaged one is
/// passed over, with a warning, for the one before it. A live generation that cannot be read
/// (the reason to roll back, often) is recognized by its files, which are links to its kept
/// copy's; when even that fails, only `to` says where to go.
///
/// A generation built under older rules than those in force ([`rules_in_force`]: the live
/// generation's, else the newest the kept ones recorded, else this build's) is refused unless
/// `force`: it may hold what the newer rules withhold ([`check_rules`]).
pub fn rollback(out: &Path, to: Option<&str>, force: bool) -> Result<RolledBack, RollbackError> {
    let partitioned = out.is_dir();
    let _lock = lock(out, partitioned)?;
    let kept = generations(&history_dir(out, partitioned));
    let LiveRules { id: live, rules: live_rules } = live(out, partitioned, &kept);
    // Worked out once, for the first target that reads, and only then: it may open every
    // kept generation.
    let mut floor = None;
    let candidates: Vec<&(String, PathBuf)> = match (to, &live) {
        // Newest copy first (a prune killed part-way may leave an older one).
        (Some(id), _) => kept.iter().rev().filter(|(name, _)| id_of(name) == id).collect(),
        (None, Some(live)) => {
            let at = kept.iter().rposition(|(name, _)| id_of(name) == live).unwrap_or(kept.len());
            kept[..at].iter().rev().filter(|(name, _)| id_of(name) != live).collect()
        }
        // Which one is "before" is unknown: the newest kept one may be the very generation
        // an earlier rollback went back from.
        (None, None) => Vec::new(),
    };
    let mut damaged = Vec::new();
    let mut refused = None;
    for (name, dir) in candidates {
        let id = id_of(name).to_owned();
        let rules = match verify(dir, partitioned, &id) {
            Ok(rules) => rules,
            Err(source) => {
                let error = typeahead_core::report::chain(source.as_ref());
                tracing::warn!(generation = %id, %error, "kept generation damaged; the one before is tried");
                damaged.push(id.clone());
                refused = Some(RollbackError::Damaged { id, source });
                continue;
            }
        };
        // Not the one before instead: older generations have no newer rules.
        if !force {
            let floor = *floor.get_or_insert_with(|| {
                // The target was just read whole: its rules are not read again.
                let kept_rules = kept.iter().map(|(_, other)| {
                    if other == dir { rules } else { kept_rules(other, partitioned) }
                });
                rules_in_force(live_rules, kept_rules)
            });
            check_rules(&id, rules, floor)?;
        }
        publish(out, partitioned, dir)
            .map_err(|source| RollbackError::Publish { id: id.clone(), source })?;
        let from = live.unwrap_or_else(|| UNREADABLE_LIVE.to_owned());
        return Ok(RolledBack { from, to: id });
    }
    // Asked for by name, and every copy of it damaged.
    if let (Some(_), Some(refused)) = (to, refused) {
        return Err(refused);
    }
    let ids: Vec<String> = kept
        .iter()
        .map(|(n, _)| {
            let id = id_of(n);
            if damaged.iter().any(|d| d == id) { format!("{id} (damaged)") } else { id.to_owned() }
        })
        .collect();
    let live = live.unwrap_or_else(|| UNREADABLE_LIVE.to_owned());
    Err(RollbackError::NoTarget { live, kept: ids.join(", ") })
}

/// Reads and verifies the generation kept in `dir`, whose id must be `id`; returns the rules
/// it was built under.
fn verify(
    dir: &Path,
    partitioned: bool,
    id: &str,
) -> Result<Option<u32>, Box<dyn std::error::Error + Send + Sync>> {
    let path = if partitioned { dir.to_owned() } else { dir.join(only_file(dir)?) };
    let generation = typeahead_core::generation::Generation::open(&path)?;
    if generation.id() != id {
        return Err(format!("it holds generation {}", generation.id()).into());
    }
    Ok(generation.rules())
}

/// The rules the kept generation in `dir` recorded. One that cannot be read may have held the
/// newest (a damaged live snapshot's kept copy is the same file): this build's count for it,
/// rather than a floor lowered by the damage a rollback is for.
fn kept_rules(dir: &Path, partitioned: bool) -> Option<u32> {
    let unknown = Some(typeahead_core::normalize::RULES_VERSION);
    if partitioned {
        return Manifest::read(&manifest_path(dir)).map_or(unknown, |m| m.rules);
    }
    let Ok(file) = only_file(dir) else { return unknown };
    typeahead_core::snapshot::Snapshot::open(&dir.join(file)).map_or(unknown, |s| s.meta().rules)
}

/// The live generation, as far as [`rollback`] needs it: its id and the rules it recorded.
struct LiveRules {
    /// Its id, `None` when it cannot be read nor recognized.
    id: Option<String>,
    /// The rules it recorded; `None` when it recorded none or cannot be read.
    rules: Option<u32>,
}

/// The live generation's id and rules: the manifest's, or the single snapshot's (only the
/// manifest is read for a partitioned build, so a damaged live partition cannot hide it).
/// When that cannot be read, the kept generation whose file the live one is (a link to the
/// same inode).
fn live(out: &Path, partitioned: bool, kept: &[(String, PathBuf)]) -> LiveRules {
    let read = if partitioned {
        Manifest::read(&manifest_path(out))
            .map(|m| (m.generation, m.rules))
            .map_err(|e| e.to_string())
    } else {
        typeahead_core::snapshot::Snapshot::open(out)
            .map(|s| (s.id().to_owned(), s.meta().rules))
            .map_err(|e| e.to_string())
    };
    let error = match read {
        Ok((id, rules)) => return LiveRules { id: Some(id), rules },
        Err(error) => error,
    };
    let live_file = if partitioned { manifest_path(out) } else { out.to_owned() };
    let found = inode(&live_file).and_then(|live| {
        kept.iter().find(|(_, dir)| {
            identity_file(dir, partitioned).ok().and_then(|f| inode(&f)) == Some(live)
        })
    });
    tracing::warn!(path = %out.display(), %error, recognized = found.is_some(), "the live generation cannot be read");
    LiveRules { id: found.map(|(name, _)| id_of(name).to_owned()), rules: None }
}

/// The kept generations, oldest first: (directory name, path).
pub fn generations(history: &Path) -> Vec<(String, PathBuf)> {
    let mut all: Vec<(String, PathBuf)> = std::fs::read_dir(history)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                .filter(|(n, _)| !n.ends_with("-pending"))
                .collect()
        })
        .unwrap_or_default();
    all.sort();
    all
}

/// The id part of a generation directory name.
pub fn id_of(name: &str) -> &str {
    name.split_once('-').map_or(name, |(_, id)| id)
}

/// Removes the older copies of generation `live`, then all but the newest `keep` generations
/// (never `live`).
///
/// One directory per generation: a build with no new hour makes the live generation again,
/// and each copy kept pushed an older generation out of the history, until `rollback` had
/// nothing to go back to. Best effort: what is left goes with the next prune.
pub fn prune(history: &Path, keep: usize, live: &str) {
    let all = generations(history);
    let newest_live = all.iter().rposition(|(name, _)| id_of(name) == live);
    let mut kept = Vec::with_capacity(all.len());
    for (i, (name, path)) in all.into_iter().enumerate() {
        if id_of(&name) == live && Some(i) != newest_live {
            retire(&name, &path);
        } else {
            kept.push((name, path));
        }
    }
    let excess = kept.len().saturating_sub(keep.max(1));
    for (name, path) in kept.into_iter().take(excess) {
        if id_of(&name) != live {
            retire(&name, &path);
        }
    }
}

/// Deletes the kept generation `name` at `path`, renaming it to a pending name first: a
/// deletion killed part-way through left a kept generation with files missing, which held a
/// keep slot and could be chosen by `rollback`. A pending directory is no generation, and the
/// next build deletes it.
fn retire(name: &str, path: &Path) {
    let doomed = path.with_file_name(format!("{name}-pending"));
    if std::fs::rename(path, &doomed).is_ok() {
        let _ = std::fs::remove_dir_all(doomed);
    }
}

/// The time part of a generation directory name (unix milliseconds), when it is a number.
/// Every number counts, a name no build wrote too: the next name is made to sort after it.
pub fn time_of(name: &str) -> Option<u128> {
    name.split_once('-').and_then(|(time, _)| time.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use typeahead_core::generation::MANIFEST_FILE;
    use typeahead_core::manifest::{MANIFEST_FORMAT, Partition};
    use typeahead_core::snapshot::{self, BuildInfo, Entry};

    /// The one key of the snapshot at `path`.
    fn key_of(path: &Path) -> String {
        let snapshot = snapshot::Snapshot::open(path).unwrap();
        snapshot.entries().map(|e| e.key).collect()
    }

    /// A snapshot whose one key is `data {round}`.
    fn snapshot_bytes(round: usize) -> Vec<u8> {
        let entry = Entry { key: format!("data {round}"), display: None, score: 1.0 };
        snapshot::write(&[entry], &BuildInfo::default()).unwrap().0
    }

    /// A generation directory with one partition file, a snapshot of `data {round}`.
    fn write_generation(out: &Path, round: usize) -> PathBuf {
        let pending = pending_dir(out, true).unwrap();
        let id = format!("gen{round}");
        let file = Partition::file_name(0, &id);
        std::fs::write(pending.join(&file), snapshot_bytes(round)).unwrap();
        let partition = Partition {
            index: 0,
            start: String::new(),
            end: None,
            file,
            bytes: 6,
            checksum: id.clone(),
            keys: 1,
        };
        let manifest = Manifest {
            format: MANIFEST_FORMAT,
            generation: id.clone(),
            created_unix: 0,
            watermark_hour: None,
            partitions: vec![partition],
            rules: Some(typeahead_core::normalize::RULES_VERSION),
        };
        std::fs::write(pending.join(MANIFEST_FILE), serde_json::to_vec(&manifest).unwrap())
            .unwrap();
        seal(&pending, &id).unwrap()
    }

    fn live_files(out: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(out)
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// An output directory with generations `rounds` written and published in turn (a few
    /// milliseconds apart, so their directories sort by age).
    fn published(rounds: std::ops::Range<usize>) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("serve");
        std::fs::create_dir_all(&out).unwrap();
        for round in rounds {
            publish(&out, true, &write_generation(&out, round)).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        (dir, out)
    }

    #[test]
    fn publish_links_files_and_prunes_history() {
        let (_dir, out) = published(0..4);
        assert_eq!(key_of(&out.join("part-000.snap")), "data 3");
        // Only the live generation's own file stays beside the stable name.
        assert_eq!(live_files(&out), ["manifest.json", "part-000-gen3.snap", "part-000.snap"]);
        let live = Manifest::read(&out.join(MANIFEST_FILE)).unwrap();
        assert_eq!(live.generation, "gen3");
        prune(&history_dir(&out, true), 2, "gen3");
        let kept: Vec<String> = generations(&history_dir(&out, true))
            .iter()
            .map(|(n, _)| id_of(n).to_owned())
            .collect();
        assert!(kept.len() <= 2 && kept.contains(&"gen3".to_owned()), "{kept:?}");
        // Rolling back = publishing an older generation.
        let older = generations(&history_dir(&out, true));
        publish(&out, true, &older[0].1).unwrap();
        assert_ne!(key_of(&out.join("part-000.snap")), "data 3");
    }

    /// A stable name of a partition the live generation does not have (the build before had
    /// more) goes: a server started on it would serve an old generation's range.
    #[test]
    fn stable_names_of_partitions_gone_are_removed() {
        let (_dir, out) = published(0..1);
        std::fs::hard_link(out.join("part-000-gen0.snap"), out.join("part-002.snap")).unwrap();
        std::fs::write(out.join("part-002.snap.notes"), "").unwrap();
        publish(&out, true, &write_generation(&out, 1)).unwrap();
        let files = ["manifest.json", "part-000-gen1.snap", "part-000.snap", "part-002.snap.notes"];
        assert_eq!(live_files(&out), files);
    }

    /// A build with no new hour makes the live generation again: it is kept once, so the one
    /// before stays a rollback target. Each copy used to count, and three such builds with
    /// two generations kept left `rollback` nothing to go back to.
    #[test]
    fn a_generation_made_again_is_kept_once() {
        let (_dir, out) = published(0..2);
        for _ in 0..3 {
            publish(&out, true, &write_generation(&out, 1)).unwrap();
            prune(&history_dir(&out, true), 2, "gen1");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let kept: Vec<String> = generations(&history_dir(&out, true))
            .iter()
            .map(|(n, _)| id_of(n).to_owned())
            .collect();
        assert_eq!(kept, ["gen0", "gen1"]);
        assert_eq!(rollback(&out, None, false).unwrap().to, "gen0");
    }

    /// One build or rollback at a time per output: a second lock, and a rollback, are refused
    /// while it is held, and a build can take it once it is released.
    #[test]
    fn an_output_is_published_by_one_build_or_rollback_at_a_time() {
        let (_dir, out) = published(0..2);
        let held = lock(&out, true).unwrap();
        let busy = lock(&out, true).unwrap_err();
        assert!(matches!(&busy, LockError::Busy(p) if *p == out), "{busy:?}");
        assert!(busy.to_string().contains("another build or rollback"), "{busy}");
        let refused = rollback(&out, None, false).unwrap_err();
        assert!(matches!(refused, RollbackError::Locked(LockError::Busy(_))), "{refused:?}");
        assert_eq!(Manifest::read(&out.join(MANIFEST_FILE)).unwrap().generation, "gen1");
        drop(held);
        assert_eq!(rollback(&out, None, false).unwrap().to, "gen0");
        assert!(lock(&out, true).is_ok(), "released by the rollback");
    }

    /// The state a build killed mid-publication leaves: the next generation's files are
    /// linked, its manifest is not. The live manifest still names only its own files.
    #[test]
    fn a_publication_cut_before_the_manifest_leaves_the_live_manifest_whole() {
        let (_dir, out) = published(1..2);
        let next = write_generation(&out, 2);
        let next_manifest = Manifest::read(&next.join(MANIFEST_FILE)).unwrap();
        for p in &next_manifest.partitions {
            atomic::replace_with_link(&next.join(&p.file), &out.join(&p.file)).unwrap();
            atomic::replace_with_link(&next.join(&p.file), &out.join(p.live_file())).unwrap();
        }
        let live = Manifest::read(&out.join(MANIFEST_FILE)).unwrap();
        assert_eq!(live.generation, "gen1");
        for p in &live.partitions {
            assert_eq!(key_of(&out.join(&p.file)), "data 1");
        }
    }

    fn kept_ids(out: &Path) -> Vec<String> {
        generations(&history_dir(out, true)).iter().map(|(n, _)| id_of(n).to_owned()).collect()
    }

    /// A damaged kept generation is never published: asked for by name, the rollback is
    /// refused; by default, it is passed over for the one before. It used to be published as
    /// it was, and servers then had nothing they could load.
    #[test]
    fn a_damaged_generation_is_not_rolled_back_to() {
        let (_dir, out) = published(0..3);
        let history = generations(&history_dir(&out, true));
        let gen1 = history.iter().find(|(n, _)| id_of(n) == "gen1").unwrap();
        let file = gen1.1.join(Partition::file_name(0, "gen1"));
        let bytes = std::fs::read(&file).unwrap();
        // A copy of its own, so that the live files (links to the other kept ones) stay whole.
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
        let refused = rollback(&out, Some("gen1"), false).unwrap_err();
        assert!(
            matches!(&refused, RollbackError::Damaged { id, .. } if id == "gen1"),
            "{refused:?}"
        );
        assert_eq!(Manifest::read(&out.join(MANIFEST_FILE)).unwrap().generation, "gen2");
        let done = rollback(&out, None, false).unwrap();
        assert_eq!((done.from.as_str(), done.to.as_str()), ("gen2", "gen0"));
        assert_eq!(key_of(&out.join("part-000.snap")), "data 0");
    }

    /// A live generation that cannot be read (what a rollback is for) does not stop one: it
    /// is recognized by its files, links to its kept copy; or, with its manifest replaced by
    /// something else, the newest kept generation that reads is published.
    #[test]
    fn a_rollback_goes_on_when_the_live_generation_cannot_be_read() {
        let (_dir, out) = published(0..3);
        // Damaged in place: the kept copy, the same file, with it.
        let live_manifest = out.join(MANIFEST_FILE);
        std::fs::OpenOptions::new().write(true).open(&live_manifest).unwrap().set_len(3).unwrap();
        let done = rollback(&out, None, false).unwrap();
        assert_eq!((done.from.as_str(), done.to.as_str()), ("gen2", "gen1"));
        // Replaced by a file of no generation: which one is "before" is unknown (the newest
        // kept may be the one an earlier rollback left), so only `--to` says where to go.
        std::fs::remove_file(&live_manifest).unwrap();
        std::fs::write(&live_manifest, b"{").unwrap();
        let refused = rollback(&out, None, false).unwrap_err();
        assert!(refused.to_string().contains("--to"), "{refused}");
        assert_eq!(std::fs::read(&live_manifest).unwrap(), b"{", "nothing published");
        let done = rollback(&out, Some("gen0"), false).unwrap();
        assert_eq!((done.from.as_str(), done.to.as_str()), (UNREADABLE_LIVE, "gen0"));
        assert_eq!(Manifest::read(&live_manifest).unwrap().generation, "gen0");
    }

    /// A generation built under older rules than those in force is not rolled back to without
    /// `force`, nor one from before rules were recorded: it may hold what the newer rules
    /// withhold.
    #[test]
    fn a_generation_under_older_rules_is_rolled_back_to_only_when_forced() {
        let (_dir, out) = published(0..3);
        let rules = typeahead_core::normalize::RULES_VERSION;
        // The live generation's kept copy under the rules before today's, so that the floor
        // taken from it cannot be told apart from this build's by chance.
        for (id, older) in [("gen2", Some(rules - 1)), ("gen1", Some(rules - 2)), ("gen0", None)] {
            let (_, dir) = generations(&history_dir(&out, true))
                .into_iter()
                .find(|(n, _)| id_of(n) == id)
                .unwrap();
            let mut manifest = Manifest::read(&dir.join(MANIFEST_FILE)).unwrap();
            manifest.rules = older;
            std::fs::write(dir.join(MANIFEST_FILE), manifest.to_json().unwrap()).unwrap();
        }
        // Live, but unrecorded (an older binary published it): the newest rules the kept
        // generations recorded are in force, not none.
        let live_manifest = out.join(MANIFEST_FILE);
        let mut unrecorded = Manifest::read(&live_manifest).unwrap();
        unrecorded.rules = None;
        std::fs::remove_file(&live_manifest).unwrap();
        std::fs::write(&live_manifest, unrecorded.to_json().unwrap()).unwrap();
        let refused = rollback(&out, None, false).unwrap_err();
        let RollbackError::OlderRules(older) = &refused else { panic!("{refused:?}") };
        assert_eq!((older.id.as_str(), older.floor), ("gen1", rules - 1));
        assert!(refused.to_string().contains("--force"), "{refused}");
        let refused = rollback(&out, Some("gen0"), false).unwrap_err();
        assert!(
            matches!(&refused, RollbackError::OlderRules(o) if o.built.is_none()),
            "{refused:?}"
        );
        assert_eq!(Manifest::read(&out.join(MANIFEST_FILE)).unwrap().generation, "gen2");
        let done = rollback(&out, None, true).unwrap();
        assert_eq!((done.from.as_str(), done.to.as_str()), ("gen2", "gen1"));
        // Live now under older rules, the one before it is no step back.
        let live = Manifest::read(&out.join(MANIFEST_FILE)).unwrap();
        assert_eq!(live.rules, Some(rules - 2));
        let refused = rollback(&out, None, false).unwrap_err();
        assert!(matches!(&refused, RollbackError::OlderRules(o) if o.id == "gen0"), "{refused:?}");
    }

    /// Names follow the history's order when the clock steps back: a generation named by the
    /// clock sorted before its elders, so each build pruned its predecessor and kept the stale
    /// ones, and `rollback` found nothing before the live generation.
    #[test]
    fn a_clock_stepped_back_does_not_reorder_the_history() {
        let (_dir, out) = published(0..2);
        let history = history_dir(&out, true);
        // The kept generations, named a day ahead: what a clock a day fast wrote.
        for (name, path) in generations(&history) {
            let (time, id) = name.split_once('-').unwrap();
            let ahead = time.parse::<u128>().unwrap() + 86_400_000;
            std::fs::rename(&path, history.join(format!("{ahead:015}-{id}"))).unwrap();
        }
        for round in 2..4 {
            publish(&out, true, &write_generation(&out, round)).unwrap();
            prune(&history, 3, &format!("gen{round}"));
        }
        assert_eq!(kept_ids(&out), ["gen1", "gen2", "gen3"]);
        assert_eq!(rollback(&out, None, false).unwrap().to, "gen2");
    }

    /// A generation published elsewhere (a bucket) sorts after the newest there, whatever the
    /// builder's clock said; one already after it keeps its name.
    #[test]
    fn seal_after_orders_a_generation_after_the_newest_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let sealed = dir.path().join("000000000000005-abc");
        std::fs::create_dir(&sealed).unwrap();
        let renamed = seal_after(&sealed, 10).unwrap();
        assert_eq!(renamed, dir.path().join("000000000000011-abc"));
        assert!(renamed.is_dir() && !sealed.exists());
        assert_eq!(seal_after(&renamed, 10).unwrap(), renamed, "already after: unchanged");
        assert_eq!(time_of("000000000000011-abc"), Some(11));
    }

    /// A generation being pruned (an old one, or an older copy of the live one) is renamed
    /// out of the history first: a prune killed part-way through it left a kept generation with
    /// files missing, which held a keep slot and could be chosen by `rollback`. What such a
    /// kill leaves now is a pending directory: no kept generation, and deleted by the next
    /// build. (The order itself cannot be seen from a test run as root, whom no permission
    /// stops deleting: this checks what each step leaves.)
    #[test]
    fn a_pruned_generation_leaves_the_history_before_its_files_go() {
        let (_dir, out) = published(0..3);
        let history = history_dir(&out, true);
        // The live generation made again: a second copy, the newer.
        let copy = write_generation(&out, 2);
        prune(&history, 2, "gen2");
        assert_eq!(kept_ids(&out), ["gen1", "gen2"]);
        assert_eq!(generations(&history)[1].1, copy, "the newest copy is the one kept");
        let left: Vec<_> = std::fs::read_dir(&history).unwrap().flatten().collect();
        assert_eq!(left.len(), 2, "nothing of gen0 or of the older copy left");
        // What a prune killed after its rename leaves: gen1, half deleted.
        let (name, gen1) = generations(&history).remove(0);
        let half = history.join(format!("{name}-pending"));
        std::fs::rename(&gen1, &half).unwrap();
        std::fs::remove_file(half.join(MANIFEST_FILE)).unwrap();
        assert_eq!(kept_ids(&out), ["gen2"]);
        let refused = rollback(&out, None, false).unwrap_err();
        assert!(matches!(refused, RollbackError::NoTarget { .. }), "{refused:?}");
        pending_dir(&out, true).unwrap();
        assert!(!half.exists(), "the next build deletes what is left");
    }
}
