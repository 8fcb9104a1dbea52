//! A bounded cache of answers for hot prefixes.
//!
//! Short prefixes fan out to the most partitions and are also the most frequent ("a", "g"), so
//! a small cache absorbs much of the fan-out. Keys include the generation: a new generation
//! never sees an entry of the old one, and old entries age out by least-recent use.
//!
//! Servers apply blocklist changes without a new generation, so the caller also puts the
//! blocklist versions the replicas report (probed every 250 ms) into the key: a hidden query
//! leaves cached answers within the second. Entries also expire after a time to live, which
//! bounds staleness from anything the key does not capture.

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::Duration;

// Tokio's clock, so tests expire entries by advancing paused time, not by sleeping.
use tokio::time::Instant;

use lru::LruCache;

use crate::api::SuggestResponse;

/// (generation, normalized prefix, k)
type Key = (String, String, usize);

/// The answer cache.
#[derive(Debug)]
pub struct Cache {
    entries: Option<Mutex<LruCache<Key, (Instant, SuggestResponse)>>>,
    ttl: Duration,
}

impl Cache {
    /// A cache of at most `capacity` answers (0 disables it), each kept for `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Cache { entries: NonZeroUsize::new(capacity).map(|c| Mutex::new(LruCache::new(c))), ttl }
    }

    /// A cached answer.
    pub fn get(&self, generation: &str, prefix: &str, k: usize) -> Option<SuggestResponse> {
        let entries = self.entries.as_ref()?;
        let mut entries = entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (generation.to_owned(), prefix.to_owned(), k);
        match entries.get(&key) {
            Some((at, answer)) if Instant::now().saturating_duration_since(*at) < self.ttl => {
                Some(answer.clone())
            }
            Some(_) => {
                entries.pop(&key);
                None
            }
            None => None,
        }
    }

    /// Remembers a complete (not partial) answer.
    pub fn put(&self, generation: &str, prefix: &str, k: usize, answer: &SuggestResponse) {
        let Some(entries) = &self.entries else { return };
        if answer.partial {
            return;
        }
        let mut entries = entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .put((generation.to_owned(), prefix.to_owned(), k), (Instant::now(), answer.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(partial: bool) -> SuggestResponse {
        SuggestResponse {
            query: "a".into(),
            suggestions: Vec::new(),
            version: "g".into(),
            partial,
            complete: true,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn keeps_complete_answers_for_the_ttl_only() {
        let ttl = Duration::from_millis(50);
        let cache = Cache::new(10, ttl);
        cache.put("g", "a", 10, &answer(false));
        cache.put("g", "b", 10, &answer(true));
        assert!(cache.get("g", "a", 10).is_some());
        assert!(cache.get("g", "b", 10).is_none(), "partial answers are not cached");
        assert!(cache.get("h", "a", 10).is_none(), "another generation misses");
        assert!(cache.get("g", "a", 9).is_none(), "another k misses");
        tokio::time::advance(ttl - Duration::from_millis(1)).await;
        assert!(cache.get("g", "a", 10).is_some(), "still fresh 1 ms before the ttl");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(cache.get("g", "a", 10).is_none(), "expired at the ttl");
    }

    #[tokio::test(start_paused = true)]
    async fn least_recently_used_answers_leave_first() {
        let cache = Cache::new(2, Duration::from_secs(60));
        cache.put("g", "a", 10, &answer(false));
        cache.put("g", "b", 10, &answer(false));
        assert!(cache.get("g", "a", 10).is_some());
        cache.put("g", "c", 10, &answer(false));
        assert!(cache.get("g", "b", 10).is_none(), "b was used least recently");
        assert!(cache.get("g", "a", 10).is_some() && cache.get("g", "c", 10).is_some());
        assert!(Cache::new(0, Duration::from_secs(60)).get("g", "a", 10).is_none());
    }
}
