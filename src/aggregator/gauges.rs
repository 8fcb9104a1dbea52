//! The aggregator's gauges of the generation it serves and its replicas, read at each scrape.
//!
//! They answer what an on-call engineer asks first: which generation is served, since when
//! its data is (the builder's hourly runs stalling shows as a watermark falling behind), which
//! generation is waited for and for how long (a partition the replicas refuse shows as a
//! pending generation that never goes), and how many replicas of each partition can answer
//! for the active generation right now.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

use super::Generations;
use super::backends::Backends;

/// Registered once in the aggregator's registry; holds what it describes.
#[derive(Debug)]
pub(super) struct GenerationGauges {
    pub(super) generations: Arc<Generations>,
    pub(super) backends: Arc<Backends>,
    /// The pending generation a scrape first saw, and when: how long it has waited, to
    /// within a scrape interval, without a clock in the generation switch itself.
    pub(super) pending_seen: Mutex<Option<(String, Instant)>>,
}

impl GenerationGauges {
    pub(super) fn new(generations: Arc<Generations>, backends: Arc<Backends>) -> Self {
        GenerationGauges { generations, backends, pending_seen: Mutex::new(None) }
    }

    /// Seconds the pending generation has waited (since a scrape first saw it); 0 when none.
    fn pending_seconds(&self, pending: Option<&str>) -> f64 {
        let mut seen = self.pending_seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match (pending, seen.as_ref()) {
            (None, _) => {
                *seen = None;
                0.0
            }
            (Some(now), Some((was, since))) if now == was => since.elapsed().as_secs_f64(),
            (Some(now), _) => {
                *seen = Some((now.to_owned(), Instant::now()));
                0.0
            }
        }
    }
}

impl Collector for GenerationGauges {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let manifest = self.generations.active();
        crate::metrics::encode_info(
            &mut encoder,
            "typeahead_generation",
            "The generation being served.",
            [
                ("version", manifest.generation.clone()),
                ("partitions", manifest.partitions.len().to_string()),
            ],
        )?;
        let pending = self.generations.pending();
        if let Some(pending) = &pending {
            crate::metrics::encode_info(
                &mut encoder,
                "typeahead_generation_pending",
                "A newer generation waiting for every partition to load it.",
                [("version", pending.generation.clone())],
            )?;
        }
        let waited = self.pending_seconds(pending.as_deref().map(|m| m.generation.as_str()));
        let mut times = vec![
            (
                "typeahead_generation_created_timestamp",
                "When the builder wrote the generation served, unix seconds.",
                manifest.created_unix as f64,
            ),
            (
                "typeahead_generation_pending",
                "How long the pending generation has waited (0: none), to within a scrape.",
                waited,
            ),
        ];
        if let Some(hour) = manifest.watermark_hour {
            times.push((
                "typeahead_generation_watermark_timestamp",
                "Start of the last hour of logs the generation served counts, unix seconds.",
                f64::from(hour) * 3600.0,
            ));
        }
        for (name, help, value) in times {
            let gauge = ConstGauge::new(value);
            let unit = Some(&Unit::Seconds);
            gauge.encode(encoder.encode_descriptor(name, help, unit, gauge.metric_type())?)?;
        }
        self.encode_replicas(&mut encoder, &manifest)
    }
}

impl GenerationGauges {
    /// Per partition: replicas not ejected, and those of them that answered the last probe
    /// with the active generation's version loaded (what an answer can come from).
    fn encode_replicas(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
        manifest: &crate::manifest::Manifest,
    ) -> Result<(), std::fmt::Error> {
        let groups: Vec<_> =
            (0..self.backends.partition_count()).map(|i| self.backends.replicas(i)).collect();
        let healthy = groups.iter().map(|g| g.iter().filter(|r| r.healthy()).count());
        per_partition(
            encoder,
            "typeahead_healthy_replicas",
            "Replicas not ejected, by partition.",
            healthy,
        )?;
        let serving = groups.iter().enumerate().map(|(i, group)| {
            let version = manifest.partitions.get(i).map(|p| p.checksum.as_str());
            group.iter().filter(|r| version.is_some_and(|v| r.serves(v))).count()
        });
        per_partition(
            encoder,
            "typeahead_serving_replicas",
            "Replicas that answered the last probe, not ejected, with the active generation's \
             version of their partition loaded, by partition (0: that partition's answers are \
             missing).",
            serving,
        )
    }
}

/// A gauge with one sample per partition, in partition order.
fn per_partition(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    counts: impl Iterator<Item = usize>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (i, count) in counts.enumerate() {
        let labels = [("partition", i.to_string())];
        ConstGauge::new(count as i64).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}
