//! A bounded cache of answers for hot prefixes.
//!
//! Short prefixes fan out to the most partitions and are also the most frequent ("a", "g"), so
//! a small cache absorbs much of the fan-out. Keys include the generation: a new generation
//! never sees an entry of the old one, and old entries age out by least-recent use.

use std::num::NonZeroUsize;
use std::sync::Mutex;

use lru::LruCache;

use crate::api::SuggestResponse;

/// (generation, normalized prefix, k)
type Key = (String, String, usize);

/// The answer cache.
#[derive(Debug)]
pub struct Cache {
    entries: Option<Mutex<LruCache<Key, SuggestResponse>>>,
}

impl Cache {
    /// A cache of at most `capacity` answers (0 disables it).
    pub fn new(capacity: usize) -> Self {
        Cache { entries: NonZeroUsize::new(capacity).map(|c| Mutex::new(LruCache::new(c))) }
    }

    /// A cached answer.
    pub fn get(&self, generation: &str, prefix: &str, k: usize) -> Option<SuggestResponse> {
        let entries = self.entries.as_ref()?;
        let mut entries = entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.get(&(generation.to_owned(), prefix.to_owned(), k)).cloned()
    }

    /// Remembers a complete (not partial) answer.
    pub fn put(&self, generation: &str, prefix: &str, k: usize, answer: &SuggestResponse) {
        let Some(entries) = &self.entries else { return };
        if answer.partial {
            return;
        }
        let mut entries = entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.put((generation.to_owned(), prefix.to_owned(), k), answer.clone());
    }
}
