//! Public routes: suggestions, OpenSearch suggestions, health, readiness, metrics.

use std::fmt::Write as _;

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use super::AppState;
use crate::api::{self, SuggestResponse};
use crate::error::ApiError;
use crate::normalize;
use crate::snapshot::DEFAULT_TOP_K;
use crate::store::Served;

/// Carries the snapshot id on every suggestion response.
pub(crate) const VERSION_HEADER: HeaderName = HeaderName::from_static("x-typeahead-version");

/// How long browsers and CDNs may reuse an answer: one second still absorbs keystroke storms at
/// a CDN (everyone typing "a" asks the same thing), and a blocked query leaves every cache
/// within the second a blocklist change promises. The ETag changes with the snapshot and the
/// blocklist, so revalidating after that is a cheap 304.
pub(crate) const CACHE_CONTROL: &str = "public, max-age=1";

/// OpenSearch suggestions carry at most this many items.
const OPENSEARCH_ITEMS: usize = 10;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/suggest", get(suggest))
        .route("/v1/opensearch", get(opensearch))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

async fn suggest(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let params = api::parse_params(raw.as_deref())?;
    if !state.inject_delay.is_zero() {
        tokio::time::sleep(state.inject_delay).await;
    }
    let served = match &params.version {
        None => state.store.current(),
        Some(v) => state.store.version(v).ok_or_else(|| ApiError::VersionUnavailable(v.clone()))?,
    };
    let k = params.k.unwrap_or(DEFAULT_TOP_K).min(served.snapshot.max_k());
    let prefix = normalize::prefix(&params.q);
    let tag = etag(&served, if params.keys { "sk" } else { "s" }, &prefix, k);
    if not_modified(&headers, &tag) {
        return Ok(cached(StatusCode::NOT_MODIFIED.into_response(), &served, &tag));
    }
    let suggestions = served
        .suggest(&prefix, k)
        .into_iter()
        .map(|s| api::Suggestion {
            text: s.text().to_owned(),
            score: s.score,
            key: params.keys.then(|| s.key.clone()),
        })
        .collect();
    let body = SuggestResponse {
        query: prefix,
        suggestions,
        version: served.snapshot.id().to_owned(),
        partial: false,
    };
    Ok(cached(Json(body).into_response(), &served, &tag))
}

/// The OpenSearch 1.1 suggestions format browsers' search bars read:
/// `["<query exactly as received>", ["completion", ...]]`.
async fn opensearch(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let params = api::parse_params(raw.as_deref())?;
    let served = state.store.current();
    let prefix = normalize::prefix(&params.q);
    let tag = etag(&served, &format!("o{}", params.q.len()), &params.q, OPENSEARCH_ITEMS);
    if not_modified(&headers, &tag) {
        return Ok(cached(StatusCode::NOT_MODIFIED.into_response(), &served, &tag));
    }
    let texts: Vec<String> = served
        .suggest(&prefix, OPENSEARCH_ITEMS)
        .into_iter()
        .map(|s| s.text().to_owned())
        .filter(|t| !api::looks_like_url(t))
        .collect();
    let body =
        serde_json::to_vec(&(&params.q, texts)).map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut response = body.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-suggestions+json; charset=utf-8"),
    );
    Ok(cached(response, &served, &tag))
}

/// Identifies an answer: snapshot, blocklist, and the request that was answered.
fn etag(served: &Served, kind: &str, q: &str, k: usize) -> String {
    let h = crate::builder::record::fnv1a(kind.bytes().chain(q.bytes()).chain(k.to_le_bytes()));
    format!("\"{}-{}-{h:016x}\"", served.snapshot.id(), served.hidden_version)
}

fn not_modified(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"))
}

fn cached(mut response: Response, served: &Served, tag: &str) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(CACHE_CONTROL));
    if let Ok(v) = HeaderValue::from_str(tag) {
        headers.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(served.snapshot.id()) {
        headers.insert(VERSION_HEADER, v);
    }
    response
}

async fn healthz() -> &'static str {
    "ok\n"
}

#[derive(Serialize)]
struct Ready<'a> {
    ready: bool,
    version: &'a str,
    previous_version: Option<String>,
    blocklist_version: &'a str,
    keys: usize,
    range: Range<'a>,
}

#[derive(Serialize)]
struct Range<'a> {
    start: &'a str,
    end: Option<&'a str>,
}

async fn readyz(State(state): State<AppState>) -> Response {
    let served = state.store.current();
    let meta = served.snapshot.meta();
    let ready = state.ready.load(std::sync::atomic::Ordering::SeqCst);
    let body = Ready {
        ready,
        version: served.snapshot.id(),
        previous_version: state.store.previous().map(|p| p.snapshot.id().to_owned()),
        blocklist_version: &served.hidden_version,
        keys: served.snapshot.len(),
        range: Range { start: &meta.range_start, end: meta.range_end.as_deref() },
    };
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Escapes a Prometheus label value.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

async fn metrics(State(state): State<AppState>) -> Response {
    let served = state.store.current();
    let meta = served.snapshot.meta();
    let now = crate::builder::logline::now_unix();
    let mut extra = String::new();
    let _ = writeln!(
        extra,
        "# HELP typeahead_snapshot_info The snapshot being served.\n# TYPE typeahead_snapshot_info gauge\n\
         typeahead_snapshot_info{{version=\"{}\",range_start=\"{}\",range_end=\"{}\"}} 1",
        served.snapshot.id(),
        label(&meta.range_start),
        label(meta.range_end.as_deref().unwrap_or(""))
    );
    let gauges = [
        ("typeahead_snapshot_keys", "Completions in the snapshot.", served.snapshot.len() as i64),
        (
            "typeahead_snapshot_age_seconds",
            "Seconds since the snapshot was built.",
            now - meta.build_time_unix,
        ),
        ("typeahead_snapshot_loaded_unix", "When the snapshot was loaded.", served.loaded_unix),
        (
            "typeahead_snapshot_memory_bytes",
            "Memory held by loaded snapshots (current, previous, and any still in use).",
            crate::snapshot::Snapshot::bytes_held() as i64,
        ),
        (
            "typeahead_blocklist_entries",
            "Entries of the active blocklist.",
            served.blocklist.list.len() as i64,
        ),
        (
            "typeahead_blocklist_hidden_items",
            "Completions hidden by the blocklist.",
            served.hidden() as i64,
        ),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(extra, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
    }
    let mut response = state.metrics.render(&extra).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
