use std::collections::{HashMap, HashSet};

use typeahead_builder::logline::{format_timestamp, hour_of, parse_timestamp};

use super::*;
use crate::zipf_weight;

#[test]
fn timestamps_format_correctly() {
    let start = LogConfig::new(0).start_unix;
    assert_eq!(format_timestamp(start), "2026-01-05 00:00:00");
    assert_eq!(parse_timestamp("2026-01-05 00:00:00"), Some(start));
    assert_eq!(hour_of(start).map(|h| h % 24), Some(0), "the default log starts at midnight");
    assert_eq!(format_timestamp(951_868_799), "2000-02-29 23:59:59");
    assert_eq!(format_timestamp(0), "1970-01-01 00:00:00");
    for days in [-1000i64, 0, 59, 10_957, 20_458, 40_000] {
        let ts = days * 86_400 + 45_296;
        assert_eq!(parse_timestamp(&format_timestamp(ts)), Some(ts), "day {days}");
    }
}

/// The timestamps of the first lines of some hours: pins `write_log`'s output (across
/// a leap day too), which must not change when the timestamp code moves. The values are
/// those of the ChaCha8 streams (re-pinned when the generator moved to `rand`); a new
/// `rand`/`rand_distr` minor version may legitimately change them.
#[test]
fn known_lines_keep_their_timestamps() {
    let first_timestamps = |cfg: &LogConfig, hour: u32| -> Vec<String> {
        let (bytes, _) = log_bytes(cfg, hour, 1);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        text.lines().take(3).map(|l| l.chars().take(19).collect()).collect()
    };
    let cfg = small_log_config(12);
    assert_eq!(
        first_timestamps(&cfg, 0),
        ["2026-01-05 00:44:01", "2026-01-05 00:36:48", "2026-01-05 00:30:12"]
    );
    // Starts 2000-02-28 00:00:00; hours 24..48 are the leap day.
    let cfg = LogConfig { start_unix: 951_696_000, hours: 80, ..small_log_config(4) };
    assert_eq!(
        first_timestamps(&cfg, 24),
        ["2000-02-29 00:37:46", "2000-02-29 00:48:17", "2000-02-29 00:09:25"]
    );
    assert_eq!(
        first_timestamps(&cfg, 47),
        ["2000-02-29 23:08:36", "2000-02-29 23:53:07", "2000-02-29 23:25:06"]
    );
    assert_eq!(
        first_timestamps(&cfg, 48),
        ["2000-03-01 00:27:04", "2000-03-01 00:48:54", "2000-03-01 00:15:36"]
    );
}

/// Classifies a line: Ok((ts, query, user)) if well-formed.
fn parse_line(line: &[u8]) -> Option<(i64, String, String)> {
    let line = std::str::from_utf8(line).ok()?;
    let parts: Vec<&str> = line.split('\t').collect();
    if parts.len() != 3 {
        return None;
    }
    // Only the exact form `write_log` writes: the ingestion parser also reads Unix
    // seconds and RFC 3339, which the generator's bad timestamps deliberately use.
    let ts = parts[0];
    if ts.len() != 19 || ts.as_bytes()[10] != b' ' {
        return None;
    }
    let ts = parse_timestamp(ts)?;
    let q = parts[1];
    if q.contains('@') || (q.len() == 10 && q.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    Some((ts, q.to_owned(), parts[2].to_owned()))
}

fn small_log_config(seed: u64) -> LogConfig {
    LogConfig {
        distinct_queries: 3_000,
        hours: 30,
        events_per_hour: 400,
        users: 300,
        ..LogConfig::new(seed)
    }
}

fn log_bytes(cfg: &LogConfig, first: u32, count: u32) -> (Vec<u8>, u64) {
    let mut out = Vec::new();
    let lines = write_log(cfg, first, count, &mut out).expect("write to Vec");
    (out, lines)
}

#[test]
fn write_log_is_deterministic_and_splits_equal() {
    let cfg = small_log_config(12);
    let (whole, lines) = log_bytes(&cfg, 0, 10);
    assert_eq!(whole, log_bytes(&cfg, 0, 10).0);
    assert_eq!(lines, whole.iter().filter(|&&b| b == b'\n').count() as u64);
    let (a, la) = log_bytes(&cfg, 0, 5);
    let (b, lb) = log_bytes(&cfg, 5, 5);
    assert_eq!(la + lb, lines);
    assert_eq!([a, b].concat(), whole);
    // Hour by hour.
    let mut by_hour = Vec::new();
    for h in 0..10 {
        by_hour.extend(log_bytes(&cfg, h, 1).0);
    }
    assert_eq!(by_hour, whole);
    // Clipped to the configured span.
    assert_eq!(log_bytes(&cfg, 30, 5).1, 0);
    assert_eq!(log_bytes(&cfg, 28, 5).0, log_bytes(&cfg, 28, 2).0);
    assert_ne!(whole, log_bytes(&small_log_config(13), 0, 10).0);
}

#[test]
fn log_lines_are_well_formed_or_deliberately_malformed() {
    let cfg = LogConfig { malformed_share: 0.02, ..small_log_config(14) };
    let (first, count) = (3u32, 24u32);
    let mut out = Vec::new();
    let (lines, malformed) = write_log_counted(&cfg, first, count, &mut out).expect("vec");
    let lo = cfg.start_unix + 3600 * i64::from(first);
    let hi = lo + 3600 * i64::from(count);
    let mut bad = 0u64;
    let mut users = HashSet::new();
    let mut per_query: HashMap<String, usize> = HashMap::new();
    let mut variants = 0;
    let body = out.strip_suffix(b"\n").unwrap_or(&out);
    for line in body.split(|&b| b == b'\n') {
        match parse_line(line) {
            None => bad += 1,
            Some((ts, q, user)) => {
                assert_eq!(line.iter().filter(|&&b| b == b'\t').count(), 2);
                assert!((lo..hi).contains(&ts), "{ts} not in {lo}..{hi}");
                assert!(!q.trim().is_empty());
                assert!(user.starts_with('u') && user[1..].parse::<u64>().is_ok());
                users.insert(user);
                if q != q.to_lowercase() || q.contains("  ") || q.ends_with(' ') {
                    variants += 1;
                }
                *per_query.entry(q).or_default() += 1;
            }
        }
    }
    assert_eq!(lines, body.split(|&b| b == b'\n').count() as u64);
    assert_eq!(bad, malformed, "classifier disagrees with generator");
    let share = malformed as f64 / lines as f64;
    assert!((0.014..0.026).contains(&share), "malformed share {share}");
    assert!(users.len() > 100);
    assert!(variants > lines / 50, "{variants} variants");
    let max = per_query.values().copied().max().unwrap_or(0);
    assert!(max > 100, "head query only {max} events");

    // Default share, default config size.
    let cfg = LogConfig::new(15);
    let mut out = Vec::new();
    let (lines, malformed) = write_log_counted(&cfg, 0, 24, &mut out).expect("vec");
    let share = malformed as f64 / lines as f64;
    assert!((0.0035..0.0065).contains(&share), "malformed share {share}");
}

#[test]
fn traffic_is_diurnal() {
    let cfg = small_log_config(16);
    let night = log_bytes(&cfg, 4, 1).1; // 04:00 UTC
    let evening = log_bytes(&cfg, 20, 1).1; // 20:00 UTC
    assert!(evening > 3 * night, "evening {evening} vs night {night}");
}

#[test]
fn trends_rise_and_fade() {
    let cfg = LogConfig { distinct_queries: 3_000, events_per_hour: 1_000, ..LogConfig::new(17) };
    let model = LogModel::new(&cfg).expect("valid config");
    let n = model.queries.len();
    for t in &model.trends {
        let q = &model.queries[t.rank];
        let peak = (t.peak_hour as u32).min(cfg.hours - 1);
        let first = peak.saturating_sub(3);
        let (bytes, lines) = log_bytes(&cfg, first, 7);
        let needle = format!("\t{q}\t");
        let seen = bytes
            .split(|&b| b == b'\n')
            .filter(|l| String::from_utf8_lossy(l).contains(&needle))
            .count() as f64;
        let hours = u64::from(first)..u64::from(first + 7).min(u64::from(cfg.hours));
        let per_hour = lines as f64 / hours.clone().count() as f64;
        let trend: f64 = hours.map(|h| t.share_at(h) * per_hour).sum();
        let baseline = lines as f64 * zipf_weight(t.rank, n, 1.0);
        assert!(seen >= 0.5 * trend, "trend {q:?}: {seen} vs expected {trend}");
        assert!(seen > 3.0 * baseline, "trend {q:?}: {seen} vs baseline {baseline}");
        // Far from the peak the trend has faded.
        assert!(t.share_at(u64::from(peak) + 150) < 1e-3 * t.peak_share);
    }
}

#[test]
fn a_share_outside_zero_one_is_an_error() {
    for share in [-0.1, 1.5, f64::NAN] {
        let cfg = LogConfig { malformed_share: share, ..small_log_config(1) };
        let err = write_log(&cfg, 0, 1, &mut Vec::new()).expect_err("invalid share");
        assert!(matches!(err, Error::Share(_)), "{err}");
    }
    let all = LogConfig { malformed_share: 1.0, events_per_hour: 50, ..small_log_config(1) };
    let mut out = Vec::new();
    let (lines, malformed) = write_log_counted(&all, 0, 1, &mut out).expect("vec");
    assert_eq!(lines, malformed);
}
