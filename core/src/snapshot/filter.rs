//! Serve-time filtering: hide blocked completions and still answer the exact top-k of the rest.
//!
//! A stored top-k list that contains a blocked completion is no longer the top-k of what may be
//! shown: the next best completions of that subtree must move up. A [`Filter`] is computed once
//! per (snapshot, blocklist) pair, off the request path: it marks every blocked key position and
//! recomputes, by scanning the node's key range, the list of exactly those nodes whose stored
//! list holds a blocked completion. Lookups then stay as cheap as unfiltered ones: a list node
//! reads either its stored list or its replacement, and small subtrees skip blocked positions
//! while they are enumerated.

use std::collections::{BinaryHeap, HashMap};

use super::Snapshot;

/// The blocked positions of one snapshot and the replacement lists they require.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    snapshot_id: String,
    blocked: Vec<u64>,
    blocked_count: usize,
    overlay: HashMap<usize, Vec<(u32, u32)>>,
}

impl Filter {
    /// Computes the filter of `snapshot` for the keys that `blocks` rejects. Every key is
    /// tested, on all cores: at 10M completions this is the bulk of a blocklist update.
    pub fn new(snapshot: &Snapshot, blocks: impl Fn(&str) -> bool + Sync) -> Filter {
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        let buckets = snapshot.bucket_count();
        let per_thread = buckets.div_ceil(threads).max(1);
        let found: Vec<Vec<u32>> = std::thread::scope(|scope| {
            let tasks: Vec<_> = (0..buckets)
                .step_by(per_thread)
                .map(|start| {
                    let blocks = &blocks;
                    scope.spawn(move || {
                        let mut hits = Vec::new();
                        let end = (start + per_thread).min(buckets);
                        snapshot.for_each_key(start..end, |pos, key, _| {
                            if blocks(key) {
                                hits.push(pos);
                            }
                        });
                        hits
                    })
                })
                .collect();
            tasks
                .into_iter()
                .map(|t| t.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        let mut blocked = vec![0u64; snapshot.len().div_ceil(64)];
        let mut blocked_count = 0;
        for pos in found.into_iter().flatten() {
            blocked[pos as usize / 64] |= 1 << (pos % 64);
            blocked_count += 1;
        }
        let mut filter = Filter {
            snapshot_id: snapshot.id().to_owned(),
            blocked,
            blocked_count,
            overlay: HashMap::new(),
        };
        if blocked_count > 0 {
            filter.overlay = filter.replacement_lists(snapshot);
        }
        filter
    }

    /// The id of the snapshot this filter belongs to; using it with another snapshot is a bug.
    pub fn snapshot_id(&self) -> &str {
        &self.snapshot_id
    }

    /// Number of completions hidden.
    pub fn blocked_count(&self) -> usize {
        self.blocked_count
    }

    /// Number of stored lists that had to be recomputed.
    pub fn replaced_lists(&self) -> usize {
        self.overlay.len()
    }

    pub(super) fn is_blocked(&self, pos: u32) -> bool {
        let pos = pos as usize;
        self.blocked.get(pos / 64).is_some_and(|w| w & (1 << (pos % 64)) != 0)
    }

    /// The positions of `range` that are not blocked, in order. Whole words of the bitmap at a
    /// time: under a blocked word most positions of a replaced list's range are blocked.
    fn unblocked(&self, range: std::ops::Range<u32>) -> impl Iterator<Item = u32> + '_ {
        let (start, end) = (range.start as usize, range.end as usize);
        (start / 64..end.div_ceil(64)).flat_map(move |w| {
            let base = w * 64;
            // Ones where a position is free and inside the range.
            let mut free = !self.blocked.get(w).copied().unwrap_or(0);
            if base < start {
                free &= !0u64 << (start - base);
            }
            if end < base + 64 {
                free &= (1u64 << (end - base)) - 1;
            }
            std::iter::from_fn(move || {
                (free != 0).then(|| {
                    let bit = free.trailing_zeros();
                    free &= free - 1;
                    (base + bit as usize) as u32
                })
            })
        })
    }

    pub(super) fn overlay(&self, node: usize) -> Option<&[(u32, u32)]> {
        self.overlay.get(&node).map(Vec::as_slice)
    }

    fn replacement_lists(&self, snapshot: &Snapshot) -> HashMap<usize, Vec<(u32, u32)>> {
        let mut buf = Vec::new();
        let mut overlay = HashMap::new();
        // The node index yields its paths in key order, so each starts at or after the last.
        let mut lo = 0;
        for (path, node) in snapshot.node_paths() {
            if !snapshot.node_list(node).any(|(p, _)| self.is_blocked(p)) {
                continue;
            }
            let range = snapshot.path_range(&path, lo, &mut buf);
            lo = range.start;
            overlay.insert(node, self.top_unblocked(snapshot, range));
        }
        overlay
    }

    /// The best `max_k` unblocked (position, rank) pairs of a key range, best first.
    fn top_unblocked(&self, snapshot: &Snapshot, range: std::ops::Range<u32>) -> Vec<(u32, u32)> {
        let k = snapshot.max_k();
        let mut heap: BinaryHeap<(u32, u32)> = BinaryHeap::with_capacity(k + 1);
        for pos in self.unblocked(range) {
            let rank = snapshot.rank_of(pos);
            // Most positions of a large range rank below the k best so far: one comparison.
            if heap.len() == k && heap.peek().is_some_and(|&(worst, _)| rank > worst) {
                continue;
            }
            heap.push((rank, pos));
            if heap.len() > k {
                heap.pop();
            }
        }
        heap.into_sorted_vec().into_iter().map(|(rank, pos)| (pos, rank)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn unblocked_positions_are_those_of_the_bitmap(
            blocked in proptest::collection::vec(any::<bool>(), 0..300),
            a in 0u32..320,
            b in 0u32..320,
        ) {
            let mut filter = Filter { blocked: vec![0; blocked.len().div_ceil(64)], ..Filter::default() };
            for (pos, _) in blocked.iter().enumerate().filter(|&(_, &b)| b) {
                filter.blocked[pos / 64] |= 1 << (pos % 64);
            }
            // Ranges may reach past the bitmap (positions there are not blocked) but are always
            // inside the snapshot in use; keep them within it.
            let len = blocked.len() as u32;
            let range = a.min(b).min(len)..a.max(b).min(len);
            let expected: Vec<u32> = range.clone().filter(|&p| !blocked[p as usize]).collect();
            prop_assert_eq!(filter.unblocked(range.clone()).collect::<Vec<_>>(), expected);
            for p in range {
                prop_assert_eq!(filter.is_blocked(p), blocked[p as usize]);
            }
        }
    }
}
