use super::*;

fn text(register: impl FnOnce(&mut Registry)) -> String {
    let mut registry = Registry::default();
    register(&mut registry);
    encode(&registry).expect("encodes")
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_request_shows_up_with_its_labels_and_buckets() {
    let m = HttpMetrics::default();
    let suggest = route_index(Some("/v1/suggest"));
    m.end(suggest, 200, Duration::from_micros(300));
    m.end(suggest, 200, Duration::from_secs(3));
    m.end(suggest, 418, Duration::from_micros(10));
    let t = text(|r| m.register(r));

    assert_eq!(sample(&t, r#"typeahead_requests_total{route="suggest",status="200"}"#), Some(2.0));
    assert_eq!(
        sample(&t, r#"typeahead_requests_total{route="suggest",status="other"}"#),
        Some(1.0)
    );
    let bucket = |class: &str, le: &str| {
        let series = format!(
            r#"typeahead_request_duration_seconds_bucket{{le="{le}",route="suggest",status="{class}"}}"#
        );
        sample(&t, &series)
    };
    // 300 µs is over the 250 µs bound and under 500 µs; 3 s is only under +Inf. (The encoder
    // writes `le` first.)
    assert_eq!(bucket("2xx", "0.00025"), Some(0.0));
    assert_eq!(bucket("2xx", "0.0005"), Some(1.0));
    assert_eq!(bucket("2xx", "1.0"), Some(1.0));
    assert_eq!(bucket("2xx", "+Inf"), Some(2.0));
    assert_eq!(bucket("4xx", "+Inf"), Some(1.0));
    let count = r#"typeahead_request_duration_seconds_count{route="suggest",status="2xx"}"#;
    assert_eq!(sample(&t, count), Some(2.0));
    let sum = r#"typeahead_request_duration_seconds_sum{route="suggest",status="2xx"}"#;
    assert!((sample(&t, sum).unwrap_or(0.0) - 3.0003).abs() < 1e-9, "{t}");
    // Routes that saw no request export no series.
    assert!(!t.contains(r#"route="opensearch""#), "{t}");
    assert!(t.ends_with("# EOF\n"), "{t}");
}

#[test]
fn every_bucket_bound_is_exported_in_order() {
    let m = HttpMetrics::default();
    m.end(route_index(Some("/healthz")), 200, Duration::ZERO);
    let t = text(|r| m.register(r));
    let prefix = r#"typeahead_request_duration_seconds_bucket{le=""#;
    let bounds: Vec<f64> = t
        .lines()
        .filter_map(|l| l.strip_prefix(prefix)?.split_once('"'))
        .map(|(le, _)| if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::NAN) })
        .collect();
    let expected: Vec<f64> = histogram::BUCKETS.iter().copied().chain([f64::INFINITY]).collect();
    assert_eq!(bounds, expected, "{t}");
}

#[test]
fn gauges_follow_their_guards_and_picks_are_all_exported() {
    let m = HttpMetrics::default();
    let request = m.in_flight();
    let _connection = m.open_connection();
    m.picked(1);
    m.picked(42);
    m.connections_refused.inc();
    let t = text(|r| m.register(r));
    assert_eq!(sample(&t, "typeahead_in_flight_requests"), Some(1.0));
    assert_eq!(sample(&t, "typeahead_open_connections"), Some(1.0));
    assert_eq!(sample(&t, "typeahead_connections_refused_total"), Some(1.0));
    assert_eq!(sample(&t, "typeahead_connections_timed_out_total"), Some(0.0));
    assert_eq!(sample(&t, r#"typeahead_suggestion_picks_total{index="0"}"#), Some(0.0));
    assert_eq!(sample(&t, r#"typeahead_suggestion_picks_total{index="1"}"#), Some(1.0));
    assert_eq!(sample(&t, r#"typeahead_suggestion_picks_total{index="9"}"#), Some(1.0));
    drop(request);
    let t = text(|r| m.register(r));
    assert_eq!(sample(&t, "typeahead_in_flight_requests"), Some(0.0));
}

#[test]
fn each_process_set_exports_its_own_names() {
    let server = ServerMetrics::default();
    server.swaps_failed.inc();
    let t = text(|r| server.register(r));
    assert_eq!(sample(&t, "typeahead_snapshot_swaps_failed_total"), Some(1.0));
    assert_eq!(sample(&t, "typeahead_blocklist_updates_failed_total"), Some(0.0));
    assert!(!t.contains("typeahead_cache_hits"), "{t}");

    let aggregator = AggregatorMetrics::default();
    aggregator.hedges.inc();
    let t = text(|r| aggregator.register(r));
    assert_eq!(sample(&t, "typeahead_hedged_requests_total"), Some(1.0));
    assert_eq!(sample(&t, "typeahead_partial_answers_total"), Some(0.0));
    assert!(!t.contains("typeahead_snapshot_swaps"), "{t}");
}
