//! How fast a replica answers lately, for choosing where a request goes.
//!
//! Fewest-requests-in-flight alone keeps sending a share of traffic to a replica that answers,
//! but slowly: its requests finish (or lose to a hedge) and it looks idle again. So each replica
//! also keeps an exponentially weighted moving average of how long its tries took, and the
//! aggregator picks the replica with the lowest expected wait, `(in flight + 1) x latency`.
//!
//! Two details keep the estimate honest. A try aborted because a hedge to another replica won
//! counts as "at least the time it ran": a replica that loses every race is slow, even though
//! it never answered, but a hedge to it cancelled a moment after it was sent says nothing
//! about its speed and must not make it look fast. And the estimate decays while a replica
//! gets no traffic (halving every [`DECAY_HALF_LIFE`]), so a replica that was slow is tried
//! again now and then and is found when it recovers.

use std::sync::Mutex;
use std::time::Duration;

// Tokio's clock: tests pause and advance it, so the decay is checked to the microsecond
// instead of against a wall clock a loaded machine stretches.
use tokio::time::Instant;

/// Weight of a new sample in the moving average.
const WEIGHT: f64 = 0.3;

/// How fast an estimate fades while its replica gets no traffic.
pub const DECAY_HALF_LIFE: Duration = Duration::from_secs(1);

/// The smallest estimate, so that requests in flight still count between replicas that both
/// look instantaneous.
const FLOOR_US: f64 = 50.0;

/// A replica's recent latency.
#[derive(Debug)]
pub struct Latency {
    /// (moving average in µs, when it was last updated).
    state: Mutex<(f64, Instant)>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency { state: Mutex::new((0.0, Instant::now())) }
    }
}

impl Latency {
    /// Adds one try's duration.
    pub fn record(&self, took: Duration) {
        self.update(|_| took.as_secs_f64() * 1e6);
    }

    /// Adds a try that was abandoned after `ran`: it raises the estimate when it ran longer,
    /// and otherwise leaves it as it is.
    pub fn record_at_least(&self, ran: Duration) {
        self.update(|current| current.max(ran.as_secs_f64() * 1e6));
    }

    /// Moves the (decayed) average toward the sample `sample(current)` gives.
    fn update(&self, sample: impl FnOnce(f64) -> f64) {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = decayed(state.0, now.saturating_duration_since(state.1));
        *state = (current + WEIGHT * (sample(current) - current), now);
    }

    /// The estimate now, in µs (never below a small floor).
    pub fn estimate_us(&self) -> f64 {
        let state = *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        decayed(state.0, Instant::now().saturating_duration_since(state.1)).max(FLOOR_US)
    }

    /// Expected wait of one more request: `(in_flight + 1) x estimate`.
    pub fn cost(&self, in_flight: usize) -> f64 {
        (in_flight as f64 + 1.0) * self.estimate_us()
    }
}

fn decayed(value: f64, since: Duration) -> f64 {
    value * 0.5f64.powf(since.as_secs_f64() / DECAY_HALF_LIFE.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    #[tokio::test(start_paused = true)]
    async fn a_slow_replica_costs_more_until_its_estimate_fades() {
        let (fast, slow) = (Latency::default(), Latency::default());
        for _ in 0..20 {
            fast.record(Duration::from_micros(300));
            slow.record(Duration::from_millis(10));
        }
        // 20 samples of the same value: the average is within 0.7^20 of it.
        assert!((fast.estimate_us() - 300.0).abs() < 1.0, "{}", fast.estimate_us());
        let slow_now = slow.estimate_us();
        assert!((slow_now - 10_000.0).abs() < 10.0, "{slow_now}");
        // The fast one wins until it has many requests in flight.
        assert!(fast.cost(10) < slow.cost(0));
        assert!(fast.cost(40) > slow.cost(0));
        // Without traffic the estimate halves every DECAY_HALF_LIFE, down to the floor.
        advance(DECAY_HALF_LIFE).await;
        assert!((slow.estimate_us() - slow_now / 2.0).abs() < 1e-6, "{}", slow.estimate_us());
        advance(DECAY_HALF_LIFE * 19).await;
        assert_eq!(slow.estimate_us(), FLOOR_US);
        assert_eq!(Latency::default().estimate_us(), FLOOR_US);
    }

    #[tokio::test(start_paused = true)]
    async fn a_sample_after_a_pause_moves_the_decayed_average() {
        let l = Latency::default();
        l.record(Duration::from_millis(10));
        let first = l.estimate_us();
        assert!((first - 3_000.0).abs() < 1e-6, "one sample from 0 moves 30% of the way: {first}");
        advance(DECAY_HALF_LIFE).await;
        l.record(Duration::from_millis(10));
        let expected = 1_500.0 + WEIGHT * (10_000.0 - 1_500.0);
        assert!((l.estimate_us() - expected).abs() < 1e-6, "{} != {expected}", l.estimate_us());
    }

    #[tokio::test(start_paused = true)]
    async fn an_abandoned_try_never_lowers_the_estimate() {
        let slow = Latency::default();
        for _ in 0..20 {
            slow.record(Duration::from_millis(10));
        }
        let before = slow.estimate_us();
        slow.record_at_least(Duration::from_micros(300));
        assert_eq!(slow.estimate_us(), before, "time stands still: nothing decays");
        slow.record_at_least(Duration::from_millis(50));
        let raised = before + WEIGHT * (50_000.0 - before);
        assert!((slow.estimate_us() - raised).abs() < 1e-6, "a long abandoned try raises it");
    }
}
