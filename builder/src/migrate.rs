//! Bringing a state written under older normalization or privacy rules up to today's.
//!
//! Keys are what counting and matching agree on, so when the rules change
//! (`typeahead_core::normalize::RULES_VERSION`) the state's keys must change with them: a state
//! from before invisible characters were removed holds "new\u{200b}york" and "newyork" as two
//! keys with split counts, and may hold queries today's privacy rules withhold. A build that
//! loads such a state re-normalizes it once, before the merge:
//!
//! - every surface form gets today's surface form, and goes under the key counting gives that
//!   form today (a record whose forms now have different keys is split, its users staying with
//!   the part that keeps its key, or else with the part of the form it showed);
//! - records whose keys now coincide are merged (their scores add, as if counted together);
//! - a record any of whose forms today's privacy rules withhold is dropped, and so is one whose
//!   key is no longer valid (nothing visible left, or too long);
//! - the state written by that build carries today's rules version, so it happens once.

use std::collections::BTreeMap;

use typeahead_core::normalize;

use crate::ema::Decay;
use crate::privacy::Privacy;
use crate::record::{KeyRecord, Surface};

/// What a migration changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// Records read.
    pub records: usize,
    /// Records whose key changed (merged into another, renamed, or split).
    pub rekeyed: usize,
    /// Records dropped by today's privacy rules.
    pub withheld: usize,
    /// Records dropped because nothing valid was left of their key.
    pub invalid: usize,
}

/// Re-normalizes `records` (sorted by key) under today's rules; the result is sorted too.
pub fn renormalize(
    records: Vec<(String, KeyRecord)>,
    decay: Decay,
    privacy: &Privacy,
) -> (Vec<(String, KeyRecord)>, Migrated) {
    let mut stats = Migrated { records: records.len(), ..Migrated::default() };
    let mut out: BTreeMap<String, KeyRecord> = BTreeMap::new();
    'records: for (old_key, record) in records {
        // Each form goes under the key counting gives it today (`key_of_surface` of its
        // surface), not under `normalize::key` of the old key: that is not the same function
        // (a key with two spaces, left by a mark folded away after a space, collapses to one),
        // and the form's later lines would be counted under another key than its past.
        let mut parts: Vec<(String, KeyRecord)> = Vec::new();
        for s in &record.surfaces {
            let surface = normalize::surface(s.text.as_deref().unwrap_or(&old_key));
            let key = normalize::key_of_surface(&surface).into_owned();
            if !normalize::is_kept(&surface, &key) {
                stats.invalid += 1;
                continue 'records;
            }
            if privacy.check(&surface, &key).is_some() {
                stats.withheld += 1;
                continue 'records;
            }
            let text = (surface != key).then_some(surface);
            let one = KeyRecord {
                surfaces: vec![Surface { text, score: s.score }],
                users: Default::default(),
            };
            match parts.iter_mut().find(|(k, _)| *k == key) {
                Some((key, part)) => part.merge(key, &one, decay),
                None => {
                    let mut part = KeyRecord { surfaces: Vec::new(), users: Default::default() };
                    part.merge(&key, &one, decay);
                    parts.push((key, part));
                }
            }
        }
        if parts.is_empty() {
            // No form: nothing to show or count (the writer never leaves such a record).
            stats.invalid += 1;
            continue;
        }
        // The users the record counted go with its key when a part keeps it, else with the
        // part of the form it showed (its one part, when it is not split); a form split off
        // under another key earns its users (`--min-users`) again, rather than showing under a
        // key its users may never have typed.
        let shown = || {
            let hour = record.surfaces.iter().map(|s| s.score.hour).max().unwrap_or_default();
            let shown = normalize::surface(record.display(&old_key, hour, decay));
            let key = normalize::key_of_surface(&shown);
            parts.iter().position(|(k, _)| *k == key)
        };
        let with_users = parts.iter().position(|(key, _)| *key == old_key).or_else(shown);
        if let Some(i) = with_users {
            parts[i].1.users = record.users.clone();
        }
        if parts.iter().any(|(key, _)| *key != old_key) {
            stats.rekeyed += 1;
        }
        for (key, part) in parts {
            match out.get_mut(&key) {
                Some(existing) => existing.merge(&key, &part, decay),
                None => {
                    out.insert(key, part);
                }
            }
        }
    }
    (out.into_iter().collect(), stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ema::Decayed;

    fn record(surface: Option<&str>, score: f64) -> KeyRecord {
        KeyRecord {
            surfaces: vec![Surface {
                text: surface.map(str::to_owned),
                score: Decayed::new(score, 10),
            }],
            users: Default::default(),
        }
    }

    #[test]
    fn invisible_characters_merge_keys_and_private_records_go() {
        let decay = Decay::new(24.0).unwrap();
        let records = vec![
            ("4111 1111 1111 1111".to_owned(), record(None, 1.0)),
            ("new\u{200b}york".to_owned(), record(Some("New\u{200b}York"), 2.0)),
            ("newyork".to_owned(), record(None, 3.0)),
            ("weather".to_owned(), record(None, 5.0)),
            ("\u{200b}".to_owned(), record(None, 1.0)),
        ];
        let (out, stats) = renormalize(records, decay, &Privacy::new());
        let keys: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["newyork", "weather"]);
        assert!((out[0].1.score_at(10, decay) - 5.0).abs() < 1e-12);
        assert_eq!(out[0].1.display("newyork", 10, decay), "newyork");
        assert_eq!(stats, Migrated { records: 5, rekeyed: 1, withheld: 1, invalid: 1 });
    }

    /// A form keeps the key counting gives it, even one `normalize::key` would change: a mark
    /// folded away after a space leaves two (`new\u{b4} york` counts under `new  york`).
    #[test]
    fn a_form_keeps_the_key_counting_gives_it() {
        let decay = Decay::new(24.0).unwrap();
        let (surface, key) = normalize::surface_and_key("New\u{b4} York").unwrap();
        assert_eq!(key, "new  york");
        assert_ne!(normalize::key(&key), key, "the case this test is about");
        let records = vec![(key.clone(), record(Some(&surface), 2.0))];
        let (out, stats) = renormalize(records, decay, &Privacy::new());
        let keys: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, [key.as_str()]);
        assert_eq!(out[0].1.display(&key, 10, decay), surface);
        assert_eq!(stats, Migrated { records: 1, ..Migrated::default() });
    }

    /// A record whose forms now have different keys is split; its users stay with the part
    /// that keeps its key, so the other earns `--min-users` again.
    #[test]
    fn a_split_record_leaves_its_users_with_its_key() {
        let decay = Decay::new(24.0).unwrap();
        let mut folded = record(Some("New York"), 3.0);
        folded.merge("new york", &record(Some("new\u{b4} york"), 1.0), decay);
        for user in ["u1", "u2"] {
            folded.users.add_user(user);
        }
        let (out, stats) = renormalize(vec![("new york".into(), folded)], decay, &Privacy::new());
        let users: Vec<(&str, u64)> =
            out.iter().map(|(k, r)| (k.as_str(), r.users.count())).collect();
        assert_eq!(users, [("new  york", 0), ("new york", 2)]);
        assert_eq!(stats, Migrated { records: 1, rekeyed: 1, ..Migrated::default() });
    }

    /// Split so that no part keeps its key, a record's users go with the form it showed: they
    /// used to go nowhere, and every part waited for new lines to reach `--min-users` again.
    #[test]
    fn a_split_record_no_part_of_which_keeps_its_key_leaves_its_users_with_the_form_shown() {
        let decay = Decay::new(24.0).unwrap();
        for (strong, weak, with_users) in [
            ("New York", "new\u{b4} york", "new york"),
            ("new\u{b4} york", "New York", "new  york"),
        ] {
            let mut split = record(Some(strong), 3.0);
            split.merge("new york\u{200b}", &record(Some(weak), 1.0), decay);
            for user in ["u1", "u2"] {
                split.users.add_user(user);
            }
            let old = vec![("new york\u{200b}".to_owned(), split)];
            let (out, stats) = renormalize(old, decay, &Privacy::new());
            let users: Vec<(&str, u64)> =
                out.iter().map(|(k, r)| (k.as_str(), r.users.count())).collect();
            let expected = if with_users == "new york" { [0, 2] } else { [2, 0] };
            assert_eq!(users, [("new  york", expected[0]), ("new york", expected[1])], "{strong}");
            assert_eq!(stats, Migrated { records: 1, rekeyed: 1, ..Migrated::default() });
        }
    }
}
