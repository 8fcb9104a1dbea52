//! `typeahead eval`: offline suggestion quality on later logs — the standard query
//! auto-completion evaluation.
//!
//! For every query event of the later log and every prefix length 1..=len(key) (in characters),
//! find the rank of the query's key in the top-10 of that prefix. From those ranks:
//!
//! - **MRR@10**: mean of 1/rank (0 when absent) over all (event, prefix length) pairs, overall
//!   and per prefix length;
//! - **success@10**: share of events whose key is in the top-10 at some prefix length;
//! - **characters to top-3 / top-1**: mean prefix length at which the key first reaches the top
//!   3 / top 1, over the events that reach it, and the keystrokes that saves on average;
//! - **coverage**: share of events whose key is a completion of the snapshot at all.
//!
//! Each distinct key is looked up once and weighted by its number of events.
//!
//! With `--typos SEED`, [`typos`] also measures how often the intended query is found when one
//! realistic typo is in what was typed, with all tiers and with the prefix tier only.
//! With `--history-log EARLIER`, [`history`] replays the later log event by event with each
//! person's own searches first ([`crate::history`]).

pub mod history;
pub mod typos;

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::builder::input::{self, InputError};
use crate::builder::logline;
use crate::normalize;
use crate::snapshot::Snapshot;

/// Longest prefix length reported separately; longer ones are pooled in the last row.
pub const MAX_REPORTED_LENGTH: usize = 20;

/// The evaluation result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Query events evaluated.
    pub events: u64,
    /// Distinct keys among them.
    pub distinct_keys: u64,
    /// Lines skipped (malformed or empty query).
    pub skipped_lines: u64,
    /// MRR@10 over all (event, prefix length) pairs.
    pub mrr: f64,
    /// MRR@10 by prefix length 1..=MAX_REPORTED_LENGTH (the last pools longer prefixes);
    /// `None` (`null`) for a length no event's key reached, which has no MRR (0 would read as
    /// measured and never found).
    pub mrr_by_length: Vec<Option<f64>>,
    /// Share of events found in some top-10.
    pub success_at_10: f64,
    /// Mean characters typed when the query first reaches the top 3 (events that reach it).
    pub chars_to_top3: f64,
    /// Mean characters typed when the query first reaches the top 1.
    pub chars_to_top1: f64,
    /// Mean keystrokes saved by picking the query once it is in the top 3 (0 when never).
    pub keystrokes_saved_top3: f64,
    /// Share of events whose key is a completion in the snapshot.
    pub coverage: f64,
    /// Quality under one typo (`--typos SEED`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub typos: Option<typos::TypoReport>,
    /// The same figures with each person's own earlier searches first (`--history-log`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Box<Report>>,
    /// In the history report: the same events without history first, the baseline its gain
    /// is measured against (the main report also counts the events without a user).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub without_history: Option<Baseline>,
}

/// MRR@10 and success@10 of a set of events.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Baseline {
    /// MRR@10 over all (event, prefix length) pairs.
    pub mrr: f64,
    /// Share of events found in some top-10.
    pub success_at_10: f64,
}

/// What one distinct key's prefixes give.
struct KeyResult {
    reciprocal_ranks: Vec<f64>,
    found: bool,
    first_top3: Option<usize>,
    first_top1: Option<usize>,
    covered: bool,
    chars: usize,
}

fn evaluate_key(snapshot: &Snapshot, key: &str) -> KeyResult {
    evaluate_prefixes(snapshot, key, |p| snapshot.suggest(p, 10).iter().position(|s| s.key == key))
}

/// The result for `key` when `position(prefix)` says where the key is in that prefix's top-10.
fn evaluate_prefixes(
    snapshot: &Snapshot,
    key: &str,
    mut position: impl FnMut(&str) -> Option<usize>,
) -> KeyResult {
    let boundaries: Vec<usize> =
        key.char_indices().map(|(i, _)| i).skip(1).chain([key.len()]).collect();
    let mut result = KeyResult {
        reciprocal_ranks: Vec::with_capacity(boundaries.len()),
        found: false,
        first_top3: None,
        first_top1: None,
        covered: false,
        chars: boundaries.len(),
    };
    for (n, &end) in boundaries.iter().enumerate() {
        // What the service looks up when the key's first characters are typed: a key can hold
        // what typing does not give ("new  york", two spaces, from "new´ york").
        let rank = position(&normalize::prefix(&key[..end])).map(|p| p + 1);
        result.reciprocal_ranks.push(rank.map_or(0.0, |r| 1.0 / r as f64));
        if let Some(r) = rank {
            result.found = true;
            if r <= 3 && result.first_top3.is_none() {
                result.first_top3 = Some(n + 1);
            }
            if r == 1 && result.first_top1.is_none() {
                result.first_top1 = Some(n + 1);
            }
        }
    }
    // Asked of the snapshot itself: with a person's history first, a key can be found
    // without being a completion of the snapshot at all.
    result.covered = snapshot.contains(key);
    result
}

/// Counts the query events of the later logs by normalized key.
pub fn count_events(paths: &[PathBuf]) -> Result<(HashMap<String, u64>, u64), InputError> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut skipped = 0;
    let too_long = for_each_log_line(paths, |line| {
        let Ok(parsed) = logline::parse_log_line(line) else {
            skipped += 1;
            return;
        };
        match normalize::surface_and_key(parsed.query) {
            Some((_, key)) => *counts.entry(key).or_default() += 1,
            None => skipped += 1,
        }
    })?;
    Ok((counts, skipped + too_long))
}

/// Calls `line` with each line of the logs `paths` (directories walked), in order, read as a
/// build reads them ([`input::for_each_line`]); returns the lines left out as too long.
fn for_each_log_line(paths: &[PathBuf], mut line: impl FnMut(&[u8])) -> Result<u64, InputError> {
    let mut too_long = 0;
    for path in input::expand_inputs(paths)? {
        too_long += input::for_each_line(&path, &mut line)?;
    }
    Ok(too_long)
}

/// Evaluates `snapshot` on the query events `counts`.
pub fn evaluate(snapshot: &Snapshot, counts: &HashMap<String, u64>, skipped: u64) -> Report {
    let mut tally = Tally::default();
    // In key order: the sums are of floats, and a map's order differs from run to run.
    let mut keys: Vec<(&String, &u64)> = counts.iter().collect();
    keys.sort_unstable();
    for (key, &n) in keys {
        tally.add(&evaluate_key(snapshot, key), n);
    }
    tally.report(counts.len() as u64, skipped)
}

/// Sums of per-key results, weighted by events, that make a [`Report`].
#[derive(Debug)]
struct Tally {
    events: u64,
    by_length: Vec<(f64, u64)>,
    rr_sum: f64,
    pairs: u64,
    found: u64,
    covered: u64,
    top3: (u64, u64),
    top1: (u64, u64),
    saved: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            events: 0,
            by_length: vec![(0.0, 0); MAX_REPORTED_LENGTH],
            rr_sum: 0.0,
            pairs: 0,
            found: 0,
            covered: 0,
            top3: (0, 0),
            top1: (0, 0),
            saved: 0,
        }
    }
}

impl Tally {
    /// Adds `n` events whose key gave `r`.
    fn add(&mut self, r: &KeyResult, n: u64) {
        self.events += n;
        for (i, rr) in r.reciprocal_ranks.iter().enumerate() {
            let slot = &mut self.by_length[i.min(MAX_REPORTED_LENGTH - 1)];
            slot.0 += rr * n as f64;
            slot.1 += n;
            self.rr_sum += rr * n as f64;
            self.pairs += n;
        }
        self.found += n * u64::from(r.found);
        self.covered += n * u64::from(r.covered);
        if let Some(c) = r.first_top3 {
            self.top3.0 += c as u64 * n;
            self.top3.1 += n;
            self.saved += (r.chars - c) as u64 * n;
        }
        if let Some(c) = r.first_top1 {
            self.top1.0 += c as u64 * n;
            self.top1.1 += n;
        }
    }

    fn report(&self, distinct_keys: u64, skipped_lines: u64) -> Report {
        let ratio = |a: f64, b: u64| if b == 0 { 0.0 } else { a / b as f64 };
        Report {
            events: self.events,
            distinct_keys,
            skipped_lines,
            mrr: ratio(self.rr_sum, self.pairs),
            mrr_by_length: self
                .by_length
                .iter()
                .map(|&(s, c)| (c > 0).then(|| ratio(s, c)))
                .collect(),
            success_at_10: ratio(self.found as f64, self.events),
            chars_to_top3: ratio(self.top3.0 as f64, self.top3.1),
            chars_to_top1: ratio(self.top1.0 as f64, self.top1.1),
            keystrokes_saved_top3: ratio(self.saved as f64, self.events),
            coverage: ratio(self.covered as f64, self.events),
            typos: None,
            history: None,
            without_history: None,
        }
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "evaluation on {} query events ({} distinct, {} lines skipped)",
            self.events, self.distinct_keys, self.skipped_lines
        )?;
        writeln!(f, "  MRR@10                  {:.4}", self.mrr)?;
        writeln!(f, "  success@10              {:.4}", self.success_at_10)?;
        writeln!(f, "  chars typed to top-3    {:.2}", self.chars_to_top3)?;
        writeln!(f, "  chars typed to top-1    {:.2}", self.chars_to_top1)?;
        writeln!(f, "  keystrokes saved (top3) {:.2} per query", self.keystrokes_saved_top3)?;
        writeln!(f, "  coverage                {:.4}", self.coverage)?;
        write!(f, "  MRR@10 by prefix length:")?;
        for (i, m) in self.mrr_by_length.iter().enumerate() {
            let label = if i + 1 == MAX_REPORTED_LENGTH {
                format!("{}+", i + 1)
            } else {
                (i + 1).to_string()
            };
            match m {
                Some(m) => write!(f, " {label}:{m:.3}")?,
                None => write!(f, " {label}:-")?,
            }
        }
        if let Some(t) = &self.typos {
            write!(f, "\n{t}")?;
        }
        if let Some(h) = &self.history {
            let without = h
                .without_history
                .unwrap_or(Baseline { mrr: self.mrr, success_at_10: self.success_at_10 });
            write!(
                f,
                "\nwith each person's own earlier searches first ({} events with a user):\n  \
                 MRR@10 {:.4} (without: {:.4})  success@10 {:.4} (without: {:.4})",
                h.events, h.mrr, without.mrr, h.success_at_10, without.success_at_10
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{BuildInfo, Entry, write};

    fn snapshot(pairs: &[(&str, f64)]) -> Snapshot {
        let mut entries: Vec<Entry> = pairs
            .iter()
            .map(|(k, s)| Entry { key: (*k).into(), display: None, score: *s })
            .collect();
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        let info = BuildInfo { half_life_hours: 1.0, ..BuildInfo::default() };
        Snapshot::from_bytes(write(&entries, &info).unwrap().0).unwrap()
    }

    #[test]
    fn ranks_by_prefix_length() {
        // "ab" is 2nd for "a" and 1st for "ab"; "zz" is not a completion.
        let s = snapshot(&[("aa", 5.0), ("ab", 3.0)]);
        let counts = HashMap::from([("ab".to_owned(), 3u64), ("zz".to_owned(), 1u64)]);
        let r = evaluate(&s, &counts, 0);
        assert_eq!(r.events, 4);
        // (event, length) pairs: ab: 1/2 and 1/1, three times; zz: 0 and 0 once.
        assert!((r.mrr - (3.0 * 1.5) / 8.0).abs() < 1e-12, "{}", r.mrr);
        assert!((r.mrr_by_length[0].unwrap() - 1.5 / 4.0).abs() < 1e-12);
        assert!((r.mrr_by_length[1].unwrap() - 3.0 / 4.0).abs() < 1e-12);
        assert_eq!(r.mrr_by_length[2], None, "no key of three characters or more");
        assert!((r.success_at_10 - 0.75).abs() < 1e-12);
        assert!((r.chars_to_top3 - 1.0).abs() < 1e-12);
        assert!((r.chars_to_top1 - 2.0).abs() < 1e-12);
        assert!((r.keystrokes_saved_top3 - 3.0 / 4.0).abs() < 1e-12);
        assert!((r.coverage - 0.75).abs() < 1e-12);
    }
}
