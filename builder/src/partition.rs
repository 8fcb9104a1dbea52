//! Splitting the key space into contiguous prefix ranges, one snapshot per range.
//!
//! The seed design's "partition based on the maximum capacity of the server": walk the keys in
//! order and cut where a partition is full, instead of cutting at first letters (which leaves
//! "s" ten times larger than "x"). Capacity is estimated per completion from what the snapshot
//! stores for it (its key, its display text, and a fixed overhead for ranks, indexes and lists),
//! which tracks real snapshot sizes closely enough to balance them.

use std::ops::Range;

use typeahead_core::snapshot::Entry;

/// How to split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitioning {
    /// Exactly this many partitions of about equal size.
    Count(usize),
    /// As many partitions as needed so that none exceeds this many (estimated) bytes.
    MaxBytes(u64),
}

/// Estimated snapshot bytes of one completion beyond its text: packed rank, bucket and node
/// indexes, list entries (about 6 bytes at 10M completions).
const OVERHEAD_BYTES: u64 = 6;

fn cost(e: &Entry) -> u64 {
    (e.key.len() + e.display.as_ref().map_or(0, String::len)) as u64 + OVERHEAD_BYTES
}

/// Why entries cannot be split as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// `--partitions 0`.
    #[error("--partitions must be at least 1")]
    Zero,
    /// More partitions than completions (every partition holds at least one).
    #[error("cannot split {completions} completions into {partitions} partitions")]
    TooMany {
        /// Completions in the build.
        completions: usize,
        /// Partitions asked for.
        partitions: usize,
    },
}

/// Splits sorted entries into contiguous, non-empty ranges, at least one.
///
/// A build in which nothing is servable yet (every key still held back by `--min-users`, say)
/// gets one empty range: an empty generation is published and the build's state is saved, so
/// the held keys go on accumulating users. Failing instead would throw that state away hour
/// after hour, and the keys would never become servable.
pub fn split(entries: &[Entry], how: Partitioning) -> Result<Vec<Range<usize>>, PartitionError> {
    match how {
        Partitioning::Count(0) => Err(PartitionError::Zero),
        Partitioning::Count(n) if n > entries.len().max(1) => {
            Err(PartitionError::TooMany { completions: entries.len(), partitions: n })
        }
        Partitioning::Count(n) => Ok(by_count(entries, n)),
        Partitioning::MaxBytes(max) => Ok(by_capacity(entries, max)),
    }
}

/// `n` ranges of about `total / n` bytes each; every range keeps at least one entry (with no
/// entries, `n` is 1 and the range is empty).
fn by_count(entries: &[Entry], n: usize) -> Vec<Range<usize>> {
    let total: u64 = entries.iter().map(cost).sum();
    let mut ranges = Vec::with_capacity(n);
    let (mut start, mut done) = (0, 0u64);
    for (i, e) in entries.iter().enumerate() {
        let parts_after_this = n - ranges.len() - 1;
        if parts_after_this == 0 {
            break;
        }
        done += cost(e);
        let reached_share = done * n as u64 >= total * (ranges.len() as u64 + 1);
        let just_enough_left = entries.len() - i - 1 == parts_after_this;
        if reached_share || just_enough_left {
            ranges.push(start..i + 1);
            start = i + 1;
        }
    }
    ranges.push(start..entries.len());
    ranges
}

/// Fills each range up to `max` bytes and opens the next one (a single entry larger than
/// `max` gets a range of its own; no entries, one empty range).
fn by_capacity(entries: &[Entry], max: u64) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let (mut start, mut size) = (0, 0u64);
    for (i, e) in entries.iter().enumerate() {
        let c = cost(e);
        if size > 0 && size + c > max {
            ranges.push(start..i);
            (start, size) = (i, 0);
        }
        size += c;
    }
    ranges.push(start..entries.len());
    ranges
}

/// The shortest boundary `b` with `prev < b <= next`: the start of the partition whose first
/// key is `next` ("disney r" rather than "disney resort reservations"), so ranges read like the
/// seed's `AABD-BXA`. Cut at a character boundary so boundaries stay valid UTF-8.
pub fn separator(prev: &str, next: &str) -> String {
    let shared = prev.bytes().zip(next.bytes()).take_while(|(a, b)| a == b).count();
    let mut end = (shared + 1).min(next.len());
    while !next.is_char_boundary(end) {
        end += 1;
    }
    next[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entries(n: usize) -> Vec<Entry> {
        (0..n).map(|i| Entry { key: format!("k{i:05}"), display: None, score: 1.0 }).collect()
    }

    #[test]
    fn equal_counts_balance_bytes() {
        let e = entries(1000);
        let r = split(&e, Partitioning::Count(4)).unwrap();
        assert_eq!(r.len(), 4);
        assert!(r.iter().all(|r| (240..=260).contains(&r.len())), "{r:?}");
        assert!(split(&e, Partitioning::Count(1001)).is_err());
    }

    #[test]
    fn nothing_servable_is_one_empty_range() {
        let one_empty = |r: Vec<Range<usize>>| r.len() == 1 && r[0] == (0..0);
        assert!(split(&[], Partitioning::Count(1)).is_ok_and(one_empty));
        assert!(split(&[], Partitioning::MaxBytes(100)).is_ok_and(one_empty));
        assert!(split(&[], Partitioning::Count(2)).is_err());
    }

    #[test]
    fn separators_are_short_and_between() {
        assert_eq!(separator("disney resort", "disney world"), "disney w");
        assert_eq!(separator("abc", "abcd"), "abcd");
        assert_eq!(separator("caf", "café"), "café");
        assert_eq!(separator("a", "b"), "b");
    }

    #[test]
    fn capacity_decides_the_count() {
        let e = entries(1000); // 12 bytes each
        let r = split(&e, Partitioning::MaxBytes(1200)).unwrap();
        assert_eq!(r.len(), 10);
        assert!(r.iter().all(|r| r.len() == 100));
    }

    proptest! {
        #[test]
        fn separator_lies_between(mut pair in proptest::collection::btree_set("[aé]{0,5}", 2..3)) {
            let next = pair.pop_last().unwrap();
            let prev = pair.pop_last().unwrap();
            let s = separator(&prev, &next);
            prop_assert!(prev.as_str() < s.as_str() && s.as_str() <= next.as_str());
        }

        #[test]
        fn ranges_are_contiguous_non_empty_and_cover_everything(n in 1usize..300, parts in 1usize..12, max in 1u64..500) {
            let e = entries(n);
            for how in [Partitioning::Count(parts.min(n)), Partitioning::MaxBytes(max)] {
                let r = split(&e, how).unwrap();
                prop_assert_eq!(r.first().unwrap().start, 0);
                prop_assert_eq!(r.last().unwrap().end, n);
                prop_assert!(r.windows(2).all(|w| w[0].end == w[1].start));
                prop_assert!(r.iter().all(|x| !x.is_empty()));
                if let Partitioning::Count(p) = how { prop_assert_eq!(r.len(), p); }
                if let Partitioning::MaxBytes(m) = how {
                    for x in &r {
                        let size: u64 = e[x.clone()].iter().map(cost).sum();
                        prop_assert!(size <= m || x.len() == 1, "{size} > {m}");
                    }
                }
            }
        }
    }
}
