//! The request latency histogram: atomics, encoded by `prometheus-client`. The crate's own
//! `Histogram` takes a mutex per observation, and every request records one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Latency bucket upper bounds in seconds: fine below a millisecond, where answers are, and
/// 50 and 250 ms around the aggregator's try timeout and deadline (50 and 100 ms by default).
pub(super) const BUCKETS: [f64; 14] = [
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 1.0,
];

/// One histogram; clones share the counts.
#[derive(Debug, Clone, Default)]
pub(super) struct LatencyHistogram(Arc<Cells>);

#[derive(Debug, Default)]
struct Cells {
    /// Observations per bucket (not cumulative); the last one is `+Inf`.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl LatencyHistogram {
    pub(super) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKETS.iter().position(|&b| secs <= b).unwrap_or(BUCKETS.len());
        self.0.buckets[i].fetch_add(1, Relaxed);
        self.0.sum_ns.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let bounds = BUCKETS.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> =
            bounds.zip(self.0.buckets.iter().map(|b| b.load(Relaxed))).collect();
        // The count is the buckets' sum, so a scrape never shows `+Inf` and `_count` apart.
        let count = buckets.iter().map(|&(_, n)| n).sum();
        let sum = self.0.sum_ns.load(Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}
