//! Quality with each person's own earlier searches first ([`crate::history`]), on logs with a
//! user column: every user's history is seeded from the earlier log, then the later log is
//! replayed event by event — every prefix length of the event's key is scored against the
//! history-first list, then the event joins its user's history, as it would in the browser.
//!
//! The clock of the rule's "last use" is the event's position in the logs (they are sorted by
//! time), so the order is the log's and ties cannot happen.

use std::collections::HashMap;
use std::path::PathBuf;

use super::{Baseline, Report, Tally, evaluate_prefixes};
use crate::builder::input::InputError;
use crate::builder::logline;
use crate::history::History;
use crate::normalize;
use crate::snapshot::Snapshot;

/// The suggestions the service gives (the prefix tier, as the rest of `eval` measures).
const K: usize = 10;

/// Calls `event(user, surface, key)` for every event of `paths` with a user, in order; returns
/// the lines skipped (malformed, empty query, or no user).
fn for_each_event(
    paths: &[PathBuf],
    mut event: impl FnMut(&str, &str, &str),
) -> Result<u64, InputError> {
    let mut skipped = 0;
    let too_long = super::for_each_log_line(paths, |line| {
        let parsed = logline::parse_log_line(line).ok();
        let user = parsed.and_then(|p| p.user);
        match (user, parsed.and_then(|p| normalize::surface_and_key(p.query))) {
            (Some(user), Some((surface, key))) => event(user, &surface, &key),
            _ => skipped += 1,
        }
    })?;
    Ok(skipped + too_long)
}

/// Seeds histories from `earlier`, replays `later` on `snapshot`: the figures of [`Report`]
/// with history first, over the later events that carry a user.
pub fn evaluate(
    snapshot: &Snapshot,
    earlier: &[PathBuf],
    later: &[PathBuf],
) -> Result<Report, InputError> {
    let mut histories: HashMap<String, History> = HashMap::new();
    let mut clock = 0u64;
    for_each_event(earlier, |user, surface, key| {
        clock += 1;
        histories.entry(user.to_owned()).or_default().record(key, surface, clock);
    })?;
    let (mut tally, mut plain) = (Tally::default(), Tally::default());
    let mut distinct: HashMap<String, ()> = HashMap::new();
    let skipped = for_each_event(later, |user, surface, key| {
        clock += 1;
        let history = histories.entry(user.to_owned()).or_default();
        // The service's own ranks, asked once per prefix and replayed for the baseline.
        let mut own = Vec::new();
        let result = evaluate_prefixes(snapshot, key, |p| {
            let suggested: Vec<String> =
                snapshot.suggest(p, K).into_iter().map(|s| s.key).collect();
            own.push(suggested.iter().position(|k| k == key));
            history.merge(p, &suggested, K).iter().position(|&k| k == key)
        });
        let mut own = own.into_iter();
        plain.add(&evaluate_prefixes(snapshot, key, |_| own.next().flatten()), 1);
        tally.add(&result, 1);
        history.record(key, surface, clock);
        distinct.entry(key.to_owned()).or_default();
    })?;
    let without = plain.report(distinct.len() as u64, skipped);
    let mut report = tally.report(distinct.len() as u64, skipped);
    report.without_history =
        Some(Baseline { mrr: without.mrr, success_at_10: without.success_at_10 });
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{BuildInfo, Entry, write};

    #[test]
    fn a_repeated_search_is_found_first_from_the_first_character() {
        let mut entries: Vec<Entry> = [("zebra", 9.0), ("zoo", 5.0), ("zorro", 1.0)]
            .iter()
            .map(|(k, s)| Entry { key: (*k).into(), display: None, score: *s })
            .collect();
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        let info = BuildInfo { half_life_hours: 1.0, ..BuildInfo::default() };
        let snapshot = Snapshot::from_bytes(write(&entries, &info).unwrap().0).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (earlier, later) = (dir.path().join("earlier.tsv"), dir.path().join("later.tsv"));
        std::fs::write(&earlier, "2006-05-01 10:00:00\tZorro\tu1\n").unwrap();
        // u1 searched "zorro" before; u2 did not; the line without a user is skipped; u2's
        // second "zorro" finds the first one.
        std::fs::write(
            &later,
            "2006-05-11 10:00:00\tzorro\tu1\n2006-05-11 10:00:01\tzorro\tu2\n\
             2006-05-11 10:00:02\tzorro\n2006-05-11 10:00:03\tzorro\tu2\n",
        )
        .unwrap();
        let r = evaluate(&snapshot, &[earlier], &[later]).unwrap();
        assert_eq!((r.events, r.distinct_keys, r.skipped_lines), (3, 1, 1));
        // With history: 1/1 at every length (5 lengths) for u1 and u2's second search; u2's
        // first: "z" 1/3, "zo" 1/2, "zor".. 1/1.
        let want = (5.0 + (1.0 / 3.0 + 0.5 + 3.0) + 5.0) / 15.0;
        assert!((r.mrr - want).abs() < 1e-12, "{} vs {want}", r.mrr);
        assert!((r.chars_to_top1 - (1.0 + 3.0 + 1.0) / 3.0).abs() < 1e-12);
        // Without history, the same three events (not the line without a user): three times
        // u2's first search.
        let without = r.without_history.unwrap();
        assert!((without.mrr - (1.0 / 3.0 + 0.5 + 3.0) / 5.0).abs() < 1e-12, "{without:?}");
        assert_eq!(without.success_at_10, 1.0);
    }
}
