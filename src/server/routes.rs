//! Public routes: suggestions, OpenSearch suggestions, health, readiness, metrics.

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;

use super::AppState;
use crate::api::{self, SuggestResponse};
use crate::error::ApiError;
use crate::http::{self, OPENSEARCH_ITEMS, cached, not_modified};
use crate::matching::Tiers;
use crate::normalize;
use crate::snapshot::DEFAULT_TOP_K;
use crate::store::Served;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/suggest", get(suggest))
        .route("/v1/opensearch", get(opensearch))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics).layer(http::compression()))
}

async fn suggest(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let params = api::parse_params(raw.as_deref())?;
    let served = match &params.version {
        None => state.store.current(),
        Some(v) => state.store.version(v).ok_or_else(|| ApiError::VersionUnavailable(v.clone()))?,
    };
    let k = params.k.unwrap_or(DEFAULT_TOP_K).min(served.snapshot.max_k());
    let prefix = normalize::prefix(&params.q);
    let tag = etag(&served, &api::answer_kind(&params), &prefix, k);
    if not_modified(&headers, &tag) {
        return Ok(cached(
            StatusCode::NOT_MODIFIED.into_response(),
            served.snapshot.id(),
            Some(&tag),
        ));
    }
    let answer = served.answer(&prefix, k, params.tiers);
    let body = SuggestResponse {
        query: prefix,
        suggestions: answer
            .suggestions
            .iter()
            .map(|s| api::Suggestion::of(s, params.keys))
            .collect(),
        version: served.snapshot.id().to_owned(),
        partial: false,
        complete: answer.complete,
    };
    Ok(cached(Json(body).into_response(), served.snapshot.id(), Some(&tag)))
}

/// The OpenSearch 1.1 suggestions format browsers' search bars read ([`http::opensearch`]).
async fn opensearch(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let params = api::parse_params(raw.as_deref())?;
    let served = state.store.current();
    let prefix = normalize::prefix(&params.q);
    let tag = etag(&served, "o", &params.q, OPENSEARCH_ITEMS);
    let version = served.snapshot.id();
    if not_modified(&headers, &tag) {
        return Ok(cached(StatusCode::NOT_MODIFIED.into_response(), version, Some(&tag)));
    }
    let answer = served.answer(&prefix, OPENSEARCH_ITEMS, Tiers::All).suggestions;
    let response = http::opensearch(&params.q, answer.iter().map(|s| s.text()))?;
    Ok(cached(response, version, Some(&tag)))
}

/// Identifies an answer: snapshot, what its filter hides, and the request that was answered.
fn etag(served: &Served, kind: &str, q: &str, k: usize) -> String {
    http::etag(served.snapshot.id(), &served.hidden_version, kind, q, k)
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
    /// The largest `k` answered exactly (the aggregator caps requests at it).
    max_k: usize,
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
        max_k: served.snapshot.max_k(),
        range: Range { start: &meta.range_start, end: meta.range_end.as_deref() },
    };
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn metrics(State(state): State<AppState>) -> Response {
    http::metrics_response(&state.registry)
}
