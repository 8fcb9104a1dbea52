//! HTTP plumbing shared by the server and the aggregator: one listener with its limits
//! ([`listen`]), one middleware stack ([`protect`]) with a way around it for answers already
//! made ([`hot`]), one error body ([`crate::error`]), one
//! caching scheme (`Cache-Control`, the version header, ETags and `If-None-Match`), one
//! OpenSearch answer and one metrics response. Each process mounts its own routes on top; none
//! reaches into the other's modules.

mod admission;
mod descriptors;
mod hot;
mod listen;
mod prepared;

pub use admission::AdmissionLayer;
pub use hot::{Front, Hot, Lookup};
pub(crate) use listen::bind_std;
pub use listen::{ConnLimits, bind, serve};
pub use prepared::Prepared;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use crate::api;
use crate::error::ApiError;
use crate::matching::Tiers;
use crate::metrics::{self, HttpMetrics, Registry};

/// Longest request URI the public routes accept: a prefix is at most
/// [`crate::api::MAX_QUERY_BYTES`], and percent-encoding can triple it.
pub const MAX_URI_BYTES: usize = 8 << 10;

/// Largest request body the public routes accept; they read none.
pub const MAX_PUBLIC_BODY_BYTES: u64 = 16 << 10;

/// Carries the snapshot id (server) or generation (aggregator) on every suggestion response.
pub const VERSION_HEADER: HeaderName = HeaderName::from_static("x-typeahead-version");

/// How long browsers and CDNs may reuse an answer: one second still absorbs keystroke storms at
/// a CDN (everyone typing "a" asks the same thing), and a blocked query leaves every cache
/// within the second a blocklist change promises. The ETag changes with the data and the
/// blocklist, so revalidating after that is a cheap 304.
pub const CACHE_CONTROL: &str = "public, max-age=1";

/// OpenSearch suggestions carry at most this many items.
pub const OPENSEARCH_ITEMS: usize = 10;

/// Limits and timing of a listener (server or aggregator) and its file watchers.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Requests served at once; more are shed with 503 + Retry-After.
    pub max_concurrency: usize,
    /// Longest a request may take before it is answered with 503.
    pub request_timeout: Duration,
    /// How often the snapshot and blocklist files are checked for changes.
    pub watch_interval: Duration,
    /// Longest an admin client may take to send a whole request body (a blocklist upload).
    pub admin_body_timeout: Duration,
    /// Longest one snapshot load (read and verify) may take before it is abandoned.
    pub load_timeout: Duration,
    /// Connection-level limits: header timeout, head size, open connections.
    pub conn: ConnLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_concurrency: 512,
            request_timeout: Duration::from_secs(2),
            watch_interval: Duration::from_millis(250),
            admin_body_timeout: Duration::from_secs(30),
            load_timeout: Duration::from_secs(120),
            conn: ConnLimits::default(),
        }
    }
}

/// The middleware every public listener (server or aggregator) runs: one concurrency limit for
/// the whole listener ([`AdmissionLayer`]: per-route limits would multiply it) with load
/// shedding, a request timeout, URI and body size limits, CORS, and request metrics.
///
/// `probes` (`/healthz`, `/readyz`) and the search page's routes (mounted here from `web`, so
/// every listener serves the same page the same way) skip the concurrency limit and the
/// timeout. They do no work worth shedding, and a shed probe lies: Kubernetes
/// restarts a process whose liveness probe fails three times, moving its load onto the others
/// just when they are overloaded too, and the aggregator learns each replica's blocklist
/// version from `/readyz`, so while the probes were shed, cached answers outlived a blocklist
/// change. A shed page script is worse: the box stays without suggestions and without the
/// notice that says so (the notice is the script's), about one page load in ten with one
/// request in flight at a time.
pub fn protect<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    probes: Router<S>,
    web: crate::web::WebConfig,
    admission: AdmissionLayer,
    metrics: Arc<HttpMetrics>,
) -> Router<S> {
    router
        .layer(admission)
        .merge(probes)
        .merge(crate::web::router(web, Arc::clone(&metrics)))
        .layer(middleware::from_fn_with_state(MAX_PUBLIC_BODY_BYTES, size_limits))
        .layer(middleware::from_fn_with_state(metrics, record))
}

/// Rejects oversized URIs (414) and declared bodies over `max_body` (413) before any handler
/// runs. (A body sent without a length is cut at its route's limit when it is read.)
pub async fn size_limits(
    State(max_body): State<u64>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if uri_too_long(request.uri()) {
        return Err(ApiError::UriTooLong);
    }
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > max_body) {
        return Err(ApiError::PayloadTooLarge);
    }
    Ok(next.run(request).await)
}

/// Whether [`size_limits`] refuses `uri` (414).
fn uri_too_long(uri: &axum::http::Uri) -> bool {
    uri.path_and_query().map_or(0, |pq| pq.as_str().len()) > MAX_URI_BYTES
}

/// Response compression (gzip or br, as the client accepts) for what pays for it: the page's
/// assets and `/metrics`, many kilobytes of text each, compressed to a fraction. Suggestion
/// answers are left alone: a few hundred bytes, a single packet either way, and compressing
/// each one would cost more CPU than the whole lookup (README, "Compression").
pub fn compression() -> tower_http::compression::CompressionLayer {
    // Level 4: most of the size gain for a fraction of the CPU of the defaults (brotli's is 11).
    tower_http::compression::CompressionLayer::new()
        .quality(tower_http::compression::CompressionLevel::Precise(4))
}

/// A suggestion route (`get(handler)`), readable by pages on any origin: it answers CORS
/// preflights, and [`record`] gives its answers the CORS headers. Only these routes carry
/// CORS: `/metrics` and `/readyz` (versions, key ranges, replica health) are for the
/// operator's tools, not for any page a person inside the network happens to open. Headers
/// set in [`record`], which runs for every request anyway, rather than by tower-http's
/// `CorsLayer` on these routes: with it `/v1/suggest` fell from 0.85 to 0.75 of `/healthz`'s
/// throughput under wrk, and with the headers set here it is at 0.83, both endpoints a few
/// percent faster than with the layer on every route (docs/performance.md, "HTTP serving").
pub fn cross_origin<S: Clone + Send + Sync + 'static>(
    route: axum::routing::MethodRouter<S>,
) -> axum::routing::MethodRouter<S> {
    route.options(preflight)
}

/// A CORS preflight: any origin may `GET` (no credentials, no request headers beyond the
/// CORS-safelisted ones).
async fn preflight() -> impl IntoResponse {
    use axum::http::header::{ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN};
    (
        [
            (ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*")),
            (ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET,HEAD")),
        ],
        axum::http::StatusCode::OK,
    )
}

/// Headers every response gets: `nosniff` (`/v1/opensearch` echoes the typed text in JSON,
/// which no content type may be guessed for), and on the suggestion routes the CORS ones.
/// The answer is the same for every origin (`*`), so no `Vary: Origin`, which would make a
/// CDN keep one copy of each answer per site that embeds the box.
fn finish(route: usize, headers: &mut axum::http::HeaderMap) {
    use axum::http::header::{
        ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, X_CONTENT_TYPE_OPTIONS,
    };
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if matches!(metrics::ROUTES[route], "suggest" | "opensearch") {
        headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        headers.insert(
            ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("etag,x-typeahead-version,retry-after"),
        );
    }
}

/// Counts every request by route and status, with its latency.
pub async fn record(
    State(metrics): State<Arc<HttpMetrics>>,
    request: Request,
    next: Next,
) -> Response {
    let route =
        metrics::route_index(request.extensions().get::<MatchedPath>().map(MatchedPath::as_str));
    let started = Instant::now();
    // A guard, so a request whose client went away (its future dropped) still leaves the
    // in-flight gauge.
    let in_flight = metrics.in_flight();
    let mut response = next.run(request).await;
    drop(in_flight);
    end_request(&metrics, route, started, &mut response);
    response
}

/// What every answered request gets, whichever way it was answered ([`record`], [`Hot`]):
/// the headers of its route ([`finish`]), its count and latency.
fn end_request(metrics: &HttpMetrics, route: usize, started: Instant, response: &mut Response) {
    finish(route, response.headers_mut());
    metrics.end(route, response.status().as_u16(), started.elapsed());
    tracing::debug!(route = metrics::ROUTES[route], status = response.status().as_u16(), "request");
}

/// A version of `items` for ETags and cache keys (16 hex digits): blocklists, and the set of
/// blocklist versions an aggregator's replicas report.
///
/// 64 bits, where a CRC32 left one change in four billion looking like no change to every
/// cache and ETag keyed by it. FNV-1a rather than std's hasher, whose algorithm may change
/// between releases: replicas built by different compilers must agree on a list's version.
pub fn digest(items: &[impl AsRef<[u8]>]) -> String {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    for item in items {
        hasher.write(item.as_ref());
        hasher.write(b"\n");
    }
    format!("{:016x}", hasher.finish())
}

/// The ETag of an answer: what was served (`version`: the snapshot or generation, and the
/// version of what the blocklist hides), how it was matched (the [`crate::RELEASE`] that
/// answers) and what was asked (`kind` of answer, the typed text, `k`). Computed before the
/// answer, so a matching `If-None-Match` costs no lookup.
pub fn etag(version: &str, hidden: &str, kind: &str, q: &str, k: usize) -> String {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(crate::RELEASE.as_bytes());
    hasher.update(&[0]);
    hasher.update(kind.as_bytes());
    hasher.update(&[0]);
    hasher.update(q.as_bytes());
    hasher.update(&(k as u64).to_le_bytes());
    format!("\"{version}-{hidden}-{:08x}\"", hasher.finalize())
}

/// Whether the request's `If-None-Match` names `tag` (or `*`), by the weak comparison RFC 9110
/// prescribes for it: `W/"x"` names `"x"` too. A proxy that compresses answers on the way
/// marks their ETags weak, and browsers behind it revalidate with the weak form.
pub fn not_modified(headers: &HeaderMap, tag: &str) -> bool {
    fn opaque(t: &str) -> &str {
        t.strip_prefix("W/").unwrap_or(t)
    }
    let tag = opaque(tag);
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || opaque(t) == tag)
}

/// Adds the caching headers of a suggestion answer: `Cache-Control` (no-store for a partial
/// answer: the missing partition may be back soon), the version header and the ETag (none for
/// a partial answer).
pub fn cached(mut response: Response, version: &str, tag: Option<&str>) -> Response {
    set_cache_headers(
        response.headers_mut(),
        HeaderValue::from_str(version).ok(),
        tag.and_then(|t| HeaderValue::from_str(t).ok()),
        tag.is_some(),
    );
    response
}

/// The headers [`cached`] adds, from values already made (a [`Prepared`] answer keeps them):
/// `shared` says whether caches may keep the answer.
fn set_cache_headers(
    headers: &mut HeaderMap,
    version: Option<HeaderValue>,
    tag: Option<HeaderValue>,
    shared: bool,
) {
    let cache = if shared { CACHE_CONTROL } else { "no-store" };
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Some(v) = tag {
        headers.insert(header::ETAG, v);
    }
    if let Some(v) = version {
        headers.insert(VERSION_HEADER, v);
    }
}

/// The content type of OpenSearch suggestions.
pub const OPENSEARCH_CONTENT_TYPE: &str = "application/x-suggestions+json; charset=utf-8";

/// The OpenSearch 1.1 suggestions answer browsers' search bars read:
/// `["<query exactly as received>", ["completion", ...]]`, URL-looking items left out, at most
/// `items` of the rest.
pub fn opensearch<'a>(
    q: &str,
    texts: impl IntoIterator<Item = &'a str>,
    items: usize,
) -> Result<Response, ApiError> {
    let mut response = opensearch_body(q, texts, items)?.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(OPENSEARCH_CONTENT_TYPE));
    Ok(response)
}

/// The body of an [`opensearch`] answer.
pub fn opensearch_body<'a>(
    q: &str,
    texts: impl IntoIterator<Item = &'a str>,
    items: usize,
) -> Result<Vec<u8>, ApiError> {
    let texts: Vec<&str> =
        texts.into_iter().filter(|t| !api::looks_like_url(t)).take(items).collect();
    serde_json::to_vec(&(q, texts)).map_err(|e| ApiError::Internal(e.to_string()))
}

/// How many items an OpenSearch answer holds at most: `k` when asked for, never more than
/// [`OPENSEARCH_ITEMS`] (what browsers show).
pub fn opensearch_items(k: Option<usize>) -> usize {
    k.unwrap_or(OPENSEARCH_ITEMS).min(OPENSEARCH_ITEMS)
}

/// The part of an OpenSearch answer's ETag and cache key that tells the tiers apart.
pub fn opensearch_kind(tiers: Tiers) -> &'static str {
    match tiers {
        Tiers::All => "o",
        Tiers::Prefix => "op",
    }
}

/// Whether an OpenSearch answer looked up for `items` is worth looking up again for `max_k`:
/// [`opensearch_body`] leaves some of it out (URL-looking), and there may be more to fill in
/// with (the snapshot stores more, and this answer was not already short of them).
pub fn opensearch_refill<T>(
    answer: &[T],
    text: impl Fn(&T) -> &str,
    items: usize,
    max_k: usize,
) -> bool {
    max_k > items
        && answer.len() >= items
        && answer.iter().any(|item| api::looks_like_url(text(item)))
}

/// A `/metrics` answer: the process's registry as OpenMetrics text.
pub fn metrics_response(registry: &Registry) -> Response {
    match metrics::encode(registry) {
        Ok(text) => {
            let mut response = text.into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(metrics::CONTENT_TYPE));
            response
        }
        Err(e) => ApiError::Internal(format!("encoding metrics: {e}")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Versions must not change between builds: replicas of different builds compare them.
    /// These are FNV-1a 64 of "" and of "bad word\nbomb\n", computed independently.
    #[test]
    fn digests_are_fnv_1a_of_the_lines() {
        assert_eq!(digest(&[] as &[&str]), "cbf29ce484222325");
        assert_eq!(digest(&["bad word", "bomb"]), "7ca9c86526663630");
        assert_ne!(digest(&["bad word", "bomb"]), digest(&["bad wordbomb"]));
    }

    fn asking(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(header::IF_NONE_MATCH, HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    #[test]
    fn if_none_match_compares_weakly() {
        let tag = "\"16c9f1c2-00000000-4353d833\"";
        assert!(not_modified(&asking(&[tag]), tag));
        assert!(not_modified(&asking(&["W/\"16c9f1c2-00000000-4353d833\""]), tag));
        assert!(not_modified(&asking(&["\"other\", W/\"16c9f1c2-00000000-4353d833\""]), tag));
        assert!(not_modified(&asking(&["\"other\"", tag]), tag), "in a second header");
        assert!(not_modified(&asking(&["*"]), tag));
        assert!(!not_modified(&asking(&["\"other\"", "W/\"16c9f1c2\""]), tag));
        assert!(!not_modified(&asking(&[]), tag));
    }
}
