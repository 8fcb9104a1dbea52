//! Public routes: suggestions, OpenSearch suggestions, health, readiness, metrics.

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::{AppState, Shared};
use crate::api;
use crate::cache;
use crate::error::ApiError;
use crate::http::{self, Prepared, cached, not_modified};
use crate::normalize;
use crate::snapshot::DEFAULT_TOP_K;
use crate::store::Served;
use std::sync::Arc;

/// The suggestion route's path (what [`suggestion_before_routing`] answers, and what injected
/// delays slow down).
pub(super) const SUGGEST: &str = "/v1/suggest";

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route(SUGGEST, http::cross_origin(get(suggest)))
        .route("/v1/opensearch", http::cross_origin(get(opensearch)))
        .route("/metrics", get(metrics).layer(http::compression()))
}

/// Liveness and readiness, which are never shed ([`http::protect`]).
pub(super) fn probes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
}

/// The generation a request is answered from: the current one, or the one `version=` pins
/// (the current or the previous; 409 for any other).
fn served_for(state: &Shared, params: &api::SuggestParams) -> Result<Arc<Served>, ApiError> {
    match &params.version {
        None => Ok(state.store.current()),
        Some(v) => state.store.version(v).ok_or_else(|| ApiError::VersionUnavailable(v.clone())),
    }
}

/// Takes the request whole, so its query and headers are read in place. (Most suggestions
/// never get here: [`suggestion_before_routing`] answers them.)
async fn suggest(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let asked = SuggestAsked::read(&state, request.uri().query())?;
    answer_suggestion(&state, &asked, request.headers())
}

/// The `/v1/suggest` answer to a request, cached or made (and cached), or `None` when the
/// route has to answer it: invalid parameters, which the route reads again to write the error.
pub(super) fn suggestion_before_routing(
    state: &Shared,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Option<Response> {
    let asked = SuggestAsked::read(state, query).ok()?;
    answer_suggestion(state, &asked, headers).ok()
}

/// The answer to `asked`: from the answer cache, or looked up, serialized and cached.
fn answer_suggestion(
    state: &Shared,
    asked: &SuggestAsked,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let question = asked.asked();
    let k = question.k;
    let SuggestAsked { params, served, prefix } = asked;
    respond(state, served, headers, question, || {
        let answer = served.answer(prefix, k, params.tiers);
        count_work(state, &answer);
        let body = api::AnswerBody {
            query: prefix,
            suggestions: api::Items { list: &answer.suggestions, keys: params.keys },
            version: served.snapshot.id(),
            partial: false,
            complete: answer.complete(),
            cut: answer.cut,
        };
        let json = body.to_json().map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok((json, JSON))
    })
}

/// A `/v1/suggest` request, read: its parameters, the generation that answers it and the
/// prefix it asks about.
struct SuggestAsked {
    params: api::SuggestParams,
    served: Arc<Served>,
    prefix: String,
}

impl SuggestAsked {
    fn read(state: &Shared, query: Option<&str>) -> Result<SuggestAsked, ApiError> {
        let params = api::parse_params(query)?;
        let served = served_for(state, &params)?;
        let prefix = normalize::prefix(&params.q);
        Ok(SuggestAsked { params, served, prefix })
    }

    fn asked(&self) -> Asked<'_> {
        let k = self.params.k.unwrap_or(DEFAULT_TOP_K).min(self.served.snapshot.max_k());
        Asked { kind: api::answer_kind(&self.params), text: &self.prefix, k }
    }
}

/// The OpenSearch 1.1 suggestions format browsers' search bars read ([`http::opensearch`]).
/// `k` (at most [`http::OPENSEARCH_ITEMS`]) and `match` are honoured as on `/v1/suggest`.
async fn opensearch(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let headers = request.headers();
    let params = api::parse_params(request.uri().query())?;
    let served = served_for(&state, &params)?;
    let items = http::opensearch_items(params.k);
    // The body repeats the text as received, so that (not the prefix) identifies the answer.
    let asked = Asked { kind: http::opensearch_kind(params.tiers), text: &params.q, k: items };
    respond(&state, &served, headers, asked, || {
        let prefix = normalize::prefix(&params.q);
        let mut answer = served.answer(&prefix, items, params.tiers);
        let max_k = served.snapshot.max_k();
        if http::opensearch_refill(&answer.suggestions, |s| s.text(), items, max_k) {
            // URL-looking items are left out: the next ones the snapshot holds fill in. The
            // first lookup's work was done too; whether a budget cut an answer is the final's.
            state.metrics.tier_candidates.inc_by(answer.examined as u64);
            answer = served.answer(&prefix, max_k, params.tiers);
        }
        count_work(&state, &answer);
        let texts = answer.suggestions.iter().map(|s| s.text());
        let body = http::opensearch_body(&params.q, texts, items)?;
        Ok((body, http::OPENSEARCH_CONTENT_TYPE))
    })
}

/// What a looked-up answer cost beyond the prefix tier, and whether a budget cut it.
fn count_work(state: &Shared, answer: &crate::snapshot::Answer) {
    state.metrics.tier_candidates.inc_by(answer.examined as u64);
    if answer.cut.is_some() {
        state.metrics.answers_cut.inc();
    }
}

const JSON: &str = "application/json";

/// What a request asked, as far as its answer depends on it.
struct Asked<'a> {
    /// The kind of answer ([`api::answer_kind`], or `"o"` for OpenSearch).
    kind: &'static str,
    /// The normalized prefix (or, for OpenSearch, the text as typed).
    text: &'a str,
    k: usize,
}

/// Sends the answer to `asked` from `served`: from the answer cache, or made by `make` and
/// cached. A request whose `If-None-Match` already names the answer gets a 304, and on a miss
/// it costs no lookup: the ETag is known before the answer.
fn respond(
    state: &Shared,
    served: &Served,
    headers: &HeaderMap,
    asked: Asked<'_>,
    make: impl FnOnce() -> Result<(Vec<u8>, &'static str), ApiError>,
) -> Result<Response, ApiError> {
    let scope = [served.snapshot.id(), served.hidden_version.as_str(), asked.kind];
    let key = cache::Key::new(&scope, asked.text, asked.k);
    if let Some(hit) = state.answers.get(&key) {
        state.metrics.answer_cache_hits.inc();
        return Ok(hit.respond(headers));
    }
    state.metrics.answer_cache_misses.inc();
    let version = served.snapshot.id();
    let tag = http::etag(version, &served.hidden_version, asked.kind, asked.text, asked.k);
    if not_modified(headers, &tag) {
        return Ok(cached(StatusCode::NOT_MODIFIED.into_response(), version, Some(&tag)));
    }
    let (body, content_type) = make()?;
    let prepared = Prepared::new(body, content_type, &tag, version)
        .ok_or_else(|| ApiError::Internal(format!("unusable ETag {tag} or version {version}")))?;
    let response = prepared.respond(headers);
    let bytes = prepared.body_len();
    state.answers.put(key, prepared, bytes);
    Ok(response)
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// `/readyz`, and `/readyz?version=V` from an aggregator's probe: V is the version it answers
/// this partition from, which the store then keeps through reloads while no probe names a
/// newer one ([`crate::store::Store::pin`]).
async fn readyz(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    if let Some(query) = query {
        let named = api::query_pairs(&query).find(|(k, _)| *k == "version");
        if let Some((_, version)) = named {
            state.store.pin(&version);
        }
    }
    let served = state.store.current();
    let meta = served.snapshot.meta();
    let ready = state.ready.load(std::sync::atomic::Ordering::SeqCst);
    let previous = state.store.previous();
    let body = api::Readiness {
        ready,
        version: Some(served.snapshot.id().to_owned()),
        previous_version: previous.as_ref().map(|p| p.snapshot.id().to_owned()),
        blocklist_version: Some(served.hidden_version.clone()),
        keys: served.snapshot.len(),
        max_k: served.snapshot.max_k(),
        previous_max_k: previous.as_ref().map(|p| p.snapshot.max_k()),
        range: Some(api::KeyRange { start: meta.range_start.clone(), end: meta.range_end.clone() }),
        release: Some(crate::RELEASE.to_owned()),
    };
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn metrics(State(state): State<AppState>) -> Response {
    http::metrics_response(&state.registry)
}
