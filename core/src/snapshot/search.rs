//! Searches over a monotone predicate on indices: the binary search, and a galloping one for
//! answers expected near a known start (a skip that usually lands close, or paths visited in
//! key order).

/// The first index in `0..n` for which `pred` is false (`pred` is true, then false).
pub(super) fn partition_point(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) { lo = mid + 1 } else { hi = mid }
    }
    lo
}

/// The first index in `from..n` for which `pred` is false, `pred` being true, then false, on
/// `0..n`, and true below `from`. Gallops from `from` (steps of 1, 2, 4, ...), then searches the
/// last step: about twice the logarithm of the distance to the answer, instead of the
/// logarithm of `n` in probes spread over the whole range.
pub(super) fn gallop_point(from: usize, n: usize, pred: impl Fn(usize) -> bool) -> usize {
    if from >= n || !pred(from) {
        return from.min(n);
    }
    // Invariant: pred(lo).
    let (mut lo, mut step) = (from, 1);
    while lo + step < n && pred(lo + step) {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(n);
    lo + 1 + partition_point(hi - lo - 1, |i| pred(lo + 1 + i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn both_find_the_split(n in 0usize..300, split in 0usize..300, from in 0usize..300) {
            let pred = |i: usize| i < split;
            prop_assert_eq!(partition_point(n, pred), split.min(n));
            // Galloping may start anywhere at or below the split.
            prop_assert_eq!(gallop_point(from.min(split), n, pred), split.min(n));
        }
    }
}
