//! The one ranking order of suggestions: score descending, then key bytewise ascending.
//!
//! Every production path that orders suggestions — the snapshot writer numbering completions,
//! the aggregator merging partitions — calls [`cmp`], so ties break identically everywhere and
//! answers are deterministic. (Test oracles restate the order on purpose, so that a mistake
//! here cannot hide in both.)

use std::cmp::Ordering;

/// Compares two completions: higher score first; equal scores by key bytes, smaller first.
pub fn cmp(a_score: f64, a_key: &[u8], b_score: f64, b_key: &[u8]) -> Ordering {
    b_score.total_cmp(&a_score).then_with(|| a_key.cmp(b_key))
}

/// [`cmp`] for completions numbered in key order (`a_pos < b_pos` exactly when `a`'s key is
/// smaller): the tie-break compares the numbers instead of the keys. The snapshot writer ranks
/// millions of completions with it, many of them tied at the lowest scores.
pub fn cmp_by_position(a_score: f64, a_pos: u32, b_score: f64, b_pos: u32) -> Ordering {
    b_score.total_cmp(&a_score).then(a_pos.cmp(&b_pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_score_then_key() {
        assert_eq!(cmp(2.0, b"b", 1.0, b"a"), Ordering::Less);
        assert_eq!(cmp(1.0, b"a", 1.0, b"b"), Ordering::Less);
        assert_eq!(cmp(1.0, b"b", 1.0, b"b"), Ordering::Equal);
        assert_eq!(cmp(0.5, b"a", 1.0, b"z"), Ordering::Greater);
    }

    #[test]
    fn positions_stand_in_for_sorted_keys() {
        let keys: [(&[u8], f64); 4] = [(b"a", 1.0), (b"b", 2.0), (b"c", 1.0), (b"d", 2.0)];
        for (i, &(ka, sa)) in keys.iter().enumerate() {
            for (j, &(kb, sb)) in keys.iter().enumerate() {
                assert_eq!(cmp_by_position(sa, i as u32, sb, j as u32), cmp(sa, ka, sb, kb));
            }
        }
    }
}
