//! Prometheus metrics on `prometheus-client`, split by owner so each process exports only what it
//! records: [`HttpMetrics`] (both processes: requests, connections, suggestion picks),
//! [`ServerMetrics`] and [`AggregatorMetrics`]. Each process registers its sets (and a collector
//! of gauges computed at scrape time) into one [`Registry`]; `/metrics` encodes it as
//! OpenMetrics text ([`encode`]).
//!
//! Metrics carry no query text (privacy): routes are labelled by their pattern.

mod histogram;
mod owned;

pub use owned::{AggregatorMetrics, ServerMetrics};
pub use prometheus_client::registry::Registry;

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Unit;

use histogram::LatencyHistogram;

/// The content type of [`encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Route labels.
pub const ROUTES: [&str; 8] =
    ["suggest", "opensearch", "healthz", "readyz", "metrics", "admin", "page", "other"];

/// Status codes counted individually; anything else counts as "other".
const STATUSES: [u16; 13] = [200, 304, 400, 401, 404, 405, 408, 409, 413, 422, 500, 502, 503];

/// The status label of each slot: [`STATUSES`], then "other".
const STATUS_LABELS: [&str; STATUSES.len() + 1] = [
    "200", "304", "400", "401", "404", "405", "408", "409", "413", "422", "500", "502", "503",
    "other",
];

/// Status class labels, by `status / 100 - 1`.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Suggestion positions counted; the last slot also counts every later one.
const PICK_LABELS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

type RouteLabels = [(&'static str, &'static str); 2];
type IndexLabel = [(&'static str, &'static str); 1];

/// Counts a request (or a connection) as in flight while it lives.
#[derive(Debug)]
pub struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// What every listener records, server or aggregator.
#[derive(Debug, Default)]
pub struct HttpMetrics {
    requests: Family<RouteLabels, Counter>,
    /// By route and status class.
    latency: Family<RouteLabels, LatencyHistogram>,
    // Handles resolved once per (route, status) and (route, class): a family lookup hashes and
    // takes a lock, and every request records one of each.
    request_slots: [[OnceLock<Counter>; STATUS_LABELS.len()]; ROUTES.len()],
    latency_slots: [[OnceLock<LatencyHistogram>; CLASSES.len()]; ROUTES.len()],
    in_flight: Gauge,
    /// Open client connections (see [`HttpMetrics::open_connection`]).
    connections: Gauge,
    /// Connections closed on accept because `max_connections` were open.
    pub connections_refused: Counter,
    /// Connections closed because a request head did not arrive in time (slow or idle client).
    pub connections_timed_out: Counter,
    picks: Picks,
}

/// Suggestions picked on the search page, by position; every position is exported, also at 0.
#[derive(Debug)]
struct Picks {
    family: Family<IndexLabel, Counter>,
    slots: [Counter; PICK_LABELS.len()],
}

impl Default for Picks {
    fn default() -> Self {
        let family = Family::<IndexLabel, Counter>::default();
        let slots = PICK_LABELS.map(|i| family.get_or_create_owned(&[("index", i)]));
        Picks { family, slots }
    }
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
        Some(
            "/" | "/opensearch.xml" | "/app.js" | "/history.js" | "/privacy.js" | "/style.css"
            | "/favicon.svg" | "/search",
        ) => "page",
        _ => "other",
    };
    ROUTES.iter().position(|&r| r == label).unwrap_or(ROUTES.len() - 1)
}

impl HttpMetrics {
    /// Adds these metrics to a process's registry.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "typeahead_requests",
            "HTTP requests by route and status",
            self.requests.clone(),
        );
        registry.register_with_unit(
            "typeahead_request_duration",
            "Request latency by route and status class",
            Unit::Seconds,
            self.latency.clone(),
        );
        registry.register(
            "typeahead_in_flight_requests",
            "Requests being served",
            self.in_flight.clone(),
        );
        registry.register(
            "typeahead_open_connections",
            "Client connections open",
            self.connections.clone(),
        );
        registry.register(
            "typeahead_connections_refused",
            "Connections closed on accept: the connection limit was reached",
            self.connections_refused.clone(),
        );
        registry.register(
            "typeahead_connections_timed_out",
            "Connections closed: a request head did not arrive in time",
            self.connections_timed_out.clone(),
        );
        registry.register(
            "typeahead_suggestion_picks",
            "Suggestions picked on the search page, by position",
            self.picks.family.clone(),
        );
    }

    /// A request entered the server; it counts as in flight until the guard is dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    /// A connection opened; it counts as open until the guard drops (also when its task is
    /// aborted after the shutdown grace).
    pub fn open_connection(&self) -> InFlight<'_> {
        self.connections.inc();
        InFlight(&self.connections)
    }

    /// A request left the server with `status` after `elapsed`.
    pub fn end(&self, route: usize, status: u16, elapsed: Duration) {
        let route = route.min(ROUTES.len() - 1);
        let slot = STATUSES.iter().position(|&s| s == status).unwrap_or(STATUSES.len());
        let labels = [("route", ROUTES[route]), ("status", STATUS_LABELS[slot])];
        self.request_slots[route][slot]
            .get_or_init(|| self.requests.get_or_create_owned(&labels))
            .inc();
        let class = usize::from(status / 100).clamp(1, CLASSES.len()) - 1;
        let labels = [("route", ROUTES[route]), ("status", CLASSES[class])];
        self.latency_slots[route][class]
            .get_or_init(|| self.latency.get_or_create_owned(&labels))
            .observe(elapsed);
    }

    /// The search page reported that the suggestion at `index` was picked.
    pub fn picked(&self, index: usize) {
        self.picks.slots[index.min(PICK_LABELS.len() - 1)].inc();
    }
}

/// A registry as OpenMetrics text (ending in `# EOF`), served with [`CONTENT_TYPE`].
pub fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::with_capacity(8192);
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

/// Writes an info metric (`NAME_info{labels} 1`) from a scrape-time collector: the served
/// snapshot (server) or generation (aggregator), whose labels change with every swap.
pub fn encode_info<const N: usize>(
    encoder: &mut prometheus_client::encoding::DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    labels: [(&'static str, String); N],
) -> Result<(), std::fmt::Error> {
    use prometheus_client::encoding::EncodeMetric;
    let info = prometheus_client::metrics::info::Info::new(labels);
    let described = encoder.encode_descriptor(name, help, None, info.metric_type())?;
    info.encode(described)
}

#[cfg(test)]
mod tests;
