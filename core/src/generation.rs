//! A generation: everything one build published, as one unit — either a single snapshot file,
//! or a directory whose [`MANIFEST_FILE`] names one snapshot per key range.
//!
//! Three parts of the system handle whole generations: the builder's regression gate compares
//! the live one with a candidate, `typeahead rollback` finds which one is live, and the
//! aggregator merges the partitions' answers into the answer of the whole. They share this
//! module so that "where is the manifest", "how is a generation opened" and "how are partition
//! answers merged" each have one answer:
//!
//! - [`MANIFEST_FILE`] — the manifest's file name inside a generation directory;
//! - [`Generation::open`] — a snapshot file or a manifest directory, loaded and verified;
//! - [`merge_top_k`] — the exact top-k of several partitions' top-k lists.

use std::path::{Path, PathBuf};

use crate::manifest::{self, Manifest};
use crate::rank;
use crate::snapshot::{self, Snapshot};

/// The manifest's file name inside a partitioned generation's directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The manifest path of the generation directory `dir`.
pub fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(MANIFEST_FILE)
}

/// Why a generation cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The manifest is unreadable or malformed.
    #[error(transparent)]
    Manifest(#[from] manifest::Error),
    /// A snapshot of the generation failed to load or verify.
    #[error("snapshot {path}")]
    Snapshot {
        /// The snapshot file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: snapshot::Error,
    },
}

/// One generation's snapshots (one, or one per partition), loaded and verified.
#[derive(Debug)]
pub struct Generation {
    /// The manifest, for a partitioned generation.
    pub manifest: Option<Manifest>,
    /// The snapshots, in key-range order.
    pub snapshots: Vec<Snapshot>,
}

impl Generation {
    /// Opens a generation: a directory with a [`MANIFEST_FILE`], or a snapshot file.
    pub fn open(path: &Path) -> Result<Generation, Error> {
        let open = |path: PathBuf| {
            Snapshot::open(&path).map_err(|source| Error::Snapshot { path, source })
        };
        if path.is_dir() {
            let manifest = Manifest::read(&manifest_path(path))?;
            let snapshots = manifest
                .partitions
                .iter()
                .map(|p| open(path.join(&p.file)))
                .collect::<Result<_, _>>()?;
            Ok(Generation { manifest: Some(manifest), snapshots })
        } else {
            Ok(Generation { manifest: None, snapshots: vec![open(path.to_owned())?] })
        }
    }

    /// The generation's id: the manifest's `generation`, or the single snapshot's id.
    pub fn id(&self) -> &str {
        match &self.manifest {
            Some(m) => &m.generation,
            None => self.snapshots.first().map_or("", Snapshot::id),
        }
    }

    /// The top `k` suggestions of a normalized prefix over every partition.
    pub fn suggest(&self, prefix: &str, k: usize) -> Vec<snapshot::Suggestion> {
        let lists = self.snapshots.iter().map(|s| s.suggest(prefix, k)).collect();
        merge_top_k(lists, k, |s| (s.score, s.key.as_str()))
    }
}

/// The best `k` of several partitions' answers, in the one ranking order ([`crate::rank`]).
///
/// Each partition answers the exact top-k of its own key range, so the top-k of the union lies
/// within the union of those lists: ordering them by rank and taking `k` gives exactly what one
/// snapshot of all the data answers. `rank_of` gives an item's score and key.
pub fn merge_top_k<T>(lists: Vec<Vec<T>>, k: usize, rank_of: impl Fn(&T) -> (f64, &str)) -> Vec<T> {
    let mut all: Vec<T> = lists.into_iter().flatten().collect();
    all.sort_by(|a, b| {
        let ((sa, ka), (sb, kb)) = (rank_of(a), rank_of(b));
        rank::cmp(sa, ka.as_bytes(), sb, kb.as_bytes())
    });
    all.truncate(k);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rank_of(x: &(String, f64)) -> (f64, &str) {
        (x.1, x.0.as_str())
    }

    #[test]
    fn ties_break_by_key() {
        let merged =
            merge_top_k(vec![vec![("b", 1.0)], vec![("a", 1.0), ("c", 2.0)]], 2, |x| (x.1, x.0));
        assert_eq!(merged, [("c", 2.0), ("a", 1.0)]);
    }

    proptest! {
        /// Splitting any data into ranges, answering per range and merging equals answering
        /// over all of it.
        #[test]
        fn merge_of_partition_top_ks_equals_global_top_k(
            data in proptest::collection::btree_map("[a-d]{1,4}", 0u8..5, 0..60),
            cuts in proptest::collection::btree_set("[a-d]{1,2}", 0..4),
            k in 1usize..12,
        ) {
            let all: Vec<(String, f64)> = data.iter().map(|(key, sc)| (key.clone(), f64::from(*sc))).collect();
            let mut bounds: Vec<&str> = vec![""];
            bounds.extend(cuts.iter().map(String::as_str));
            let lists: Vec<Vec<(String, f64)>> = bounds
                .iter()
                .enumerate()
                .map(|(i, start)| {
                    let end = bounds.get(i + 1);
                    let part: Vec<(String, f64)> = all
                        .iter()
                        .filter(|x| x.0.as_str() >= *start && end.is_none_or(|e| x.0.as_str() < *e))
                        .cloned()
                        .collect();
                    merge_top_k(vec![part], k, rank_of)
                })
                .collect();
            prop_assert_eq!(merge_top_k(lists, k, rank_of), merge_top_k(vec![all], k, rank_of));
        }
    }
}
