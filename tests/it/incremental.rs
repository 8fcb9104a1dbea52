//! Hourly builds through `--state` must give the same scores as one build over all hours.

use std::path::Path;

use proptest::prelude::*;
use typeahead::blocklist::Blocklist;
use typeahead::builder::build::{self, BuildError, BuildOptions};
use typeahead::builder::partition::Partitioning;
use typeahead::generation::MANIFEST_FILE;
use typeahead::manifest::Manifest;

use crate::support::{BASE_HOUR, assert_same_entries, entries, hour_line, log_text, write};

fn options(inputs: &[&Path], state: Option<&Path>, out: &Path) -> BuildOptions {
    BuildOptions {
        inputs: inputs.iter().map(|p| p.to_path_buf()).collect(),
        state_dir: state.map(Path::to_path_buf),
        out: out.to_path_buf(),
        partitioning: None,
        half_life_hours: 5.0,
        min_score: 0.0,
        min_users: 0,
        blocklist: Blocklist::empty(),
        top_k: 10,
        counts_hour: None,
        threads: 2,
        until: None,
        keep_generations: 3,
        gate: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Building hours 1..10 then 11..20 incrementally equals building 1..20 at once.
    #[test]
    fn incremental_equals_one_shot(seed in any::<u64>(), lines in 50usize..400) {
        let dir = tempfile::tempdir().unwrap();
        let first = write(dir.path(), "h01-10.tsv", &log_text(seed, BASE_HOUR, 10, lines));
        let second = write(dir.path(), "h11-20.tsv", &log_text(seed ^ 1, BASE_HOUR + 10, 10, lines));
        let state = dir.path().join("state");
        let inc = dir.path().join("inc.snap");
        build::run(&options(&[&first], Some(&state), &inc)).unwrap();
        build::run(&options(&[&second], Some(&state), &inc)).unwrap();
        let all = dir.path().join("all.snap");
        build::run(&options(&[&second, &first], None, &all)).unwrap();
        assert_same_entries(&entries(&inc), &entries(&all), 1e-9);
    }
}

#[test]
fn rerunning_the_same_input_counts_lines_as_late() {
    let dir = tempfile::tempdir().unwrap();
    let log = write(dir.path(), "log.tsv", &log_text(7, BASE_HOUR, 6, 300));
    let state = dir.path().join("state");
    let out = dir.path().join("s.snap");
    let first = build::run(&options(&[&log], Some(&state), &out)).unwrap();
    let before = entries(&out);
    let again = build::run(&options(&[&log], Some(&state), &out)).unwrap();
    assert_eq!(again.lines.counted, 0);
    assert_eq!(
        again.lines.late,
        first.lines.counted
            + first.lines.privacy_total()
            + first.lines.bad.get("rejected_query").copied().unwrap_or(0)
    );
    assert_eq!(again.watermark, first.watermark);
    assert_same_entries(&entries(&out), &before, 0.0);
}

/// A key written in several ways, some of them last searched in the same earlier hour,
/// scores the same, to the bit, when a build with nothing new reads it back from the state.
/// (The state held every form moved to the watermark one by one, while the build that wrote
/// it had added same-hour forms before moving them: the re-run scored such keys an ulp away,
/// so it was a new generation with the same searches.)
#[test]
fn a_rerun_scores_every_key_to_the_bit() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for (a, b) in (1..12).flat_map(|a| (1..12).map(move |b| (a, b))) {
        let key = format!("cafe {a} {b}");
        text += &hour_line(BASE_HOUR, &key).repeat(a);
        text += &hour_line(BASE_HOUR, &key.replace("cafe", "café")).repeat(b);
        text += &hour_line(BASE_HOUR + 3, &format!("cafè {a} {b}"));
    }
    let log = write(dir.path(), "log.tsv", &text);
    let state = dir.path().join("state");
    let out = dir.path().join("s.snap");
    let bits = || -> Vec<(String, u64)> {
        entries(&out).into_iter().map(|(key, _, score)| (key, score.to_bits())).collect()
    };
    build::run(&options(&[&log], Some(&state), &out)).unwrap();
    let first = bits();
    assert_eq!(first.len(), 121);
    let again = build::run(&options(&[&log], Some(&state), &out)).unwrap();
    assert_eq!(again.lines.counted, 0);
    let moved = bits().into_iter().zip(first).find(|(now, before)| now != before);
    assert_eq!(moved, None, "(key, score bits) now and before");
}

#[test]
fn a_state_refuses_another_half_life() {
    let dir = tempfile::tempdir().unwrap();
    let log = write(dir.path(), "log.tsv", &log_text(3, BASE_HOUR, 3, 50));
    let state = dir.path().join("state");
    let out = dir.path().join("s.snap");
    build::run(&options(&[&log], Some(&state), &out)).unwrap();
    let mut other = options(&[&log], Some(&state), &out);
    other.half_life_hours = 24.0;
    assert!(matches!(build::run(&other), Err(BuildError::HalfLifeMismatch { .. })));
}

#[test]
fn min_score_drops_faded_keys_from_state_and_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let old = write(dir.path(), "old.tsv", "2026-01-05 00:10:00\told query\n");
    let new = write(dir.path(), "new.tsv", "2026-01-06 00:10:00\tnew query\n");
    let state = dir.path().join("state");
    let out = dir.path().join("s.snap");
    let mut opts = options(&[&old], Some(&state), &out);
    opts.min_score = 0.01; // 24 hours at a 5-hour half-life decays 1.0 to 0.036; 48 hours below 0.01
    build::run(&opts).unwrap();
    opts.inputs = vec![new.clone()];
    let summary = build::run(&opts).unwrap();
    assert_eq!(summary.dropped_min_score, 0);
    let keys: Vec<String> = entries(&out).into_iter().map(|e| e.0).collect();
    assert_eq!(keys, ["new query", "old query"]);
    let later = write(dir.path(), "later.tsv", "2026-01-07 00:10:00\tnew query\n");
    opts.inputs = vec![later];
    let summary = build::run(&opts).unwrap();
    assert_eq!(summary.dropped_min_score, 1);
    let keys: Vec<String> = entries(&out).into_iter().map(|e| e.0).collect();
    assert_eq!(keys, ["new query"]);
}

#[test]
fn blocklist_and_min_users_keep_keys_out_of_the_snapshot_but_in_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let log = write(
        dir.path(),
        "log.tsv",
        "2026-01-05 00:10:00\thow to make a bomb\tu1\n\
         2026-01-05 00:11:00\tbombay hotels\tu1\n\
         2026-01-05 00:12:00\tbombay hotels\tu2\n\
         2026-01-05 00:13:00\tbombay hotels\tu2\n\
         2026-01-05 00:14:00\tsecret diary\tu3\n",
    );
    let out = dir.path().join("s.snap");
    let state = dir.path().join("state");
    let mut opts = options(&[&log], Some(&state), &out);
    opts.blocklist = Blocklist::parse("# operators' list\nBomb\n").unwrap();
    opts.min_users = 2;
    let summary = build::run(&opts).unwrap();
    assert_eq!((summary.keys_kept, summary.blocked, summary.held_min_users), (3, 0, 2));
    let keys: Vec<String> = entries(&out).into_iter().map(|e| e.0).collect();
    assert_eq!(keys, ["bombay hotels"]);
    opts.min_users = 1;
    let summary = build::run(&opts).unwrap();
    assert_eq!(summary.blocked, 1);
    let keys: Vec<String> = entries(&out).into_iter().map(|e| e.0).collect();
    assert_eq!(keys, ["bombay hotels", "secret diary"]);
}

/// An hour in which every key is still held back by `--min-users` publishes an empty
/// generation and saves the state, so the next hour's second user makes the key servable.
#[test]
fn a_partitioned_build_with_nothing_servable_yet_still_advances_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let state = dir.path().join("state");
    let first = write(dir.path(), "h0.tsv", "2026-01-05 00:10:00\tbombay hotels\tu1\n");
    let second = write(dir.path(), "h1.tsv", "2026-01-05 01:10:00\tbombay hotels\tu2\n");
    let served = |log: &Path| {
        let mut opts = options(&[log], Some(&state), &out);
        opts.partitioning = Some(Partitioning::Count(1));
        opts.min_users = 2;
        let summary = build::run(&opts).unwrap();
        let live = Manifest::read(&out.join(MANIFEST_FILE)).unwrap();
        let [part] = &live.partitions[..] else { panic!("{live:?}") };
        assert_eq!((part.start.as_str(), part.end.as_deref()), ("", None));
        let keys: Vec<String> = entries(&out.join(&part.file)).into_iter().map(|e| e.0).collect();
        assert_eq!(keys.len() as u64, part.keys);
        (summary.held_min_users, keys)
    };
    assert_eq!(served(&first), (1, vec![]));
    assert_eq!(served(&second), (0, vec!["bombay hotels".to_owned()]));
    let mut opts = options(&[&first], Some(&state), &out);
    opts.partitioning = Some(Partitioning::Count(2));
    let err = build::run(&opts).unwrap_err();
    assert!(matches!(err, BuildError::Partition(_)), "{err}");
}

#[test]
fn pre_aggregated_counts_for_one_hour() {
    let dir = tempfile::tempdir().unwrap();
    let counts = write(dir.path(), "counts.tsv", "google\t10\t4\nebay\t3\nbad count\tx\nzero\t0\n");
    let out = dir.path().join("s.snap");
    let mut opts = options(&[&counts], None, &out);
    opts.counts_hour = Some(BASE_HOUR);
    opts.min_users = 2;
    let summary = build::run(&opts).unwrap();
    assert_eq!(summary.lines.bad.get("bad_count"), Some(&1));
    assert_eq!(summary.lines.bad.get("zero_count"), Some(&1));
    let accounted =
        summary.lines.counted + summary.lines.bad_total() + summary.lines.privacy_total();
    assert_eq!(accounted, summary.lines.lines, "every line read is accounted for");
    assert_eq!(summary.watermark, Some(BASE_HOUR));
    let got = entries(&out);
    assert_eq!(got, [("google".to_owned(), "google".to_owned(), 10.0)]);
}

#[test]
fn a_future_timestamp_is_rejected_instead_of_moving_the_watermark() {
    let dir = tempfile::tempdir().unwrap();
    // 4102444800 is 2100-01-01 (a broken clock); 1700000000000 is milliseconds read as
    // seconds, past year 9999, which no timestamp format can express: a bad timestamp.
    let log = write(
        dir.path(),
        "log.tsv",
        "2026-01-05 10:00:00\treal query\n4102444800\tfuture query\n1700000000000\tms query\n",
    );
    let out = dir.path().join("s.snap");
    let summary = build::run(&options(&[&log], None, &out)).unwrap();
    assert_eq!(summary.lines.bad.get("future_timestamp"), Some(&1));
    assert_eq!(summary.lines.bad.get("bad_timestamp"), Some(&1));
    assert_eq!(summary.watermark, Some(BASE_HOUR + 10));
    let keys: Vec<String> = entries(&out).into_iter().map(|e| e.0).collect();
    assert_eq!(keys, ["real query"]);
}

/// One line stamped 20 h ahead (inside the old 24 h tolerance) moved the watermark, and the
/// next build dropped every real line as late. A line after the build's current hour never
/// moves the watermark now, which never passes the wall-clock hour.
#[test]
fn a_clock_skewed_line_cannot_poison_the_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let now = typeahead::clock::now_unix();
    let hour = |offset: i64| crate::support::format_ts((now / 3600 + offset) * 3600 + 7);
    let mut first: String =
        (0..106).map(|i| format!("{}\tweather {}\n", hour(-3), i % 5)).collect();
    first.push_str(&format!("{}\tfrom the future\n", hour(20)));
    let first = write(dir.path(), "first.tsv", &first);
    let state = dir.path().join("state");
    let out = dir.path().join("s.snap");
    let summary = build::run(&options(&[&first], Some(&state), &out)).unwrap();
    assert_eq!(summary.lines.bad.get("future_timestamp"), Some(&1));
    let current = typeahead::builder::logline::current_hour();
    assert!(summary.watermark.is_some_and(|w| w <= current), "{:?}", summary.watermark);

    let second: String = (0..106).map(|i| format!("{}\tnews {}\n", hour(-1), i % 5)).collect();
    let second = write(dir.path(), "second.tsv", &second);
    let summary = build::run(&options(&[&second], Some(&state), &out)).unwrap();
    assert_eq!(summary.lines.late, 0, "real lines were dropped as late");
    assert_eq!(summary.lines.counted, 106);
}

/// A 1 GB line cost 2.1 GB of RAM. Over-long lines are cut while streaming and counted.
#[test]
fn an_over_long_line_is_counted_and_skipped() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let ts = crate::support::format_ts(i64::from(BASE_HOUR) * 3600);
    let path = dir.path().join("log.tsv.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    writeln!(gz, "{ts}\tbefore").unwrap();
    // 64 MiB of NULs without a newline: a small gzip bomb.
    let zeros = vec![0u8; 1 << 20];
    write!(gz, "{ts}\t").unwrap();
    for _ in 0..64 {
        gz.write_all(&zeros).unwrap();
    }
    writeln!(gz).unwrap();
    writeln!(gz, "{ts}\tafter").unwrap();
    gz.finish().unwrap();
    let out = dir.path().join("s.snap");
    let summary = build::run(&options(&[&path], None, &out)).unwrap();
    assert_eq!(summary.lines.bad.get("line_too_long"), Some(&1));
    assert_eq!(summary.lines.counted, 2);
    let keys: Vec<String> = entries(&out).into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(keys, ["after", "before"]);
}

/// A state written before invisible characters were removed holds "new\u{200b}york" and
/// "newyork" apart, and may hold what today's privacy rules withhold. Loading it re-normalizes:
/// the two merge, the card number goes, and the next state carries today's rules.
#[test]
fn a_state_from_older_rules_is_renormalized_on_load() {
    use typeahead::builder::ema::Decayed;
    use typeahead::builder::record::{KeyRecord, Surface};
    use typeahead::builder::state::{self, Header};
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    std::fs::create_dir_all(&state_dir).unwrap();
    let record = |score: f64| KeyRecord {
        surfaces: vec![Surface { text: None, score: Decayed::new(score, BASE_HOUR) }],
        users: Default::default(),
    };
    let file = std::fs::File::create(state_dir.join(state::STATE_FILE)).unwrap();
    let header = Header { half_life_hours: 5.0, watermark: Some(BASE_HOUR), rules: 1 };
    let mut writer = state::Writer::new(std::io::BufWriter::new(file), &header).unwrap();
    for (key, score) in [("4111 1111 1111 1111", 1.0), ("new\u{200b}york", 2.0), ("newyork", 3.0)] {
        writer.push(key, &record(score)).unwrap();
    }
    writer.finish().unwrap();
    let empty = write(dir.path(), "empty.tsv", "");
    let out = dir.path().join("s.snap");
    build::run(&options(&[&empty], Some(&state_dir), &out)).unwrap();
    let got = entries(&out);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "newyork");
    assert!((got[0].2 - 5.0).abs() < 1e-9, "{got:?}");
    let reader = state::Reader::open(&state_dir.join(state::STATE_FILE)).unwrap();
    assert_eq!(reader.header().rules, typeahead::normalize::RULES_VERSION);
}

/// A state written by a newer build (a binary rolled back) was read under this build's older
/// rules and saved relabelled as this build's: refused, and left as it was.
#[test]
fn a_state_from_newer_rules_is_refused() {
    use typeahead::builder::state::{self, Header};
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    std::fs::create_dir_all(&state_dir).unwrap();
    let path = state_dir.join(state::STATE_FILE);
    let newer = typeahead::normalize::RULES_VERSION + 1;
    let header = Header { half_life_hours: 5.0, watermark: Some(BASE_HOUR), rules: newer };
    let file = std::fs::File::create(&path).unwrap();
    let writer = state::Writer::new(std::io::BufWriter::new(file), &header).unwrap();
    writer.finish().unwrap();
    let before = std::fs::read(&path).unwrap();
    let empty = write(dir.path(), "empty.tsv", "");
    let out = dir.path().join("s.snap");
    let refused = build::run(&options(&[&empty], Some(&state_dir), &out)).unwrap_err();
    assert!(refused.to_string().contains("newer than this build"), "{refused}");
    assert!(!out.exists(), "nothing published");
    assert_eq!(std::fs::read(&path).unwrap(), before, "the state is untouched");
}

/// Equal searches tie, and ties go by key (the contract's order), however the searches split
/// into surface forms: "cafe" (6 times, and once as "café") and "cafa" (7 times) in one hour.
/// "cafe" scored an ulp higher and came first.
#[test]
fn equal_searches_split_into_forms_tie_and_go_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let at = |hour: u32| format!("{}", i64::from(hour) * 3600);
    let mut log = String::new();
    for (q, n) in [("cafa", 7), ("cafe", 6), ("café", 1)] {
        log.push_str(&format!("{}\t{q}\n", at(BASE_HOUR)).repeat(n));
    }
    log.push_str(&format!("{}\tzz\n", at(BASE_HOUR + 2)));
    let input = write(dir.path(), "log.tsv", &log);
    let out = dir.path().join("s.snap");
    // A half-life where 6f + f and 7f round apart (f = 2^(-2/168)).
    let opts = BuildOptions { half_life_hours: 168.0, ..options(&[&input], None, &out) };
    build::run(&opts).unwrap();
    let snapshot = typeahead::snapshot::Snapshot::open(&out).unwrap();
    let got: Vec<(String, f64)> =
        snapshot.suggest("caf", 10).into_iter().map(|s| (s.key, s.score)).collect();
    assert_eq!(got[0].1, got[1].1, "{got:?}");
    assert_eq!([got[0].0.as_str(), got[1].0.as_str()], ["cafa", "cafe"]);
}

/// A state written before a privacy rule may hold what the rule withholds; the rules changed,
/// so loading it re-checks every record and drops those. Look-alike digits (rules 4: a card
/// number in circled digits), spaced addresses ending in a top-level domain of another
/// script (rules 7: "иван @ почта.рф") and a card number dashed with the CJK `一` (rules 8).
#[test]
fn a_state_from_before_a_privacy_rule_drops_what_it_withholds() {
    let card = "\u{278d}\u{278a}\u{278a}\u{278a} \u{278a}\u{278a}\u{278a}\u{278a} \u{278a}\u{278a}\u{278a}\u{278a} \u{278a}\u{278a}\u{278a}\u{278a}";
    let dashed = "4111\u{4e00}1111\u{4e00}1111\u{4e00}1111";
    for (rules, withheld) in [(4, card), (7, "иван @ почта.рф"), (8, dashed)] {
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("state");
        write_state(&state_dir, rules, &["weather", withheld]);
        let empty = write(dir.path(), "empty.tsv", "");
        let out = dir.path().join("s.snap");
        build::run(&options(&[&empty], Some(&state_dir), &out)).unwrap();
        let keys: Vec<String> = entries(&out).into_iter().map(|e| e.0).collect();
        assert_eq!(keys, ["weather"], "rules {rules}");
    }
}

/// Writes a state under rules version `rules` holding `keys` (sorted), each searched twice
/// in `BASE_HOUR`.
fn write_state(state_dir: &Path, rules: u32, keys: &[&str]) {
    use typeahead::builder::ema::Decayed;
    use typeahead::builder::record::{KeyRecord, Surface};
    use typeahead::builder::state::{self, Header};
    std::fs::create_dir_all(state_dir).unwrap();
    let record = KeyRecord {
        surfaces: vec![Surface { text: None, score: Decayed::new(2.0, BASE_HOUR) }],
        users: Default::default(),
    };
    let file = std::fs::File::create(state_dir.join(state::STATE_FILE)).unwrap();
    let header = Header { half_life_hours: 5.0, watermark: Some(BASE_HOUR), rules };
    let mut writer = state::Writer::new(std::io::BufWriter::new(file), &header).unwrap();
    for key in keys {
        writer.push(key, &record).unwrap();
    }
    writer.finish().unwrap();
}

/// Three hours of logs in `dir`, one file each (`h0.tsv`, `h1.tsv`, `h2.tsv`).
fn three_hours(dir: &Path) -> [std::path::PathBuf; 3] {
    [0u32, 1, 2].map(|h| {
        let text = log_text(u64::from(h) + 1, BASE_HOUR + h, 1, 300);
        write(dir, &format!("h{h}.tsv"), &text)
    })
}

/// A build of `inputs` with a state and the regression gate (any churn passes).
fn gated(inputs: &[&Path], state: &Path, out: &Path) -> BuildOptions {
    use typeahead::builder::gate::GateOptions;
    let gate = GateOptions { max_churn: 1.0, blocklist: Blocklist::empty() };
    BuildOptions { gate: Some(gate), ..options(inputs, Some(state), out) }
}

/// A live generation that cannot be read skips the gate (a new build repairs it), not the
/// check that no hour is lost: a partitioned one's manifest still says which hours it counted
/// when one of its partition files is damaged.
#[test]
fn a_damaged_live_partition_does_not_hide_a_state_behind_it() {
    let dir = tempfile::tempdir().unwrap();
    let [h0, h1, h2] = three_hours(dir.path());
    let (state, out) = (dir.path().join("state"), dir.path().join("live"));
    let gated = |inputs: &[&Path]| {
        let opts = gated(inputs, &state, &out);
        BuildOptions { partitioning: Some(Partitioning::Count(2)), ..opts }
    };
    build::run(&gated(&[&h0])).unwrap();
    let saved = std::fs::read(state.join("state.bin")).unwrap();
    build::run(&gated(&[&h1])).unwrap();
    let live = Manifest::read(&out.join(MANIFEST_FILE)).unwrap();
    let part = std::fs::OpenOptions::new().write(true).open(out.join(&live.partitions[0].file));
    part.unwrap().set_len(16).unwrap();
    std::fs::write(state.join("state.bin"), &saved).unwrap();
    match build::run(&gated(&[&h2])) {
        Err(BuildError::GateRefused(why)) => assert!(why.contains("behind the live"), "{why}"),
        other => panic!("not refused: {other:?}"),
    }
    assert_eq!(Manifest::read(&out.join(MANIFEST_FILE)).unwrap(), live, "nothing published");
    // Re-running the hour the state lacks publishes, and repairs the damaged partition.
    build::run(&gated(&[&h1, &h2])).unwrap();
    let now = Manifest::read(&out.join(MANIFEST_FILE)).unwrap();
    assert_ne!(now.generation, live.generation);
    assert!(typeahead::generation::Generation::open(&out).is_ok());
}

/// A state left behind the live generation (restored here; a builder killed between
/// publishing and saving its state leaves the same) is refused by the gate unless the build
/// re-runs the hours it lacks, in order: an hourly job that took only the next hour's logs
/// published a generation without the hour the state missed, and a build of the live
/// generation's last hour alone made the hours before it late for good. A re-run, whole or one
/// hour at a time, is published; `--force` (no gate) publishes anyway.
#[test]
fn a_state_behind_the_live_generation_must_rerun_its_missing_hours() {
    let dir = tempfile::tempdir().unwrap();
    let [h0, h1, h2] = three_hours(dir.path());
    let (state, out) = (dir.path().join("state"), dir.path().join("live.snap"));
    let gated = |inputs: &[&Path]| gated(inputs, &state, &out);
    let refused = |inputs: &[&Path]| {
        let live = entries(&out);
        match build::run(&gated(inputs)) {
            Err(BuildError::GateRefused(why)) => assert!(why.contains("behind the live"), "{why}"),
            other => panic!("not refused: {other:?}"),
        }
        assert_eq!(entries(&out), live, "nothing published");
    };
    let (reference, all) = (dir.path().join("reference-state"), dir.path().join("all.snap"));
    for input in [&h0, &h1, &h2] {
        build::run(&options(&[input], Some(&reference), &all)).unwrap();
    }
    build::run(&gated(&[&h0])).unwrap();
    let saved = std::fs::read(state.join("state.bin")).unwrap();
    let restore = || std::fs::write(state.join("state.bin"), &saved).unwrap();
    build::run(&gated(&[&h1])).unwrap();
    let at_h1 = std::fs::read(state.join("state.bin")).unwrap();

    // Hour 1 again from the restored state makes the live generation again: nothing is
    // published, but the state still catches up (or hour 2 alone would be refused forever).
    restore();
    let live = std::fs::read(&out).unwrap();
    assert!(build::run(&gated(&[&h1])).unwrap().unchanged);
    assert!(std::fs::read(&out).unwrap() == live, "nothing published");
    assert!(std::fs::read(state.join("state.bin")).unwrap() == at_h1, "the state caught up");

    restore();
    refused(&[&h2]);
    build::run(&gated(&[&h1, &h2])).unwrap();
    assert_same_entries(&entries(&out), &entries(&all), 1e-9);

    // Live at hour 2 now: hour 2 alone would make hour 1 late for good.
    restore();
    refused(&[&h2]);
    build::run(&gated(&[&h1])).unwrap();
    build::run(&gated(&[&h2])).unwrap();
    assert_same_entries(&entries(&out), &entries(&all), 1e-9);

    restore();
    let live = entries(&out);
    build::run(&options(&[&h2], Some(&state), &out)).unwrap();
    assert_ne!(entries(&out), live, "without the gate the build is published, hour 1 and all");
}
