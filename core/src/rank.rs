//! The one ranking order of suggestions: score descending, then key bytewise ascending.
//!
//! Every place that orders suggestions — the snapshot writer numbering completions, the oracle in
//! tests, the aggregator merging partitions — calls [`cmp`], so ties break identically everywhere
//! and answers are deterministic.

use std::cmp::Ordering;

/// Compares two completions: higher score first; equal scores by key bytes, smaller first.
pub fn cmp(a_score: f64, a_key: &[u8], b_score: f64, b_key: &[u8]) -> Ordering {
    b_score.total_cmp(&a_score).then_with(|| a_key.cmp(b_key))
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
}
