//! Snapshot tests: lookups against a brute-force oracle, filtering, corruption.

use proptest::prelude::*;

use super::*;
use crate::{normalize, rank};

fn info(top_k: usize) -> BuildInfo {
    BuildInfo {
        build_time_unix: 1_700_000_000,
        watermark_hour: Some(470_000),
        half_life_hours: 168.0,
        min_score: 0.0,
        top_k,
        range_start: String::new(),
        range_end: None,
        blocklist: Vec::new(),
        small_subtree: SMALL_SUBTREE,
        rules: None,
    }
}

fn entries_of(pairs: &[(&str, f64)]) -> Vec<Entry> {
    let mut entries: Vec<Entry> =
        pairs.iter().map(|&(k, score)| Entry { key: k.to_owned(), display: None, score }).collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries
}

fn build(entries: &[Entry], top_k: usize) -> Snapshot {
    let (bytes, _) = write(entries, &info(top_k)).unwrap();
    Snapshot::from_bytes(bytes).unwrap()
}

/// The answer by definition: filter by prefix, sort by the ranking order, take k.
fn oracle(
    entries: &[Entry],
    prefix: &str,
    k: usize,
    blocked: &dyn Fn(&str) -> bool,
) -> Vec<(String, f64)> {
    let mut hits: Vec<&Entry> =
        entries.iter().filter(|e| e.key.starts_with(prefix) && !blocked(&e.key)).collect();
    hits.sort_by(|a, b| rank::cmp(a.score, a.key.as_bytes(), b.score, b.key.as_bytes()));
    hits.iter().take(k).map(|e| (e.key.clone(), e.score)).collect()
}

fn answer(s: &Snapshot, prefix: &str, k: usize, filter: Option<&Filter>) -> Vec<(String, f64)> {
    s.suggest_filtered(prefix, k, filter).into_iter().map(|x| (x.key, x.score)).collect()
}

/// The decoded lists stop at their budget of key bytes, and a snapshot whose lists would
/// decode to more than its file (long keys front-coded to nothing, each in many lists: what a
/// crafted file can do) keeps answering from the file's lists, exactly.
#[test]
fn decoded_lists_keep_to_a_budget_of_the_files_size() {
    let long = "x".repeat(crate::normalize::MAX_KEY_BYTES - 3);
    let pairs: Vec<(String, f64)> =
        (0..300).map(|i| (format!("{long}{i:03}"), f64::from(1000 - i))).collect();
    let pairs: Vec<(&str, f64)> = pairs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let entries = entries_of(&pairs);
    let mut many = info(64);
    many.small_subtree = 4;
    let (bytes, _) = write(&entries, &many).unwrap();
    let mut s = Snapshot::from_bytes(bytes).unwrap();
    let whole = super::lists::DecodedLists::within(&s, usize::MAX).unwrap().text_bytes();
    assert!(whole > s.size_bytes(), "{whole} bytes of keys, a file of {}", s.size_bytes());
    assert!(super::lists::DecodedLists::within(&s, whole - 1).is_none());
    assert!(!s.forget_decoded_lists(), "lists past the file's size were decoded");
    for p in ["", "x", &long, &format!("{long}1")] {
        assert_eq!(answer(&s, p, 64, None), oracle(&entries, p, 64, &|_| false), "prefix {p:?}");
    }
}

/// Keys are at most as long as normalization makes them: the writer refuses a longer one,
/// and a file that holds one anyway is refused when opened, saying so.
#[test]
fn keys_longer_than_a_key_can_be_are_refused() {
    let max = crate::normalize::MAX_KEY_BYTES;
    let (fits, long) = ("k".repeat(max), format!("{}l", "k".repeat(max)));
    let entries = entries_of(&[(fits.as_str(), 2.0), (long.as_str(), 1.0)]);
    let refused = write(&entries, &info(10)).unwrap_err().to_string();
    assert!(refused.contains(&format!("longer than {max}")), "{refused}");
    let (bytes, _) = super::writer::write_unchecked(&entries, &info(10)).unwrap();
    let refused = Snapshot::from_bytes(bytes).unwrap_err().to_string();
    assert!(refused.contains(&format!("key 1 is longer than {max} bytes")), "{refused}");
    let (bytes, _) = write(&entries[..1], &info(10)).unwrap();
    assert_eq!(Snapshot::from_bytes(bytes).unwrap().entries().next().unwrap().key, fits);
}

/// Query-like text gets a symbol table; text it would not shrink is stored as it is. Both
/// answer the same.
#[test]
fn keys_get_a_symbol_table_only_when_it_makes_them_smaller() {
    let table_bytes = |s: &Snapshot| {
        s.section_sizes().into_iter().find(|(name, _)| *name == "key_symbols").map(|(_, n)| n)
    };
    let words = ["new york", "weather", "news", "restaurants", "near me", "hotels"];
    let queries: Vec<String> =
        (0..600).map(|i| format!("{} {} {i}", words[i % 6], words[(i / 6) % 6])).collect();
    // Code points spread over 20,000 CJK characters: no eight-byte run repeats enough to pay
    // for a table entry.
    let scattered: Vec<String> = (0..600u32)
        .map(|i| {
            (0..4)
                .filter_map(|j| char::from_u32(0x4e00 + (i * 7919 + j * 104_729) % 20_000))
                .collect()
        })
        .collect();
    for (keys, expect_table) in [(queries, true), (scattered, false)] {
        let pairs: Vec<(&str, f64)> =
            keys.iter().enumerate().map(|(i, k)| (k.as_str(), (i % 17) as f64 + 1.0)).collect();
        let mut entries = entries_of(&pairs);
        entries.dedup_by(|a, b| a.key == b.key);
        let s = build(&entries, 10);
        assert_eq!(table_bytes(&s).is_some_and(|n| n > 0), expect_table);
        let stored: Vec<String> = s.entries().map(|e| e.key).collect();
        let expected: Vec<String> = entries.iter().map(|e| e.key.clone()).collect();
        assert_eq!(stored, expected);
        for e in entries.iter().step_by(37) {
            let prefix: String = e.key.chars().take(2).collect();
            assert_eq!(answer(&s, &prefix, 10, None), oracle(&entries, &prefix, 10, &|_| false));
        }
    }
}

#[test]
fn seed_example() {
    let entries = entries_of(&[
        ("cap", 3.0),
        ("cat", 9.0),
        ("captain", 5.0),
        ("capital", 5.0),
        ("caption", 1.0),
    ]);
    let s = build(&entries, 10);
    let keys: Vec<String> = s.suggest("cap", 10).into_iter().map(|x| x.key).collect();
    assert_eq!(keys, ["capital", "captain", "cap", "caption"]);
    assert_eq!(s.suggest("ca", 1)[0].key, "cat");
    assert!(s.suggest("dog", 10).is_empty());
    assert!(
        s.contains("cap") && s.contains("caption") && !s.contains("capt") && !s.contains("zzz")
    );
    assert_eq!(s.suggest("", 2).len(), 2);
}

#[test]
fn display_text_and_scores_round_trip() {
    let mut entries = entries_of(&[("cafe", 2.5), ("cafe de flore", 1.25)]);
    entries[0].display = Some("café".into());
    let s = build(&entries, 10);
    let got = s.suggest("caf", 10);
    assert_eq!(
        got[0],
        Suggestion {
            key: "cafe".into(),
            display: Some("café".into()),
            score: 2.5,
            tier: crate::matching::Match::Prefix,
            typos: 0,
        }
    );
    assert_eq!(got[0].text(), "café");
    assert_eq!(got[1].text(), "cafe de flore");
    let all: Vec<Suggestion> = s.entries().collect();
    assert_eq!(all.len(), 2);
}

#[test]
fn large_subtrees_use_stored_lists() {
    // 2,000 keys under "a" force list nodes on the way down.
    let keys: Vec<String> = (0..2000).map(|i| format!("a{i:04}")).collect();
    let entries: Vec<Entry> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| Entry { key: k.clone(), display: None, score: (i % 97) as f64 })
        .collect();
    let s = build(&entries, 10);
    assert!(s.meta().list_nodes > 10);
    for p in ["", "a", "a1", "a19", "a199", "a1999", "b"] {
        assert_eq!(answer(&s, p, 10, None), oracle(&entries, p, 10, &|_| false), "prefix {p:?}");
    }
}

#[test]
fn filter_refills_from_the_rest_of_the_subtree() {
    let keys: Vec<String> = (0..500).map(|i| format!("q{i:03}")).collect();
    let entries: Vec<Entry> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| Entry { key: k.clone(), display: None, score: 1000.0 - i as f64 })
        .collect();
    let s = build(&entries, 10);
    let blocked = |k: &str| k < "q003";
    let filter = Filter::new(&s, blocked);
    assert_eq!(filter.blocked_count(), 3);
    let got = answer(&s, "q", 10, Some(&filter));
    assert_eq!(got, oracle(&entries, "q", 10, &blocked));
    assert_eq!(got[0].0, "q003");
}

#[test]
fn empty_snapshot_answers_nothing() {
    let s = build(&[], 10);
    assert!(s.is_empty());
    assert!(s.suggest("", 10).is_empty());
}

#[test]
fn rejects_unsorted_input_and_bad_scores() {
    let unsorted = vec![
        Entry { key: "b".into(), display: None, score: 1.0 },
        Entry { key: "a".into(), display: None, score: 1.0 },
    ];
    assert!(matches!(write(&unsorted, &info(10)), Err(Error::InvalidInput(_))));
    let nan = vec![Entry { key: "a".into(), display: None, score: f64::NAN }];
    assert!(matches!(write(&nan, &info(10)), Err(Error::InvalidInput(_))));
    // `-0.0` used to be written, in a file the reader then refused.
    let zeros = vec![
        Entry { key: "a".into(), display: None, score: 0.0 },
        Entry { key: "b".into(), display: None, score: -0.0 },
    ];
    assert!(matches!(write(&zeros, &info(10)), Err(Error::InvalidInput(_))));
    // A small-subtree size the reader would refuse is refused when writing.
    let one = vec![Entry { key: "a".into(), display: None, score: 1.0 }];
    let huge = BuildInfo { small_subtree: 1 << 20, ..info(10) };
    assert!(matches!(write(&one, &huge), Err(Error::InvalidInput(_))));
}

#[test]
fn rejects_corruption_truncation_and_foreign_files() {
    let entries = entries_of(&[("alpha", 1.0), ("beta", 2.0)]);
    let (bytes, _) = write(&entries, &info(10)).unwrap();
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0x40;
    assert!(matches!(Snapshot::from_bytes(flipped), Err(Error::ChecksumMismatch { .. })));
    assert!(Snapshot::from_bytes(bytes[..bytes.len() - 7].to_vec()).is_err());
    assert!(matches!(Snapshot::from_bytes(b"hello world".to_vec()), Err(Error::NotASnapshot)));
    let mut future = bytes.clone();
    future[8] = 9;
    assert!(matches!(
        Snapshot::from_bytes(future),
        Err(Error::UnsupportedVersion { found: 9, .. })
    ));
}

/// A file of another kind at the snapshot's path is refused by its first bytes, before its
/// size is taken in memory: a sparse terabyte of anything but a snapshot header gave "does not
/// fit in memory" at best, and at worst (a few GB, inside the memory limit) was read whole
/// before its magic bytes were looked at. Bytes after the last section are refused too, so
/// the length a header allows is the length read.
#[test]
fn a_foreign_file_is_refused_by_its_header_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.snap");
    let file = std::fs::File::create(&path).unwrap();
    std::io::Write::write_all(&mut &file, b"2006-03-01 07:17:12\tsome log line\n").unwrap();
    file.set_len(1 << 40).unwrap();
    assert!(matches!(Snapshot::open(&path), Err(Error::NotASnapshot)));

    let (bytes, _) = write(&entries_of(&[("alpha", 1.0)]), &info(10)).unwrap();
    let mut longer = bytes[..bytes.len() - 4].to_vec();
    longer.extend_from_slice(&[0; 8]);
    longer.extend_from_slice(&[0; 4]);
    let longer = reseal(longer);
    assert!(matches!(Snapshot::from_bytes(longer.clone()), Err(Error::Corrupt(_))));
    let at = dir.path().join("longer.snap");
    std::fs::write(&at, &longer).unwrap();
    assert!(matches!(Snapshot::open(&at), Err(Error::Corrupt(_))));
    std::fs::write(&at, &bytes).unwrap();
    assert_eq!(Snapshot::open(&at).unwrap().len(), 1);
}

#[test]
fn a_cancelled_open_gives_up_and_an_uncancelled_one_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.snap");
    write_file(&path, &entries_of(&[("alpha", 1.0), ("beta", 2.0)]), &info(10)).unwrap();
    let cancel = std::sync::atomic::AtomicBool::new(true);
    assert!(matches!(Snapshot::open_cancellable(&path, &cancel), Err(Error::Cancelled)));
    // Given up before the read: a path that cannot be read is not even opened.
    let missing = dir.path().join("missing.snap");
    assert!(matches!(Snapshot::open_cancellable(&missing, &cancel), Err(Error::Cancelled)));
    cancel.store(false, std::sync::atomic::Ordering::Relaxed);
    let opened = Snapshot::open_cancellable(&path, &cancel).unwrap();
    assert_eq!(opened.id(), Snapshot::open(&path).unwrap().id());
    assert_eq!(answer(&opened, "", 10, None), vec![("beta".into(), 2.0), ("alpha".into(), 1.0)]);
}

/// Valid checksum, broken content: the checksum is recomputed after a mutation.
fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
    let body = bytes.len() - 4;
    let crc = crc32fast::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

fn random_entries() -> impl Strategy<Value = Vec<Entry>> {
    // Small alphabets with diacritics and spaces give deep shared prefixes and many ties;
    // "é" folds to "e" in the key (kept in the display), "ж" stays two bytes in it.
    proptest::collection::btree_map("[ab éж]{1,7}", 0u8..6, 0..120).prop_map(|m| {
        let mut entries: Vec<Entry> = m
            .into_iter()
            .filter_map(|(q, s)| {
                let (surface, key) = normalize::surface_and_key(&q)?;
                Some(Entry { key, display: Some(surface), score: f64::from(s) * 0.5 })
            })
            .collect();
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        entries.dedup_by(|a, b| a.key == b.key);
        entries
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn answers_equal_the_oracle(entries in random_entries(), k in 1usize..12, probes in proptest::collection::vec("[ab é]{0,4}", 0..8)) {
        let s = build(&entries, 10);
        let mut prefixes: Vec<String> = probes.iter().map(|p| normalize::prefix(p)).collect();
        for e in &entries {
            for (i, _) in e.key.char_indices() { prefixes.push(e.key[..i].to_owned()); }
            prefixes.push(e.key.clone());
        }
        for p in prefixes {
            prop_assert_eq!(answer(&s, &p, k, None), oracle(&entries, &p, k.min(10), &|_| false), "prefix {:?}", p);
        }
    }

    /// The lists decoded at opening answer as the file's lists do: keys, scores and display
    /// texts, for every prefix and k.
    #[test]
    fn decoded_lists_answer_as_the_file_lists(entries in random_entries(), k in 1usize..6) {
        let mut small = info(4);
        small.small_subtree = 4;
        let (bytes, _) = write(&entries, &small).unwrap();
        let decoded = Snapshot::from_bytes(bytes.clone()).unwrap();
        let mut file = Snapshot::from_bytes(bytes).unwrap();
        prop_assert_eq!(file.forget_decoded_lists(), decoded.meta().list_nodes > 0);
        let mut prefixes = vec![String::new()];
        for e in &entries {
            prefixes.extend(e.key.char_indices().map(|(i, _)| e.key[..i].to_owned()));
        }
        for p in prefixes {
            prop_assert_eq!(decoded.suggest(&p, k), file.suggest(&p, k), "prefix {:?}", p);
        }
    }

    #[test]
    fn filtered_answers_equal_the_oracle(entries in random_entries(), blocked_word in "[abé]{1,2}", k in 1usize..11) {
        let s = build(&entries, 4);
        let list = crate::blocklist::Blocklist::parse(&blocked_word).unwrap();
        let filter = Filter::new(&s, |key| list.blocks(key));
        for e in &entries {
            for (i, _) in e.key.char_indices() {
                let p = &e.key[..i];
                prop_assert_eq!(
                    answer(&s, p, k, Some(&filter)),
                    oracle(&entries, p, k.min(4), &|key| list.blocks(key)),
                    "prefix {:?}", p
                );
            }
        }
    }

    #[test]
    fn head_words_order_keys_unless_equal(a in "[ab é]{0,12}", b in "[ab é]{0,12}") {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        let words = reader::head_word(a).cmp(&reader::head_word(b));
        if words.is_ne() {
            prop_assert_eq!(words, a.cmp(b));
        }
    }

    #[test]
    fn head_below_compares_with_the_bucket_head(entries in random_entries(), targets in proptest::collection::vec("[ab é\u{ff}]{0,10}", 1..8)) {
        let s = build(&entries, 10);
        let keys: Vec<&[u8]> = entries.iter().map(|e| e.key.as_bytes()).collect();
        for t in &targets {
            for b in 0..=keys.len().div_ceil(frontcode::BUCKET_SIZE) {
                let head = keys.get(b * frontcode::BUCKET_SIZE);
                prop_assert_eq!(s.head_below(b, t.as_bytes(), reader::head_word(t.as_bytes())), head.is_some_and(|h| *h < t.as_bytes()), "bucket {} target {:?}", b, t);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = Snapshot::from_bytes(bytes);
    }

    #[test]
    fn mutated_snapshots_are_rejected_or_answer_without_panic(
        entries in random_entries(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let (mut bytes, _) = write(&entries, &info(10)).unwrap();
        for (at, x) in flips {
            let i = at.index(bytes.len() - 4);
            bytes[i] ^= x | 1;
        }
        if let Ok(s) = Snapshot::from_bytes(reseal(bytes)) {
            for p in ["", "a", "b", "ab", "é"] {
                let _ = s.suggest(p, 10);
            }
            for p in ["abab", "ab ab", "b a", "a ", "baaab"] {
                let answer = s.answer(p, 10, None, crate::matching::Tiers::All);
                prop_assert!(answer.suggestions.len() <= 10);
                for x in &answer.suggestions {
                    prop_assert!(crate::matching::check(p, &x.key, x.tier, x.typos), "{:?} for {:?}", x, p);
                }
            }
        }
    }
}

/// Two builds of the same completions differ in their ids (the checksum covers the build
/// time) and in nothing else; any other difference, in a score or in the settings, counts.
#[test]
fn same_content_ignores_the_build_time_alone() {
    let entries = entries_of(&[("new york", 5.0), ("news", 3.0), ("newt", 1.0)]);
    let at = |build_time_unix: i64, entries: &[Entry], top_k: usize| {
        let info = BuildInfo { build_time_unix, ..info(top_k) };
        Snapshot::from_bytes(write(entries, &info).unwrap().0).unwrap()
    };
    let (a, b) = (at(1, &entries, 10), at(2, &entries, 10));
    assert_ne!(a.id(), b.id());
    assert!(a.same_content(&b) && b.same_content(&a));
    let mut rescored = entries.clone();
    rescored[0].score = 5.5;
    assert!(!a.same_content(&at(1, &rescored, 10)), "a score");
    assert!(!a.same_content(&at(1, &entries, 5)), "the top-k");
    assert!(!a.same_content(&at(1, &entries[1..], 10)), "a completion");
}
