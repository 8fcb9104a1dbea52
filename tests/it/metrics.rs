//! `/metrics` of a server and of an aggregator in front of it, as real processes on loopback:
//! each exports the request metrics both record plus only its own.

use crate::cluster::{build, start_cluster};
use crate::http::{Client, Process};
use crate::support::{BASE_HOUR, log_text, write};

/// Metric names (without the `_total`/`_bucket` sample suffixes, so `# HELP` lines count too)
/// that only `typeahead serve` records.
const SERVER_ONLY: [&str; 10] = [
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
];

/// Metric names only `typeahead aggregate` records.
const AGGREGATOR_ONLY: [&str; 9] = [
    "typeahead_partial_answers",
    "typeahead_cache_hits",
    "typeahead_cache_misses",
    "typeahead_backend_errors",
    "typeahead_hedged_requests",
    "typeahead_replica_ejections",
    "typeahead_generation_flips",
    "typeahead_generation_info",
    "typeahead_healthy_replicas",
];

/// Sample names both export.
const SHARED: [&str; 7] = [
    "typeahead_requests_total{",
    "typeahead_request_duration_seconds_bucket{",
    "typeahead_in_flight_requests ",
    "typeahead_open_connections ",
    "typeahead_connections_refused_total ",
    "typeahead_connections_timed_out_total ",
    "typeahead_suggestion_picks_total{",
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
    for name in SHARED {
        assert!(served.contains(name), "the server lacks {name}\n{served}");
        assert!(aggregated.contains(name), "the aggregator lacks {name}\n{aggregated}");
    }
}
