//! `/metrics` of a server and of an aggregator in front of it, as real processes on loopback:
//! each exports the request metrics both record plus only its own.

use crate::cluster::{build, start_cluster};
use crate::http::{Client, Process};
use crate::support::{BASE_HOUR, log_text, write};

/// Metric names (without the `_total`/`_bucket` sample suffixes, so `# HELP` lines count too)
/// that only `typeahead serve` records.
const SERVER_ONLY: [&str; 16] = [
    "typeahead_snapshot_swaps",
    "typeahead_snapshot_swaps_failed",
    "typeahead_blocklist_updates",
    "typeahead_blocklist_updates_failed",
    "typeahead_snapshot_info",
    "typeahead_snapshot_keys",
    "typeahead_snapshot_age_seconds",
    "typeahead_snapshot_memory_bytes",
    "typeahead_blocklist_entries",
    "typeahead_blocklist_hidden_items",
    "typeahead_snapshot_watermark_timestamp_seconds",
    "typeahead_blocklist_info",
    "typeahead_blocklist_applied_timestamp_seconds",
    "typeahead_manifest_poll_failures_by_reason_total{reason=\"layout\"} 0",
    "typeahead_tier_candidates_total",
    "typeahead_answers_cut_total",
];

/// Metric names only `typeahead aggregate` records.
const AGGREGATOR_ONLY: [&str; 16] = [
    "typeahead_partial_answers",
    "typeahead_cache_hits",
    "typeahead_cache_misses",
    "typeahead_coalesced_answers",
    "typeahead_early_asks",
    "typeahead_backend_errors",
    "typeahead_probe_failures",
    "typeahead_hedged_requests",
    "typeahead_replica_ejections",
    "typeahead_generation_flips",
    "typeahead_generation_info",
    "typeahead_healthy_replicas",
    "typeahead_serving_replicas",
    "typeahead_generation_created_timestamp_seconds",
    "typeahead_generation_watermark_timestamp_seconds",
    "typeahead_generation_pending_seconds",
];

/// Sample names both export.
const SHARED: [&str; 8] = [
    "typeahead_requests_total{",
    "typeahead_request_duration_seconds_bucket{",
    "typeahead_in_flight_requests ",
    "typeahead_open_connections ",
    "typeahead_connections_refused_total ",
    "typeahead_connections_timed_out_total ",
    "typeahead_suggestion_picks_total{",
    "typeahead_manifest_poll_failures_total ",
];

/// The `/metrics` text, checked for the OpenMetrics content type and its closing line.
async fn scrape(process: &Process) -> String {
    let reply = Client::new().get(&process.url("/metrics")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = String::from_utf8(reply.body).unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_process_exports_only_its_own_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let log = write(dir.path(), "log.tsv", &log_text(31, BASE_HOUR, 3, 2_000));
    let out = dir.path().join("p1");
    build(log.to_str().unwrap(), &out, Some(1));
    let cluster = start_cluster(&out, 1, &[], &[]);
    let (server, aggregator) = (&cluster.servers[0][0], &cluster.aggregator);
    let started = std::time::Instant::now();
    while Client::new().get(&aggregator.url("/readyz")).await.status != 200 {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "never ready");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // One suggestion through both, so each has a request series.
    let answer = Client::new().get(&aggregator.url("/v1/suggest?q=new")).await;
    assert_eq!(answer.status, 200);

    let served = scrape(server).await;
    let aggregated = scrape(aggregator).await;
    for name in SERVER_ONLY {
        assert!(served.contains(name), "the server lacks {name}\n{served}");
        assert!(!aggregated.contains(name), "the aggregator exports {name}\n{aggregated}");
    }
    for name in AGGREGATOR_ONLY {
        assert!(aggregated.contains(name), "the aggregator lacks {name}\n{aggregated}");
        assert!(!served.contains(name), "the server exports {name}\n{served}");
    }
    // The one replica answers for the active generation, and nothing is waited for.
    for sample in
        ["typeahead_serving_replicas{partition=\"0\"} 1", "typeahead_generation_pending_seconds 0"]
    {
        assert!(aggregated.contains(sample), "{sample}\n{aggregated}");
    }
    for name in SHARED {
        assert!(served.contains(name), "the server lacks {name}\n{served}");
        assert!(aggregated.contains(name), "the aggregator lacks {name}\n{aggregated}");
    }
}
