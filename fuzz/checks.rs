//! What each fuzz target checks, shared by the two harnesses that drive them:
//! `cargo fuzz` (coverage-guided libFuzzer on nightly, `fuzz/fuzz_targets/*.rs`) and the stable
//! mutation harness in `tests/fuzz.rs`, which `cargo test` and `.ci/run` run for a bounded time.
//!
//! A check never just calls the code under test: where an input is accepted, it also asserts
//! what must then hold (answers sorted and bounded, keys normalized, blocked terms absent), so a
//! wrong answer is found as well as a panic. Every check takes raw bytes, as a fuzzer gives them.

#![allow(dead_code)] // each fuzz target binary uses one check

use std::sync::OnceLock;

use typeahead::api;
use typeahead_builder::logline;
use typeahead_builder::privacy::Privacy;
use typeahead_core::blocklist::Blocklist;
use typeahead_core::manifest::Manifest;
use typeahead_core::matching::{self, Tiers};
use typeahead_core::normalize;
use typeahead_core::snapshot::{Filter, Snapshot};

/// A check: panics when the input shows a bug.
pub type Check = fn(&[u8]);

/// Every target: name (also the corpus directory under `fuzz/corpus/`) and check.
pub const TARGETS: &[(&str, Check)] = &[
    ("snapshot_bytes", snapshot_bytes),
    ("snapshot_mutated", snapshot_mutated),
    ("logline", logline),
    ("normalize", normalize),
    ("blocklist", blocklist),
    ("query_params", query_params),
    ("privacy", privacy),
    ("manifest", manifest),
];

/// For the snapshot targets under cargo-fuzz: the reader turns panics of the `fst` crate on
/// malformed nodes into errors (`catch_unwind` in `fstwalk::verify`), but libFuzzer's panic
/// hook aborts on every panic, caught or not. This hook stays silent instead; a panic that
/// escapes a check still ends the run (libfuzzer-sys aborts on it) — replay the saved input
/// with `cargo test --test fuzz` (put it in `fuzz/regressions/<target>/`) to read the message.
pub fn quiet_caught_panics() {
    std::panic::set_hook(Box::new(|_| {}));
}

/// Arbitrary bytes as a snapshot: a clean error, or a snapshot whose answers are well-formed.
pub fn snapshot_bytes(data: &[u8]) {
    if let Ok(snapshot) = Snapshot::from_bytes(data.to_vec()) {
        exercise(&snapshot, data);
    }
}

/// A mutated snapshot with its checksum recomputed, so the structural checks behind the
/// checksum are what gets fuzzed (the corpus holds valid snapshots).
pub fn snapshot_mutated(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let mut bytes = data.to_vec();
    let body = bytes.len() - 4;
    let crc = crc32fast::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    if let Ok(snapshot) = Snapshot::from_bytes(bytes) {
        exercise(&snapshot, data);
    }
}

/// Lookups on a snapshot that passed verification: its keys are no longer than a key can be;
/// every answer is at most k long, best first, made of keys that exist and start with the
/// prefix; filtering removes what it must.
fn exercise(snapshot: &Snapshot, data: &[u8]) {
    let longest = snapshot.entries().map(|e| e.key.len()).max().unwrap_or(0);
    assert!(longest <= normalize::MAX_KEY_BYTES, "a key of {longest} bytes passed verification");
    let mut prefixes = vec![String::new()];
    for e in snapshot.entries().take(64) {
        for end in [1, 2, e.key.len() / 2, e.key.len()] {
            if let Some(p) = e.key.get(..end) {
                prefixes.push(p.to_owned());
            }
        }
    }
    // A snapshot starts with its magic: what varies is at its end (its checksum, mutations).
    prefixes.push(String::from_utf8_lossy(&data[data.len().saturating_sub(8)..]).into_owned());
    // Blocked: the keys sharing the first byte of one of the snapshot's own keys (chosen by
    // the input), so the filter has something to hide.
    let own: Vec<u8> = snapshot.entries().take(64).filter_map(|e| e.key.bytes().next()).collect();
    let pick = usize::from(data.last().copied().unwrap_or(0));
    let first_byte = own.get(pick % own.len().max(1)).copied().unwrap_or(0);
    let filter = Filter::new(snapshot, |key| key.bytes().next() == Some(first_byte));
    for prefix in &prefixes {
        for k in [1, 10, snapshot.max_k()] {
            let answer = snapshot.suggest(prefix, k);
            assert!(answer.len() <= k);
            for pair in answer.windows(2) {
                assert!(pair[0].score >= pair[1].score, "answer not best first: {pair:?}");
            }
            for s in &answer {
                assert!(
                    s.key.starts_with(prefix.as_str()),
                    "{:?} does not start with {prefix:?}",
                    s.key
                );
            }
            let filtered = snapshot.suggest_filtered(prefix, k, Some(&filter));
            assert!(filtered.iter().all(|s| s.key.bytes().next() != Some(first_byte)));
        }
        exercise_tiers(snapshot, prefix, &filter, first_byte);
        let _ = snapshot.contains(prefix);
    }
}

/// The tiered answer for `prefix` and for variants of it with a typo and with its words
/// swapped: every item satisfies its tier's condition and no earlier tier's, tiers come in
/// order, no key twice, blocked keys never.
fn exercise_tiers(snapshot: &Snapshot, prefix: &str, filter: &Filter, blocked_first: u8) {
    let mut typed = vec![prefix.to_owned(), prefix.split(' ').rev().collect::<Vec<_>>().join(" ")];
    let mut chars: Vec<char> = prefix.chars().collect();
    if chars.len() > 2 {
        chars.swap(1, 2);
        typed.push(chars.iter().collect());
    }
    for text in typed {
        let p = normalize::prefix(&text);
        for filtered in [None, Some(filter)] {
            let answer = snapshot.answer(&p, 10, filtered, Tiers::All);
            let items = &answer.suggestions;
            assert!(items.len() <= 10);
            let mut keys: Vec<&str> = items.iter().map(|s| s.key.as_str()).collect();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), items.len(), "a key twice for {p:?}");
            for pair in items.windows(2) {
                assert!((pair[0].tier, pair[0].typos) <= (pair[1].tier, pair[1].typos));
            }
            for s in items {
                assert!(matching::check(&p, &s.key, s.tier, s.typos), "{s:?} for {p:?}");
                if filtered.is_some() {
                    assert_ne!(s.key.bytes().next(), Some(blocked_first), "blocked {s:?}");
                }
            }
        }
    }
}

/// The log-line parsers: never panic; accepted lines give back slices of the input.
pub fn logline(data: &[u8]) {
    if let Ok(line) = logline::parse_log_line(data) {
        // The line's hour is its timestamp field's (read as the timestamp parser reads it).
        let field = data.split(|&b| b == b'\t').next().unwrap_or_default();
        let field = std::str::from_utf8(field).unwrap_or_default();
        let hour = logline::parse_timestamp(field).and_then(logline::hour_of);
        assert_eq!(Some(line.hour), hour, "hour of {field:?}");
        let query = line.query.as_bytes();
        assert!(query.is_empty() || data.windows(query.len()).any(|w| w == query));
        assert!(!line.query.contains('\t'));
        if let Some(user) = line.user {
            assert!(!user.is_empty());
        }
        if let Some((surface, key)) = normalize::surface_and_key(line.query) {
            assert!(normalize::is_valid_key(&key), "invalid key {key:?} from {surface:?}");
        }
    }
    if let Ok(line) = logline::parse_count_line(data) {
        assert!(!line.query.contains('\t'));
    }
    // The timestamp field of a line, and the whole input as one: whatever is accepted prints
    // back in the canonical format and parses to the same time.
    let first_field = data.split(|&b| b == b'\t').next().unwrap_or_default();
    for field in [first_field, data] {
        let Ok(text) = std::str::from_utf8(field) else { continue };
        if let Some(t) = logline::parse_timestamp(text).filter(|t| *t >= 0) {
            let printed = logline::format_timestamp(t);
            assert_eq!(logline::parse_timestamp(&printed), Some(t), "{text:?} -> {printed:?}");
        }
    }
}

/// Normalization: surfaces are idempotent and whitespace-clean; keys and prefixes agree.
pub fn normalize(data: &[u8]) {
    let q = String::from_utf8_lossy(data);
    let surface = normalize::surface(&q);
    // The closing NFC keeps marks that lowercasing put out of canonical order in order
    // ("\u{130}\u{319}"), so a surface is its own surface.
    assert_eq!(normalize::surface(&surface), surface, "surface not idempotent for {q:?}");
    assert!(!surface.starts_with(' ') && !surface.ends_with(' ') && !surface.contains("  "));
    let key = normalize::key(&q);
    if normalize::surface(&key) == key {
        assert_eq!(normalize::key(&key), key, "key not idempotent for {q:?}");
    }
    // Invisible characters never reach a key; the joiners alone may stay in a surface.
    assert!(!key.chars().any(normalize::is_default_ignorable), "{key:?} from {q:?}");
    assert!(
        !surface
            .chars()
            .any(|c| normalize::is_default_ignorable(c) && !matches!(c, '\u{200c}' | '\u{200d}')),
        "{surface:?} from {q:?}"
    );
    assert_eq!(normalize::key_of_surface(&surface), key, "key of the surface for {q:?}");
    // The key of a whole query is found by typing that query as a prefix.
    let prefix = normalize::prefix(&q);
    assert!(key.starts_with(&prefix) || prefix.starts_with(&key), "{key:?} vs prefix {prefix:?}");
    let end = normalize::prefix_end(key.as_bytes());
    if !end.is_empty() {
        assert!(end.as_slice() > key.as_bytes());
    }
    if let Some((_, k)) = normalize::surface_and_key(&q) {
        assert!(normalize::is_valid_key(&k));
    }
}

/// The privacy rules on arbitrary text: never panic; invisible characters sprinkled between
/// every character change neither the key nor the verdict (normalization removes them and
/// recomposes what they kept apart, "co\u{200b}\u{301}" is "có"); nine ASCII digits in a row
/// in the key are always withheld, however the surface separates them.
pub fn privacy(data: &[u8]) {
    static RULES: OnceLock<Privacy> = OnceLock::new();
    let rules = RULES.get_or_init(Privacy::new);
    let q = String::from_utf8_lossy(data);
    let Some((surface, key)) = normalize::surface_and_key(&q) else { return };
    let verdict = rules.check(&surface, &key);
    let sprinkled: String = q.chars().flat_map(|c| [c, '\u{200b}']).collect();
    if let Some((s, k)) = normalize::surface_and_key(&sprinkled) {
        assert_eq!(k, key, "zero-width spaces changed the key of {q:?}");
        assert_eq!(rules.check(&s, &k), verdict, "zero-width spaces changed the verdict on {q:?}");
    }
    if key.as_bytes().windows(9).any(|w| w.iter().all(u8::is_ascii_digit)) {
        assert!(verdict.is_some(), "a nine-digit run in {key:?} was not withheld");
    }
}

/// Blocklist text: parses or fails cleanly; every entry blocks itself and queries that
/// contain it as whole words, whatever case, width or spacing they are typed in.
pub fn blocklist(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(list) = Blocklist::parse(&text) else { return };
    for entry in list.entries().iter().take(32) {
        assert_eq!(normalize::words(&normalize::key(entry)), *entry, "entries are normalized");
        assert!(list.blocks(entry), "{entry:?} does not block itself");
        assert!(list.blocks(&normalize::key(&format!("x {entry} y"))));
    }
    for line in typeahead_core::blocklist::lines(&text).take(32) {
        let key = normalize::key(line);
        if !normalize::words(&key).is_empty() && !line.trim_start().starts_with('#') {
            assert!(list.blocks(&key), "line {line:?} (key {key:?}) is not blocked");
        }
    }
}

/// The query string of `/v1/suggest` and `/v1/opensearch`, through the real router: never a
/// 5xx, always JSON, answers bounded and free of blocked terms.
pub fn query_params(data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else { return };
    if let Ok(params) = api::parse_params(Some(raw)) {
        assert!(params.q.len() <= api::MAX_QUERY_BYTES);
    }
    let app = app();
    for path in ["/v1/suggest", "/v1/opensearch"] {
        let Ok(uri) = format!("{path}?{raw}").parse::<axum::http::Uri>() else { return };
        let request = axum::http::Request::get(uri).body(axum::body::Body::empty());
        let Ok(request) = request else { return };
        let (status, body) = app.runtime.block_on(async {
            use tower::ServiceExt;
            let response = app.router.clone().oneshot(request).await.expect("infallible");
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("body");
            (status, body)
        });
        assert!(!status.is_server_error(), "{path}?{raw} answered {status}");
        let json: serde_json::Value = serde_json::from_slice(&body).expect("JSON body");
        if !status.is_success() {
            continue;
        }
        let texts: Vec<String> = if path == "/v1/suggest" {
            let answer: api::SuggestResponse = serde_json::from_value(json).expect("suggest shape");
            answer.suggestions.into_iter().map(|s| s.text).collect()
        } else {
            // OpenSearch: [query, [completions], ...].
            let texts = json.get(1).and_then(|t| t.as_array()).expect("opensearch shape");
            texts.iter().map(|t| t.as_str().expect("a completion is text").to_owned()).collect()
        };
        // The snapshot holds more keys than an answer may (its top-k is 10).
        assert!(texts.len() <= 10, "{path}?{raw}: {} completions", texts.len());
        for text in &texts {
            assert!(!app.blocked.blocks(&normalize::key(text)), "blocked {text:?} leaked");
        }
    }
}

/// A manifest as read from a bucket or a file (the one outside JSON every follower and
/// aggregator acts on): a clean error, or one that prints back to itself, names only files
/// below its directory, puts every key in exactly one partition, and routes every prefix to
/// the partition of each key under it.
pub fn manifest(data: &[u8]) {
    let Ok(m) = Manifest::parse(data) else { return };
    let printed = serde_json::to_vec(&m).expect("a manifest serializes");
    assert_eq!(Manifest::parse(&printed).as_ref(), Ok(&m), "does not print back to itself");
    let mut keys = vec![String::new(), String::from_utf8_lossy(data).into_owned()];
    for p in &m.partitions {
        assert!(!p.file.starts_with('/') && !p.file.split('/').any(|s| s == ".."), "{p:?}");
        keys.push(p.start.clone());
        keys.extend(p.end.iter().flat_map(|e| [e.clone(), format!("{e}\0"), format!("{e}z")]));
    }
    for key in keys.iter().take(64) {
        let holders: Vec<usize> =
            m.partitions.iter().filter(|p| p.contains(key)).map(|p| p.index).collect();
        assert_eq!(holders.len(), 1, "{key:?} is in partitions {holders:?}");
        for (end, _) in key.char_indices().chain([(key.len(), ' ')]).take(32) {
            let routed = m.partitions_for(&key[..end]);
            assert!(routed.contains(&holders[0]), "{:?} not routed to {holders:?}", &key[..end]);
        }
    }
}

/// A real server's router over a small snapshot with a blocklist, built once per process.
struct App {
    runtime: tokio::runtime::Runtime,
    router: typeahead::http::Front,
    blocked: Blocklist,
    _dir: tempfile::TempDir,
}

fn app() -> &'static App {
    static APP: OnceLock<App> = OnceLock::new();
    APP.get_or_init(|| {
        use typeahead_core::snapshot::{BuildInfo, Entry, write_file};
        let dir = tempfile::tempdir().expect("temp dir");
        let words = ["bomb threat", "cafe", "new york", "new york times", "news", "bomb"];
        // Sixteen more under "new": an answer must stop at ten.
        let more = ('a'..='p').map(|c| format!("new {c}{c}"));
        let mut entries: Vec<Entry> = words
            .iter()
            .map(|w| (*w).to_owned())
            .chain(more)
            .enumerate()
            .map(|(i, key)| Entry { key, display: None, score: 100.0 - i as f64 })
            .collect();
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        let info = BuildInfo::default();
        let snapshot = dir.path().join("s.snap");
        write_file(&snapshot, &entries, &info).expect("snapshot");
        let blocklist = dir.path().join("blocked.txt");
        std::fs::write(&blocklist, "bomb\n").expect("blocklist");
        let config = typeahead::server::ServeConfig {
            snapshot,
            blocklist: Some(blocklist),
            admin_token: None,
            limits: typeahead::http::Limits::default(),
            faults: typeahead::server::Faults::default(),
            // Small, so inputs go through both the cache and the lookup.
            cache_entries: 64,
            web: typeahead::web::WebConfig::default(),
        };
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let state =
            runtime.block_on(async { typeahead::server::load_state(&config) }).expect("state");
        let router = typeahead::server::public_router(state, &config.limits, config.faults);
        App { runtime, router, blocked: Blocklist::parse("bomb\n").expect("list"), _dir: dir }
    })
}
