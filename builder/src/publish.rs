//! Publishing snapshot generations where servers pick them up, keeping the last few for
//! rollback.
//!
//! A build writes its files into a new directory of the history first
//! (`OUT/generations/<time>-<id>/` for a partitioned build, `OUT.generations/<time>-<id>/` for a
//! single snapshot file), then publishes them: each live file (`OUT/part-NNN.snap`, or `OUT`)
//! becomes a hard link to the generation's file, replaced atomically, and the manifest goes last.
//! Servers watching the live paths reload; the aggregator follows the manifest. Rolling back
//! publishes an older generation's files the same way. Only the newest `keep` generations stay.

use std::path::{Path, PathBuf};

use typeahead_core::atomic;

/// File name of the manifest of a partitioned build.
pub const MANIFEST_FILE: &str = "manifest.json";

/// Where the generations of `out` are kept.
pub fn history_dir(out: &Path, partitioned: bool) -> PathBuf {
    if partitioned {
        out.join("generations")
    } else {
        let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        out.with_file_name(format!("{name}.generations"))
    }
}

/// A directory for a generation being written (renamed once its id is known).
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

/// Gives a written generation its final name `<unix milliseconds>-<id>` (sortable by age).
pub fn seal(pending: &Path, id: &str) -> std::io::Result<PathBuf> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let dir = pending.with_file_name(format!("{now:015}-{id}"));
    std::fs::rename(pending, &dir)?;
    Ok(dir)
}

/// Publishes the generation in `dir`: every file it holds becomes the live file of the same name
/// (for a single snapshot: the `out` file itself), the manifest last.
pub fn publish(out: &Path, partitioned: bool, dir: &Path) -> std::io::Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort_by_key(|n| (n == MANIFEST_FILE, n.clone()));
    for name in names {
        let live = if partitioned { out.join(&name) } else { out.to_owned() };
        atomic::replace_with_link(&dir.join(&name), &live)?;
    }
    Ok(())
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

/// Removes all but the newest `keep` generations (never the one named `live`).
pub fn prune(history: &Path, keep: usize, live: &str) {
    let all = generations(history);
    let excess = all.len().saturating_sub(keep.max(1));
    for (name, path) in all.into_iter().take(excess) {
        if id_of(&name) != live {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_links_files_and_prunes_history() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("serve");
        std::fs::create_dir_all(&out).unwrap();
        let mut ids = Vec::new();
        for round in 0..4 {
            let pending = pending_dir(&out, true).unwrap();
            std::fs::write(pending.join("part-000.snap"), format!("data {round}")).unwrap();
            std::fs::write(pending.join(MANIFEST_FILE), format!("manifest {round}")).unwrap();
            let sealed = seal(&pending, &format!("gen{round}")).unwrap();
            publish(&out, true, &sealed).unwrap();
            ids.push(format!("gen{round}"));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(std::fs::read_to_string(out.join("part-000.snap")).unwrap(), "data 3");
        assert_eq!(std::fs::read_to_string(out.join(MANIFEST_FILE)).unwrap(), "manifest 3");
        prune(&history_dir(&out, true), 2, "gen3");
        let kept: Vec<String> = generations(&history_dir(&out, true))
            .iter()
            .map(|(n, _)| id_of(n).to_owned())
            .collect();
        assert!(kept.len() <= 2 && kept.contains(&"gen3".to_owned()), "{kept:?}");
        // Rolling back = publishing an older generation.
        let older = generations(&history_dir(&out, true));
        publish(&out, true, &older[0].1).unwrap();
        assert_ne!(std::fs::read_to_string(out.join("part-000.snap")).unwrap(), "data 3");
    }
}
