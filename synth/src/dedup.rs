//! Deduplication of generated queries in about 6 bytes per query, so that tens of millions
//! of distinct queries fit in memory next to their texts.

use std::hash::Hasher;

use rustc_hash::FxHasher;

/// A 64-bit hash of a query text. The hash is not value-stable across `rustc-hash` versions
/// or platforms; that does not matter here, since it only decides (with probability about
/// 2^-32 per query) whether a distinct query is wrongly taken for a duplicate.
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

/// A fixed-capacity set of 64-bit hashes for deduplication, stored as
/// 32-bit fingerprints in a linear-probing table (4 bytes per slot, load
/// factor <= 0.7, so about 6 bytes per query).
///
/// The slot comes from the high hash bits and the fingerprint from the low
/// ones. Equal strings always collide, so a duplicate is never admitted; two
/// different strings share slot chain and fingerprint with probability about
/// 2^-32 per insert, which merely rejects one new candidate.
#[derive(Debug, Clone)]
pub(crate) struct FingerprintSet {
    slots: Vec<u32>,
    mask: usize,
    len: usize,
    capacity: usize,
}

impl FingerprintSet {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let size = (capacity.saturating_mul(10) / 7 + 1).next_power_of_two().max(16);
        FingerprintSet { slots: vec![0; size], mask: size - 1, len: 0, capacity }
    }

    fn home_slot(&self, hash: u64) -> usize {
        ((hash >> 32) as usize).wrapping_mul(0x9E37_79B9) & self.mask
    }

    /// Reads the home slot of `hash` (to bring it into the cache early).
    pub(crate) fn peek(&self, hash: u64) -> u32 {
        self.slots[self.home_slot(hash)]
    }

    /// Inserts the hash; false if it (or a colliding fingerprint) is present.
    ///
    /// # Panics
    /// If more than `capacity` hashes are inserted.
    pub(crate) fn insert(&mut self, hash: u64) -> bool {
        let fingerprint = (hash as u32).max(1);
        let mut i = self.home_slot(hash);
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                assert!(self.len < self.capacity, "FingerprintSet over capacity");
                self.slots[i] = fingerprint;
                self.len += 1;
                return true;
            }
            if slot == fingerprint {
                return false;
            }
            i = (i + 1) & self.mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng;
    use rand::Rng as _;

    #[test]
    fn fingerprints_admit_each_hash_once() {
        let mut set = FingerprintSet::with_capacity(1_000);
        let mut rng = rng(5);
        let hashes: Vec<u64> = (0..1_000).map(|_| rng.next_u64()).collect();
        assert!(hashes.iter().all(|&h| set.insert(h)));
        assert!(hashes.iter().all(|&h| !set.insert(h)));
    }

    #[test]
    fn similar_texts_hash_apart_in_both_halves() {
        // Slot and fingerprint come from different halves: both must separate near-duplicates.
        let texts = ["new york", "new york ", "new yorl", "New york", "new  york", "a", "b"];
        let hashes: Vec<u64> = texts.iter().map(|t| hash_bytes(t.as_bytes())).collect();
        for (i, a) in hashes.iter().enumerate() {
            for b in &hashes[i + 1..] {
                assert_ne!(a >> 32, b >> 32);
                assert_ne!(*a as u32, *b as u32);
            }
        }
    }
}
