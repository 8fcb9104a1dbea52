//! The one random number generator of the project's synthetic data, fuzz harness and tests.

use rand::SeedableRng;

/// The generator: ChaCha8, because it is seedable, fast, and, unlike `StdRng` and `SmallRng`,
/// documented as portable and value-stable, so a seed keeps naming the same data. Sampling
/// goes through `rand::RngExt` (re-exported as [`crate::rand`]).
pub type Rng = rand::rngs::ChaCha8Rng;

/// A generator seeded from one number (every seed, 0 included, gives a good stream).
pub fn rng(seed: u64) -> Rng {
    Rng::seed_from_u64(seed)
}

/// The parts of the model that draw from separate streams, so that generating one part (an
/// hour of log, a user's favourites) never depends on how much of another was generated.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stream {
    Vocabulary = 1,
    Accent,
    Queries,
    Users,
    Trend,
    Favorite,
    Hour,
}

/// The stream of `part` for `seed` and up to two indices (hour, user, …). ChaCha's key is the
/// whole 256 bits, so distinct labels give independent streams without a hand-made mixer.
pub(crate) fn stream(seed: u64, part: Stream, a: u64, b: u64) -> Rng {
    let mut key = [0u8; 32];
    for (chunk, word) in key.chunks_exact_mut(8).zip([seed, part as u64, a, b]) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    Rng::from_seed(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng as _, RngExt};

    #[test]
    fn rng_is_deterministic_and_ranges_are_uniform() {
        let mut a = rng(42);
        let mut b = rng(42);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut r = rng(7);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            let f: f64 = r.random();
            assert!((0.0..1.0).contains(&f));
            counts[r.random_range(0..10usize)] += 1;
            assert!(r.random_range(0..3u64) < 3);
            assert_eq!(r.random_range(0..1u64), 0);
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_ne!(rng(1).next_u64(), rng(2).next_u64());
    }

    #[test]
    fn streams_are_distinct_and_reproducible() {
        let first = |mut r: Rng| r.next_u64();
        let s = |part, a, b| first(stream(9, part, a, b));
        assert_eq!(s(Stream::Hour, 3, 0), s(Stream::Hour, 3, 0));
        let all = [
            s(Stream::Hour, 3, 0),
            s(Stream::Hour, 4, 0),
            s(Stream::Favorite, 3, 0),
            s(Stream::Favorite, 0, 3),
            first(stream(10, Stream::Hour, 3, 0)),
            first(rng(9)),
        ];
        let unique: std::collections::HashSet<u64> = all.iter().copied().collect();
        assert_eq!(unique.len(), all.len(), "{all:?}");
    }
}
