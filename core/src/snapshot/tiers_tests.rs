//! The tiered answer against the contract evaluated by brute force ([`crate::matching`]).

use std::collections::HashSet;

use proptest::prelude::*;

use super::*;
use crate::matching::{self, Match, Tiers, Typed};
use crate::rank;

/// (key, tier, typos) of the contract's answer, by definition: scan every key.
fn model(
    entries: &[Entry],
    p: &str,
    k: usize,
    blocked: &HashSet<String>,
) -> Vec<(String, Match, u8)> {
    let mut live: Vec<&Entry> = entries.iter().filter(|e| !blocked.contains(&e.key)).collect();
    live.sort_by(|a, b| rank::cmp(a.score, a.key.as_bytes(), b.score, b.key.as_bytes()));
    let typed = Typed::of(p);
    let mut out: Vec<(String, Match, u8)> = live
        .iter()
        .filter(|e| e.key.starts_with(p))
        .take(k)
        .map(|e| (e.key.clone(), Match::Prefix, 0))
        .collect();
    if out.len() < k {
        let words = live.iter().filter(|e| !e.key.starts_with(p) && typed.matches(&e.key));
        let room = k - out.len();
        out.extend(words.take(room).map(|e| (e.key.clone(), Match::Words, 0)));
    }
    if out.len() < k {
        let mut fuzzy: Vec<(u8, usize)> = live
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.key.starts_with(p) && !typed.matches(&e.key))
            .filter_map(|(i, e)| matching::fuzzy_distance(p, &e.key).map(|d| (d, i)))
            .collect();
        fuzzy.sort();
        let room = k - out.len();
        out.extend(
            fuzzy.into_iter().take(room).map(|(d, i)| (live[i].key.clone(), Match::Fuzzy, d)),
        );
    }
    out
}

fn build(entries: &[Entry], top_k: usize) -> Snapshot {
    build_small(entries, top_k, crate::snapshot::SMALL_SUBTREE)
}

/// With `small` low, most of the trie is in the node index, whose walk the fuzzy tier takes.
fn build_small(entries: &[Entry], top_k: usize, small: usize) -> Snapshot {
    let info = BuildInfo { top_k, small_subtree: small, ..BuildInfo::default() };
    let (bytes, _) = write(entries, &info).unwrap();
    Snapshot::from_bytes(bytes).unwrap()
}

fn got(s: &Snapshot, p: &str, k: usize, filter: Option<&Filter>) -> Vec<(String, Match, u8)> {
    let answer = s.answer(p, k, filter, Tiers::All);
    assert!(answer.complete());
    answer.suggestions.into_iter().map(|x| (x.key, x.tier, x.typos)).collect()
}

fn entries_of(pairs: &[(&str, f64)]) -> Vec<Entry> {
    let mut entries: Vec<Entry> =
        pairs.iter().map(|&(k, score)| Entry { key: k.to_owned(), display: None, score }).collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries
}

#[test]
fn the_issue_examples() {
    let entries = entries_of(&[
        ("new york times", 9.0),
        ("new york", 8.0),
        ("facebook", 7.0),
        ("cafe", 6.0),
        ("cafeteria", 1.0),
        ("the times of york", 2.0),
    ]);
    let s = build(&entries, 10);
    let keys = |p: &str| -> Vec<(String, Match, u8)> { got(&s, p, 10, None) };
    assert_eq!(keys("york times")[0], ("new york times".into(), Match::Words, 0));
    assert_eq!(keys("york times")[1], ("the times of york".into(), Match::Words, 0));
    assert_eq!(keys("facebok"), [("facebook".into(), Match::Fuzzy, 1)]);
    assert_eq!(keys("cafr")[0], ("cafe".into(), Match::Fuzzy, 1));
    assert_eq!(
        keys("new yokr")[..2],
        [("new york times".into(), Match::Fuzzy, 1), ("new york".into(), Match::Fuzzy, 1)]
    );
    // Only the prefix tier when asked, and no later tier for a full answer.
    let prefix_only = s.answer("york times", 10, None, Tiers::Prefix);
    assert!(prefix_only.suggestions.is_empty());
    assert_eq!(got(&s, "new", 2, None).len(), 2);
}

#[test]
fn blocked_completions_are_in_no_tier() {
    let entries = entries_of(&[("new york times", 9.0), ("new york", 8.0), ("york times", 1.0)]);
    let s = build(&entries, 10);
    let filter = Filter::new(&s, |key| key == "new york times");
    let answer = got(&s, "york times", 10, Some(&filter));
    assert_eq!(answer, [("york times".into(), Match::Prefix, 0)]);
}

/// A typed text of spaces only (what `normalize::prefix` makes of spacing accents: U+00B4 is a
/// space and a combining mark after NFKC) has no words but, from four characters on, a fuzzy
/// tier like any other text.
#[test]
fn a_text_of_spaces_only_has_a_fuzzy_tier() {
    let entries = entries_of(&[(" abcd", 3.0), ("   x", 2.0), ("  x", 1.0)]);
    let s = build(&entries, 10);
    let p = crate::normalize::prefix(&"\u{b4}".repeat(5));
    assert!(p.chars().count() >= 4 && p.trim().is_empty(), "{p:?}");
    let want = model(&entries, &p, 10, &HashSet::new());
    assert!(want.iter().any(|w| w.1 == Match::Fuzzy), "{want:?}");
    assert_eq!(got(&s, &p, 10, None), want);
}

/// A fuzzy range whose stored list holds a blocked completion reads the filter's replacement
/// list (the range's best unblocked ones): read past the blocked entry, the stored list came
/// up one short, and the whole range (here 20,000 keys) was scanned for it.
#[test]
fn a_blocked_completion_in_a_fuzzy_range_costs_no_scan() {
    let mut pairs: Vec<(String, f64)> =
        (0..20_000).map(|i| (format!("facebo{i:05}"), f64::from(i))).collect();
    pairs.push(("facebook".to_owned(), 1e6));
    let refs: Vec<(&str, f64)> = pairs.iter().map(|(k, s)| (k.as_str(), *s)).collect();
    let entries = entries_of(&refs);
    let s = build(&entries, 10);
    let blocked: HashSet<String> = ["facebook".to_owned()].into();
    let filter = Filter::new(&s, |key| blocked.contains(key));
    let answer = s.answer("facebok", 10, Some(&filter), Tiers::All);
    let keys: Vec<(String, Match, u8)> =
        answer.suggestions.iter().map(|x| (x.key.clone(), x.tier, x.typos)).collect();
    assert_eq!(keys, model(&entries, "facebok", 10, &blocked));
    assert!(answer.complete());
    assert!(answer.examined < 1000, "examined {}", answer.examined);
}

/// A partial word that starts many words: its merged lists drive when they are the shorter
/// side, are sought in when the complete word's list is, and past [`tiers::PARTIAL_LISTS`]
/// words the decoded keys decide.
#[test]
fn a_partial_word_of_many_words_drives_or_is_sought_in() {
    for zz in [60, tiers::PARTIAL_LISTS + 40] {
        let mut pairs: Vec<(String, f64)> = Vec::new();
        // "zz" starts `zz` words, each in one key; "common" is in 400 keys, 12 with a zz word.
        pairs.extend((0..zz).map(|i| (format!("zz{i:04} filler"), 1.0 + i as f64)));
        pairs.extend((0..400).map(|i| (format!("common word{i:03}"), 100.0 + f64::from(i))));
        pairs.extend((0..12).map(|i| (format!("word common zz{i:04}"), 50.0 + f64::from(i))));
        // "rare" is in 3 keys (none starting with "rare zz"), against the lists of every "zz"
        // word, which are sought in (or past PARTIAL_LISTS, the decoded keys checked).
        pairs.extend((0..3).map(|i| (format!("x rare zz{:04}", i * 7), 10.0 + f64::from(i))));
        let refs: Vec<(&str, f64)> = pairs.iter().map(|(k, s)| (k.as_str(), *s)).collect();
        let entries = entries_of(&refs);
        let s = build(&entries, 10);
        for p in ["common zz", "rare zz", "zz0007 rare", "filler zz1", "common zz000"] {
            assert_eq!(got(&s, p, 10, None), model(&entries, p, 10, &HashSet::new()), "{p:?}");
        }
        let words = |p: &str| got(&s, p, 10, None).iter().filter(|w| w.1 == Match::Words).count();
        assert_eq!((words("common zz"), words("rare zz")), (10, 3));
    }
}

/// Keys over a small alphabet (with a two-byte and a three-byte character, both their own
/// folding, so typed text reaches them) so that prefixes, words and typos collide often. Spaces may double or stand at either end: `key()` folds
/// diacritics after collapsing spaces, so "x\u{b4}" (NFKC: a space and U+0301) is the key "x ".
fn key() -> impl Strategy<Value = String> {
    proptest::collection::vec(prop::sample::select(vec!['a', 'b', 'c', ' ', 'ж', '中']), 1..9)
        .prop_map(|cs| cs.into_iter().collect::<String>())
        .prop_filter("a key is not only spaces", |k| !k.trim().is_empty())
}

/// A typed text: random, or a prefix of a key with one realistic edit, or its words reversed.
fn typed_for(keys: &[String], pick: usize, edit: u8, at: usize, raw: String) -> String {
    let Some(key) = keys.get(pick % keys.len().max(1)) else { return raw };
    let chars: Vec<char> = key.chars().collect();
    let mut p: Vec<char> = chars[..(at % chars.len()) + 1].to_vec();
    let i = 1 + at % p.len().max(1);
    match edit % 6 {
        0 => return raw,
        1 if i < p.len() => {
            p.remove(i);
        }
        2 => p.insert(i.min(p.len()), 'b'),
        3 if i < p.len() => p[i] = 'c',
        4 if i + 1 < p.len() => p.swap(i, i + 1),
        5 => return key.split(' ').rev().collect::<Vec<_>>().join(" "),
        _ => {}
    }
    p.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tiers_equal_the_contract(
        raw in proptest::collection::btree_map(key(), 0u32..6, 1..90),
        top_k in 1usize..12,
        k in 1usize..12,
        typed in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<usize>(), "[abc éж中\u{b4}]{0,9}"), 1..12),
        blocked_every in 2usize..7,
        small in 1usize..40,
    ) {
        let entries: Vec<Entry> = raw
            .iter()
            .map(|(key, &score)| Entry { key: key.clone(), display: None, score: f64::from(score) })
            .collect();
        let s = build_small(&entries, top_k, small);
        let keys: Vec<String> = raw.keys().cloned().collect();
        let blocked: HashSet<String> = keys.iter().step_by(blocked_every).cloned().collect();
        let filter = Filter::new(&s, |key| blocked.contains(key));
        let k = k.min(top_k);
        for (pick, edit, at, text) in typed {
            let p = crate::normalize::prefix(&typed_for(&keys, pick, edit, at, text));
            prop_assert_eq!(got(&s, &p, k, None), model(&entries, &p, k, &HashSet::new()), "p={:?}", p);
            prop_assert_eq!(got(&s, &p, k, Some(&filter)), model(&entries, &p, k, &blocked), "p={:?} blocked", p);
            // The words tier alone: the best k unblocked keys that hold the words, not p.
            let typed = Typed::of(&p);
            let mut words: Vec<&Entry> = entries
                .iter()
                .filter(|e| !blocked.contains(&e.key) && !e.key.starts_with(p.as_str()) && typed.matches(&e.key))
                .collect();
            words.sort_by(|a, b| rank::cmp(a.score, a.key.as_bytes(), b.score, b.key.as_bytes()));
            let expected: Vec<&str> = words.iter().take(k).map(|e| e.key.as_str()).collect();
            let alone = s.words_answer(&p, k, Some(&filter));
            prop_assert!(alone.complete());
            let keys: Vec<&str> = alone.suggestions.iter().map(|x| x.key.as_str()).collect();
            prop_assert_eq!(keys, expected, "p={:?} words alone", p);
        }
    }
}

/// Keys long enough that a typed prefix passes [`super::osa::Bits::MAX_TYPED`] characters, so
/// the walk runs on the banded rows.
fn long_key() -> impl Strategy<Value = String> {
    (proptest::collection::vec(prop::sample::select(vec!['a', 'b', '中']), 60..70), 0u8..3)
        .prop_map(|(cs, tail)| cs.into_iter().chain("ab".chars().take(tail.into())).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn long_typed_texts_equal_the_contract(
        raw in proptest::collection::btree_map(long_key(), 0u32..6, 1..30),
        typed in proptest::collection::vec((any::<usize>(), 1u8..5, 58usize..70), 1..6),
    ) {
        let entries: Vec<Entry> = raw
            .iter()
            .map(|(key, &score)| Entry { key: key.clone(), display: None, score: f64::from(score) })
            .collect();
        let s = build_small(&entries, 10, 8);
        let keys: Vec<String> = raw.keys().cloned().collect();
        for (pick, edit, at) in typed {
            let p = crate::normalize::prefix(&typed_for(&keys, pick, edit, at, String::new()));
            prop_assert_eq!(got(&s, &p, 10, None), model(&entries, &p, 10, &HashSet::new()), "p={:?}", p);
        }
    }
}

/// Checking a words candidate against the other typed words' lists is paid for: a text of
/// many common words otherwise cost its word count times the budget (an audit's 60 words
/// took 40 ms). Here `b` drives (150 ranks), and each candidate's check against `c`, which
/// never holds it, costs one more: 300.
#[test]
fn checks_against_other_words_lists_are_paid_for() {
    let pairs: Vec<(String, f64)> = (0..300)
        .map(|i| (format!("w{i} a {}", if i % 2 == 0 { "b" } else { "c" }), f64::from(i)))
        .collect();
    let refs: Vec<(&str, f64)> = pairs.iter().map(|(k, s)| (k.as_str(), *s)).collect();
    let entries = entries_of(&refs);
    let s = build(&entries, 10);
    let answer = s.words_answer("a b c ", 10, None);
    assert!(answer.suggestions.is_empty() && answer.complete());
    assert_eq!(answer.examined, 300);
}
