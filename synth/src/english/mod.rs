//! Distinct English queries that read like real ones ("weather in paris", "how to tie a tie",
//! "pizza near me", "the new york times"), for the demo: a newcomer who types "new", "the" or
//! "weather" gets answers they can judge.
//!
//! The queries are every filling of a set of common query shapes with hand-written word lists
//! ([`lists`], public domain). Each query's popularity is the shape's weight times a Zipf
//! weight per list item (lists are ordered most popular first), times seeded noise (uniform in
//! log space, a factor within e^±1); the queries are returned most popular first, like [`crate::distinct_queries`], so the
//! log generator's Zipf draws, hourly curve and trends apply unchanged. Still SYNTHETIC: no
//! query comes from a real log, and the counts are invented.

mod lists;

use std::collections::HashMap;
use std::sync::Mutex;

use rand::RngExt;

use crate::rng::{Stream, stream};
use lists::*;

/// The candidates so far: text -> best log-popularity.
#[derive(Debug, Default)]
struct Candidates {
    scores: HashMap<String, f64>,
}

impl Candidates {
    fn add(&mut self, text: String, score: f64) {
        let best = self.scores.entry(text).or_insert(f64::NEG_INFINITY);
        *best = best.max(score);
    }

    /// `base + ln weight(item)` for each item of `list` (Zipf, exponent 1).
    fn one(&mut self, list: &[&str], base: f64, text: impl Fn(&str) -> String) {
        for (i, item) in list.iter().enumerate() {
            self.add(text(item), base - zipf(i));
        }
    }

    /// Every pair of `a` and `b` (distinct items when `distinct`), weights multiplied.
    fn two(
        &mut self,
        a: &[&str],
        b: &[&str],
        base: f64,
        distinct: bool,
        text: impl Fn(&str, &str) -> String,
    ) {
        for (i, x) in a.iter().enumerate() {
            for (j, y) in b.iter().enumerate() {
                if !(distinct && x == y) {
                    self.add(text(x, y), base - zipf(i) - zipf(j));
                }
            }
        }
    }
}

/// Minus the log Zipf weight of rank `i`.
fn zipf(i: usize) -> f64 {
    ((i + 1) as f64).ln()
}

/// Every query the shapes give, with its log-popularity before noise.
fn candidates() -> Candidates {
    let mut c = Candidates::default();
    c.one(ALONE, 3.0, str::to_owned);
    c.one(NAMES, 3.0, str::to_owned);
    c.two(NAMES, NAME_AFTER, 1.0, false, |n, a| format!("{n} {a}"));
    // Each kind of name with the endings that fit it: "weather login" or "the beatles
    // customer service" made the demo look broken.
    for (names, after, base) in [
        (SHOWS, SHOW_AFTER, 1.5),
        (FILMS, FILM_AFTER, 1.0),
        (BANDS, BAND_AFTER, 1.0),
        (ORGS, ORG_AFTER, 1.5),
        (LEAGUES, LEAGUE_AFTER, 2.0),
        (GAMES, GAME_AFTER, 1.5),
        (DEVICES, DEVICE_AFTER, 1.5),
    ] {
        c.one(names, base + 1.0, str::to_owned);
        c.two(names, after, base, false, |n, a| format!("{n} {a}"));
    }
    c.one(PLACES, 1.5, str::to_owned);
    c.two(PLACES, PLACE_AFTER, 1.0, false, |p, a| format!("{p} {a}"));
    c.two(PLACE_BEFORE, PLACES, 1.0, false, |b, p| format!("{b} {p}"));
    c.two(PLACES, PLACES, -1.0, true, |p, q| format!("flights from {p} to {q}"));
    c.two(PLACES, PLACES, -1.5, true, |p, q| format!("distance from {p} to {q}"));
    c.one(HOW_TO, 2.0, |h| format!("how to {h}"));
    c.one(FOODS, 1.0, str::to_owned);
    c.two(FOODS, FOOD_AFTER, 1.0, false, |f, a| format!("{f} {a}"));
    c.one(EATERIES, 1.5, str::to_owned);
    c.two(EATERIES, EATERY_AFTER, 1.5, false, |e, a| format!("{e} {a}"));
    c.two(FOODS, PLACES, -0.5, false, |f, p| format!("best {f} in {p}"));
    c.one(PRODUCTS, 0.5, str::to_owned);
    c.two(PRODUCT_BEFORE, PRODUCTS, 0.5, false, |m, p| format!("{m} {p}"));
    c.two(PRODUCTS, PRODUCT_AFTER, 0.5, false, |p, a| format!("{p} {a}"));
    c.two(SECOND_HAND, DURABLES, 0.5, false, |m, p| format!("{m} {p}"));
    c.one(ANIMALS, 0.5, str::to_owned);
    c.two(ANIMALS, ANIMAL_AFTER, 0.5, false, |x, a| format!("{x} {a}"));
    c.one(WILD_ANIMALS, 0.0, str::to_owned);
    c.two(WILD_ANIMALS, WILD_AFTER, 0.0, false, |x, a| format!("{x} {a}"));
    c.two(JOBS, JOB_AFTER, 0.5, false, |j, a| format!("{j} {a}"));
    c.two(JOBS, PLACES, -1.0, false, |j, p| format!("{j} jobs in {p}"));
    c.one(CONCEPTS, 1.0, |x| format!("what is {x}"));
    c.two(LANGUAGES, LANGUAGES, 0.0, true, |a, b| format!("{a} to {b}"));
    // LANGUAGES[0] is English itself.
    c.one(&LANGUAGES[1..], 0.0, |l| format!("translate {l} to english"));
    c.one(LANGUAGES, -0.5, |l| format!("learn {l}"));
    c.one(SPORTS, 0.5, str::to_owned);
    c.two(SPORTS, SPORT_AFTER, 0.5, false, |s, a| format!("{s} {a}"));
    c.one(ACTIVITIES, 0.5, str::to_owned);
    c.two(ACTIVITIES, ACTIVITY_AFTER, 0.5, false, |s, a| format!("{s} {a}"));
    c
}

/// How many distinct queries the shapes can give: [`queries`] returns at most this many.
pub fn capacity() -> usize {
    candidates().scores.len()
}

/// Up to `n` distinct English queries, most popular first, deterministic for a seed (all of
/// them, about 100 000, when `n` is larger).
///
/// The last answer is kept: the demo writes its log an hour at a time, and each hour asks again.
pub fn queries(seed: u64, n: usize) -> Vec<String> {
    static LAST: Mutex<Option<(u64, usize, Vec<String>)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((s, m, q)) = last.as_ref()
        && (*s, *m) == (seed, n)
    {
        return q.clone();
    }
    let q = generate(seed, n);
    *last = Some((seed, n, q.clone()));
    q
}

fn generate(seed: u64, n: usize) -> Vec<String> {
    let mut rng = stream(seed, Stream::Queries, 1, 0);
    let mut scored: Vec<(f64, String)> =
        candidates().scores.into_iter().map(|(text, score)| (score, text)).collect();
    // A fixed order before the noise is drawn: HashMap order is not deterministic.
    scored.sort_unstable_by(|a, b| a.1.cmp(&b.1));
    for (score, _) in &mut scored {
        // Uniform noise in log space: similar queries do not line up in list order.
        *score += rng.random_range(-1.0..1.0);
    }
    scored.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    scored.into_iter().take(n).map(|(_, text)| text).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_distinct_deterministic_and_read_like_searches() {
        let q = queries(7, 50_000);
        assert_eq!(q.len(), 50_000, "capacity {}", capacity());
        assert_eq!(q, queries(7, 50_000));
        assert_ne!(q, queries(8, 50_000), "the seed matters");
        let distinct: std::collections::HashSet<&String> = q.iter().collect();
        assert_eq!(distinct.len(), q.len());
        // What a newcomer types finds something.
        for typed in ["new", "the", "weather", "how to", "pizza", "caf", "münchen"] {
            assert!(q.iter().any(|x| x.starts_with(typed)), "{typed}");
        }
        // The head is the short, popular searches; no digits (the privacy rules withhold
        // numbers), lower case, single spaces.
        let head_words = q[..100].iter().map(|x| x.split(' ').count()).sum::<usize>();
        assert!(head_words < 250, "{:?}", &q[..100]);
        for x in &q {
            assert!(!x.chars().any(|c| c.is_ascii_digit() || c.is_uppercase()), "{x}");
            assert!(!x.contains("  ") && x.trim() == x, "{x:?}");
        }
    }

    /// Each kind of name or thing takes only the endings that fit it: a demo that suggests
    /// "weather login" for "weather l" looks broken.
    #[test]
    fn endings_fit_what_they_follow() {
        let all = queries(7, usize::MAX);
        for nonsense in [
            "weather login",
            "the beatles customer service",
            "the lion king login",
            "nasa stock",
            "iphone login",
            "hiking scores",
            "chess standings",
            "shark for sale",
            "used used cars",
            "new used cars",
            "engagement rings for kids",
            "refurbished dog food",
            "bakery recipe",
        ] {
            assert!(!all.iter().any(|x| x == nonsense), "{nonsense}");
        }
        for sensible in
            ["the beatles songs", "nba scores", "iphone price", "café near me", "used car"]
        {
            assert!(all.iter().any(|x| x == sensible), "{sensible}");
        }
    }
}
