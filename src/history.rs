//! A person's own searches first: the rule the page applies in the browser (`web/history.js`)
//! and `typeahead eval --history-log` measures. Both implement it; a browser test checks that
//! they agree on the same searches.
//!
//! History never leaves the person's device: the service has no part in it. This module exists
//! so the rule can be evaluated on logs with a user column and tested against the page.
//!
//! # The rule
//!
//! - A search is recorded per key (the service's key normalization): how many times, the time
//!   of the last use, and the latest surface text for display. At most [`MAX_KEYS`] keys; past
//!   that the least recently used is dropped. A search the service would not keep
//!   ([`is_kept`]: an empty key, a key over `MAX_KEY_BYTES` or a text over `MAX_SURFACE_BYTES`)
//!   is not recorded (one letter and a thousand marks would otherwise fill the browser's
//!   storage). Nor is one the privacy rules withhold ([`crate::builder::privacy`]: a card or
//!   phone number, an e-mail address, a password, a token): an empty box shows the recent
//!   searches to whoever sits at the screen next, and they are suggestions like the service's.
//! - For a typed prefix `p` (the service's prefix normalization), the entries whose key starts
//!   with `p` come first, by count desc, then last use desc, then key bytewise asc, at most
//!   [`MAX_SHOWN`]; then the service's suggestions without those keys; at most `k` in all.
//! - With an empty box, the [`RECENT`] most recently used entries are shown.

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::builder::privacy::Privacy;
use crate::normalize::is_kept;

/// The privacy rules, compiled once for every history.
static PRIVACY: LazyLock<Privacy> = LazyLock::new(Privacy::new);

/// Keys one history holds at most.
pub const MAX_KEYS: usize = 500;
/// History entries shown for one prefix at most.
pub const MAX_SHOWN: usize = 3;
/// Entries shown for an empty box.
pub const RECENT: usize = 5;

/// What is remembered of one key.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Times searched.
    pub count: u64,
    /// When last searched (any increasing clock: the page uses milliseconds, eval the event's
    /// position in the log).
    pub last: u64,
    /// The text of the latest search, for display.
    pub text: String,
}

/// One person's searches.
#[derive(Debug, Clone, Default)]
pub struct History {
    entries: HashMap<String, Entry>,
}

impl History {
    /// Records a search of `key` (normalized) typed as `text` (its surface form), at time
    /// `now`; one the service would not keep or the privacy rules withhold is not recorded.
    pub fn record(&mut self, key: &str, text: &str, now: u64) {
        if !is_kept(text, key) || PRIVACY.check(text, key).is_some() {
            return;
        }
        let entry = self.entries.entry(key.to_owned()).or_insert(Entry {
            count: 0,
            last: now,
            text: String::new(),
        });
        entry.count += 1;
        entry.last = entry.last.max(now);
        text.clone_into(&mut entry.text);
        if self.entries.len() > MAX_KEYS {
            self.drop_least_recent();
        }
    }

    fn drop_least_recent(&mut self) {
        // Ties (equal clocks) drop the bytewise greatest key: deterministic, like the page.
        let oldest = self
            .entries
            .iter()
            .min_by(|a, b| a.1.last.cmp(&b.1.last).then_with(|| b.0.cmp(a.0)))
            .map(|(k, _)| k.clone());
        if let Some(key) = oldest {
            self.entries.remove(&key);
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of `key`, if held.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// The entries shown first for the normalized prefix `p`, best first (at most
    /// [`MAX_SHOWN`]); for an empty `p`, the [`RECENT`] most recent.
    pub fn matches(&self, p: &str) -> Vec<(&str, &Entry)> {
        let mut hits: Vec<(&str, &Entry)> = self
            .entries
            .iter()
            .filter(|(key, _)| key.starts_with(p))
            .map(|(key, e)| (key.as_str(), e))
            .collect();
        if p.is_empty() {
            hits.sort_by(|a, b| b.1.last.cmp(&a.1.last).then_with(|| a.0.cmp(b.0)));
            hits.truncate(RECENT);
        } else {
            hits.sort_by(|a, b| {
                b.1.count.cmp(&a.1.count).then(b.1.last.cmp(&a.1.last)).then_with(|| a.0.cmp(b.0))
            });
            hits.truncate(MAX_SHOWN);
        }
        hits
    }

    /// The keys shown for `p`: the history's first, then `suggested` (the service's keys, best
    /// first) without those, at most `k`.
    pub fn merge<'a>(&'a self, p: &str, suggested: &'a [String], k: usize) -> Vec<&'a str> {
        let mut out: Vec<&str> = self.matches(p).into_iter().map(|(key, _)| key).collect();
        let own = out.len();
        for key in suggested {
            if out.len() >= k {
                break;
            }
            if !out[..own].contains(&key.as_str()) {
                out.push(key);
            }
        }
        out.truncate(k);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize::{MAX_KEY_BYTES, MAX_SURFACE_BYTES};

    fn keys(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn own_searches_come_first_by_count_then_recency_then_key() {
        let mut h = History::default();
        h.record("cats", "Cats", 1);
        h.record("car wash", "car wash", 2);
        h.record("cats", "cats", 3);
        h.record("cab", "cab", 4);
        h.record("cake", "cake", 4);
        h.record("dog", "dog", 5);
        // cats (2), then cab and cake (1, last 4: key order), car wash (last 2) is the 4th.
        let suggested = keys(&["cake", "capital one", "cats", "cat", "car"]);
        assert_eq!(
            h.merge("ca", &suggested, 10),
            ["cats", "cab", "cake", "capital one", "cat", "car"]
        );
        assert_eq!(h.merge("ca", &suggested, 4), ["cats", "cab", "cake", "capital one"]);
        assert_eq!(h.get("cats").unwrap().text, "cats", "the latest text is shown");
        assert_eq!(h.merge("x", &suggested, 10), suggested);
        // An empty box: the most recent, newest first.
        let recent: Vec<&str> = h.matches("").into_iter().map(|(k, _)| k).collect();
        assert_eq!(recent, ["dog", "cab", "cake", "cats", "car wash"]);
    }

    #[test]
    fn a_search_the_service_would_not_keep_is_not_recorded() {
        let mut h = History::default();
        h.record("", "", 1);
        h.record(&"k".repeat(MAX_KEY_BYTES + 1), "k", 2);
        h.record("c", &format!("c{}", "\u{301}".repeat(MAX_SURFACE_BYTES / 2)), 3);
        assert!(h.is_empty());
        h.record("c", "c\u{301}", 4);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn what_the_privacy_rules_withhold_is_not_recorded() {
        let mut h = History::default();
        let withheld = [
            "4111 1111 1111 1111",
            "call 555-1234",
            "john.doe@gmail.com",
            "john at gmail dot com",
            "wifi password: hunter2",
            "https://example.com/?access_token=abc",
            "ghp_0123456789abcdefghij0123456789abcdef",
            "john%40gmail.com",
        ];
        for (t, text) in (1..).zip(withheld) {
            let surface = crate::normalize::surface(text);
            h.record(&crate::normalize::key(text), &surface, t);
        }
        assert!(h.is_empty(), "{:?}", h.matches(""));
        h.record("1984 book", "1984 book", 9);
        assert_eq!(h.len(), 1, "a short number is a search like any other");
    }

    #[test]
    fn the_least_recently_used_key_is_dropped_past_the_bound() {
        let mut h = History::default();
        for i in 0..MAX_KEYS as u64 {
            h.record(&format!("q{i:03}"), "x", 10 + i);
        }
        h.record("q000", "x", 1000); // used again: no longer the oldest
        h.record("new", "x", 1001);
        assert_eq!(h.len(), MAX_KEYS);
        assert!(h.get("q000").is_some());
        assert!(h.get("q001").is_none(), "the least recently used went");
        assert!(h.get("new").is_some());
    }
}
