//! The `typeahead` binary as a user runs it.

use crate::support::{bin, run_ok, write};

const LOG: &str = "2026-01-05 10:00:00\tCafé de Flore\tu1\n\
2026-01-05 10:01:00\tCafé de Flore\tu2\n\
2026-01-05 10:05:00\tcafe de flore\tu2\n\
2026-01-05 11:00:00\tcapital one\n\
2026-01-05T11:30:00+01:00\tcapital one\n\
1767610000\tCaptain   America\n\
2026-01-05 11:00:00\tnew york\n\
2026-01-05 11:00:00\tnewton\n\
no tab here\n\
2026-01-05 12:00:00\tmail me at jane@example.org\n";

fn built(dir: &std::path::Path) -> String {
    let log = write(dir, "log.tsv", LOG);
    let out = dir.join("s.snap");
    let o = run_ok(&["build", "--input", log.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let summary = String::from_utf8(o.stdout).unwrap();
    assert!(summary.contains("lines read         10"), "{summary}");
    assert!(summary.contains("bad lines          1 (no_tab 1)"), "{summary}");
    assert!(summary.contains("privacy withheld   1 (email 1)"), "{summary}");
    assert!(summary.contains("log.tsv:9"), "examples name file:line\n{summary}");
    assert!(!summary.contains("jane@"), "privacy examples never show the query\n{summary}");
    out.to_str().unwrap().to_owned()
}

/// `--version` names the release: the crate version and the digest of the sources that shape
/// an answer, which answers' ETags carry too (`build.rs`).
#[test]
fn the_version_names_the_release() {
    let out = bin().arg("--version").output().unwrap();
    let shown = String::from_utf8(out.stdout).unwrap();
    assert_eq!(shown.trim(), format!("typeahead {}", typeahead::RELEASE));
    let (version, digest) = typeahead::RELEASE.split_once('+').unwrap();
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    assert!(digest.len() == 16 && digest.bytes().all(|b| b.is_ascii_hexdigit()), "{digest}");
}

/// The build's own counting path makes keys as the contract does (the unit tests of the
/// privacy rules go through the normalization functions, not through it): joiners go, so a
/// card number split by them is withheld and "new\u{200d}york" counts with "newyork". A
/// number in the timestamp column is shown only by its length, and a query made mostly of
/// combining marks is rejected.
#[test]
fn a_build_keys_queries_as_the_contract_says_and_prints_no_number() {
    let dir = tempfile::tempdir().unwrap();
    let zalgo = format!("weather{}", "\u{301}".repeat(600));
    let text = format!(
        "2026-01-05 10:00:00\t4111\u{200d}1111\u{200d}1111\u{200d}1111\n\
         2026-01-05 10:00:00\tnew\u{200d}york\n\
         2026-01-05 10:01:00\tnewyork\n\
         4111 1111 1111 1111\t12\n\
         1767611111111\tweather\n\
         2026-01-05 10:02:00\t{zalgo}\n"
    );
    let log = write(dir.path(), "log.tsv", &text);
    let out = dir.path().join("s.snap");
    let o = run_ok(&["build", "--input", log.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let summary = String::from_utf8(o.stdout).unwrap();
    assert!(summary.contains("privacy withheld   1 (long_number 1)"), "{summary}");
    for reason in ["bad_timestamp 2", "rejected_query 1"] {
        assert!(summary.contains(reason), "{reason}\n{summary}");
    }
    assert!(summary.contains("a number of 13 digits"), "{summary}");
    assert!(!summary.contains("4111"), "a number in the summary\n{summary}");
    let snap = out.to_str().unwrap();
    let o = run_ok(&["query", "--snapshot", snap, "--json", "--match", "prefix", "4111", "new"]);
    let lines: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["suggestions"].as_array().unwrap().len(), 0, "{}", lines[0]);
    let new = lines[1]["suggestions"].as_array().unwrap();
    assert_eq!(new.len(), 1, "{}", lines[1]);
    assert!(new[0]["score"].as_f64().unwrap() > 1.9, "both lines count under one key");
}

/// Credentials and disguised addresses and numbers never reach a snapshot, whichever tier
/// would find them: a word typed from one (`gmail`, `ghp`) finds only what may be served.
#[test]
fn a_build_withholds_credentials_and_disguised_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let text = "2026-01-05 10:00:00\tjohn.doe at gmail.com\n\
         2026-01-05 10:00:00\tjohn(at)gmail.com\n\
         2026-01-05 10:00:00\tghp_16C7e42F292c6912E7710c838347Ae178B4a\n\
         2026-01-05 10:00:00\taccess_token=ya29.a0AfH6SMBx\n\
         2026-01-05 10:00:00\thector cell 330-4029\n\
         2026-01-05 10:00:00\t\u{ff10}\u{ff19}\u{ff10}\u{30fc}\u{ff11}\u{ff12}\u{ff13}\u{ff14}\u{30fc}\u{ff15}\u{ff16}\u{ff17}\u{ff18}\n\
         2026-01-05 10:00:00\tgmail login\n\
         2026-01-05 10:00:00\tghp meaning\n";
    let log = write(dir.path(), "log.tsv", text);
    let out = dir.path().join("s.snap");
    let o = run_ok(&["build", "--input", log.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let summary = String::from_utf8(o.stdout).unwrap();
    let want = "privacy withheld   6 (email 2, long_number 2, token 1, url_secret 1)";
    assert!(summary.contains(want), "{summary}");
    let snap = out.to_str().unwrap();
    let o = run_ok(&["query", "--snapshot", snap, "--json", "gmail", "ghp", "hector", "090"]);
    let found: Vec<Vec<String>> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|answer| {
            let items = answer["suggestions"].as_array().unwrap().iter();
            items.map(|s| s["text"].as_str().unwrap().to_owned()).collect()
        })
        .collect();
    assert_eq!(found, [vec!["gmail login"], vec!["ghp meaning"], vec![], vec![]]);
}

#[test]
fn query_json_lines_follow_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let snap = built(dir.path());
    let o =
        run_ok(&["query", "--snapshot", &snap, "--json", "--match", "prefix", "CA", "new ", "zzz"]);
    let lines: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["q"], "CA");
    let texts: Vec<&str> = lines[0]["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    // café de flore: 3 searches (2 as "café de flore"), capital one 2, captain america 1.
    assert_eq!(texts, ["café de flore", "capital one", "captain america"]);
    assert!(lines[0]["suggestions"][0]["score"].as_f64().unwrap() > 2.9);
    assert_eq!(lines[1]["q"], "new ");
    assert_eq!(
        lines[1]["suggestions"].as_array().unwrap().len(),
        1,
        "\"new \" must not match newton"
    );
    assert_eq!(lines[2]["suggestions"].as_array().unwrap().len(), 0);
    // Every tier (the default): "new " is one typo from "newton", which comes after the prefix
    // tier, marked as such.
    let o = run_ok(&["query", "--snapshot", &snap, "--json", "new "]);
    let line: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tiers: Vec<(&str, &str)> = line["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["text"].as_str().unwrap(), s["match"].as_str().unwrap()))
        .collect();
    assert_eq!(tiers.last(), Some(&("newton", "fuzzy")), "{tiers:?}");
    assert_eq!(tiers[0].1, "prefix");
    assert!(line.get("complete").is_none(), "complete answers do not say so");
}

#[test]
fn query_reads_every_stdin_line_including_blank_ones() {
    let dir = tempfile::tempdir().unwrap();
    let snap = built(dir.path());
    let mut child = bin()
        .args(["query", "--snapshot", &snap, "--k", "2"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"cap\n\n   \nnew\r\nx").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "cap\tcapital one\tcaptain america",
            "\tcafé de flore\tcapital one",
            "   \tcafé de flore\tcapital one",
            "new\tnew york\tnewton",
            "x",
        ]
    );
}

#[test]
fn inspect_shows_metadata_and_sections() {
    let dir = tempfile::tempdir().unwrap();
    let snap = built(dir.path());
    let text = String::from_utf8(run_ok(&["inspect", &snap]).stdout).unwrap();
    for needle in [
        "completions        5",
        "watermark hour     2026-01-05T12:00:00Z",
        "key_buckets",
        "node_lists",
        "per completion",
        "memory when open",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    // Opening makes more than the file holds (bucket heads, beginnings, decoded lists).
    let number = |label: &str| -> u64 {
        let line = text.lines().find(|l| l.trim_start().starts_with(label)).unwrap();
        line[line.find(label).unwrap() + label.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(number("memory when open") > number("total bytes"), "{text}");
}

#[test]
fn corrupt_truncated_and_foreign_snapshots_are_rejected_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let snap = built(dir.path());
    let bytes = std::fs::read(&snap).unwrap();
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 1;
    let cases = [
        ("flipped.snap", flipped, "checksum mismatch"),
        ("short.snap", bytes[..bytes.len() / 2].to_vec(), "checksum mismatch"),
        (
            "foreign.snap",
            b"PK\x03\x04 definitely a zip file, not a snapshot at all......".to_vec(),
            "not a typeahead snapshot",
        ),
    ];
    for (name, content, message) in cases {
        let path = write(dir.path(), name, "");
        std::fs::write(&path, content).unwrap();
        let o = bin().args(["query", "--snapshot", path.to_str().unwrap(), "a"]).output().unwrap();
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(message), "{name}: {err}");
    }
}

#[test]
fn a_corrupt_state_fails_the_build_and_keeps_the_previous_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let log = write(dir.path(), "log.tsv", LOG);
    let later = write(dir.path(), "later.tsv", "2026-01-06 10:00:00\tlater query\n");
    let (state, out) = (dir.path().join("state"), dir.path().join("s.snap"));
    let args = |input: &std::path::Path| {
        vec![
            "build".to_owned(),
            "--input".into(),
            input.to_str().unwrap().into(),
            "--state".into(),
            state.to_str().unwrap().into(),
            "--out".into(),
            out.to_str().unwrap().into(),
        ]
    };
    let a = args(&log);
    run_ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let before = std::fs::read(&out).unwrap();
    let state_file = state.join("state.bin");
    let mut bytes = std::fs::read(&state_file).unwrap();
    let at = bytes.len() - 10;
    bytes[at] ^= 0xff;
    std::fs::write(&state_file, &bytes).unwrap();
    let o = bin().args(args(&later)).output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("corrupt"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read(&out).unwrap(), before, "the previous snapshot is untouched");
}

#[test]
fn compressed_inputs_and_directories() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(logs.join("2026-01-05")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"2026-01-05 10:00:00\tgzip query\n").unwrap();
    std::fs::write(logs.join("2026-01-05/10.tsv.gz"), gz.finish().unwrap()).unwrap();
    let zst = zstd::stream::encode_all(&b"2026-01-05 11:00:00\tzstd query\n"[..], 3).unwrap();
    std::fs::write(logs.join("2026-01-05/11.tsv.zst"), zst).unwrap();
    write(&logs, "12.tsv", "2026-01-05 12:00:00\tplain query\n");
    let out = dir.path().join("s.snap");
    run_ok(&["build", "--input", logs.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let o = run_ok(&["query", "--snapshot", out.to_str().unwrap(), ""]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text, "\tplain query\tzstd query\tgzip query\n");
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let o = bin()
        .args(["build", "--input", "/nonexistent/logs", "--out", "/tmp/x.snap"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/logs"));
    let o = bin().args(["query", "--snapshot", "/nonexistent.snap", "a"]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot load snapshot"));
    // Values are checked as the command line is parsed, naming the flag and the value.
    for (flag, value, says) in [
        ("--top-k", "0", "from 1 to 1000"),
        ("--top-k", "5000", "from 1 to 1000"),
        ("--min-score", "-1", "non-negative"),
        ("--min-score", "NaN", "non-negative"),
        ("--hour", "yesterday", "is not an hour"),
        ("--hour", "13", "before 1990"),
        ("--hour", "2099-01-01T00", "after the current UTC hour"),
        ("--until", "13", "before 1990"),
        ("--until", "2026-13-45T99", "is not an hour"),
        ("--max-churn", "NaN", "is not a share"),
        ("--max-churn", "50", "is not a share"),
        ("--max-churn", "-1", "is not a share"),
    ] {
        let arg = format!("{flag}={value}");
        let o = bin()
            .args(["build", "--input", "/nonexistent/logs", "--out", "/tmp/x.snap", &arg])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(flag) && stderr.contains(says), "{flag} {value}: {stderr}");
    }
    for (flag, value, says) in [
        ("--public-url", "example.com", "is not an http(s) URL"),
        ("--public-url", "ftp://example.com", "is not an http(s) URL"),
        ("--results-url", "http://[::1/s?q={searchTerms}", "is not a URL"),
    ] {
        let arg = format!("{flag}={value}");
        let o = bin().args(["serve", "--snapshot", "/nonexistent.snap", &arg]).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(flag) && stderr.contains(says), "{flag} {value}: {stderr}");
    }
}

/// A flag that means something only with another one is refused without it: an operator
/// who gave `--partition 2` with `--snapshot` believed the server serves partition 2.
#[test]
fn serve_flags_of_a_follower_need_a_manifest() {
    for extra in [["--partition", "2"], ["--cache-dir", "/tmp/c"], ["--poll-ms", "500"]] {
        let o =
            bin().args(["serve", "--snapshot", "/nonexistent.snap"]).args(extra).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains("--manifest"), "{extra:?}: {stderr}");
    }
}

/// Snapshots and inputs named by `file://` URLs are read like paths, and a file name with a
/// colon in it is a path, not a URL of some scheme.
#[test]
fn file_urls_and_file_names_with_colons_are_local() {
    let dir = tempfile::tempdir().unwrap();
    let log = write(dir.path(), "hour-11:00.tsv", LOG);
    let out = dir.path().join("snap-2026-01-05T11:00.snap");
    let input = format!("file://{}", log.display());
    run_ok(&["build", "--input", &input, "--out", out.to_str().unwrap()]);
    // Relative to the working directory, colon and all.
    let o = bin()
        .current_dir(dir.path())
        .args(["query", "--snapshot", "snap-2026-01-05T11:00.snap", "cap"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let by_path = String::from_utf8(o.stdout).unwrap();
    assert!(by_path.starts_with("cap\tcapital one"), "{by_path}");
    let url = format!("file://{}", out.display());
    for args in [vec!["query", "--snapshot", &url, "cap"], vec!["inspect", &url]] {
        let o = run_ok(&args);
        assert!(!o.stdout.is_empty(), "{args:?}");
    }
    let o = run_ok(&["query", "--snapshot", &url, "cap"]);
    assert_eq!(String::from_utf8(o.stdout).unwrap(), by_path);
    let o = run_ok(&["eval", "--snapshot", &url, "--log", &input]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("MRR"), "eval reads file:// logs");
}

/// `typeahead query` answers a line as soon as it is read when nothing more is waiting, so a
/// program can write a prefix and read its answer; and a reader that goes away early
/// (`| head -1`) ends it with success, not an error.
#[test]
fn query_answers_each_line_when_asked_and_stops_quietly_when_unread() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let snap = built(dir.path());
    let mut child = bin()
        .args(["query", "--snapshot", &snap, "--k", "1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for (prefix, answer) in [("cap", "cap\tcapital one\n"), ("new", "new\tnew york\n")] {
        stdin.write_all(format!("{prefix}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
        // Blocks for ever if the answer waits in a buffer (the test binary's timeout ends it).
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, answer);
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    // The reader reads one line and leaves; the rest would fill the pipe many times over.
    let prefixes = write(dir.path(), "many.txt", &"cap\n".repeat(200_000));
    let mut child = bin()
        .args(["query", "--snapshot", &snap])
        .stdin(std::fs::File::open(prefixes).unwrap())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("cap\t"), "{first}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("error"), "{stderr}");
}

#[test]
fn eval_reports_ranks_on_later_logs() {
    let dir = tempfile::tempdir().unwrap();
    let snap = built(dir.path());
    // "capital one" is 2nd for "c"/"ca" (after café de flore), 1st from "cap" on.
    let later = write(
        dir.path(),
        "later.tsv",
        "2026-01-06 10:00:00\tcapital one\n2026-01-06 10:00:00\tunknown query\nbad line\n",
    );
    let o = run_ok(&["eval", "--snapshot", &snap, "--log", later.to_str().unwrap(), "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((r["events"].as_u64(), r["skipped_lines"].as_u64()), (Some(2), Some(1)));
    assert_eq!(r["success_at_10"].as_f64(), Some(0.5));
    assert_eq!(r["coverage"].as_f64(), Some(0.5));
    assert_eq!(r["chars_to_top1"].as_f64(), Some(3.0));
    let by_length = r["mrr_by_length"].as_array().unwrap();
    assert_eq!(by_length[0].as_f64(), Some(0.25), "1/2 for capital one, 0 for the unknown query");
    // "capital one" has 11 characters and "unknown query" 13: no event reached 14, which has
    // no MRR rather than a measured 0.
    assert_eq!((by_length[12].as_f64(), &by_length[13]), (Some(0.0), &serde_json::Value::Null));

    // With each person's own earlier searches first: u1 searched "capital one" before, so it
    // is 1st from "c" on; u2 has no history; the line without a user is skipped.
    let earlier = write(dir.path(), "earlier.tsv", "2026-01-05 09:00:00\tCapital One\tu1\n");
    let later = write(
        dir.path(),
        "later-users.tsv",
        "2026-01-06 10:00:00\tcapital one\tu1\n2026-01-06 10:00:01\tcapital one\tu2\n\
         2026-01-06 10:00:02\tcapital one\n",
    );
    let args = ["eval", "--snapshot", &snap, "--log", later.to_str().unwrap()];
    let earlier = earlier.to_str().unwrap();
    let o = run_ok(&[&args[..], &["--history-log", earlier, "--json"]].concat());
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let h = &r["history"];
    assert_eq!((h["events"].as_u64(), h["skipped_lines"].as_u64()), (Some(2), Some(1)), "{h}");
    assert_eq!(h["chars_to_top1"].as_f64(), Some(2.0), "u1 at 1, u2 at 3: {h}");
    assert!(h["mrr"].as_f64() > r["mrr"].as_f64(), "{r}");
    let o = run_ok(&[&args[..], &["--history-log", earlier]].concat());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("with each person's own earlier searches first"), "{text}");

    // Nothing to evaluate is an error, not figures of zero that look measured: a counts file
    // as the later log, or later events of which none names its user.
    let counts = write(dir.path(), "counts.tsv", "capital one\t5\n");
    let no_users = write(dir.path(), "no-users.tsv", "2026-01-06 10:00:00\tcapital one\n");
    let cases = [
        (vec!["--log", counts.to_str().unwrap()], "no query events"),
        (vec!["--log", no_users.to_str().unwrap(), "--history-log", earlier], "names its user"),
    ];
    for (extra, says) in cases {
        let o = bin().args([&["eval", "--snapshot", &snap][..], &extra].concat()).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && stderr.contains(says), "{extra:?}: {stderr}");
    }
}
