//! The aggregator's routes: the same API as a partition server.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::task::JoinSet;

use super::{AggState, merge};
use crate::api::{self, SuggestResponse};
use crate::error::ApiError;
use crate::normalize;
use crate::snapshot::DEFAULT_TOP_K;

pub(super) fn router() -> Router<AggState> {
    Router::new()
        .route("/v1/suggest", get(suggest))
        .route("/v1/opensearch", get(opensearch))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

/// Fans `q` out to the partitions that may hold it and merges their answers.
async fn answer(state: &AggState, q: &str, k: usize) -> SuggestResponse {
    let manifest = state.generations.active();
    let prefix = normalize::prefix(q);
    // Cached answers are valid for one generation under one set of blocklists.
    let cache_key = format!("{}/{}", manifest.generation, state.backends.blocklist_epoch());
    if let Some(hit) = state.cache.get(&cache_key, &prefix, k) {
        state.metrics.cache_hits.fetch_add(1, Ordering::Relaxed);
        return hit;
    }
    state.metrics.cache_misses.fetch_add(1, Ordering::Relaxed);
    let deadline = Instant::now() + state.deadline;
    let encoded: String = form_urlencoded::byte_serialize(q.as_bytes()).collect();
    let mut asks = JoinSet::new();
    for index in manifest.partitions_for(&prefix) {
        let version = manifest.partitions[index].checksum.clone();
        let path = format!("/v1/suggest?q={encoded}&k={k}&keys=1&version={version}");
        let backends = std::sync::Arc::clone(&state.backends);
        asks.spawn(async move { backends.ask(index, &path, &version, deadline).await });
    }
    let (mut lists, mut partial) = (Vec::new(), false);
    while let Some(done) = asks.join_next().await {
        match done {
            Ok(Ok(answer)) => lists.push(answer.suggestions),
            _ => partial = true,
        }
    }
    let suggestions =
        merge::top_k(lists, k).into_iter().map(|s| api::Suggestion { key: None, ..s }).collect();
    let answer = SuggestResponse {
        query: prefix,
        suggestions,
        version: manifest.generation.clone(),
        partial,
    };
    if partial {
        state.metrics.partial_answers.fetch_add(1, Ordering::Relaxed);
    } else {
        state.cache.put(&cache_key, &answer.query, k, &answer);
    }
    answer
}

fn headers(mut response: Response, answer: &SuggestResponse) -> Response {
    use crate::server::routes::{CACHE_CONTROL, VERSION_HEADER};
    let h = response.headers_mut();
    // Partial answers must not be cached downstream: the missing partition may be back soon.
    let cache = if answer.partial { "no-store" } else { CACHE_CONTROL };
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(v) = HeaderValue::from_str(&answer.version) {
        h.insert(VERSION_HEADER, v);
    }
    if !answer.partial {
        // The answer itself identifies the content: generation, prefix and suggestions.
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(answer.query.as_bytes());
        for s in &answer.suggestions {
            hasher.update(s.text.as_bytes());
            hasher.update(&s.score.to_le_bytes());
        }
        if let Ok(v) =
            HeaderValue::from_str(&format!("\"{}-{:08x}\"", answer.version, hasher.finalize()))
        {
            h.insert(header::ETAG, v);
        }
    }
    response
}

async fn suggest(
    State(state): State<AggState>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let params = api::parse_params(raw.as_deref())?;
    let k = params.k.unwrap_or(DEFAULT_TOP_K);
    let answer = answer(&state, &params.q, k).await;
    Ok(headers(Json(&answer).into_response(), &answer))
}

async fn opensearch(
    State(state): State<AggState>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let params = api::parse_params(raw.as_deref())?;
    let answer = answer(&state, &params.q, DEFAULT_TOP_K).await;
    let texts: Vec<&str> = answer
        .suggestions
        .iter()
        .map(|s| s.text.as_str())
        .filter(|t| !api::looks_like_url(t))
        .collect();
    let body =
        serde_json::to_vec(&(&params.q, texts)).map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut response = headers(body.into_response(), &answer);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-suggestions+json; charset=utf-8"),
    );
    Ok(response)
}

async fn readyz(State(state): State<AggState>) -> Response {
    let manifest = state.generations.active();
    let healthy: Vec<usize> = (0..state.backends.partition_count())
        .map(|i| state.backends.replicas(i).iter().filter(|r| r.healthy()).count())
        .collect();
    let ready = healthy.iter().all(|&n| n > 0);
    let body = serde_json::json!({
        "ready": ready,
        "version": manifest.generation,
        "pending_version": state.generations.pending().map(|m| m.generation.clone()),
        "partitions": manifest.partitions.len(),
        "healthy_replicas": healthy,
    });
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(body)).into_response()
}

async fn metrics(State(state): State<AggState>) -> Response {
    let manifest = state.generations.active();
    let mut extra = String::new();
    let _ = writeln!(
        extra,
        "# HELP typeahead_generation_info The generation being served.\n# TYPE typeahead_generation_info gauge\n\
         typeahead_generation_info{{version=\"{}\",partitions=\"{}\"}} 1",
        manifest.generation,
        manifest.partitions.len()
    );
    let _ = writeln!(
        extra,
        "# HELP typeahead_healthy_replicas Replicas not ejected, by partition.\n# TYPE typeahead_healthy_replicas gauge"
    );
    for i in 0..state.backends.partition_count() {
        let healthy = state.backends.replicas(i).iter().filter(|r| r.healthy()).count();
        let _ = writeln!(extra, "typeahead_healthy_replicas{{partition=\"{i}\"}} {healthy}");
    }
    let mut response = state.metrics.render(&extra).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
