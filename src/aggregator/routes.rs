//! The aggregator's routes: the same API as a partition server.

use tokio::time::Instant;

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use std::sync::Arc;
use std::time::Duration;

use super::AggState;
use super::coalesce::Made;
use crate::api::{self, SuggestResponse};
use crate::cache;
use crate::error::ApiError;
use crate::generation;
use crate::http::{self, cached, not_modified};
use crate::manifest::Manifest;
use crate::matching::{self, Match, Tiers};
use crate::normalize;
use crate::snapshot::DEFAULT_TOP_K;

pub(super) fn router() -> Router<AggState> {
    Router::new()
        .route("/v1/suggest", http::cross_origin(get(suggest)))
        .route("/v1/opensearch", http::cross_origin(get(opensearch)))
        .route("/metrics", get(metrics).layer(http::compression()))
}

/// Liveness and readiness, which are never shed ([`http::protect`]).
pub(super) fn probes() -> Router<AggState> {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
}

/// What one request is answered from, loaded once so its ETag and its body name the same
/// generation even when a switch happens in between.
struct View {
    manifest: Arc<Manifest>,
    /// The blocklist versions and releases the replicas report
    /// ([`super::backends::Backends::blocklist_epoch`]).
    epoch: Arc<String>,
    /// Whether each partition's replicas reported one blocklist and one release
    /// ([`super::backends::Backends::lists_agree`]).
    lists_agree: bool,
}

impl View {
    /// The active generation, or a `version=` the request pinned: only the active generation
    /// can be answered, since a pending one may be on no replica yet and a replaced one may
    /// be gone from them. A server answers 409 to a version it does not hold; so does this.
    fn of(state: &AggState, pinned: Option<&str>) -> Result<View, ApiError> {
        let manifest = state.generations.active();
        match pinned {
            Some(v) if v != manifest.generation => Err(ApiError::VersionUnavailable(v.to_owned())),
            _ => Ok(View {
                manifest,
                epoch: state.backends.blocklist_epoch(),
                lists_agree: state.backends.lists_agree(),
            }),
        }
    }

    /// The largest `k` the partitions answer exactly from this generation's snapshots.
    fn max_k(&self, state: &AggState) -> usize {
        state.backends.max_k(&self.manifest)
    }

    /// Identifies an answer before it is computed: the generation, the blocklist versions
    /// (as the cache key does) and the request. None while a partition's replicas hold
    /// different blocklists: which one answered is not in the tag, and the epoch stays the
    /// same while they disagree, so a shared cache revalidating an answer from the replica
    /// behind would get 304s, and keep a blocked term, for as long as that lasts (what the
    /// aggregator's own cache does not keep either).
    fn etag(&self, kind: &str, q: &str, k: usize) -> Option<String> {
        self.lists_agree.then(|| http::etag(&self.manifest.generation, &self.epoch, kind, q, k))
    }
}

/// One request as the fan-out sees it.
struct Request<'a> {
    /// What it is answered from.
    view: &'a View,
    /// The text as typed, which the partitions normalize again.
    q: &'a str,
    /// `q` normalized: what selects the partitions, and the cache key's text.
    prefix: String,
    /// Suggestions asked for (capped by the generation's `max_k`).
    k: usize,
    tiers: Tiers,
}

/// Fans the typed text out to the partitions that may hold it and merges their answers.
///
/// The prefix tier lives in the partitions of the prefix's range, which are asked first (with
/// all tiers). When their prefix matches leave the answer short the other partitions are asked
/// too: a words or fuzzy candidate can be in any of them (and when the first ones have not
/// answered halfway to the deadline, the others are asked beside them: see [`fan_out`]).
/// Merging tier by tier ([`generation::merge_tiers`]) then gives exactly one snapshot's answer.
///
/// Out by `deadline` (see [`deadline`]): a request that waits for another's fan-out waits only
/// until it, and one that takes the fan-out over (the other client left) has only what is left
/// of its own time.
///
/// Requests for the same answer wait for one fan-out ([`Coalesce`](super::coalesce::Coalesce)).
/// A `refill` (an OpenSearch answer's second fan-out, with what is left of its request's time)
/// waits only for other refills: a request with its whole time ahead must not take the
/// partial answer a refill's short deadline made, and the followers of one answer, which all
/// refill the moment it comes, must not each fan out again.
async fn answer(
    state: &AggState,
    request: Request<'_>,
    deadline: Instant,
    refill: bool,
) -> Arc<SuggestResponse> {
    let Request { view, prefix, k, tiers, .. } = &request;
    // Cached answers are valid for one generation under one set of blocklists.
    let scope = [view.manifest.generation.as_str(), &view.epoch, tiers.name()];
    let cache_key = cache::Key::new(&scope, prefix, *k);
    if let Some(hit) = state.cache.get(&cache_key) {
        state.metrics.cache_hits.inc();
        return hit;
    }
    state.metrics.cache_misses.inc();
    // The key the fan-out is shared under, made on a miss only (a hit is most requests).
    let making = match refill {
        false => cache_key.clone(),
        true => cache::Key::new(&[&scope[..], &["refill"]].concat(), prefix, *k),
    };
    // Cached before the claim on the key is given up, so a request that comes after finds
    // either the claim or the entry, never neither (which would fan out once more).
    let make = || async {
        // Taking over from a leader that left, another request may have made it meanwhile.
        if let Some(hit) = state.cache.get(&cache_key) {
            return hit;
        }
        let answer = fan_out(state, &request, deadline).await;
        // Nor while a partition's replicas hold different blocklists: which one answered
        // would be kept for everyone (`Backends::lists_agree`). Read again after the fan-out
        // as well as taken with the view: lists that came apart while it ran count too.
        if !answer.partial && view.lists_agree && state.backends.lists_agree() {
            state.cache.put(cache_key.clone(), Arc::clone(&answer), answer.approx_bytes());
        }
        answer
    };
    let (answer, made) = state.coalesce.get(making, deadline, make).await;
    if made == Made::Joined {
        state.metrics.coalesced_answers.inc();
    }
    if answer.partial {
        // Not cached: the missing partition may be back for the next request.
        state.metrics.partial_answers.inc();
    }
    answer
}

/// Asks the partitions for one answer by `deadline` (see [`answer`]).
async fn fan_out(
    state: &AggState,
    request: &Request<'_>,
    deadline: Instant,
) -> Arc<SuggestResponse> {
    let (manifest, prefix, k) = (&request.view.manifest, &request.prefix, request.k);
    let start = Instant::now();
    // The answer must be out by the deadline, so the partitions are waited for until a margin
    // before it, which merging and sending the answer take.
    let deadline = deadline - merge_margin(state.deadline);
    let first = manifest.partitions_for(prefix);
    // Later tiers can hold any partition's keys.
    let all = request.tiers == Tiers::All;
    let rest: Vec<usize> = if all && matching::later_tiers_possible(prefix) {
        (0..manifest.partitions.len()).filter(|i| !first.contains(i)).collect()
    } else {
        Vec::new()
    };
    // Futures do nothing until polled: the rest are asked only when awaited below.
    let asked_first = Merged::ask(state, request, &first, deadline);
    let asked_rest = Merged::ask(state, request, &rest, deadline);
    tokio::pin!(asked_first, asked_rest);
    // The rest are asked once the first partitions leave the answer short, or beside them once
    // half the time is gone: a hung partition (connections taken, no answer) must not also cost
    // the others' answers, as it did when they were asked only after its round ended, at the
    // deadline, when nothing could be asked any more.
    // Asked early, the rest add load as a hedge does (mostly in vain when the first ones are
    // only slow, as under overload), so early asks spend from a budget of their own.
    if !rest.is_empty() {
        state.backends.earn_early_ask();
    }
    let halfway = start + deadline.saturating_duration_since(start) / 2;
    let first_round = match tokio::time::timeout_at(halfway, &mut asked_first).await {
        Ok(merged) => Ok(merged),
        // Whichever round ends first: the first partitions' answer may make the rest's
        // unneeded, and then a hung partition among the rest is not waited for.
        Err(_) if !rest.is_empty() && state.backends.spend_early_ask() => {
            state.metrics.early_asks.inc();
            tokio::select! {
                merged = &mut asked_first => Ok(merged),
                others = &mut asked_rest => Err(others),
            }
        }
        Err(_) => Ok(asked_first.as_mut().await),
    };
    let (mut merged, others) = match first_round {
        Ok(merged) => (merged, None),
        Err(others) => (asked_first.await, Some(others)),
    };
    if merged.short_of(k) {
        merged.absorb(match others {
            Some(others) => others,
            None => asked_rest.await,
        });
    }
    let complete = merged.complete_for(k);
    let Merged { lists, partial, cut } = merged;
    let suggestions = generation::merge_tiers(lists, k, order_of)
        .into_iter()
        .map(|s| api::Suggestion { key: None, typos: None, ..s })
        .collect();
    Arc::new(SuggestResponse {
        query: prefix.clone(),
        suggestions,
        version: manifest.generation.clone(),
        partial,
        complete,
        cut: if complete { None } else { cut },
    })
}

async fn suggest(
    State(state): State<AggState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let mut params = api::parse_params(raw.as_deref())?;
    // `keys=1` is how this process asks its servers for the keys it merges by; its own
    // answers never carry them, so the parameter must not split their tags either.
    params.keys = false;
    let view = View::of(&state, params.version.as_deref())?;
    // Capped like a server caps it: past what the partitions answer exactly, a larger `k`
    // would only split the cache.
    let k = params.k.unwrap_or(DEFAULT_TOP_K).min(view.max_k(&state));
    let prefix = normalize::prefix(&params.q);
    let tag = view.etag(api::answer_kind(&params), &prefix, k);
    if let Some(tag) = tag.as_deref().filter(|tag| not_modified(&headers, tag)) {
        let version = &view.manifest.generation;
        return Ok(cached(StatusCode::NOT_MODIFIED.into_response(), version, Some(tag)));
    }
    let request = Request { view: &view, q: &params.q, prefix, k, tiers: params.tiers };
    let answer = answer(&state, request, deadline(&state), false).await;
    let tag = tag.as_deref().filter(|_| !answer.partial);
    Ok(cached(Json(&*answer).into_response(), &answer.version, tag))
}

async fn opensearch(
    State(state): State<AggState>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let params = api::parse_params(raw.as_deref())?;
    let view = View::of(&state, params.version.as_deref())?;
    let items = http::opensearch_items(params.k);
    // What fills in for left-out items depends on the generation's `max_k`, which the
    // replicas report (10 until they have): a tag for one body, not for either.
    let max_k = view.max_k(&state);
    let kind = format!("{}{max_k}", http::opensearch_kind(params.tiers));
    let tag = view.etag(&kind, &params.q, items);
    if let Some(tag) = tag.as_deref().filter(|tag| not_modified(&headers, tag)) {
        let version = &view.manifest.generation;
        return Ok(cached(StatusCode::NOT_MODIFIED.into_response(), version, Some(tag)));
    }
    let prefix = normalize::prefix(&params.q);
    let asked = |k: usize| Request {
        view: &view,
        q: &params.q,
        prefix: prefix.clone(),
        k,
        tiers: params.tiers,
    };
    // Capped as `suggest` caps `k`: a snapshot built with `--top-k` under 10 answers fewer, and
    // merging more than each partition sent would make up the tail.
    // One deadline for both fan-outs: the refill's is what is left of the first's.
    let deadline = deadline(&state);
    let mut merged = answer(&state, asked(items.min(max_k)), deadline, false).await;
    // URL-looking items are left out: the next ones the partitions hold fill in. Not after a
    // partial answer: a second fan-out would wait out a second deadline for the same partition.
    if !merged.partial
        && http::opensearch_refill(&merged.suggestions, |s| s.text.as_str(), items, max_k)
    {
        // A partial refill would lose the whole first answer's items and its tag.
        let refilled = answer(&state, asked(max_k), deadline, true).await;
        if !refilled.partial {
            merged = refilled;
        }
    }
    let texts = merged.suggestions.iter().map(|s| s.text.as_str());
    let response = http::opensearch(&params.q, texts, items)?;
    let tag = tag.as_deref().filter(|_| !merged.partial);
    Ok(cached(response, &merged.version, tag))
}

async fn readyz(State(state): State<AggState>) -> Response {
    let manifest = state.generations.active();
    let healthy: Vec<usize> = (0..state.backends.partition_count())
        .map(|i| state.backends.replicas(i).iter().filter(|r| r.healthy()).count())
        .collect();
    let probed = state.backends.probed();
    let ready = state.ready();
    let body = serde_json::json!({
        "ready": ready,
        "probed": probed,
        "version": manifest.generation,
        "pending_version": state.generations.pending().map(|m| m.generation.clone()),
        "partitions": manifest.partitions.len(),
        "healthy_replicas": healthy,
    });
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    // As a server's: a readiness answer kept by a cache would mislead a balancer.
    let mut response = (status, Json(body)).into_response();
    let no_store = axum::http::HeaderValue::from_static("no-store");
    response.headers_mut().insert(axum::http::header::CACHE_CONTROL, no_store);
    response
}

async fn metrics(State(state): State<AggState>) -> Response {
    http::metrics_response(&state.registry)
}

/// The partitions' answers gathered for one request.
#[derive(Default)]
struct Merged {
    lists: Vec<Vec<api::Suggestion>>,
    partial: bool,
    /// The earliest tier any partition cut by its budget (`None`: none did).
    cut: Option<Match>,
}

impl Merged {
    /// Whether the prefix matches gathered so far leave the answer short of `k`: only then do
    /// the later tiers reach it, and only then can a partition's cut tier make it incomplete
    /// (one snapshot never consults them once prefix matches fill the answer).
    fn short_of(&self, k: usize) -> bool {
        self.lists.iter().flatten().filter(|s| s.tier == Match::Prefix).count() < k
    }

    /// Whether the merged top `k` is complete: a partition's cut tier leaves it incomplete only
    /// while the tiers before it leave the answer short, as one snapshot, which consults a tier
    /// only then, would say (the cut tier's items would otherwise all rank below `k` earlier
    /// ones and be dropped).
    fn complete_for(&self, k: usize) -> bool {
        self.cut.is_none_or(|cut| self.lists.iter().flatten().filter(|s| s.tier < cut).count() >= k)
    }

    /// Adds what other partitions answered.
    fn absorb(&mut self, other: Merged) {
        self.lists.extend(other.lists);
        self.partial |= other.partial;
        self.cut = match (self.cut, other.cut) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// Asks `partitions` (pinned to the manifest's versions) in parallel and keeps what they
    /// answer; one that cannot answer by the deadline makes the answer partial.
    async fn ask(
        state: &AggState,
        request: &Request<'_>,
        partitions: &[usize],
        deadline: Instant,
    ) -> Merged {
        let (manifest, k) = (&request.view.manifest, request.k);
        let mut merged = Merged::default();
        let encoded: String = form_urlencoded::byte_serialize(request.q.as_bytes()).collect();
        let only = if request.tiers == Tiers::Prefix { "&match=prefix" } else { "" };
        // Polled here rather than spawned (see `Backends::ask`).
        let mut asks = FuturesUnordered::new();
        for &index in partitions {
            let version = &manifest.partitions[index].checksum;
            let path = format!("/v1/suggest?q={encoded}&k={k}&keys=1&version={version}{only}");
            let backends = &state.backends;
            asks.push(async move { backends.ask(index, &path, version, k, deadline).await });
        }
        while let Some(done) = asks.next().await {
            match done {
                Ok(answer) => {
                    if !answer.complete {
                        // A server that does not say which tier (an older one) cut the first.
                        let tier = answer.cut.unwrap_or(Match::Words);
                        merged.cut = Some(merged.cut.map_or(tier, |cut| cut.min(tier)));
                    }
                    merged.lists.push(answer.suggestions);
                }
                Err(_) => merged.partial = true,
            }
        }
        merged
    }
}

/// When an answer to a request that comes now must be out: one deadline for the request,
/// however many fan-outs answer it.
fn deadline(state: &AggState) -> Instant {
    Instant::now() + state.deadline
}

/// The part of the deadline kept for merging and sending an answer: a tenth, at most 10 ms.
fn merge_margin(deadline: Duration) -> Duration {
    (deadline / 10).min(Duration::from_millis(10))
}

/// A partition answer's place in the tier order: servers send keys and distances (`keys=1`) so
/// ties break as in one snapshot.
fn order_of(s: &api::Suggestion) -> (Match, u8, f64, &str) {
    (s.tier, s.typos.unwrap_or(0), s.score, s.key.as_deref().unwrap_or(&s.text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(text: &str, tier: Match) -> api::Suggestion {
        api::Suggestion { text: text.into(), score: 1.0, key: None, tier, typos: None }
    }

    #[test]
    fn a_cut_later_tier_leaves_an_answer_incomplete_only_while_it_is_short() {
        let mut merged = Merged::default();
        // Two partitions: one with two prefix matches, one whose fuzzy tier was cut.
        merged.lists.push(vec![item("ab", Match::Prefix), item("ac", Match::Prefix)]);
        merged.lists.push(vec![item("xb", Match::Fuzzy)]);
        merged.cut = Some(Match::Fuzzy);
        assert!(merged.short_of(3) && !merged.short_of(2));
        assert!(!merged.complete_for(3), "the cut tier's items reach a top 3");
        assert!(merged.complete_for(2), "prefix matches fill a top 2: nothing was cut from it");
        merged.cut = None;
        assert!(merged.complete_for(3));
    }

    /// One partition's words fill the answer while another's fuzzy tier was cut: one snapshot
    /// would never have consulted its fuzzy tier, so nothing is missing. A cut words tier
    /// counts only the prefix matches before it.
    #[test]
    fn a_cut_tier_counts_only_the_tiers_before_it() {
        let mut merged = Merged::default();
        merged.lists.push((0..10).map(|i| item(&format!("w{i}"), Match::Words)).collect());
        merged.lists.push(vec![item("v", Match::Words), item("f", Match::Fuzzy)]);
        merged.cut = Some(Match::Fuzzy);
        assert!(merged.complete_for(10) && merged.complete_for(11));
        assert!(!merged.complete_for(12), "the fuzzy tier reaches a top 12");
        merged.cut = Some(Match::Words);
        assert!(!merged.complete_for(1), "no prefix match: the cut words tier reaches it");
    }
}
