//! The regression gate: before a new generation is published, compare its answers for the
//! hottest prefixes with the live generation's, and refuse to publish a surprise.
//!
//! Hot prefixes are the empty prefix, every single letter and digit, and the first 1-3
//! characters of each suggestion those return — the short prefixes of the most popular
//! queries, which most users see. The gate refuses when
//! - any suggestion for them is blocked by the blocklist, or
//! - the churn (mean share of a prefix's top-10 that changed, over the hot prefixes the live
//!   generation answers) exceeds the threshold.
//!
//! Hourly builds with a week-long half-life change little from one hour to the next, so a high
//! churn means broken input (a truncated log, a clock jump), not news.

use std::collections::BTreeSet;

use typeahead_core::blocklist::Blocklist;
use typeahead_core::generation::Generation;

/// What the gate checks.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// Refuse when the mean churn of hot prefixes is above this (0..=1).
    pub max_churn: f64,
    /// Refuse when a hot prefix would suggest a blocked query.
    pub blocklist: Blocklist,
}

/// The verdict of the gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Hot prefixes compared (those the live generation answers).
    pub prefixes: usize,
    /// Mean churn over them.
    pub churn: f64,
    /// Blocked suggestions found (prefix, key).
    pub blocked: Vec<(String, String)>,
}

/// The merged top-10 keys of a prefix.
fn top10(generation: &Generation, prefix: &str) -> Vec<String> {
    generation.suggest(prefix, 10).into_iter().map(|s| s.key).collect()
}

fn hot_prefixes(live: &Generation) -> Vec<String> {
    let mut prefixes: BTreeSet<String> = BTreeSet::new();
    prefixes.insert(String::new());
    let starts: Vec<String> = ('a'..='z').chain('0'..='9').map(String::from).collect();
    for p in std::iter::once(String::new()).chain(starts.iter().cloned()) {
        prefixes.insert(p.clone());
        for key in top10(live, &p) {
            for n in 1..=3 {
                prefixes.insert(key.chars().take(n).collect());
            }
        }
    }
    prefixes.into_iter().collect()
}

/// Compares `candidate` with `live` on the hot prefixes of `live`.
///
/// Churn is measured where the live generation answers something: a prefix it has nothing
/// for cannot regress, and counting its first answers as change would refuse every build
/// after an empty generation (one published while `--min-users` held every key back) and
/// any build in which a new first letter appears. Blocked suggestions are looked for under
/// every hot prefix.
pub fn check(live: &Generation, candidate: &Generation, blocklist: &Blocklist) -> Verdict {
    let (mut compared, mut churn) = (0usize, 0.0);
    let mut blocked = Vec::new();
    for p in &hot_prefixes(live) {
        let (old, new) = (top10(live, p), top10(candidate, p));
        if !old.is_empty() {
            let kept = new.iter().filter(|k| old.contains(k)).count();
            churn += 1.0 - kept as f64 / old.len().max(new.len()) as f64;
            compared += 1;
        }
        blocked.extend(new.into_iter().filter(|k| blocklist.blocks(k)).map(|k| (p.clone(), k)));
    }
    Verdict { prefixes: compared, churn: churn / compared.max(1) as f64, blocked }
}

impl Verdict {
    /// Why the gate refuses, if it does.
    pub fn refusal(&self, max_churn: f64) -> Option<String> {
        if let Some((p, k)) = self.blocked.first() {
            return Some(format!(
                "{} blocked suggestion(s) among the hot prefixes (e.g. {k:?} for {p:?})",
                self.blocked.len()
            ));
        }
        (self.churn > max_churn).then(|| {
            format!(
                "top-10 churn {:.1}% over {} hot prefixes exceeds the allowed {:.1}%",
                self.churn * 100.0,
                self.prefixes,
                max_churn * 100.0
            )
        })
    }
}
