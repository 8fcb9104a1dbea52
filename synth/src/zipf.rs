//! The Zipf law of popularity: exact weights of a rank ([`zipf_weight`]) and draws of ranks
//! ([`ZipfRank`], `rand_distr`'s sampler counted from 0).

use rand::Rng as RandCore;
use rand_distr::{Distribution, Zipf};

use crate::Error;

/// `expm1(x) / x`, accurate near 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// Generalised harmonic number `H(n, s) = sum_{k=1..n} k^-s`: exact for the
/// first terms, Euler–Maclaurin for the tail (relative error < 1e-10), because
/// benchmarks normalise over tens of millions of ranks.
pub(crate) fn harmonic(n: usize, s: f64) -> f64 {
    const EXACT: usize = 32;
    if n <= 4 * EXACT {
        return (1..=n).map(|k| (k as f64).powf(-s)).sum();
    }
    let head: f64 = (1..EXACT).map(|k| (k as f64).powf(-s)).sum();
    let a = EXACT as f64;
    let b = n as f64;
    let l = (b / a).ln();
    let t = 1.0 - s;
    let integral = a.powf(t) * l * expm1_over_x(t * l);
    let f = |x: f64| x.powf(-s);
    let d1 = |x: f64| -s * x.powf(-s - 1.0);
    let d3 = |x: f64| -s * (s + 1.0) * (s + 2.0) * x.powf(-s - 3.0);
    head + integral + (f(a) + f(b)) / 2.0 + (d1(b) - d1(a)) / 12.0 - (d3(b) - d3(a)) / 720.0
}

thread_local! {
    static HARMONIC_CACHE: std::cell::Cell<(usize, u64, f64)> =
        const { std::cell::Cell::new((0, 0, 0.0)) };
}

/// `H(n, s)`, memoising the last value per thread (benchmarks call
/// [`zipf_weight`] for every rank with the same `n` and exponent).
fn harmonic_cached(n: usize, s: f64) -> f64 {
    HARMONIC_CACHE.with(|c| {
        let (cn, cs, h) = c.get();
        if cn == n && cs == s.to_bits() && n != 0 {
            return h;
        }
        let h = harmonic(n, s);
        c.set((n, s.to_bits(), h));
        h
    })
}

/// Probability `p(rank)` of the item with popularity rank `rank` (0-based)
/// under the Zipf law with the given exponent over `n` items:
/// `(rank + 1)^-exponent / H(n, exponent)`.
///
/// The expected count of that item when `total` events are drawn is
/// `total as f64 * zipf_weight(rank, n, exponent)`. Returns 0 for
/// `rank >= n`. O(1) amortised (the normaliser is cached per thread).
pub fn zipf_weight(rank: usize, n: usize, exponent: f64) -> f64 {
    if rank >= n {
        return 0.0;
    }
    ((rank + 1) as f64).powf(-exponent) / harmonic_cached(n, exponent)
}

/// Popularity ranks `0..n` drawn from the Zipf law `p(r) ∝ (r + 1)^-exponent`:
/// [`rand_distr::Zipf`], which draws `1..=n` as floats, as 0-based indices.
#[derive(Debug, Clone, Copy)]
pub struct ZipfRank {
    zipf: Zipf<f64>,
    n: usize,
}

impl ZipfRank {
    /// The law over `n` items; an error if `n == 0` or `exponent` is negative or NaN.
    pub fn new(n: usize, exponent: f64) -> Result<Self, Error> {
        let zipf =
            Zipf::new(n as f64, exponent).map_err(|source| Error::Zipf { n, exponent, source })?;
        Ok(ZipfRank { zipf, n })
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Always false (a law has at least one item).
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Distribution<usize> for ZipfRank {
    fn sample<R: RandCore + ?Sized>(&self, rng: &mut R) -> usize {
        // The draw is a whole number in [1, n]; the clamp only guards float rounding near n.
        (self.zipf.sample(rng) as usize).clamp(1, self.n) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng;
    use crate::vocab::VOCAB_SIZE;
    use rand::RngExt;

    #[test]
    fn zipf_rank_follows_the_law() {
        let n = 1_000;
        let z = ZipfRank::new(n, 1.0).expect("valid law");
        let mut rng = rng(11);
        let draws = 400_000;
        let mut counts = vec![0u32; n];
        for _ in 0..draws {
            counts[rng.sample(z)] += 1;
        }
        let p0 = f64::from(counts[0]) / f64::from(draws);
        let expected = zipf_weight(0, n, 1.0);
        assert!((p0 / expected - 1.0).abs() < 0.05, "{p0} vs {expected}");
        let ratio = f64::from(counts[0]) / f64::from(counts[100].max(1));
        assert!((60.0..160.0).contains(&ratio), "rank0/rank100 = {ratio}");
        let half = f64::from(counts[1]) / f64::from(counts[0]);
        assert!((half - 0.5).abs() < 0.05, "{half}");
        assert!(counts[..10].iter().sum::<u32>() > counts[500..].iter().sum::<u32>());

        // Other exponents and edge cases.
        let uniform = ZipfRank::new(10, 0.0).expect("valid law");
        let mut c = [0u32; 10];
        for _ in 0..50_000 {
            c[rng.sample(uniform)] += 1;
        }
        assert!(c.iter().all(|&x| (4_000..6_000).contains(&x)), "{c:?}");
        let steep = ZipfRank::new(1_000_000, 2.0).expect("valid law");
        let top = (0..10_000).filter(|_| rng.sample(steep) == 0).count();
        assert!((5_600..6_600).contains(&top), "{top}"); // 1/zeta(2) = 0.608
        let one = ZipfRank::new(1, 1.0).expect("valid law");
        assert_eq!(rng.sample(one), 0);
        assert_eq!(one.len(), 1);
        let big = ZipfRank::new(VOCAB_SIZE, 1.0).expect("valid law");
        assert!((0..10_000).all(|_| rng.sample(big) < VOCAB_SIZE));
    }

    #[test]
    fn invalid_laws_are_errors() {
        assert!(matches!(ZipfRank::new(0, 1.0), Err(Error::Zipf { n: 0, .. })));
        assert!(ZipfRank::new(10, -1.0).is_err());
        assert!(ZipfRank::new(10, f64::NAN).is_err());
    }

    #[test]
    fn zipf_weight_is_normalised() {
        for (n, s) in [(1usize, 1.0), (100, 1.0), (5_000, 1.0), (5_000, 0.7), (200_000, 1.2)] {
            let exact: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
            assert!((harmonic(n, s) / exact - 1.0).abs() < 1e-9, "H({n},{s})");
            let total: f64 = (0..n).map(|r| zipf_weight(r, n, s)).sum();
            assert!((total - 1.0).abs() < 1e-9, "{total}");
        }
        assert_eq!(zipf_weight(10, 10, 1.0), 0.0);
        assert!(zipf_weight(0, 100, 1.0) > 10.0 * zipf_weight(20, 100, 1.0));
    }
}
