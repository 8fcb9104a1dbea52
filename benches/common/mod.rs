//! Shared by the benches: synthetic snapshots and prefix samples.
//!
//! The data is SYNTHETIC (see `typeahead_synth`): word n-grams with Zipf popularity and
//! AOL-like lengths. Real logs are used only when `../shared/data` exists, never shipped.
#![allow(dead_code)]

mod procs;

use typeahead::builder::logline::parse_log_line;
use typeahead::normalize;
use typeahead::snapshot::{BuildInfo, Entry, Snapshot, write};
use typeahead::synth::rand::RngExt;
use typeahead::synth::{self, SynthConfig};

/// Entries for `n` synthetic distinct queries: score = expected count of the query's Zipf rank
/// among `10 * n` searches (at least one search each).
pub fn synthetic_entries(n: usize, seed: u64) -> Vec<Entry> {
    let cfg = SynthConfig::new(seed, n);
    let texts = synth::distinct_queries(&cfg);
    let total = 10.0 * n as f64;
    let mut entries: Vec<Entry> = texts
        .iter()
        .enumerate()
        .filter_map(|(rank, text)| {
            let (surface, key) = normalize::surface_and_key(text)?;
            let score = (synth::zipf_weight(rank, n, cfg.zipf_exponent) * total).round().max(1.0);
            Some(Entry { display: (surface != key).then_some(surface), key, score })
        })
        .collect();
    entries.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    entries.dedup_by(|a, b| a.key == b.key);
    entries
}

/// Builds an in-memory snapshot of the entries.
pub fn snapshot_of(entries: &[Entry]) -> (Snapshot, usize) {
    let info = BuildInfo { watermark_hour: Some(0), ..BuildInfo::default() };
    let (bytes, stats) = write(entries, &info).expect("synthetic entries are valid");
    (Snapshot::from_bytes(bytes).expect("fresh snapshot verifies"), stats.bytes as usize)
}

/// `count` prefixes of `chars` characters (whole keys when `chars` is `None`) of keys drawn
/// uniformly. (Criterion cycles through them, so after the first pass they are warm: the
/// scale benchmark's figures time every lookup once, cold.)
pub fn prefixes(entries: &[Entry], chars: Option<usize>, count: usize, seed: u64) -> Vec<String> {
    let mut rng = synth::rng(seed);
    (0..count)
        .map(|_| {
            let key = &entries[rng.random_range(0..entries.len())].key;
            match chars {
                Some(c) => key.chars().take(c).collect(),
                None => key.clone(),
            }
        })
        .collect()
}

/// The real AOL sample log in `../shared/data` (present in CI and here; never shipped).
pub fn aol_log() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/aol1000_log_2006-03-01_2006-05-17.tsv.gz")
}

/// Prefixes as users type them: a random real query event (or, without `../shared/data`, a
/// Zipf-sampled SYNTHETIC query), cut at a random length. Also says which source was used.
pub fn typed_prefixes(count: usize) -> (Vec<String>, &'static str) {
    use std::io::BufRead;
    let mut rng = synth::rng(11);
    let log = aol_log();
    let queries: Vec<String> = match std::fs::File::open(&log) {
        Ok(f) => {
            let reader = std::io::BufReader::new(flate2::read::MultiGzDecoder::new(f));
            let all: Vec<String> = reader
                // Bytes, not `lines()`, which ends at the first line that is not UTF-8; and
                // the builder's own parser: the queries of the lines it would parse.
                .split(b'\n')
                .map_while(Result::ok)
                .filter_map(|l| Some(parse_log_line(&l).ok()?.query.to_owned()))
                .collect();
            (0..count).map(|_| all[rng.random_range(0..all.len())].clone()).collect()
        }
        Err(_) => {
            let n = 200_000;
            let texts = synth::distinct_queries(&SynthConfig::new(3, n));
            let zipf = synth::ZipfRank::new(n, 1.0).expect("a valid Zipf law");
            (0..count).map(|_| texts[rng.sample(zipf)].clone()).collect()
        }
    };
    let source = if log.exists() { "real AOL queries" } else { "SYNTHETIC queries" };
    let cut = queries
        .into_iter()
        .map(|q| {
            let chars: Vec<char> = q.chars().collect();
            let n = rng.random_range(1..=chars.len().max(1));
            chars.into_iter().take(n).collect::<String>()
        })
        .collect();
    (cut, source)
}

/// Resident memory of process `pid` in KiB (0 if it cannot be read).
pub fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The processes `pid` started and that still run, each with its command line (arguments
/// joined by spaces; Linux, empty elsewhere).
pub fn children(pid: u32) -> Vec<(u32, String)> {
    procs::child_pids(pid)
        .into_iter()
        .map(|child| {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            (child, String::from_utf8_lossy(&cmdline).replace('\0', " "))
        })
        .collect()
}

/// The value of sample `name` (exactly, no labels) in a Prometheus text exposition.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// CPU seconds (user + system) process `pid` has used so far (0 if unreadable).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state, field 3;
    // utime and stime are fields 14 and 15, in clock ticks (100 per second on Linux).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i - 3).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(14) + ticks(15)) / 100.0
}
