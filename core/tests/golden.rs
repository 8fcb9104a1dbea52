//! Golden snapshots: committed bytes of a small snapshot per format version, with the answers
//! it gave when it was written. Every test run loads them and answers again, so a change to
//! the snapshot format (or to what a format's bytes mean) is a deliberate act: it bumps
//! `FORMAT_VERSION` and adds a golden file, it does not slip in.
//!
//! `cargo test -p typeahead-core --test golden -- --ignored write_golden` writes the current
//! version's files (only when they do not exist yet).

use std::path::{Path, PathBuf};

use typeahead_core::matching::Tiers;
use typeahead_core::normalize;
use typeahead_core::snapshot::{self, BuildInfo, Entry, FORMAT_VERSION, Snapshot};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden")
}

/// A small snapshot with shared prefixes, display texts, non-ASCII and CJK keys, ties, and
/// enough keys under "ca" for a stored list node.
fn entries() -> Vec<Entry> {
    let mut entries: Vec<Entry> = Vec::new();
    let words = ["café", "cap", "captain", "capital", "car", "cart", "cat", "new york", "newton"];
    for (i, w) in words.iter().enumerate() {
        for j in 0..8 {
            let text = if j == 0 { (*w).to_owned() } else { format!("{w} {j}") };
            let key = normalize::key(&text);
            let display = (text != key).then_some(text);
            entries.push(Entry { key, display, score: ((i * 7 + j * 3) % 11) as f64 + 0.5 });
        }
    }
    for (q, score) in [("北京", 3.0), ("北京 天气", 2.0), ("ÉCOLE", 2.0), ("ecole", 2.0)] {
        entries.push(Entry { key: normalize::key(q), display: None, score });
    }
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries.dedup_by(|a, b| a.key == b.key);
    entries
}

const PREFIXES: &[&str] = &[
    "",
    "c",
    "ca",
    "cap",
    "cat",
    "café",
    "new ",
    "n",
    "北",
    "e",
    "zz",
    "york",
    "3 cap",
    "captian",
    "cpatain 5",
    "天气",
];

/// Every prefix's answer (all tiers) as text lines: `prefix<TAB>text<TAB>score<TAB>tier ...`.
fn answers(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    for p in PREFIXES {
        out.push_str(p);
        let answer = snapshot.answer(&normalize::prefix(p), 10, None, Tiers::All);
        for s in answer.suggestions {
            out.push_str(&format!("\t{}\t{}\t{}", s.text(), s.score, s.tier.as_str()));
        }
        out.push('\n');
    }
    out
}

#[test]
fn every_golden_snapshot_loads_and_answers_as_recorded() {
    let mut versions = 0;
    for entry in std::fs::read_dir(golden_dir()).expect("golden dir") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("snap") {
            continue;
        }
        versions += 1;
        let name = path.file_stem().and_then(|s| s.to_str()).expect("name");
        let version: u32 = name.trim_start_matches('v').parse().expect("vN.snap");
        let expected = std::fs::read_to_string(path.with_extension("answers")).expect("answers");
        match Snapshot::open(&path) {
            Ok(snapshot) => {
                assert_eq!(version, FORMAT_VERSION, "{name} loads but is not the current version");
                assert_eq!(answers(&snapshot), expected, "{name} answers differently now");
            }
            // Older formats are refused with a message that names both versions.
            Err(e) => {
                assert_ne!(version, FORMAT_VERSION, "the current golden snapshot fails: {e}");
                let message = e.to_string();
                assert!(message.contains(&version.to_string()), "{message}");
            }
        }
    }
    assert!(versions >= 1, "no golden snapshot committed");
    assert!(
        golden_dir().join(format!("v{FORMAT_VERSION}.snap")).exists(),
        "format {FORMAT_VERSION} has no golden snapshot: run write_golden"
    );
}

#[test]
#[ignore = "writes into the source tree; run once per new FORMAT_VERSION"]
fn write_golden() {
    let path = golden_dir().join(format!("v{FORMAT_VERSION}.snap"));
    assert!(!path.exists(), "{} exists: golden files are never rewritten", path.display());
    std::fs::create_dir_all(golden_dir()).expect("golden dir");
    let info = BuildInfo {
        build_time_unix: 1_700_000_000,
        watermark_hour: Some(472_222),
        ..BuildInfo::default()
    };
    snapshot::write_file(&path, &entries(), &info).expect("write");
    let snapshot = Snapshot::open(&path).expect("load");
    std::fs::write(path.with_extension("answers"), answers(&snapshot)).expect("answers");
}
