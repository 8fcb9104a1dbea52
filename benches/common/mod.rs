//! Shared by the benches: synthetic snapshots and prefix samples.
//!
//! The data is SYNTHETIC (see `typeahead_builder::synth`): word n-grams with Zipf popularity and
//! AOL-like lengths. Real logs are used only when `../shared/data` exists, never shipped.
#![allow(dead_code)]

use typeahead::builder::synth::{self, Rng, SynthConfig};
use typeahead::normalize;
use typeahead::snapshot::{BuildInfo, Entry, Snapshot, write};

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
    let info = BuildInfo {
        build_time_unix: 0,
        watermark_hour: Some(0),
        half_life_hours: 168.0,
        min_score: 0.0,
        top_k: 10,
        range_start: String::new(),
        range_end: None,
    };
    let (bytes, stats) = write(entries, &info).expect("synthetic entries are valid");
    (Snapshot::from_bytes(bytes).expect("fresh snapshot verifies"), stats.bytes as usize)
}

/// `count` prefixes of `chars` characters (whole keys when `chars` is `None`) of keys drawn
/// uniformly, so most lookups hit cold parts of the snapshot.
pub fn prefixes(entries: &[Entry], chars: Option<usize>, count: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|_| {
            let key = &entries[rng.below(entries.len() as u64) as usize].key;
            match chars {
                Some(c) => key.chars().take(c).collect(),
                None => key.clone(),
            }
        })
        .collect()
}
