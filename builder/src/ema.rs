//! Exponentially decayed counts: the score of a query.
//!
//! The contract: the score of a key at hour `T` is
//! `sum over hours h <= T of count_h(key) * 2^(-(T - h) / H)`, with `H` the half-life in hours.
//! (Multiplied by `1 - 2^(-1/H)` it is the classic EMA of hourly counts; the ranking is the same.)
//!
//! Because the sum is linear, a score can be carried as a pair (value, the hour it refers to) and
//! moved forward by multiplying with `2^(-dt/H)`. That is what makes hourly builds incremental:
//! the state keeps each score as of the last hour it grew, and the next build decays it to the
//! new watermark and adds the new hours — no old log is ever re-read.

use serde::{Deserialize, Serialize};

use crate::logline::Hour;

/// The default half-life: one week, so weekly rhythms average out while trends still surface
/// within days.
pub const DEFAULT_HALF_LIFE_HOURS: f64 = 168.0;

/// The default `--min-score`: a key that fell this far (about 20 half-lives without a search)
/// is dropped. Small enough that no key a user could still see in a top-10 of a live prefix is
/// lost in practice, large enough that the state stops growing with dead queries.
pub const DEFAULT_MIN_SCORE: f64 = 1e-6;

/// The decay law for one half-life.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decay {
    half_life_hours: f64,
}

/// A half-life must be a positive, finite number of hours.
#[derive(Debug, thiserror::Error)]
#[error("half-life must be a positive number of hours, got {0}")]
pub struct BadHalfLife(pub f64);

impl Decay {
    /// A decay law with half-life `hours`.
    pub fn new(half_life_hours: f64) -> Result<Self, BadHalfLife> {
        if half_life_hours.is_finite() && half_life_hours > 0.0 {
            Ok(Decay { half_life_hours })
        } else {
            Err(BadHalfLife(half_life_hours))
        }
    }

    /// The half-life in hours.
    pub fn half_life_hours(self) -> f64 {
        self.half_life_hours
    }

    /// The weight of a count `hours` hours old: `2^(-hours / H)`.
    pub fn factor(self, hours: u32) -> f64 {
        (-f64::from(hours) / self.half_life_hours).exp2()
    }
}

/// A decayed count as of a given hour.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Decayed {
    /// The score as of `hour`.
    pub score: f64,
    /// The hour the score refers to.
    pub hour: Hour,
}

impl Decayed {
    /// `count` searches in `hour`.
    pub fn new(count: f64, hour: Hour) -> Self {
        Decayed { score: count, hour }
    }

    /// The score moved forward to `hour` (an earlier `hour` keeps the stored one).
    pub fn at(self, hour: Hour, decay: Decay) -> f64 {
        self.score * decay.factor(hour.saturating_sub(self.hour))
    }

    /// Adds another decayed count, in whichever of the two hours is later.
    pub fn add(&mut self, other: Decayed, decay: Decay) {
        if other.hour > self.hour {
            self.score = self.at(other.hour, decay) + other.score;
            self.hour = other.hour;
        } else {
            self.score += other.at(self.hour, decay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn matches_the_contract_formula() {
        let d = Decay::new(24.0).unwrap();
        let mut s = Decayed::new(4.0, 100);
        s.add(Decayed::new(1.0, 124), d);
        s.add(Decayed::new(2.0, 112), d);
        let expected = 4.0 * 0.5 + 1.0 + 2.0 * 0.5f64.powf(12.0 / 24.0);
        assert!((s.at(124, d) - expected).abs() < 1e-12);
        assert!((s.at(148, d) - expected / 2.0).abs() < 1e-12);
        assert!(Decay::new(0.0).is_err() && Decay::new(f64::NAN).is_err());
    }

    proptest! {
        /// Adding counts in any order gives the contract's sum (to rounding), never negative and
        /// never growing without new counts.
        #[test]
        fn order_does_not_matter(events in proptest::collection::vec((0u32..500, 1u32..50), 1..40), h in 1.0f64..1000.0) {
            let d = Decay::new(h).unwrap();
            let t = events.iter().map(|e| e.0).max().unwrap();
            let expected: f64 = events.iter().map(|&(hour, c)| f64::from(c) * (-(f64::from(t - hour)) / h).exp2()).sum();
            let mut fwd = Decayed::new(0.0, 0);
            for &(hour, c) in &events { fwd.add(Decayed::new(f64::from(c), hour), d); }
            let mut rev = Decayed::new(0.0, 0);
            for &(hour, c) in events.iter().rev() { rev.add(Decayed::new(f64::from(c), hour), d); }
            prop_assert!((fwd.at(t, d) - expected).abs() <= 1e-9 * expected);
            prop_assert!((rev.at(t, d) - expected).abs() <= 1e-9 * expected);
            prop_assert!(fwd.at(t + 10, d) <= fwd.at(t, d) && fwd.at(t + 10, d) >= 0.0);
        }
    }
}
