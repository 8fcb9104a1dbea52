//! `typeahead eval --typos SEED`: how often the intended query survives one realistic typo.
//!
//! # The generator (deterministic for a seed)
//!
//! Distinct keys are taken in byte order; a key with `n` events gets `n` draws, in turn, from
//! one ChaCha8 stream seeded with SEED ([`crate::synth::rng`]). For a key of `m >= 5`
//! characters, one draw is:
//!
//! 1. a prefix length `L`, uniform in `5..=m`, and the prefix `c[..L]`;
//! 2. a kind, uniform over: *substitute* `c[i]` by a QWERTY neighbour of it, *insert* a QWERTY
//!    neighbour of `c[i - 1]` before `c[i]` (or at the end when `i = L`), *delete* `c[i]`,
//!    *transpose* `c[i]` and `c[i + 1]`;
//! 3. a position `i`, uniform over the positions the kind allows, never the first character
//!    (`1..L` to substitute or delete, `1..=L` to insert, `1..L - 1` to transpose).
//!
//! A draw that is no edit (two equal characters swapped, a character without QWERTY
//! neighbours to substitute or insert) is made again, whole (1 to 3), and so is one that
//! normalization turns into two edits (deleting a one-letter word merges the spaces around it:
//! the typed text, normalized as any typed text is, must be within one edit of a prefix of the
//! key, [`crate::matching::prefix_distance`]). After [`DRAWS`] draws without an edit the event
//! is counted in `no_typo` and not evaluated. Events of keys under 5 characters are not
//! counted.
//!
//! As the issue defines the typo, deleting the last character of the prefix, or inserting the
//! key's next character at its end, is one: the typed text is then still a plain prefix of the
//! key (counted in `plain_prefix`), and those texts are the only ones the prefix tier alone can
//! find the key for.

use std::collections::HashMap;

use serde::Serialize;

use crate::matching::{self, Tiers};
use crate::normalize;
use crate::snapshot::Snapshot;
use crate::synth::rand::RngExt;

/// Quality under one typo, with all tiers and with the prefix tier only.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TypoReport {
    /// The seed of the generator.
    pub seed: u64,
    /// Events evaluated (keys of 5+ characters).
    pub events: u64,
    /// Events of keys of 5+ characters for which [`DRAWS`] draws in a row changed nothing
    /// (substitutions or insertions by characters without QWERTY neighbours, swaps of equal
    /// ones), not evaluated.
    pub no_typo: u64,
    /// Evaluated events whose typed text is still a plain prefix of the key (its last character
    /// deleted, or the next one inserted).
    pub plain_prefix: u64,
    /// MRR@10 of the intended key, all tiers.
    pub mrr: f64,
    /// Share of events whose intended key is in the top-10, all tiers.
    pub success_at_10: f64,
    /// MRR@10 with the prefix tier only.
    pub mrr_prefix_only: f64,
    /// success@10 with the prefix tier only.
    pub success_at_10_prefix_only: f64,
    /// Answers cut by a tier's candidate budget (0 on every log we know).
    pub incomplete_answers: u64,
}

const ROWS: [&str; 3] = ["qwertyuiop", "asdfghjkl", "zxcvbnm"];

/// The letters next to `c` on a QWERTY keyboard: left and right in its row, and the three
/// keys at the same index -1, 0, +1 in the rows above and below.
fn neighbours(c: char) -> Vec<char> {
    let Some((row, col)) = ROWS
        .iter()
        .enumerate()
        .find_map(|(r, keys)| keys.chars().position(|k| k == c).map(|col| (r, col as isize)))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (r, keys) in ROWS.iter().enumerate() {
        let keys: Vec<char> = keys.chars().collect();
        for dc in -1isize..=1 {
            let near = r.abs_diff(row) == 1 || (r == row && dc != 0);
            let at = col + dc;
            if near && (0..keys.len() as isize).contains(&at) {
                out.push(keys[at as usize]);
            }
        }
    }
    out
}

/// Draws before an event is given up on ([`TypoReport::no_typo`]).
pub const DRAWS: usize = 16;

/// The generator for a key of 5+ characters: the typed text with its typo, normalized, within
/// one edit of the key's prefixes; `None` when [`DRAWS`] draws gave no edit.
pub fn typo(key: &[char], rng: &mut crate::synth::Rng) -> Option<String> {
    let whole: String = key.iter().collect();
    (0..DRAWS).find_map(|_| {
        let (typed, len) = draw(key, rng);
        if typed[..] == key[..len] {
            return None;
        }
        let p = normalize::prefix(&typed.into_iter().collect::<String>());
        let chars: Vec<char> = p.chars().collect();
        matching::prefix_distance(&chars, &whole, 1).is_some().then_some(p)
    })
}

/// One draw: a prefix of `key` with one edit as drawn (none when the kind finds nothing to
/// change), and the prefix's length.
fn draw(key: &[char], rng: &mut crate::synth::Rng) -> (Vec<char>, usize) {
    let len = rng.random_range(5..=key.len());
    let mut p: Vec<char> = key[..len].to_vec();
    let pick = |rng: &mut crate::synth::Rng, options: Vec<char>| {
        (!options.is_empty()).then(|| options[rng.random_range(0..options.len())])
    };
    match rng.random_range(0..4u8) {
        0 => {
            let i = rng.random_range(1..len);
            if let Some(c) = pick(rng, neighbours(p[i])) {
                p[i] = c;
            }
        }
        1 => {
            let i = rng.random_range(1..=len);
            if let Some(c) = pick(rng, neighbours(p[i - 1])) {
                p.insert(i, c);
            }
        }
        2 => {
            p.remove(rng.random_range(1..len));
        }
        _ => {
            let i = rng.random_range(1..len - 1);
            p.swap(i, i + 1);
        }
    }
    (p, len)
}

/// Evaluates the typo'd prefixes of the events `counts` (key -> events) on `snapshot`.
pub fn evaluate(snapshot: &Snapshot, counts: &HashMap<String, u64>, seed: u64) -> TypoReport {
    let mut keys: Vec<(&String, &u64)> = counts.iter().collect();
    keys.sort_unstable();
    let mut rng = crate::synth::rng(seed);
    let mut report = TypoReport { seed, ..TypoReport::default() };
    let (mut rr, mut hits, mut rr_prefix, mut hits_prefix) = (0.0, 0u64, 0.0, 0u64);
    for (key, &n) in keys {
        let chars: Vec<char> = key.chars().collect();
        if chars.len() < 5 {
            continue;
        }
        for _ in 0..n {
            let Some(p) = typo(&chars, &mut rng) else {
                report.no_typo += 1;
                continue;
            };
            report.events += 1;
            report.plain_prefix += u64::from(key.starts_with(&p));
            let all = snapshot.answer(&p, 10, None, Tiers::All);
            report.incomplete_answers += u64::from(!all.complete());
            if let Some(r) = all.suggestions.iter().position(|s| &s.key == key) {
                rr += 1.0 / (r + 1) as f64;
                hits += 1;
            }
            let prefix = snapshot.suggest(&p, 10);
            if let Some(r) = prefix.iter().position(|s| &s.key == key) {
                rr_prefix += 1.0 / (r + 1) as f64;
                hits_prefix += 1;
            }
        }
    }
    let share = |x: f64| if report.events == 0 { 0.0 } else { x / report.events as f64 };
    report.mrr = share(rr);
    report.success_at_10 = share(hits as f64);
    report.mrr_prefix_only = share(rr_prefix);
    report.success_at_10_prefix_only = share(hits_prefix as f64);
    report
}

impl std::fmt::Display for TypoReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "with one typo (seed {}, {} events of 5+ characters):",
            self.seed, self.events
        )?;
        writeln!(
            f,
            "  all tiers               MRR@10 {:.4}  success@10 {:.4}",
            self.mrr, self.success_at_10
        )?;
        writeln!(
            f,
            "  prefix tier only        MRR@10 {:.4}  success@10 {:.4}",
            self.mrr_prefix_only, self.success_at_10_prefix_only
        )?;
        writeln!(f, "  answers cut by budget   {}", self.incomplete_answers)?;
        writeln!(
            f,
            "  typed texts still a plain prefix of the key  {} (last character deleted, next inserted)",
            self.plain_prefix
        )?;
        write!(
            f,
            "  events without a typo   {} (no draw gave an edit; not evaluated)",
            self.no_typo
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One edit at most after normalization, never on the first character, never none: also
    /// for keys where a draw often is not (a one-letter word whose deletion merges two spaces,
    /// doubled letters, characters without QWERTY neighbours).
    #[test]
    fn typos_are_one_edit_after_the_first_character() {
        let mut rng = crate::synth::rng(7);
        for key in ["new york times", "one in a million tv", "aabbccdd", "東京タワー行き"] {
            let chars: Vec<char> = key.chars().collect();
            let mut lengths = std::collections::HashSet::new();
            let mut plain = 0;
            for _ in 0..500 {
                let t = typo(&chars, &mut rng).expect("a typo");
                assert_eq!(t.chars().next(), key.chars().next(), "{t}");
                let typed: Vec<char> = t.chars().collect();
                let d = crate::matching::prefix_distance(&typed, key, 1);
                assert!(d.is_some(), "{t:?} is not within one edit of {key:?}");
                plain += usize::from(d == Some(0));
                lengths.insert(t.chars().count() as isize - 5);
            }
            assert!(lengths.len() > 3, "{key}: lengths {lengths:?}");
            // Only the contract's deletion of the last character or insertion of the next.
            assert!(plain < 500 / 4, "{key}: {plain} of 500 plain prefixes");
        }
        assert_eq!(neighbours('s'), ['q', 'w', 'e', 'a', 'd', 'z', 'x', 'c']);
        assert!(neighbours('1').is_empty());
    }
}
