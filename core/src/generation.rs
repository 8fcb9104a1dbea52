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
//! - [`merge_top_k`] — the exact top-k of several partitions' top-k lists;
//! - [`merge_tiers`] — the same for tiered answers ([`crate::matching`]);
//! - [`check_rules`] — whether a generation may go live again where newer rules are in force.

use std::path::{Path, PathBuf};

use crate::manifest::{self, Manifest};
use crate::matching::{self, Match};
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

    /// The last hour of logs the generation counts: the manifest's, or the single snapshot's.
    pub fn watermark_hour(&self) -> Option<u32> {
        match &self.manifest {
            Some(m) => m.watermark_hour,
            None => self.snapshots.first().and_then(|s| s.meta().watermark_hour),
        }
    }

    /// The normalization and privacy rules it was built under: the manifest's, or the single
    /// snapshot's; `None` for a generation from before they were recorded.
    pub fn rules(&self) -> Option<u32> {
        match &self.manifest {
            Some(m) => m.rules,
            None => self.snapshots.first().and_then(|s| s.meta().rules),
        }
    }

    /// Whether `other` answers every request as this generation does: the same partitions
    /// (ranges and files' content, [`Snapshot::same_content`]), whenever either was built.
    pub fn same_content(&self, other: &Generation) -> bool {
        let ranges = |g: &Generation| {
            g.manifest.as_ref().map(|m| {
                m.partitions.iter().map(|p| (p.start.clone(), p.end.clone())).collect::<Vec<_>>()
            })
        };
        self.snapshots.len() == other.snapshots.len()
            && ranges(self) == ranges(other)
            && self.snapshots.iter().zip(&other.snapshots).all(|(a, b)| a.same_content(b))
    }

    /// The top `k` suggestions of a normalized prefix over every partition.
    pub fn suggest(&self, prefix: &str, k: usize) -> Vec<snapshot::Suggestion> {
        let lists = self.snapshots.iter().map(|s| s.suggest(prefix, k)).collect();
        merge_top_k(lists, k, |s| (s.score, s.key.as_str()))
    }
}

/// A generation built under older normalization and privacy rules than those in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "generation {id} was built under {}, older than the rules in force (rules {floor}): it may \
     hold queries the newer rules withhold (numbers, e-mail addresses, secrets); pass --force \
     to publish it anyway",
    named(.built)
)]
pub struct OlderRules {
    /// The generation.
    pub id: String,
    /// Its rules (`None`: not recorded).
    pub built: Option<u32>,
    /// The rules in force ([`rules_in_force`]).
    pub floor: u32,
}

fn named(rules: &Option<u32>) -> String {
    rules.map_or_else(
        || "unrecorded rules (a build from before they were recorded)".to_owned(),
        |r| format!("rules {r}"),
    )
}

/// The rules a generation must have been built under to go live again: the live generation's
/// (`live`, `None` when it recorded none or cannot be read), else the newest any of the
/// `others` recorded (the kept generations, the one waited for), else this build's
/// [`RULES_VERSION`](crate::normalize::RULES_VERSION).
///
/// Unrecorded does not mean old: the generations published just before rules were recorded
/// were built under the rules of that day, so an unrecorded live generation sets no lower
/// floor than a recorded one would. The kept generations count only then, a newer one than
/// the live generation (rolled back from) too; a recorded live generation alone is the floor,
/// so after a forced rollback to older rules the ones before it are no step back.
pub fn rules_in_force(live: Option<u32>, others: impl IntoIterator<Item = Option<u32>>) -> u32 {
    live.or_else(|| others.into_iter().flatten().max()).unwrap_or(crate::normalize::RULES_VERSION)
}

/// Whether generation `id`, built under rules `built`, may go live again where rules `floor`
/// are in force ([`rules_in_force`]).
///
/// Every rules version withholds at least what the one before did, so a generation built
/// under older rules can hold personal data today's withhold: a rollback, or an aggregator
/// falling back to a kept generation, would publish it again. Unrecorded rules count as older
/// than any (they cannot be told from the oldest).
pub fn check_rules(id: &str, built: Option<u32>, floor: u32) -> Result<(), OlderRules> {
    if built < Some(floor) {
        return Err(OlderRules { id: id.to_owned(), built, floor });
    }
    Ok(())
}

/// The first `k` of several partitions' tiered answers, in the tier order
/// ([`crate::matching::cmp`]): what one snapshot of all their keys answers.
///
/// Whether a key matches a tier depends on the key alone, and a partition fills its own answer
/// the same way the whole would: when the merged prefix tier is short, every partition's prefix
/// tier is complete and each lists at least as many words matches as the whole still needs (it
/// had no more prefix matches than the whole); the same holds one tier further. So ordering the
/// union by tier and taking `k` is exact — provided every partition that can hold a candidate
/// was asked (for the later tiers, not just the prefix's range).
pub fn merge_tiers<T>(
    lists: Vec<Vec<T>>,
    k: usize,
    order_of: impl Fn(&T) -> (Match, u8, f64, &str),
) -> Vec<T> {
    let mut all: Vec<T> = lists.into_iter().flatten().collect();
    all.sort_by(|a, b| {
        let ((ta, da, sa, ka), (tb, db, sb, kb)) = (order_of(a), order_of(b));
        matching::cmp((ta, da, sa, ka.as_bytes()), (tb, db, sb, kb.as_bytes()))
    });
    all.truncate(k);
    all
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

    #[test]
    fn older_rules_than_those_in_force_are_refused() {
        assert_eq!(check_rules("a", Some(9), 9), Ok(()));
        assert_eq!(check_rules("a", Some(10), 9), Ok(()));
        let refused = check_rules("a", Some(8), 9).unwrap_err();
        assert_eq!(refused, OlderRules { id: "a".into(), built: Some(8), floor: 9 });
        assert!(refused.to_string().contains("rules 8") && refused.to_string().contains("--force"));
        // Unrecorded rules are older than any recorded ones.
        let refused = check_rules("b", None, 1).unwrap_err();
        assert!(refused.to_string().contains("unrecorded"), "{refused}");
    }

    #[test]
    fn the_rules_in_force_are_the_live_ones_else_the_newest_recorded_else_this_builds() {
        use crate::normalize::RULES_VERSION;
        assert_eq!(rules_in_force(Some(7), [Some(8), None]), 7);
        assert_eq!(rules_in_force(None, [Some(7), None, Some(8)]), 8);
        assert_eq!(rules_in_force(None, [None, None]), RULES_VERSION);
        assert_eq!(rules_in_force(None, []), RULES_VERSION);
    }

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
            // The contract's order written out, not `merge_top_k` again (whose order would
            // then agree with itself): score descending, then key bytes ascending.
            let mut want = all;
            want.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
            want.truncate(k);
            prop_assert_eq!(merge_top_k(lists, k, rank_of), want);
        }

        /// The same for tiered answers: partition snapshots (random cuts, some keys blocked)
        /// answered and merged equal one snapshot of everything, for typed texts with typos and
        /// words in any order.
        #[test]
        fn merged_tiers_equal_one_snapshot(
            data in proptest::collection::btree_map("[ab]{1,3}( [abc]{1,4}){0,2}", 0u8..5, 1..80),
            cuts in proptest::collection::btree_set("[a-c]{1,3}", 0..4),
            typed in proptest::collection::vec("[abc ]{1,10}", 1..10),
            k in 1usize..11,
            blocked_every in 2usize..9,
        ) {
            use snapshot::{BuildInfo, Entry, Filter};
            let entries: Vec<Entry> = data
                .iter()
                .map(|(key, sc)| Entry { key: key.clone(), display: None, score: f64::from(*sc) })
                .collect();
            let open = |part: Vec<Entry>| {
                let (bytes, _) = snapshot::write(&part, &BuildInfo::default()).unwrap();
                Snapshot::from_bytes(bytes).unwrap()
            };
            let blocked: Vec<&String> = data.keys().step_by(blocked_every).collect();
            let hide = |key: &str| blocked.iter().any(|b| b.as_str() == key);
            let whole = open(entries.clone());
            let whole_filter = Filter::new(&whole, hide);
            let mut bounds: Vec<&str> = vec![""];
            bounds.extend(cuts.iter().map(String::as_str));
            let parts: Vec<Snapshot> = bounds
                .iter()
                .enumerate()
                .map(|(i, start)| {
                    let end = bounds.get(i + 1);
                    open(entries.iter().filter(|e| e.key.as_str() >= *start && end.is_none_or(|x| e.key.as_str() < *x)).cloned().collect())
                })
                .collect();
            let filters: Vec<Filter> = parts.iter().map(|p| Filter::new(p, hide)).collect();
            fn order(s: &snapshot::Suggestion) -> (Match, u8, f64, &str) {
                (s.tier, s.typos, s.score, s.key.as_str())
            }
            for text in typed {
                let p = crate::normalize::prefix(&text);
                let lists = parts
                    .iter()
                    .zip(&filters)
                    .map(|(s, f)| s.answer(&p, k, Some(f), matching::Tiers::All).suggestions)
                    .collect();
                let want = whole.answer(&p, k, Some(&whole_filter), matching::Tiers::All).suggestions;
                prop_assert_eq!(merge_tiers(lists, k, order), want, "p={:?}", p);
            }
        }
    }
}
