//! Prometheus metrics, hand-rolled: a fixed set of routes and status codes kept in atomics, so
//! recording a request is a few relaxed increments and never takes a lock.
//!
//! Metrics carry no query text (privacy): routes are labelled by their pattern.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Route labels.
pub const ROUTES: [&str; 8] =
    ["suggest", "opensearch", "healthz", "readyz", "metrics", "admin", "page", "other"];

/// Status codes counted individually; anything else counts as "other".
const STATUSES: [u16; 13] = [200, 304, 400, 401, 404, 405, 408, 409, 413, 422, 500, 502, 503];

/// Latency bucket upper bounds in seconds.
const BUCKETS: [f64; 12] =
    [0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.1, 1.0];

#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&b| secs <= b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(d.as_nanos() as u64, Relaxed);
    }
}

/// Counts a request as in flight while it lives.
#[derive(Debug)]
pub struct InFlight<'a>(&'a AtomicI64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// Counters of one server process.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: [[AtomicU64; STATUSES.len() + 1]; ROUTES.len()],
    /// By route and status class (index: 1xx..5xx -> 0..4).
    latency: [[Histogram; 5]; ROUTES.len()],
    in_flight: AtomicI64,
    /// Open client connections (see [`Metrics::open_connection`]).
    connections: AtomicI64,
    /// Connections closed on accept because `max_connections` were open.
    pub connections_refused: AtomicU64,
    /// Connections closed because a request head did not arrive in time (slow or idle client).
    pub connections_timed_out: AtomicU64,
    /// Snapshots published by a reload.
    pub swaps: AtomicU64,
    /// Reloads rejected (the old snapshot kept serving).
    pub swaps_failed: AtomicU64,
    /// Blocklist changes applied.
    pub blocklist_updates: AtomicU64,
    /// Blocklist changes rejected.
    pub blocklist_failed: AtomicU64,
    /// Suggestion answers served with `partial: true` (aggregator).
    pub partial_answers: AtomicU64,
    /// Aggregator cache hits.
    pub cache_hits: AtomicU64,
    /// Aggregator cache misses.
    pub cache_misses: AtomicU64,
    /// Backend requests that failed or timed out (aggregator).
    pub backend_errors: AtomicU64,
    /// Hedged backend requests sent (aggregator).
    pub hedges: AtomicU64,
    /// Replicas ejected after repeated failures (aggregator).
    pub ejections: AtomicU64,
    /// Generations the aggregator switched to (aggregator).
    pub generation_flips: AtomicU64,
    /// Suggestions picked on the search page, by position (0-based, last slot: 9 or more).
    picks: [AtomicU64; 10],
}

/// The route label index of a matched path pattern.
pub fn route_index(path: Option<&str>) -> usize {
    let label = match path {
        Some("/v1/suggest") => "suggest",
        Some("/v1/opensearch") => "opensearch",
        Some("/healthz") => "healthz",
        Some("/readyz") => "readyz",
        Some("/metrics") => "metrics",
        Some(p) if p.starts_with("/admin") => "admin",
        Some("/" | "/opensearch.xml" | "/app.js" | "/style.css" | "/search") => "page",
        _ => "other",
    };
    ROUTES.iter().position(|&r| r == label).unwrap_or(ROUTES.len() - 1)
}

impl Metrics {
    /// A request entered the server; it counts as in flight until the guard is dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Relaxed);
        InFlight(&self.in_flight)
    }

    /// A connection opened; it counts as open until the guard drops (also when its task is
    /// aborted after the shutdown grace).
    pub fn open_connection(&self) -> InFlight<'_> {
        self.connections.fetch_add(1, Relaxed);
        InFlight(&self.connections)
    }

    /// A request left the server with `status` after `elapsed`.
    pub fn end(&self, route: usize, status: u16, elapsed: Duration) {
        let route = route.min(ROUTES.len() - 1);
        let slot = STATUSES.iter().position(|&s| s == status).unwrap_or(STATUSES.len());
        self.requests[route][slot].fetch_add(1, Relaxed);
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.latency[route][class].observe(elapsed);
    }

    /// The search page reported that the suggestion at `index` was picked.
    pub fn picked(&self, index: usize) {
        self.picks[index.min(9)].fetch_add(1, Relaxed);
    }

    /// Total requests counted for a route label and status (tests, dashboards).
    pub fn requests(&self, route: &str, status: u16) -> u64 {
        let r = ROUTES.iter().position(|&x| x == route).unwrap_or(ROUTES.len() - 1);
        let slot = STATUSES.iter().position(|&s| s == status).unwrap_or(STATUSES.len());
        self.requests[r][slot].load(Relaxed)
    }

    /// Renders the request metrics in the Prometheus text format; `extra` is appended (gauges
    /// that belong to whoever owns the served state).
    pub fn render(&self, extra: &str) -> String {
        let mut out = String::with_capacity(8192);
        out.push_str("# HELP typeahead_requests_total HTTP requests by route and status.\n");
        out.push_str("# TYPE typeahead_requests_total counter\n");
        for (r, route) in ROUTES.iter().enumerate() {
            for (slot, count) in self.requests[r].iter().enumerate() {
                let n = count.load(Relaxed);
                if n > 0 {
                    let status =
                        STATUSES.get(slot).map_or_else(|| "other".to_owned(), u16::to_string);
                    let _ = writeln!(
                        out,
                        "typeahead_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
                    );
                }
            }
        }
        out.push_str("# HELP typeahead_request_duration_seconds Request latency by route and status class.\n");
        out.push_str("# TYPE typeahead_request_duration_seconds histogram\n");
        for (r, route) in ROUTES.iter().enumerate() {
            for (c, h) in self.latency[r].iter().enumerate() {
                let count = h.count.load(Relaxed);
                if count == 0 {
                    continue;
                }
                let labels = format!("route=\"{route}\",status=\"{}xx\"", c + 1);
                let mut cumulative = 0;
                for (i, bound) in BUCKETS.iter().enumerate() {
                    cumulative += h.buckets[i].load(Relaxed);
                    let _ = writeln!(
                        out,
                        "typeahead_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
                    );
                }
                let _ = writeln!(
                    out,
                    "typeahead_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {count}"
                );
                let sum = h.sum_ns.load(Relaxed) as f64 / 1e9;
                let _ = writeln!(out, "typeahead_request_duration_seconds_sum{{{labels}}} {sum}");
                let _ =
                    writeln!(out, "typeahead_request_duration_seconds_count{{{labels}}} {count}");
            }
        }
        let gauges = [
            (
                "typeahead_in_flight_requests",
                "gauge",
                "Requests being served.",
                self.in_flight.load(Relaxed) as f64,
            ),
            (
                "typeahead_open_connections",
                "gauge",
                "Client connections open.",
                self.connections.load(Relaxed) as f64,
            ),
            (
                "typeahead_connections_refused_total",
                "counter",
                "Connections closed on accept: the connection limit was reached.",
                self.connections_refused.load(Relaxed) as f64,
            ),
            (
                "typeahead_connections_timed_out_total",
                "counter",
                "Connections closed: a request head did not arrive in time.",
                self.connections_timed_out.load(Relaxed) as f64,
            ),
            (
                "typeahead_snapshot_swaps_total",
                "counter",
                "Snapshots published by reloads.",
                self.swaps.load(Relaxed) as f64,
            ),
            (
                "typeahead_snapshot_swaps_failed_total",
                "counter",
                "Reloads rejected; the old snapshot kept serving.",
                self.swaps_failed.load(Relaxed) as f64,
            ),
            (
                "typeahead_blocklist_updates_total",
                "counter",
                "Blocklist changes applied.",
                self.blocklist_updates.load(Relaxed) as f64,
            ),
            (
                "typeahead_blocklist_updates_failed_total",
                "counter",
                "Blocklist changes rejected.",
                self.blocklist_failed.load(Relaxed) as f64,
            ),
            (
                "typeahead_partial_answers_total",
                "counter",
                "Answers marked partial.",
                self.partial_answers.load(Relaxed) as f64,
            ),
            (
                "typeahead_cache_hits_total",
                "counter",
                "Aggregator cache hits.",
                self.cache_hits.load(Relaxed) as f64,
            ),
            (
                "typeahead_cache_misses_total",
                "counter",
                "Aggregator cache misses.",
                self.cache_misses.load(Relaxed) as f64,
            ),
            (
                "typeahead_backend_errors_total",
                "counter",
                "Backend requests that failed or timed out.",
                self.backend_errors.load(Relaxed) as f64,
            ),
            (
                "typeahead_hedged_requests_total",
                "counter",
                "Hedged backend requests sent.",
                self.hedges.load(Relaxed) as f64,
            ),
            (
                "typeahead_replica_ejections_total",
                "counter",
                "Replicas ejected after repeated failures.",
                self.ejections.load(Relaxed) as f64,
            ),
            (
                "typeahead_generation_flips_total",
                "counter",
                "Generations the aggregator switched to.",
                self.generation_flips.load(Relaxed) as f64,
            ),
        ];
        for (name, kind, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
        out.push_str("# HELP typeahead_suggestion_picks_total Suggestions picked on the search page, by position.\n");
        out.push_str("# TYPE typeahead_suggestion_picks_total counter\n");
        for (i, n) in self.picks.iter().enumerate() {
            let _ = writeln!(
                out,
                "typeahead_suggestion_picks_total{{index=\"{i}\"}} {}",
                n.load(Relaxed)
            );
        }
        out.push_str(extra);
        out
    }
}
