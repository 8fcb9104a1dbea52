//! Searches over a monotone predicate on indices: the binary search, a galloping one for
//! answers expected near a known start (a skip that usually lands close, or paths visited in
//! key order), and a sampled one for arrays too large to stay in cache.

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

/// [`partition_point`] over `0..n` in two steps: first over every `stride`-th index
/// (`sampled(i)` is `pred(i * stride)`, asked of a small array that stays in cache), then
/// within the one stride that holds the answer, after `touch` has been told which indices
/// those are (to load them all at once rather than one miss per probe).
pub(super) fn sampled_point(
    n: usize,
    stride: usize,
    sampled: impl Fn(usize) -> bool,
    touch: impl FnOnce(std::ops::Range<usize>),
    pred: impl Fn(usize) -> bool,
) -> usize {
    let samples = n.div_ceil(stride);
    // Samples below: the answer is past the last of them and at most `stride` further.
    let below = partition_point(samples, sampled);
    if below == 0 {
        return 0;
    }
    let lo = (below - 1) * stride + 1;
    let hi = (below * stride).min(n);
    touch(lo..hi);
    lo + partition_point(hi.saturating_sub(lo), |i| pred(lo + i))
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

        #[test]
        fn sampling_finds_the_split(n in 0usize..300, split in 0usize..300, stride in 1usize..70) {
            let pred = |i: usize| i < split;
            let found = sampled_point(n, stride, |i| pred(i * stride), |r| assert!(r.end <= n), pred);
            prop_assert_eq!(found, split.min(n));
        }
    }
}
