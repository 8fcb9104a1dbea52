//! The regression gate: before a new generation is published, compare its answers for the
//! hottest prefixes with the live generation's, and refuse to publish a surprise.
//!
//! Hot prefixes are the empty prefix, every single letter and digit, and the first 1-3
//! characters of each suggestion those return — the short prefixes of the most popular
//! queries, which most users see. The gate refuses when
//! - any suggestion for them is blocked by the blocklist, or
//! - the churn (mean share of a prefix's top-10 that changed) exceeds the threshold.
//!
//! Hourly builds with a week-long half-life change little from one hour to the next, so a high
//! churn means broken input (a truncated log, a clock jump), not news.

use std::collections::BTreeSet;
use std::path::Path;

use typeahead_core::blocklist::Blocklist;
use typeahead_core::manifest::Manifest;
use typeahead_core::rank;
use typeahead_core::snapshot::Snapshot;

/// What the gate checks.
#[derive(Debug, Clone)]
pub struct GateOptions {
    /// Refuse when the mean churn of hot prefixes is above this (0..=1).
    pub max_churn: f64,
    /// Refuse when a hot prefix would suggest a blocked query.
    pub blocklist: Blocklist,
}

/// One generation's snapshots (one, or one per partition).
#[derive(Debug)]
pub struct Generation {
    snapshots: Vec<Snapshot>,
}

impl Generation {
    /// Opens a generation: a snapshot file, or a directory with a manifest.
    pub fn open(path: &Path) -> Result<Generation, String> {
        if path.is_dir() {
            let manifest = Manifest::read(&path.join(crate::publish::MANIFEST_FILE))
                .map_err(|e| e.to_string())?;
            let snapshots = manifest
                .partitions
                .iter()
                .map(|p| Snapshot::open(&path.join(&p.file)).map_err(|e| e.to_string()))
                .collect::<Result<_, _>>()?;
            Ok(Generation { snapshots })
        } else {
            Ok(Generation { snapshots: vec![Snapshot::open(path).map_err(|e| e.to_string())?] })
        }
    }

    /// The merged top-10 keys of a prefix.
    fn top10(&self, prefix: &str) -> Vec<String> {
        let mut all: Vec<(String, f64)> = self
            .snapshots
            .iter()
            .flat_map(|s| s.suggest(prefix, 10))
            .map(|s| (s.key, s.score))
            .collect();
        all.sort_by(|a, b| rank::cmp(a.1, a.0.as_bytes(), b.1, b.0.as_bytes()));
        all.into_iter().take(10).map(|x| x.0).collect()
    }
}

/// The verdict of the gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Hot prefixes compared.
    pub prefixes: usize,
    /// Mean churn over them.
    pub churn: f64,
    /// Blocked suggestions found (prefix, key).
    pub blocked: Vec<(String, String)>,
}

fn hot_prefixes(live: &Generation) -> Vec<String> {
    let mut prefixes: BTreeSet<String> = BTreeSet::new();
    prefixes.insert(String::new());
    let starts: Vec<String> = ('a'..='z').chain('0'..='9').map(String::from).collect();
    for p in std::iter::once(String::new()).chain(starts.iter().cloned()) {
        prefixes.insert(p.clone());
        for key in live.top10(&p) {
            for n in 1..=3 {
                prefixes.insert(key.chars().take(n).collect());
            }
        }
    }
    prefixes.into_iter().collect()
}

/// Compares `candidate` with `live` on the hot prefixes of `live`.
pub fn check(live: &Generation, candidate: &Generation, blocklist: &Blocklist) -> Verdict {
    let prefixes = hot_prefixes(live);
    let mut churn = 0.0;
    let mut blocked = Vec::new();
    for p in &prefixes {
        let (old, new) = (live.top10(p), candidate.top10(p));
        let kept = new.iter().filter(|k| old.contains(k)).count();
        churn += 1.0 - kept as f64 / old.len().max(new.len()).max(1) as f64;
        blocked.extend(new.into_iter().filter(|k| blocklist.blocks(k)).map(|k| (p.clone(), k)));
    }
    Verdict { prefixes: prefixes.len(), churn: churn / prefixes.len().max(1) as f64, blocked }
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
