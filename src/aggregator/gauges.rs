//! The aggregator's gauges of the generation it serves and its replicas, read at each scrape.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::Generations;
use super::backends::Backends;

/// Registered once in the aggregator's registry; holds what it describes.
#[derive(Debug)]
pub(super) struct GenerationGauges {
    pub(super) generations: Arc<Generations>,
    pub(super) backends: Arc<Backends>,
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
        let mut healthy = encoder.encode_descriptor(
            "typeahead_healthy_replicas",
            "Replicas not ejected, by partition.",
            None,
            MetricType::Gauge,
        )?;
        for i in 0..self.backends.partition_count() {
            let count = self.backends.replicas(i).iter().filter(|r| r.healthy()).count();
            let labels = [("partition", i.to_string())];
            ConstGauge::new(count as i64).encode(healthy.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
