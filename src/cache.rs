//! A bounded cache of answers for hot prefixes, shared by the server and the aggregator.
//!
//! Typed prefixes follow the queries' Zipf law ("a", "g", "face" come again and again), so a
//! small cache answers most requests without a lookup (server) or a fan-out (aggregator). What
//! an answer depends on is all in its [`Key`]: the snapshot or generation, what the blocklist
//! hides, the kind of answer, the normalized prefix and `k`. A new snapshot or blocklist never
//! sees an entry of the old one; old entries age out by (approximately) least-recent use.
//!
//! The aggregator also gives entries a time to live: its key carries the blocklist versions the
//! replicas report, probed every 250 ms, and the TTL bounds staleness from anything that probe
//! misses. The server's key is exact, so its entries live until evicted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

// Tokio's clock, so tests expire entries by advancing paused time, not by sleeping.
use tokio::time::Instant;

use hashbrown::HashMap;

/// Everything an answer depends on, as one byte string: each part length-prefixed, so no two
/// different requests share a key whatever bytes their parts hold.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key(Vec<u8>);

impl Key {
    /// The key of the answer to `prefix` (up to `k` items) under `scope` (what was served:
    /// version, blocklist version, kind of answer, in a fixed order).
    pub fn new(scope: &[&str], prefix: &str, k: usize) -> Key {
        let len = scope.iter().map(|s| s.len() + 4).sum::<usize>() + prefix.len() + 12;
        let mut bytes = Vec::with_capacity(len);
        for part in scope.iter().chain([&prefix]) {
            bytes.extend_from_slice(&(part.len() as u32).to_le_bytes());
            bytes.extend_from_slice(part.as_bytes());
        }
        bytes.extend_from_slice(&(k as u64).to_le_bytes());
        Key(bytes)
    }
}

/// Longest key an answer is cached under, in bytes. Its prefix part is the normalized text,
/// and normalization can make a short text much longer (NFKC expands some characters up to
/// 18 times: 1 KiB of `q` can become 11 KB): answers to such texts, which no one types (a key
/// is at most 256 bytes), are made each time rather than let a flood of them fill the cache
/// with entries tens of times the usual size.
pub const MAX_KEY_BYTES: usize = 512;

/// Largest answer cached, in bytes (as sent, or as its texts count for an answer kept
/// unserialized). Ten suggestions take about 1 KB; an answer of hundreds (a build with a
/// large `--top-k`, asked for with a large `k`) is made each time: cached, a client cycling
/// through `k` and prefixes could fill `--cache-entries` with answers a hundred times the
/// usual size.
pub const MAX_VALUE_BYTES: usize = 4096;

/// Bytes of keys and answers the cache holds per entry of its capacity, on average. Usual
/// answers take about 1 KB, so the entry count binds first; entries near the limits above
/// (echoed texts of control characters make OpenSearch answers of 2.5 KB that all normalize
/// to one prefix, and each is another entry) would otherwise let a client fill the default
/// 50,000 entries with 230 MB, beyond what a deployment sizes for the cache.
pub const AVERAGE_ENTRY_BYTES: usize = 1536;

/// The answer cache: at most `capacity` values, each reused for at most `ttl`.
#[derive(Debug)]
pub struct Cache<V> {
    entries: Option<RwLock<Clock<V>>>,
    /// `None`: entries stay until evicted, and a hit reads no clock.
    ttl: Option<Duration>,
}

impl<V: Clone> Cache<V> {
    /// A cache of at most `capacity` answers (0 disables it), each kept for `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Self::with_ttl(capacity, Some(ttl))
    }

    /// A cache whose entries stay until evicted (for exact keys).
    pub fn unexpiring(capacity: usize) -> Self {
        Self::with_ttl(capacity, None)
    }

    fn with_ttl(capacity: usize, ttl: Option<Duration>) -> Self {
        let entries = (capacity > 0).then(|| RwLock::new(Clock::new(capacity)));
        Cache { entries, ttl }
    }

    /// The cached answer of `key`, if it is there and fresh. A hit takes the lock shared and
    /// only marks its entry used; a miss never takes the lock exclusively. An expired entry is
    /// not answered and not marked used: a `put` of its key replaces it, and otherwise the hand
    /// evicts it as any entry not read (while fresh) since the hand last passed it.
    pub fn get(&self, key: &Key) -> Option<V> {
        if key.0.len() > MAX_KEY_BYTES {
            return None;
        }
        let entries = self.entries.as_ref()?.read().unwrap_or_else(PoisonError::into_inner);
        let slot = entries.get(&key.0)?;
        if self.ttl.is_some_and(|ttl| Instant::now().saturating_duration_since(slot.at) >= ttl) {
            return None;
        }
        slot.used.store(true, Ordering::Relaxed);
        Some(slot.value.clone())
    }

    /// Remembers `value`, of `bytes` bytes, as the answer of `key`, unless the key is longer
    /// than [`MAX_KEY_BYTES`] or the value larger than [`MAX_VALUE_BYTES`].
    pub fn put(&self, key: Key, value: V, bytes: usize) {
        let Some(entries) = &self.entries else { return };
        if key.0.len() > MAX_KEY_BYTES || bytes > MAX_VALUE_BYTES {
            return;
        }
        let mut entries = entries.write().unwrap_or_else(PoisonError::into_inner);
        entries.put(key.0.into_boxed_slice(), Instant::now(), value, bytes);
    }
}

/// An entry, with whether it was read since the hand last passed it.
#[derive(Debug)]
struct Slot<V> {
    key: Box<[u8]>,
    at: Instant,
    value: V,
    used: AtomicBool,
    /// The key's and the value's bytes, as counted against [`Clock::max_bytes`].
    bytes: usize,
}

/// The CLOCK approximation of least-recently-used eviction (second chance): entries sit in a
/// ring, a hit sets the entry's `used` bit, and eviction sweeps a hand around the ring,
/// clearing set bits, up to the first entry not used since the hand last passed it.
///
/// Why not a move-to-front list (the `lru` crate, until issue 16): every hit rewrote two
/// neighbours' links under an exclusive lock, and that was the largest cost a cached
/// `/v1/suggest` had over `/healthz` (a `perf` profile under `wrk`: 2.5% of the server's
/// time). Here a hit is a hash lookup and a relaxed store, under a shared lock.
#[derive(Debug)]
struct Clock<V> {
    /// Key -> index in `slots`.
    index: HashMap<Box<[u8]>, usize>,
    slots: Vec<Slot<V>>,
    capacity: usize,
    /// At most this many bytes of keys and values ([`AVERAGE_ENTRY_BYTES`] per entry).
    max_bytes: usize,
    /// The bytes the slots hold.
    bytes: usize,
    hand: usize,
}

impl<V> Clock<V> {
    fn new(capacity: usize) -> Self {
        let max_bytes = capacity.saturating_mul(AVERAGE_ENTRY_BYTES);
        Clock { index: HashMap::new(), slots: Vec::new(), capacity, max_bytes, bytes: 0, hand: 0 }
    }

    fn get(&self, key: &[u8]) -> Option<&Slot<V>> {
        self.index.get(key).and_then(|&i| self.slots.get(i))
    }

    /// Inserts or replaces. While the cache is full (in entries or in bytes), the hand evicts
    /// the first entry not read since it last passed, clearing the bits of those read. A new
    /// entry starts unused, and goes when the hand comes round again unless read by then; a
    /// replaced one counts as read.
    fn put(&mut self, key: Box<[u8]>, at: Instant, value: V, value_bytes: usize) {
        let bytes = key.len() + value_bytes;
        let replaced = self.index.get(&key).copied().map(|i| self.remove(i)).is_some();
        self.evict_over(bytes);
        let used = AtomicBool::new(replaced);
        self.index.insert(key.clone(), self.slots.len());
        self.slots.push(Slot { key, at, value, used, bytes });
        self.bytes += bytes;
    }

    /// Removes slot `i`; the last slot takes its place (and the hand follows it there).
    fn remove(&mut self, i: usize) -> Slot<V> {
        let last = self.slots.len() - 1;
        let old = self.slots.swap_remove(i);
        self.index.remove(&old.key);
        self.bytes -= old.bytes;
        if let Some(moved) = self.slots.get(i)
            && let Some(at) = self.index.get_mut(&moved.key)
        {
            *at = i;
        }
        if self.hand == last {
            self.hand = if i < self.slots.len() { i } else { 0 };
        }
        old
    }

    /// Evicts until a new entry of `more` bytes fits.
    fn evict_over(&mut self, more: usize) {
        while !self.slots.is_empty()
            && (self.slots.len() >= self.capacity || self.bytes + more > self.max_bytes)
        {
            // Every entry's bit is cleared within one turn, so this ends by the second.
            while std::mem::take(self.slots[self.hand].used.get_mut()) {
                self.hand = (self.hand + 1) % self.slots.len();
            }
            // The last slot, the newest entry, moves into the hand's place: the hand goes past
            // it, or the next miss would evict the entry the last one put.
            self.remove(self.hand);
            if !self.slots.is_empty() {
                self.hand = (self.hand + 1) % self.slots.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(scope: &str, prefix: &str, k: usize) -> Key {
        Key::new(&[scope], prefix, k)
    }

    #[tokio::test(start_paused = true)]
    async fn keeps_answers_for_the_ttl_only() {
        let ttl = Duration::from_millis(50);
        let cache = Cache::new(10, ttl);
        cache.put(key("g", "a", 10), 1, 8);
        assert_eq!(cache.get(&key("g", "a", 10)), Some(1));
        assert_eq!(cache.get(&key("h", "a", 10)), None, "another scope misses");
        assert_eq!(cache.get(&key("g", "a", 9)), None, "another k misses");
        tokio::time::advance(ttl - Duration::from_millis(1)).await;
        assert_eq!(cache.get(&key("g", "a", 10)), Some(1), "still fresh 1 ms before the ttl");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(cache.get(&key("g", "a", 10)), None, "expired at the ttl");
    }

    #[tokio::test(start_paused = true)]
    async fn unexpiring_entries_outlive_any_clock() {
        let cache = Cache::unexpiring(10);
        cache.put(key("g", "a", 10), 1, 8);
        tokio::time::advance(Duration::from_secs(86_400 * 365)).await;
        assert_eq!(cache.get(&key("g", "a", 10)), Some(1));
    }

    #[test]
    fn answers_under_overlong_keys_are_not_kept() {
        let cache = Cache::unexpiring(10);
        let scope = "v";
        let fits = "a".repeat(MAX_KEY_BYTES - scope.len() - 16);
        assert_eq!(Key::new(&[scope], &fits, 10).0.len(), MAX_KEY_BYTES);
        cache.put(Key::new(&[scope], &fits, 10), 1, 8);
        assert_eq!(cache.get(&Key::new(&[scope], &fits, 10)), Some(1));
        let longer = format!("{fits}a");
        cache.put(Key::new(&[scope], &longer, 10), 2, 8);
        assert_eq!(cache.get(&Key::new(&[scope], &longer, 10)), None);
    }

    #[test]
    fn answers_over_the_size_limit_are_not_kept() {
        let cache = Cache::unexpiring(10);
        cache.put(key("g", "a", 10), 1, MAX_VALUE_BYTES);
        cache.put(key("g", "b", 10), 2, MAX_VALUE_BYTES + 1);
        assert_eq!(cache.get(&key("g", "a", 10)), Some(1));
        assert_eq!(cache.get(&key("g", "b", 10)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn least_recently_used_answers_leave_first() {
        let cache = Cache::new(2, Duration::from_secs(60));
        cache.put(key("g", "a", 10), 1, 8);
        cache.put(key("g", "b", 10), 2, 8);
        assert!(cache.get(&key("g", "a", 10)).is_some());
        cache.put(key("g", "c", 10), 3, 8);
        assert_eq!(cache.get(&key("g", "b", 10)), None, "b was used least recently");
        assert!(cache.get(&key("g", "a", 10)).is_some() && cache.get(&key("g", "c", 10)).is_some());
        assert_eq!(Cache::<u8>::new(0, Duration::from_secs(60)).get(&key("g", "a", 10)), None);
    }

    #[test]
    fn the_hand_gives_used_entries_a_second_chance() {
        let cache = Cache::unexpiring(3);
        for (i, p) in ["a", "b", "c"].iter().enumerate() {
            cache.put(key("g", p, 10), i, 8);
        }
        // Every entry used: the hand clears all three and evicts where it started ("a").
        for p in ["a", "b", "c"] {
            assert!(cache.get(&key("g", p, 10)).is_some());
        }
        cache.put(key("g", "d", 10), 3, 8);
        assert_eq!(cache.get(&key("g", "a", 10)), None, "a was first under the hand");
        // "b" and "c" lost their bits to that sweep; only "c" is read again, so "b" goes next.
        assert!(cache.get(&key("g", "c", 10)).is_some());
        cache.put(key("g", "e", 10), 4, 8);
        assert_eq!(cache.get(&key("g", "b", 10)), None);
        for (p, v) in [("c", 2), ("d", 3), ("e", 4)] {
            assert_eq!(cache.get(&key("g", p, 10)), Some(v), "{p}");
        }
    }

    /// Entries near the size limits are evicted by bytes before the entry count binds: 50,000
    /// answers of 2.5 KB, each its own entry, would hold 230 MB where 50 MB were planned.
    #[test]
    fn large_answers_are_bounded_by_bytes() {
        let cache = Cache::unexpiring(100);
        for i in 0..100 {
            cache.put(key("g", &i.to_string(), 10), i, 3000);
        }
        let clock = cache.entries.as_ref().unwrap().read().unwrap();
        assert!(clock.bytes <= 100 * AVERAGE_ENTRY_BYTES, "{} bytes", clock.bytes);
        assert_eq!(clock.slots.len(), 100 * AVERAGE_ENTRY_BYTES / (3000 + 18));
        drop(clock);
        assert_eq!(cache.get(&key("g", "99", 10)), Some(99), "the newest is kept");
    }

    /// A new entry lives about a turn of the hand, as in CLOCK: an eviction moves the newest
    /// entry into the evicted place, and the hand used to look at it next, so the next miss
    /// evicted the entry the last miss put (a model of a workload that repeats recent texts
    /// hit 2% instead of 50%).
    #[test]
    fn a_new_entry_outlives_older_unread_ones() {
        let cache = Cache::unexpiring(3);
        for p in ["a", "b", "c", "d", "e"] {
            cache.put(key("g", p, 10), p, 8);
        }
        for (p, kept) in [("a", false), ("b", false), ("c", true), ("d", true), ("e", true)] {
            assert_eq!(cache.get(&key("g", p, 10)).is_some(), kept, "{p}");
        }
    }

    #[test]
    fn putting_a_cached_key_again_replaces_it_in_place() {
        let cache = Cache::unexpiring(2);
        cache.put(key("g", "a", 10), 1, 8);
        cache.put(key("g", "b", 10), 2, 8);
        cache.put(key("g", "a", 10), 3, 8);
        assert_eq!(cache.get(&key("g", "a", 10)), Some(3));
        assert_eq!(cache.get(&key("g", "b", 10)), Some(2), "a replaced, not added");
        let entries = cache.entries.as_ref().map(|e| e.read().unwrap().slots.len());
        assert_eq!(entries, Some(2));
    }

    proptest::proptest! {
        /// The ring's invariants under any sequence of puts and reads: never more than
        /// `capacity` entries, index and ring agree, and what was put last is readable.
        #[test]
        fn bounded_and_the_last_put_is_kept(
            capacity in 1usize..6,
            ops in proptest::collection::vec((0u8..10, proptest::bool::ANY, 0..=MAX_VALUE_BYTES), 1..80),
        ) {
            let cache = Cache::unexpiring(capacity);
            for (n, (k, read, bytes)) in ops.into_iter().enumerate() {
                let key = key("g", &k.to_string(), 10);
                if read {
                    let _ = cache.get(&key);
                } else {
                    cache.put(key.clone(), n, bytes);
                    proptest::prop_assert_eq!(cache.get(&key), Some(n));
                }
                let clock = cache.entries.as_ref().unwrap().read().unwrap();
                proptest::prop_assert!(clock.slots.len() <= capacity);
                proptest::prop_assert_eq!(clock.index.len(), clock.slots.len());
                for (i, slot) in clock.slots.iter().enumerate() {
                    proptest::prop_assert_eq!(clock.index.get(&slot.key), Some(&i));
                }
                let held: usize = clock.slots.iter().map(|s| s.bytes).sum();
                proptest::prop_assert_eq!(held, clock.bytes);
                proptest::prop_assert!(held <= clock.max_bytes || clock.slots.len() == 1);
                proptest::prop_assert!(clock.hand < clock.slots.len().max(1));
            }
        }
    }

    #[test]
    fn parts_cannot_run_into_each_other() {
        assert_ne!(Key::new(&["ab", "c"], "d", 1), Key::new(&["a", "bc"], "d", 1));
        assert_ne!(Key::new(&["a"], "b", 1), Key::new(&["a", "b"], "", 1));
        assert_ne!(Key::new(&["a"], "b", 1), Key::new(&["a"], "b", 2));
    }
}
