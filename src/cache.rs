//! A bounded cache of answers for hot prefixes, shared by the server and the aggregator.
//!
//! Typed prefixes follow the queries' Zipf law ("a", "g", "face" come again and again), so a
//! small cache answers most requests without a lookup (server) or a fan-out (aggregator). What
//! an answer depends on is all in its [`Key`]: the snapshot or generation, what the blocklist
//! hides, the kind of answer, the normalized prefix and `k`. A new snapshot or blocklist never
//! sees an entry of the old one; old entries age out by least-recent use.
//!
//! The aggregator also gives entries a time to live: its key carries the blocklist versions the
//! replicas report, probed every 250 ms, and the TTL bounds staleness from anything that probe
//! misses. The server's key is exact, so its entries live until evicted.

use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

// Tokio's clock, so tests expire entries by advancing paused time, not by sleeping.
use tokio::time::Instant;

use lru::LruCache;

/// Everything an answer depends on, as one byte string: each part length-prefixed, so no two
/// different requests share a key whatever bytes their parts hold.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Entries by key bytes, each with the time it was made.
type Entries<V> = Mutex<LruCache<Box<[u8]>, (Instant, V)>>;

/// The answer cache: at most `capacity` values, each reused for at most `ttl`.
#[derive(Debug)]
pub struct Cache<V> {
    entries: Option<Entries<V>>,
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
        Cache { entries: NonZeroUsize::new(capacity).map(|c| Mutex::new(LruCache::new(c))), ttl }
    }

    /// The cached answer of `key`, if it is there and fresh.
    pub fn get(&self, key: &Key) -> Option<V> {
        let mut entries = self.entries.as_ref()?.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get(key.0.as_slice()) {
            Some((at, value))
                if self
                    .ttl
                    .is_none_or(|ttl| Instant::now().saturating_duration_since(*at) < ttl) =>
            {
                Some(value.clone())
            }
            Some(_) => {
                entries.pop(key.0.as_slice());
                None
            }
            None => None,
        }
    }

    /// Remembers `value` as the answer of `key`.
    pub fn put(&self, key: Key, value: V) {
        let Some(entries) = &self.entries else { return };
        let mut entries = entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.put(key.0.into_boxed_slice(), (Instant::now(), value));
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
        cache.put(key("g", "a", 10), 1);
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
        cache.put(key("g", "a", 10), 1);
        tokio::time::advance(Duration::from_secs(86_400 * 365)).await;
        assert_eq!(cache.get(&key("g", "a", 10)), Some(1));
    }

    #[tokio::test(start_paused = true)]
    async fn least_recently_used_answers_leave_first() {
        let cache = Cache::new(2, Duration::from_secs(60));
        cache.put(key("g", "a", 10), 1);
        cache.put(key("g", "b", 10), 2);
        assert!(cache.get(&key("g", "a", 10)).is_some());
        cache.put(key("g", "c", 10), 3);
        assert_eq!(cache.get(&key("g", "b", 10)), None, "b was used least recently");
        assert!(cache.get(&key("g", "a", 10)).is_some() && cache.get(&key("g", "c", 10)).is_some());
        assert_eq!(Cache::<u8>::new(0, Duration::from_secs(60)).get(&key("g", "a", 10)), None);
    }

    #[test]
    fn parts_cannot_run_into_each_other() {
        assert_ne!(Key::new(&["ab", "c"], "d", 1), Key::new(&["a", "bc"], "d", 1));
        assert_ne!(Key::new(&["a"], "b", 1), Key::new(&["a", "b"], "", 1));
        assert_ne!(Key::new(&["a"], "b", 1), Key::new(&["a"], "b", 2));
    }
}
