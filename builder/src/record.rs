//! What the builder knows about one key: its surface forms with their decayed counts, and how
//! many distinct users searched it. The same record is accumulated from new log lines and kept
//! in the state between builds.

use serde::{Deserialize, Serialize};

use crate::ema::{Decay, Decayed};
use crate::logline::Hour;

/// Distinct users are tracked exactly up to this many per key; beyond it the key is simply
/// "popular enough" for any `--min-users` threshold up to this value.
pub const MAX_TRACKED_USERS: usize = 64;

/// Surface forms kept per key. Folding makes endless forms of one key (every diacritic a
/// variant of "weather" can carry), and each new one was compared with all before it: hostile
/// input cost quadratic time and grew the state for good. Past this many, a new form takes the
/// place of the least frequent one, whose searches count for the key under its most frequent
/// form. Real logs come nowhere near it (AOL: at most a few forms per key).
pub const MAX_SURFACES: usize = 64;

/// One way users wrote a key, e.g. "café" for the key "cafe".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Surface {
    /// The surface text; `None` when it equals the key (the common case, stored for free).
    pub text: Option<String>,
    /// Decayed count of this surface form.
    pub score: Decayed,
}

/// A lower bound on the number of distinct users who issued a key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DistinctUsers {
    /// Sorted hashes of user ids seen, at most [`MAX_TRACKED_USERS`].
    hashes: Vec<u64>,
    /// Distinct users reported by pre-aggregated input (counts of other systems).
    reported: u64,
}

impl DistinctUsers {
    /// Records a user id.
    pub fn add_user(&mut self, user: &str) {
        if self.hashes.len() >= MAX_TRACKED_USERS {
            return;
        }
        let h = fnv1a(user.bytes());
        if let Err(at) = self.hashes.binary_search(&h) {
            self.hashes.insert(at, h);
        }
    }

    /// Records a distinct-user count reported by pre-aggregated input.
    pub fn add_reported(&mut self, n: u64) {
        self.reported = self.reported.max(n);
    }

    /// Combines two observations of the same key.
    pub fn merge(&mut self, other: &DistinctUsers) {
        for &h in &other.hashes {
            if self.hashes.len() >= MAX_TRACKED_USERS {
                break;
            }
            if let Err(at) = self.hashes.binary_search(&h) {
                self.hashes.insert(at, h);
            }
        }
        self.reported = self.reported.max(other.reported);
    }

    /// The lower bound on distinct users.
    pub fn count(&self) -> u64 {
        (self.hashes.len() as u64).max(self.reported)
    }
}

/// FNV-1a: a stable hash (user ids hash the same in every build and Rust version; ETags are
/// cheap to compute).
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes
        .into_iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Everything known about one key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// Surface forms and their decayed counts.
    pub surfaces: Vec<Surface>,
    /// Distinct users who issued the key.
    pub users: DistinctUsers,
}

/// Forms a record holds while a build counts ([`KeyRecord::count`]) before it settles them
/// early: [`MAX_SURFACES`] is the bound a settled record keeps, this the one hostile input (a
/// flood of forms of one key) meets first. It is checked at each compaction, which comes when
/// the entries fill their room (twice what the last compaction kept, or what they had), so a
/// flood holds a small multiple of it at most. Hours are not bounded: a form holds one entry
/// per hour it was searched in, which the lines already bound.
pub const MAX_PENDING_FORMS: usize = 4 * MAX_SURFACES;

/// Entries a count looks back through for its form and hour before it appends a new one: the
/// lines of one hour mostly come together, a form or two interleaved.
const RECENT_ENTRIES: usize = 8;

/// Entries a record holds before counting compacts them (and again each time they fill the
/// room the last compaction left: twice what it kept).
const COMPACT_FROM: usize = 16;

impl KeyRecord {
    /// Counts `count` searches written as `surface` (or as the key itself) in `hour`, exactly:
    /// while a build counts, a record holds entries of (form, hour, whole count), until
    /// [`KeyRecord::settle`] folds each form's hours in ascending order.
    ///
    /// Folding as lines came (`add`) made a score depend on the order of its lines and on how
    /// they were split between workers: keys with the same searches in the same hours got
    /// floats an ulp apart, and the ranking's tie-break by key never applied (a snapshot then
    /// depended on the build machine's core count). Counts of one hour add exactly, and the
    /// fold's order is the hours', so the same searches of each form give the same score, bit
    /// for bit.
    ///
    /// A count adds to its form and hour's entry when it is among the last few, else appends one;
    /// each time the entries fill their room they are sorted and those of one form and hour added
    /// ([`KeyRecord::compact`]). Keeping them sorted at every count moved every later entry for
    /// each new hour: a log written newest first, or in user order as AOL's is, cost the square of
    /// a key's hours (a year of them: 1.5 GB of moves per key).
    pub fn count(&mut self, key: &str, surface: &str, count: f64, hour: Hour, decay: Decay) {
        let text = (surface != key).then_some(surface);
        self.count_decayed(key, text, Decayed::new(count, hour), decay);
    }

    /// Adds another worker's entries of the same key ([`KeyRecord::count`]'s, not yet
    /// settled), and its users: one pass over both lists, compacted, equal (form, hour)
    /// entries added exactly.
    pub fn merge_counts(&mut self, key: &str, other: &KeyRecord, decay: Decay) {
        self.compact(key, decay);
        let compacted;
        let other_entries = if other.is_compact() {
            &other.surfaces
        } else {
            let mut copy = other.clone();
            copy.compact(key, decay);
            compacted = copy.surfaces;
            &compacted
        };
        let mine = std::mem::take(&mut self.surfaces);
        let mut merged = Vec::with_capacity(mine.len() + other_entries.len());
        let mut theirs = other_entries.iter().peekable();
        for entry in mine {
            while let Some(t) = theirs.next_if(|t| entry_order(t, &entry).is_lt()) {
                merged.push(t.clone());
            }
            match theirs.next_if(|t| entry_order(t, &entry).is_eq()) {
                Some(t) => merged.push(Surface {
                    text: entry.text,
                    score: Decayed { score: entry.score.score + t.score.score, ..entry.score },
                }),
                None => merged.push(entry),
            }
        }
        merged.extend(theirs.cloned());
        self.surfaces = merged;
        if self.forms() > MAX_PENDING_FORMS {
            self.settle(key, decay);
        }
        self.users.merge(&other.users);
    }

    fn count_decayed(&mut self, key: &str, text: Option<&str>, score: Decayed, decay: Decay) {
        let recent = self.surfaces.len().saturating_sub(RECENT_ENTRIES);
        let same = |s: &&mut Surface| s.score.hour == score.hour && s.text.as_deref() == text;
        if let Some(entry) = self.surfaces[recent..].iter_mut().rev().find(same) {
            entry.score.score += score.score;
            return;
        }
        let len = self.surfaces.len();
        if len == 0 {
            // Nearly every key has one entry: the default growth (room for four) would make
            // this the largest allocation of a 10M-key build.
            self.surfaces.reserve_exact(1);
        } else if len >= COMPACT_FROM && len == self.surfaces.capacity() {
            // Full: compacted before it grows, then given room for as many entries again as
            // the compaction left, so that the next one comes after at least as many appends.
            // (At a fixed length, a record compacted back to one entry short of it would be
            // compacted again at every line.)
            self.compact(key, decay);
            self.surfaces.reserve_exact(self.surfaces.len());
        }
        self.surfaces.push(Surface { text: text.map(str::to_owned), score });
    }

    /// Sorts the entries by form, then hour, and adds those of one form and hour together
    /// (exactly: their counts are whole numbers); past [`MAX_PENDING_FORMS`] forms, settles
    /// them early. What a worker hands on to be merged is compacted ([`KeyRecord::merge_counts`]
    /// reads both lists in order).
    fn compact(&mut self, key: &str, decay: Decay) {
        if self.is_compact() {
            return;
        }
        sort_and_add(&mut self.surfaces);
        if self.forms() > MAX_PENDING_FORMS {
            self.settle(key, decay);
        }
    }

    /// Whether the entries are sorted by form, then hour, each (form, hour) once.
    fn is_compact(&self) -> bool {
        self.surfaces.windows(2).all(|w| entry_order(&w[0], &w[1]).is_lt())
    }

    /// The number of distinct forms among the entries (sorted by form).
    fn forms(&self) -> usize {
        let mut forms = 0;
        let mut last: Option<Option<&str>> = None;
        for s in &self.surfaces {
            if last != Some(s.text.as_deref()) {
                forms += 1;
                last = Some(s.text.as_deref());
            }
        }
        forms
    }

    /// Folds the entries [`KeyRecord::count`] made into one per form: each form's hours in
    /// ascending order, the forms in byte order (then bounded to [`MAX_SURFACES`] as `add`
    /// bounds them). The result depends on the counts of each form and hour only.
    pub fn settle(&mut self, key: &str, decay: Decay) {
        if self.surfaces.len() <= 1 {
            return;
        }
        let mut entries = std::mem::take(&mut self.surfaces);
        // An hour's counts are added before the fold goes past it: (a + b) + c and a + (b + c)
        // may differ in their last bit.
        sort_and_add(&mut entries);
        let mut folded: Vec<Surface> = Vec::with_capacity(entries.len());
        for entry in entries {
            match folded.last_mut() {
                Some(last) if last.text == entry.text => last.score.add(entry.score, decay),
                _ => folded.push(entry),
            }
        }
        if folded.len() <= MAX_SURFACES {
            folded.shrink_to_fit();
            self.surfaces = folded;
            return;
        }
        for s in folded {
            self.add_decayed(key, s.text.as_deref(), s.score, decay);
        }
    }

    /// Adds `count` searches written as `surface` (or as the key itself) in `hour`, folded into
    /// the form's score at once (the unit tests' way to make a record; a build counts with
    /// [`KeyRecord::count`] and [`KeyRecord::settle`]).
    #[cfg(test)]
    pub(crate) fn add(&mut self, key: &str, surface: &str, count: f64, hour: Hour, decay: Decay) {
        let text = (surface != key).then_some(surface);
        self.add_decayed(key, text, Decayed::new(count, hour), decay);
    }

    fn add_decayed(&mut self, key: &str, text: Option<&str>, score: Decayed, decay: Decay) {
        let full = self.surfaces.len() >= MAX_SURFACES;
        match self.surfaces.iter_mut().find(|s| s.text.as_deref() == text) {
            Some(s) => s.score.add(score, decay),
            None if full => {
                // The weakest form's searches go to the one shown (the key's score keeps every
                // search, and the form shown stays the one shown), and its place to the new
                // form: a form that becomes popular later can still become the one shown.
                // Compared in the latest hour any of them was searched, so no form is compared
                // undecayed against decayed ones.
                let hour = self.surfaces.iter().map(|s| s.score.hour).fold(score.hour, Hour::max);
                let Some(shown) = self.strongest(key, hour, decay) else { return };
                let Some(weakest) = self.weakest(key, hour, decay, shown) else { return };
                let folded = self.surfaces[weakest].score;
                self.surfaces[shown].score.add(folded, decay);
                self.surfaces[weakest] = Surface { text: text.map(str::to_owned), score };
            }
            None => {
                // Nearly every key has one surface: the default growth (room for four) would
                // make this the largest allocation of a 10M-key build.
                self.surfaces.reserve_exact(1);
                self.surfaces.push(Surface { text: text.map(str::to_owned), score });
            }
        }
    }

    /// Combines two records of `key`.
    pub fn merge(&mut self, key: &str, other: &KeyRecord, decay: Decay) {
        for s in &other.surfaces {
            self.add_decayed(key, s.text.as_deref(), s.score, decay);
        }
        self.users.merge(&other.users);
    }

    /// The key's score at `hour`: the sum over its surface forms.
    ///
    /// Forms last searched in the same hour are added before they are decayed, as one form
    /// holding all those searches would be: counts of one hour add exactly, while decaying each
    /// form apart rounds each product. "cafe" searched 6 times and "café" once scored an ulp
    /// above "cafa" searched 7 times in the same hour, and the tie the contract breaks by key
    /// was broken by rounding.
    pub fn score_at(&self, hour: Hour, decay: Decay) -> f64 {
        if let [only] = self.surfaces.as_slice() {
            return only.score.at(hour, decay);
        }
        let mut by_hour: Vec<Decayed> = Vec::with_capacity(self.surfaces.len());
        for s in &self.surfaces {
            match by_hour.iter_mut().find(|d| d.hour == s.score.hour) {
                Some(d) => d.score += s.score.score,
                None => by_hour.push(s.score),
            }
        }
        by_hour.iter().map(|d| d.at(hour, decay)).sum()
    }

    /// The display text: the surface with the highest score, ties broken by smallest bytes.
    ///
    /// Scores within [`TIE`] of the highest are tied: the same searches give a surface
    /// slightly different floats depending on the path they were summed along (hourly builds
    /// through the state, or log lines split between workers), so an exact comparison would
    /// let rounding, not the searches, choose between two equally frequent forms.
    pub fn display<'a>(&'a self, key: &'a str, hour: Hour, decay: Decay) -> &'a str {
        // Nearly every key has one surface: no score to compare, so none is computed (the
        // two passes of `strongest` would decay each score twice, for every key of a build).
        if let [only] = self.surfaces.as_slice() {
            return only.text.as_deref().unwrap_or(key);
        }
        self.strongest(key, hour, decay).map_or(key, |i| self.text(i, key))
    }

    /// The form shown ([`KeyRecord::display`]): the index of the highest score at `hour`,
    /// scores within [`TIE`] tied, ties to the smallest bytes.
    fn strongest(&self, key: &str, hour: Hour, decay: Decay) -> Option<usize> {
        let at = |i: usize| self.surfaces[i].score.at(hour, decay);
        let forms = 0..self.surfaces.len();
        let best = forms.clone().map(at).fold(f64::NEG_INFINITY, f64::max);
        forms
            .filter(|&i| at(i) >= best - TIE * best.abs())
            .min_by(|&a, &b| self.text(a, key).as_bytes().cmp(self.text(b, key).as_bytes()))
    }

    /// The form evicted first, other than `shown` (whose searches it goes to, even when every
    /// form is tied with it): the lowest score at `hour`, ties to the largest bytes (so the
    /// order forms were added in never decides).
    fn weakest(&self, key: &str, hour: Hour, decay: Decay, shown: usize) -> Option<usize> {
        let at = |i: usize| self.surfaces[i].score.at(hour, decay);
        (0..self.surfaces.len()).filter(|&i| i != shown).min_by(|&a, &b| {
            let bytes = |i: usize| self.text(i, key).as_bytes();
            at(a).total_cmp(&at(b)).then_with(|| bytes(b).cmp(bytes(a)))
        })
    }

    fn text<'a>(&'a self, i: usize, key: &'a str) -> &'a str {
        self.surfaces[i].text.as_deref().unwrap_or(key)
    }
}

/// The order of a counting record's entries: by form (bytes, the key itself first), then hour.
/// Sorts `entries` by form, then hour, and adds those of one form and hour together.
fn sort_and_add(entries: &mut Vec<Surface>) {
    entries.sort_by(entry_order);
    entries.dedup_by(|later, kept| {
        let same = entry_order(later, kept).is_eq();
        if same {
            kept.score.score += later.score.score;
        }
        same
    });
}

fn entry_order(a: &Surface, b: &Surface) -> std::cmp::Ordering {
    (a.text.as_deref(), a.score.hour).cmp(&(b.text.as_deref(), b.score.hour))
}

/// Relative difference under which two surface scores count as equal (see
/// [`KeyRecord::display`]): far above float rounding (~1e-16 an operation), and the precision
/// scores are checked to against the oracle. A real difference this small is one search some
/// 30 half-lives old.
pub const TIE: f64 = 1e-9;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// However the searches of a key come (any order, split between any number of
        /// workers), counted and settled they give the same forms and scores, bit for bit:
        /// so two keys with the same searches tie exactly, and the ranking's tie-break by key
        /// applies. Folded as they came (`add`), they differed in their last digits.
        #[test]
        fn settled_counts_depend_on_the_searches_only(
            events in proptest::collection::vec((0usize..3, 0u32..40, 1u32..5), 1..60),
            order in any::<u64>(),
            workers in 1usize..4,
            half_life in prop_oneof![Just(1.0f64), Just(5.0), Just(24.0), Just(168.0)],
        ) {
            let d = Decay::new(half_life).unwrap();
            let forms = ["cafe", "café", "CAFE"];
            let count = |r: &mut KeyRecord, &(form, hour, n): &(usize, u32, u32)| {
                r.count("cafe", forms[form], f64::from(n), hour, d);
            };
            let mut one = KeyRecord::default();
            for e in &events {
                count(&mut one, e);
            }
            one.settle("cafe", d);
            // The same events shuffled (a seeded Fisher-Yates) and dealt to the workers.
            let mut shuffled = events.clone();
            let mut x = order | 1;
            for i in (1..shuffled.len()).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                shuffled.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut parts = vec![KeyRecord::default(); workers];
            for (i, e) in shuffled.iter().enumerate() {
                count(&mut parts[i % workers], e);
            }
            let mut merged = parts.remove(0);
            for part in &parts {
                merged.merge_counts("cafe", part, d);
            }
            merged.settle("cafe", d);
            prop_assert_eq!(&merged.surfaces, &one.surfaces);
            let t = events.iter().map(|e| e.1).max().unwrap_or(0) + 3;
            prop_assert_eq!(merged.score_at(t, d).to_bits(), one.score_at(t, d).to_bits());
            prop_assert_eq!(merged.display("cafe", t, d), one.display("cafe", t, d));
        }
    }

    /// A form's hours fold in ascending order: the contract's sum, to rounding.
    #[test]
    fn settling_folds_each_form_in_hour_order() {
        let d = Decay::new(24.0).unwrap();
        let mut r = KeyRecord::default();
        for (form, hour, n) in [
            ("café", 30, 1.0),
            ("cafe", 6, 2.0),
            ("café", 6, 1.0),
            ("cafe", 30, 1.0),
            ("cafe", 6, 1.0),
        ] {
            r.count("cafe", form, n, hour, d);
        }
        assert_eq!(r.surfaces.len(), 4, "one entry per form and hour while counting");
        r.settle("cafe", d);
        assert_eq!(r.surfaces.len(), 2);
        let expected = 4.0 * d.factor(24) + 2.0;
        assert!((r.score_at(30, d) - expected).abs() < 1e-12, "{}", r.score_at(30, d));
        assert_eq!(r.display("cafe", 30, d), "cafe");
    }

    /// A flood of forms stays bounded while counting, and every search counts; hours are not
    /// bounded (the lines bound them), so a key searched in every hour of a long build keeps
    /// them all, and its score still depends on its searches only.
    #[test]
    fn counting_bounds_forms_not_hours() {
        let d = Decay::new(168.0).unwrap();
        let mut r = KeyRecord::default();
        for i in 0..5_000u32 {
            let form = format!("weather{}{}", "\u{301}".repeat(i as usize % 7), i % 300);
            r.count("weather", &form, 1.0, i % 900, d);
            // Compacted (and settled when over) each time the entries fill their room.
            assert!(r.surfaces.len() <= 2 * MAX_PENDING_FORMS, "{}", r.surfaces.len());
        }
        r.settle("weather", d);
        assert!(r.surfaces.len() <= MAX_SURFACES);
        let expected: f64 = (0..5_000u32).map(|i| d.factor(899 - i % 900)).sum();
        assert!((r.score_at(899, d) - expected).abs() < 1e-9 * expected);
        // One form in 3,000 hours, counted forward and in two shuffled halves: the same bits.
        let (mut one, mut a, mut b) =
            (KeyRecord::default(), KeyRecord::default(), KeyRecord::default());
        for h in 0..3_000u32 {
            one.count("ebay", "ebay", 1.0, h, d);
            let part = if h % 3 == 0 { &mut a } else { &mut b };
            part.count("ebay", "ebay", 1.0, 2_999 - h, d);
        }
        b.merge_counts("ebay", &a, d);
        one.settle("ebay", d);
        b.settle("ebay", d);
        assert_eq!(one.score_at(3_000, d).to_bits(), b.score_at(3_000, d).to_bits());
    }

    #[test]
    fn display_is_the_most_frequent_surface_with_bytewise_ties() {
        let d = Decay::new(168.0).unwrap();
        let mut r = KeyRecord::default();
        r.add("cafe", "café", 2.0, 10, d);
        r.add("cafe", "cafe", 1.0, 10, d);
        assert_eq!(r.display("cafe", 10, d), "café");
        r.add("cafe", "cafe", 1.0, 10, d);
        assert_eq!(r.display("cafe", 10, d), "cafe"); // tie: "cafe" < "café" bytewise
        assert!((r.score_at(10, d) - 4.0).abs() < 1e-12);
    }

    /// A flood of forms of one key is bounded; every search still counts, and the form shown
    /// stays the most frequent one.
    #[test]
    fn surfaces_are_bounded_and_keep_every_search() {
        let d = Decay::new(168.0).unwrap();
        let mut r = KeyRecord::default();
        r.add("weather", "Weather", 50.0, 10, d);
        let mut other = KeyRecord::default();
        for i in 0..10_000 {
            let form = format!("we{}ather", "\u{301}".repeat(i % 97 + 1) + &i.to_string());
            r.add("weather", &form, 1.0, 10, d);
            other.add("weather", &form, 1.0, 11, d);
        }
        assert_eq!(r.surfaces.len(), MAX_SURFACES);
        r.merge("weather", &other, d);
        assert_eq!(r.surfaces.len(), MAX_SURFACES);
        let expected = (50.0 + 10_000.0) * d.factor(1) + 10_000.0;
        assert!((r.score_at(11, d) - expected).abs() < 1e-6 * expected, "{}", r.score_at(11, d));
        assert_eq!(r.display("weather", 11, d), "Weather");
        // A form that arrives after the flood and becomes the most searched is the one shown.
        r.add("weather", "wéather", 1.0, 12, d);
        assert_eq!(r.surfaces.len(), MAX_SURFACES);
        r.add("weather", "wéather", 1e6, 12, d);
        assert_eq!(r.display("weather", 12, d), "wéather");
    }

    /// The form a full record folds its weakest form into is the form shown: two forms tied
    /// for the most searches stay tied in favour of the one shown, whichever came last.
    #[test]
    fn a_full_record_folds_its_weakest_form_into_the_one_shown() {
        let d = Decay::new(168.0).unwrap();
        let mut r = KeyRecord::default();
        for i in 0..MAX_SURFACES - 2 {
            r.add("cafe", &format!("cafe{}", "\u{301}".repeat(i + 1)), 1.0, 0, d);
        }
        r.add("cafe", "cafe", 1.0, 100, d);
        r.add("cafe", "café", 1.0, 100, d);
        assert_eq!(r.display("cafe", 100, d), "cafe", "a tie goes to the smaller bytes");
        r.add("cafe", "CAFE", 0.5, 100, d);
        assert_eq!(r.surfaces.len(), MAX_SURFACES);
        assert_eq!(r.display("cafe", 100, d), "cafe", "the fold went to another form");
    }

    /// With every form tied, the order they came in decides neither the form evicted nor the
    /// one shown, and the one shown keeps every search (it is never the one evicted).
    #[test]
    fn tied_forms_are_evicted_the_same_in_any_order() {
        let d = Decay::new(168.0).unwrap();
        let forms: Vec<String> =
            (0..MAX_SURFACES).map(|i| format!("cafe{}", "\u{301}".repeat(i))).collect();
        let record = |order: &mut dyn Iterator<Item = &String>| {
            let mut r = KeyRecord::default();
            for form in order {
                r.add("cafe", form, 1.0, 100, d);
            }
            r.add("cafe", "cafè", 1.0, 100, d);
            r
        };
        let (forward, backward) = (record(&mut forms.iter()), record(&mut forms.iter().rev()));
        let texts = |r: &KeyRecord| {
            let mut t: Vec<Option<String>> = r.surfaces.iter().map(|s| s.text.clone()).collect();
            t.sort();
            t
        };
        assert_eq!(texts(&forward), texts(&backward));
        for r in [&forward, &backward] {
            assert_eq!(r.display("cafe", 100, d), "cafe");
            assert!((r.score_at(100, d) - (MAX_SURFACES as f64 + 1.0)).abs() < 1e-9);
        }
    }

    /// The same searches in one hour score the same, however they split into forms.
    #[test]
    fn forms_of_one_hour_score_as_one_form() {
        let d = Decay::new(168.0).unwrap();
        let (mut split, mut whole) = (KeyRecord::default(), KeyRecord::default());
        split.add("cafe", "cafe", 6.0, 10, d);
        split.add("cafe", "café", 1.0, 10, d);
        whole.add("cafa", "cafa", 7.0, 10, d);
        assert_eq!(split.score_at(12, d), whole.score_at(12, d));
        // Forms of different hours are each decayed from their own.
        split.add("cafe", "CAFE", 2.0, 11, d);
        let expected = 7.0 * d.factor(2) + 2.0 * d.factor(1);
        assert!((split.score_at(12, d) - expected).abs() < 1e-12);
    }

    #[test]
    fn surfaces_whose_scores_differ_by_rounding_are_tied() {
        let d = Decay::new(5.0).unwrap();
        let mut r = KeyRecord::default();
        // The same two searches, summed in another order: equal counts, floats an ulp apart.
        r.add_decayed("cafe x", Some("café x"), Decayed { score: 0.1 + 0.2, hour: 10 }, d);
        r.add_decayed("cafe x", Some("cafe x"), Decayed { score: 0.3, hour: 10 }, d);
        assert_ne!(0.1 + 0.2, 0.3);
        assert_eq!(r.display("cafe x", 10, d), "cafe x");
        // Hours summed in either order tie too.
        let mut r = KeyRecord::default();
        for (text, hours) in [("café", [3, 9]), ("cafe", [9, 3])] {
            for h in hours {
                r.add("cafe", text, 1.0, h, d);
            }
        }
        assert_eq!(r.display("cafe", 12, d), "cafe");
        // A real difference is not a tie, however small the counts.
        r.add("cafe", "café", 1e-6, 12, d);
        assert_eq!(r.display("cafe", 12, d), "café");
    }

    #[test]
    fn one_surface_takes_room_for_one() {
        // A 10M-key build holds a record per key: the default growth to four surfaces cost
        // 1.3 GB of its peak.
        let d = Decay::new(168.0).unwrap();
        let mut r = KeyRecord::default();
        r.add("cafe", "cafe", 1.0, 10, d);
        assert_eq!(r.surfaces.capacity(), 1);
        r.add("cafe", "café", 1.0, 10, d);
        assert_eq!(r.surfaces.len(), 2);
    }

    #[test]
    fn distinct_users_count_and_cap() {
        let mut u = DistinctUsers::default();
        for id in ["a", "b", "a"] {
            u.add_user(id);
        }
        assert_eq!(u.count(), 2);
        u.add_reported(7);
        assert_eq!(u.count(), 7);
        for i in 0..200 {
            u.add_user(&i.to_string());
        }
        assert_eq!(u.count(), MAX_TRACKED_USERS as u64);
    }
}
