//! What an answer holds after the exact prefix: the tier contract, in one place.
//!
//! An answer for a typed prefix `p` (already [`crate::normalize::prefix`]-ed) is up to `k`
//! completions in three tiers, concatenated; a key is in at most one tier (its first), and a
//! later tier is consulted only while the answer is short:
//!
//! 1. [`Match::Prefix`] — the key starts with `p`. Order: score desc, key asc.
//! 2. [`Match::Words`] — every *complete* typed word is a word of the key and the *partial* last
//!    word (when `p` does not end with a space) is a prefix of some word of the key
//!    ([`Typed::matches`]). Set semantics: typed words may share a key word. Order: score desc,
//!    key asc.
//! 3. [`Match::Fuzzy`] — the key starts with `p`'s first character and `d`, the smallest
//!    optimal-string-alignment distance between `p` and any prefix of the key (over Unicode
//!    scalar values), is in `1..=max_typos(p)`. Order: `d` asc, score desc, key asc.
//!
//! Words are the non-empty pieces between spaces (a key can hold a stray double space, see
//! [`crate::normalize::words`], which must not make an empty word).
//!
//! The snapshot answers this with its own indexes ([`crate::snapshot`]); the functions here are
//! the plain definitions every other implementation is checked against, and what the aggregator
//! and the snapshot use to order and verify candidates.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

/// Which tier a suggestion came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Match {
    /// Starts with what was typed.
    Prefix,
    /// Holds the typed words.
    Words,
    /// Within a typo or two of what was typed.
    Fuzzy,
}

impl Match {
    /// The name on the wire (`"prefix"`, `"words"`, `"fuzzy"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Match::Prefix => "prefix",
            Match::Words => "words",
            Match::Fuzzy => "fuzzy",
        }
    }
}

/// Which tiers an answer may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Tiers {
    /// Only completions that start with the prefix.
    Prefix,
    /// Prefix, then words, then fuzzy.
    #[default]
    All,
}

impl Tiers {
    /// The name `match=` and `--match` take: `"prefix"` or `"all"`.
    pub fn name(self) -> &'static str {
        match self {
            Tiers::Prefix => "prefix",
            Tiers::All => "all",
        }
    }
}

/// The words of a typed prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typed<'a> {
    /// Words followed by a space: each must be a word of the key. Sorted, no duplicates.
    pub complete: Vec<&'a str>,
    /// The last word when no space follows it: a prefix of some word of the key.
    pub partial: Option<&'a str>,
}

impl<'a> Typed<'a> {
    /// Splits a normalized prefix into complete words and the partial last word.
    pub fn of(p: &'a str) -> Typed<'a> {
        let mut complete: Vec<&str> = words(p).collect();
        let partial = if p.ends_with(' ') { None } else { complete.pop() };
        complete.sort_unstable();
        complete.dedup();
        Typed { complete, partial }
    }

    /// Whether nothing was typed (no word at all): the words tier then matches nothing.
    pub fn is_empty(&self) -> bool {
        self.complete.is_empty() && self.partial.is_none()
    }

    /// Whether `key` satisfies the words tier's condition (ignoring whether it starts with `p`).
    pub fn matches(&self, key: &str) -> bool {
        if self.is_empty() {
            return false;
        }
        let has = |w: &str| words(key).any(|k| k == w);
        self.complete.iter().all(|w| has(w))
            && self.partial.is_none_or(|w| words(key).any(|k| k.starts_with(w)))
    }
}

/// The words of a key or prefix: the non-empty pieces between spaces.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    word_spans(text).map(|(_, word)| word)
}

/// [`words`] with the byte offset where each starts.
pub fn word_spans(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split(' ')
        .scan(0, |start, piece| {
            let at = *start;
            *start += piece.len() + 1;
            Some((at, piece))
        })
        .filter(|(_, piece)| !piece.is_empty())
}

/// The largest distance the fuzzy tier accepts for a prefix of `n` characters (a trailing
/// space counts): none under 4, one up to 7, two from 8.
pub fn max_typos_for_len(n: usize) -> u8 {
    match n {
        0..=3 => 0,
        4..=7 => 1,
        _ => 2,
    }
}

/// [`max_typos_for_len`] of `p`'s character count.
pub fn max_typos(p: &str) -> u8 {
    max_typos_for_len(p.chars().count())
}

/// Whether a later tier can match anything for `p` at all: a typed word (the words tier), or
/// (four characters on, even of spaces only) room for a typo. When it cannot, an answer is
/// the prefix tier's alone, which only the partitions whose range holds `p` can give.
pub fn later_tiers_possible(p: &str) -> bool {
    !Typed::of(p).is_empty() || max_typos(p) > 0
}

/// The fuzzy tier's distance of `key` for `p`: the smallest optimal-string-alignment distance
/// between `p` and a prefix of `key`, when it is at most `max`; `None` beyond. The first
/// characters are not compared here (see [`fuzzy_distance`]).
///
/// This is the plain dynamic program over the whole key: the definition, used by tests, the fuzz
/// checks and the eval tool (also through [`fuzzy_distance`] and [`check`]), never by a lookup.
/// The fuzzy tier's walk computes its own distances over the key store, and the proptests and
/// the oracle hold them to this one.
pub fn prefix_distance(p: &[char], key: &str, max: u8) -> Option<u8> {
    let n = p.len();
    // rows[j][i]: distance between p[..i] and the key's first j characters.
    let mut before: Vec<usize> = Vec::new();
    let mut prev: Vec<usize> = (0..=n).collect();
    let mut best = prev[n];
    let mut last: Option<char> = None;
    for (j, c) in key.chars().enumerate() {
        let mut row = vec![j + 1; n + 1];
        for i in 1..=n {
            let cost = usize::from(p[i - 1] != c);
            let mut d = (prev[i] + 1).min(row[i - 1] + 1).min(prev[i - 1] + cost);
            if i > 1 && last == Some(p[i - 1]) && p[i - 2] == c && !before.is_empty() {
                d = d.min(before[i - 2] + 1);
            }
            row[i] = d;
        }
        best = best.min(row[n]);
        before = std::mem::replace(&mut prev, row);
        last = Some(c);
    }
    (best <= usize::from(max)).then_some(best as u8)
}

/// The fuzzy tier's verdict on `key` for `p`: `Some(d)` when the first characters agree and
/// `1 <= d <= max_typos(p)`.
pub fn fuzzy_distance(p: &str, key: &str) -> Option<u8> {
    let chars: Vec<char> = p.chars().collect();
    let max = max_typos_for_len(chars.len());
    if max == 0 || key.chars().next() != chars.first().copied() {
        return None;
    }
    prefix_distance(&chars, key, max).filter(|&d| d >= 1)
}

/// Whether `key` may be answered for `p` in `tier` (with `typos` for the fuzzy tier): the
/// tier's condition holds and no earlier tier's does. Not whether it is among the best.
pub fn check(p: &str, key: &str, tier: Match, typos: u8) -> bool {
    let typed = Typed::of(p);
    match tier {
        Match::Prefix => key.starts_with(p) && typos == 0,
        Match::Words => !key.starts_with(p) && typed.matches(key) && typos == 0,
        Match::Fuzzy => !typed.matches(key) && fuzzy_distance(p, key) == Some(typos),
    }
}

/// The order of suggestions within and across tiers: tier, then (fuzzy only) distance, then
/// [`crate::rank::cmp`].
pub fn cmp(a: (Match, u8, f64, &[u8]), b: (Match, u8, f64, &[u8])) -> Ordering {
    a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then_with(|| crate::rank::cmp(a.2, a.3, b.2, b.3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn word_spans_point_into_the_text() {
        let text = " new  york é ";
        let spans: Vec<(usize, &str)> = word_spans(text).collect();
        assert_eq!(spans, [(1, "new"), (6, "york"), (11, "é")]);
        assert!(spans.iter().all(|&(at, w)| &text[at..at + w.len()] == w));
    }

    #[test]
    fn splits_typed_words() {
        let t = Typed::of("york t");
        assert_eq!((t.complete, t.partial), (vec!["york"], Some("t")));
        let t = Typed::of("new york ");
        assert_eq!((t.complete, t.partial), (vec!["new", "york"], None));
        let t = Typed::of("york york");
        assert_eq!((t.complete, t.partial), (vec!["york"], Some("york")));
        assert!(Typed::of("").is_empty() && Typed::of(" ").is_empty());
    }

    #[test]
    fn words_tier_condition() {
        assert!(Typed::of("york times").matches("new york times"));
        assert!(Typed::of("times york").matches("new york times"));
        assert!(Typed::of("york ").matches("new york"));
        assert!(!Typed::of("yor ").matches("new york"));
        assert!(Typed::of("yor").matches("new york"));
        assert!(Typed::of("york york").matches("new york"));
        assert!(!Typed::of("york x").matches("new york"));
        assert!(!Typed::of("").matches("new york"));
    }

    #[test]
    fn typo_budget_by_length() {
        assert_eq!(max_typos("caf"), 0);
        assert_eq!(max_typos("cafr"), 1);
        assert_eq!(max_typos("caf "), 1);
        assert_eq!(max_typos("new yokr"), 2);
        assert_eq!(max_typos("café"), 1);
    }

    #[test]
    fn distance_to_the_nearest_prefix() {
        assert_eq!(prefix_distance(&chars("facebok"), "facebook", 2), Some(1));
        assert_eq!(prefix_distance(&chars("new yokr"), "new york times", 2), Some(1));
        assert_eq!(prefix_distance(&chars("cafr"), "cafe", 1), Some(1));
        assert_eq!(prefix_distance(&chars("cafe"), "cafeteria", 1), Some(0));
        assert_eq!(prefix_distance(&chars("abcd"), "xyzw", 2), None);
        assert_eq!(prefix_distance(&chars("abcdefgh"), "abdcefhg", 2), Some(2));
        // OSA, not Damerau: a transposed pair is not edited again. "ca" -> "abc" is 3 as whole
        // strings but 1 to the prefix "a", so it cannot tell them apart; this one can (Damerau
        // gives 2: swap "ca", then insert "b" between them).
        assert_eq!(prefix_distance(&chars("ca"), "abc", 3), Some(1));
        assert_eq!(prefix_distance(&chars("zcazzzzz"), "zabczzzzz", 3), Some(3));
        assert_eq!(fuzzy_distance("zcazzzzz", "zabczzzzz"), None);
        assert_eq!(fuzzy_distance("cafr", "cafe"), Some(1));
        assert_eq!(fuzzy_distance("cafr", "bafr"), None);
        assert_eq!(fuzzy_distance("cafe", "cafe au lait"), None);
        assert_eq!(fuzzy_distance("caf", "cab"), None);
    }
}
