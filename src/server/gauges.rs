//! The server's gauges of the snapshot it serves, read from the store at each scrape.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

use crate::store::Store;

/// Registered once in the server's registry; holds the store it describes.
#[derive(Debug)]
pub(super) struct SnapshotGauges(pub(super) Arc<Store>);

impl Collector for SnapshotGauges {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let served = self.0.current();
        let meta = served.snapshot.meta();
        crate::metrics::encode_info(
            &mut encoder,
            "typeahead_snapshot",
            "The snapshot being served.",
            [
                ("version", served.snapshot.id().to_owned()),
                ("range_start", meta.range_start.clone()),
                ("range_end", meta.range_end.clone().unwrap_or_default()),
            ],
        )?;
        crate::metrics::encode_info(
            &mut encoder,
            "typeahead_blocklist",
            "The blocklist in force (its version is what /readyz and the aggregator compare).",
            [("version", served.blocklist.version.clone())],
        )?;
        let now = crate::clock::now_unix();
        let gauges = [
            (
                "typeahead_snapshot_keys",
                "Completions in the snapshot.",
                None,
                served.snapshot.len() as i64,
            ),
            (
                "typeahead_snapshot_age",
                "Seconds since the snapshot was built.",
                Some(Unit::Seconds),
                now.saturating_sub(meta.build_time_unix),
            ),
            (
                "typeahead_snapshot_loaded_unix",
                "When the snapshot was loaded.",
                None,
                served.loaded_unix,
            ),
            (
                "typeahead_snapshot_memory",
                "Memory of loaded snapshots (current, previous, in use): files and derived data.",
                Some(Unit::Bytes),
                crate::snapshot::Snapshot::bytes_held() as i64,
            ),
            (
                "typeahead_blocklist_entries",
                "Entries of the active blocklist.",
                None,
                served.blocklist.list.len() as i64,
            ),
            (
                "typeahead_blocklist_applied_timestamp",
                "When the blocklist in force was applied, unix seconds.",
                Some(Unit::Seconds),
                served.blocklist.applied_unix,
            ),
            (
                "typeahead_blocklist_hidden_items",
                "Completions hidden by the blocklist.",
                None,
                served.hidden() as i64,
            ),
        ];
        let watermark = meta.watermark_hour.map(|hour| {
            (
                "typeahead_snapshot_watermark_timestamp",
                "Start of the last hour of logs the snapshot counts, unix seconds.",
                Some(Unit::Seconds),
                i64::from(hour) * 3600,
            )
        });
        for (name, help, unit, value) in gauges.into_iter().chain(watermark) {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(
                name,
                help,
                unit.as_ref(),
                gauge.metric_type(),
            )?)?;
        }
        Ok(())
    }
}
