//! Wire types of the HTTP API, shared by servers, the aggregator and tests.
//!
//! `GET /v1/suggest?q=<prefix>[&k=N]` answers [`SuggestResponse`]; every error answers
//! [`ErrorResponse`] (`{"error": {"code": "...", "message": "..."}}`) with a stable snake_case
//! code. Parameters are parsed here, by hand, so that malformed input gets our JSON error instead
//! of a framework's plain-text rejection.

use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::matching::{Match, Tiers};

/// Longest accepted `q`, in bytes after percent-decoding.
pub const MAX_QUERY_BYTES: usize = 1024;

/// The answer of a server's `/readyz`: what it serves. Aggregators probe it to group replicas
/// by partition, pin versions and cap `k`. Read leniently (every field may be missing: it
/// then says nothing), so a replica of another release is still reached.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Readiness {
    /// Whether it answers suggestions.
    pub ready: bool,
    /// Id of the snapshot it answers from.
    pub version: Option<String>,
    /// Id of the snapshot it answered from before, still loaded for pinned requests.
    pub previous_version: Option<String>,
    /// Version of the blocklist it applies.
    pub blocklist_version: Option<String>,
    /// Completions in its snapshot.
    pub keys: usize,
    /// The largest `k` it answers exactly from its snapshot (the aggregator caps requests at
    /// it).
    pub max_k: usize,
    /// The same for the previous snapshot, which pinned requests may still be answered from:
    /// a generation built with another `--top-k` answers another `k` exactly.
    pub previous_max_k: Option<usize>,
    /// The keys its snapshot holds.
    pub range: Option<KeyRange>,
    /// The release it runs ([`crate::RELEASE`]): two releases may answer the same snapshot
    /// differently (a new look-alike table, a tier fix).
    pub release: Option<String>,
}

/// Keys `[start, end)` (`end: None` is unbounded).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KeyRange {
    /// First key (inclusive).
    pub start: String,
    /// End (exclusive).
    pub end: Option<String>,
}

/// The answer of `/v1/suggest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuggestResponse {
    /// The normalized prefix that was looked up.
    pub query: String,
    /// Best first.
    pub suggestions: Vec<Suggestion>,
    /// Id of the snapshot (generation) that answered.
    pub version: String,
    /// True when some partition could not answer (aggregator only).
    pub partial: bool,
    /// False when a later tier stopped at its candidate budget
    /// ([`crate::snapshot::TIER_BUDGET`]): what is there is correct but may not be the best.
    /// Sent only when false.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub complete: bool,
    /// With `complete: false`, the first tier that stopped (`"words"` or `"fuzzy"`): whether a
    /// partition's cut reaches the merged answer depends on it (an aggregator's answer whose
    /// top `k` all come from earlier tiers lost nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<Match>,
}

fn yes() -> bool {
    true
}

/// For `skip_serializing_if`: a `complete` flag is sent only when false.
pub(crate) fn is_true(b: &bool) -> bool {
    *b
}

/// One suggestion on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suggestion {
    /// What users see.
    pub text: String,
    /// The EMA score.
    pub score: f64,
    /// The normalized key; sent only when asked for with `keys=1` (the aggregator needs it to
    /// break score ties exactly like a single snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The tier that found it: `"prefix"`, `"words"` or `"fuzzy"` ([`crate::matching`]).
    #[serde(rename = "match", default = "prefix_tier")]
    pub tier: Match,
    /// For fuzzy matches, the distance (1 or 2); sent with `keys=1` (the aggregator orders
    /// fuzzy matches by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typos: Option<u8>,
}

impl SuggestResponse {
    /// About the size of this answer as JSON, for the cache's size limit: its texts, and
    /// room for each item's fields.
    pub fn approx_bytes(&self) -> usize {
        let items: usize = self.suggestions.iter().map(|s| s.text.len() + 48).sum();
        self.query.len() + self.version.len() + 64 + items
    }
}

fn prefix_tier() -> Match {
    Match::Prefix
}

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// Machine-readable code and human-readable message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable snake_case code.
    pub code: String,
    /// Explanation for humans.
    pub message: String,
}

/// Parameters of a suggestion request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuggestParams {
    /// The prefix as received, percent-decoded (`+` is a space; bytes that are not UTF-8
    /// become U+FFFD).
    pub q: String,
    /// Requested number of suggestions, if given.
    pub k: Option<usize>,
    /// Answer from this snapshot id only (`version=`; used by the aggregator to pin a
    /// generation during a rollout).
    pub version: Option<String>,
    /// Include each suggestion's key (`keys=1`).
    pub keys: bool,
    /// `match=prefix` answers the prefix tier only; `match=all` (the default) all tiers.
    pub tiers: Tiers,
}

/// The parameters of a raw query string: each name as sent (not decoded) with its value
/// decoded (`+` is a space; bytes that are not UTF-8 become U+FFFD), in order.
///
/// Names are compared as sent, as nginx's `$arg_q` and most proxies and CDNs compare them: a
/// name decoded here but not there (`%71=` is `q` once decoded) would let `?%71=X&q=Y` show a
/// rule at the edge one text and answer another. Every route that reads a query string
/// reads it through this.
pub fn query_pairs(raw: &str) -> impl Iterator<Item = (&str, std::borrow::Cow<'_, str>)> {
    // `form_urlencoded::parse` splits on `&` and skips empty pieces just so: the two
    // iterators stay in step, and only the value is taken from its decoding.
    let names = raw.split('&').filter(|piece| !piece.is_empty());
    let names = names.map(|piece| piece.split_once('=').map_or(piece, |(name, _)| name));
    names.zip(form_urlencoded::parse(raw.as_bytes())).map(|(name, (_, value))| (name, value))
}

/// Parses the raw query string of `/v1/suggest` or `/v1/opensearch`.
pub fn parse_params(raw: Option<&str>) -> Result<SuggestParams, ApiError> {
    let (mut q, mut k, mut version, mut keys, mut tiers) = (None, None, None, None, None);
    // The first of a repeated parameter counts, for every parameter and whatever the later
    // ones hold, as most proxies read them (nginx's `$arg_q` is the first `q` too, though it
    // does not tell `Q` from `q`: `Q=` is another name here, and so is `%71=`, see
    // [`query_pairs`]).
    for (name, value) in query_pairs(raw.unwrap_or_default()) {
        match name {
            "q" if q.is_none() => q = Some(value.into_owned()),
            "k" if k.is_none() => k = Some(parse_k(&value)?),
            "version" if version.is_none() => version = Some(value.into_owned()),
            "keys" if keys.is_none() => keys = Some(parse_keys(&value)?),
            "match" if tiers.is_none() => tiers = Some(parse_tiers(&value)?),
            _ => {}
        }
    }
    let (keys, tiers) = (keys.unwrap_or(false), tiers.unwrap_or(Tiers::All));
    let q =
        q.ok_or_else(|| ApiError::bad_request("missing_query", "the q parameter is required"))?;
    if q.len() > MAX_QUERY_BYTES {
        return Err(ApiError::bad_request(
            "query_too_long",
            format!("q is {} bytes; at most {MAX_QUERY_BYTES} are accepted", q.len()),
        ));
    }
    Ok(SuggestParams { q, k, version, keys, tiers })
}

/// The part of an ETag (and of a cache key) that tells answers to the same prefix apart: keys
/// sent or not, tiers used.
pub fn answer_kind(params: &SuggestParams) -> &'static str {
    match (params.keys, params.tiers) {
        (false, Tiers::All) => "s",
        (true, Tiers::All) => "sk",
        (false, Tiers::Prefix) => "sp",
        (true, Tiers::Prefix) => "skp",
    }
}

/// `prefix` or `all`.
pub fn parse_tiers(value: &str) -> Result<Tiers, ApiError> {
    match value {
        "prefix" => Ok(Tiers::Prefix),
        "all" => Ok(Tiers::All),
        _ => Err(ApiError::bad_request(
            "invalid_match",
            format!("match must be \"prefix\" or \"all\", got {value:?}"),
        )),
    }
}

impl Suggestion {
    /// The wire form of a snapshot's suggestion; `keys` adds what the aggregator needs to merge.
    pub fn of(s: &crate::snapshot::Suggestion, keys: bool) -> Suggestion {
        Suggestion {
            text: s.text().to_owned(),
            score: s.score,
            key: keys.then(|| s.key.clone()),
            tier: s.tier,
            typos: (keys && s.tier == Match::Fuzzy).then_some(s.typos),
        }
    }
}

/// A snapshot's answer on the wire, borrowed: serializes exactly as the [`SuggestResponse`]
/// built from it would, without copying a string (the server's request path).
#[derive(Debug, Serialize)]
pub struct AnswerBody<'a> {
    /// As [`SuggestResponse::query`].
    pub query: &'a str,
    /// As [`SuggestResponse::suggestions`].
    pub suggestions: Items<'a>,
    /// As [`SuggestResponse::version`].
    pub version: &'a str,
    /// As [`SuggestResponse::partial`].
    pub partial: bool,
    /// As [`SuggestResponse::complete`].
    #[serde(skip_serializing_if = "is_true")]
    pub complete: bool,
    /// As [`SuggestResponse::cut`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<Match>,
}

/// A snapshot's suggestions, serialized as a list of [`Suggestion`]s.
#[derive(Debug)]
pub struct Items<'a> {
    /// Best first.
    pub list: &'a [crate::snapshot::Suggestion],
    /// Send keys and distances ([`Suggestion::of`]).
    pub keys: bool,
}

impl Serialize for Items<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.list.iter().map(|s| SuggestionRef {
            text: s.text(),
            score: s.score,
            key: self.keys.then_some(s.key.as_str()),
            tier: s.tier,
            typos: (self.keys && s.tier == Match::Fuzzy).then_some(s.typos),
        }))
    }
}

/// [`Suggestion`], borrowed; the fields and their order must stay the same.
#[derive(Serialize)]
struct SuggestionRef<'a> {
    text: &'a str,
    score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    #[serde(rename = "match")]
    tier: Match,
    #[serde(skip_serializing_if = "Option::is_none")]
    typos: Option<u8>,
}

impl AnswerBody<'_> {
    /// The JSON text, in one buffer sized for it up front.
    pub fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        let texts: usize = self.suggestions.list.iter().map(|s| 2 * s.key.len() + 64).sum();
        let mut buffer = Vec::with_capacity(96 + self.query.len() + self.version.len() + texts);
        serde_json::to_writer(&mut buffer, self)?;
        Ok(buffer)
    }
}

/// Firefox drops suggestion lists whose items look like URLs; such queries ("ebay.com") are
/// navigation, not search, so OpenSearch answers leave them out.
pub fn looks_like_url(text: &str) -> bool {
    if text.contains("://") || text.starts_with("www.") {
        return true;
    }
    if text.contains(' ') {
        return false;
    }
    let host = text.split('/').next().unwrap_or(text);
    let mut labels = host.split('.');
    let first = labels.next().unwrap_or("");
    let rest: Vec<&str> = labels.collect();
    !first.is_empty()
        && rest.last().is_some_and(|tld| {
            (2..=6).contains(&tld.len()) && tld.chars().all(|c| c.is_ascii_alphabetic())
        })
}

/// A positive integer in ASCII digits (no sign, no spaces: `k=+5` or `k= 5` is as malformed
/// as `match=Prefix`); one too large for a `usize` is as good as the largest (the answer caps
/// `k` at the snapshot's maximum either way, and a client should not get a 400 for 2^64).
fn parse_k(value: &str) -> Result<usize, ApiError> {
    let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    match value.parse::<usize>() {
        Ok(k) if digits && k >= 1 => Ok(k),
        Err(e) if digits && *e.kind() == std::num::IntErrorKind::PosOverflow => Ok(usize::MAX),
        _ => Err(ApiError::bad_request(
            "invalid_k",
            format!("k must be a positive integer, got {value:?}"),
        )),
    }
}

/// `keys=`: whether to carry each suggestion's key. Anything but `0`, `1`, `false` or `true`
/// is refused, as a misspelled `match` is: `keys=yes` read as "no" would fail quietly.
fn parse_keys(value: &str) -> Result<bool, ApiError> {
    match value {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(ApiError::bad_request(
            "invalid_keys",
            format!("keys must be 0, 1, false or true, got {value:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let p = parse_params(Some("q=new+york&k=3")).unwrap();
        assert_eq!(
            p,
            SuggestParams {
                q: "new york".into(),
                k: Some(3),
                version: None,
                keys: false,
                tiers: Tiers::All
            }
        );
        let p = parse_params(Some("q=a&version=abc&keys=1")).unwrap();
        assert_eq!((p.version.as_deref(), p.keys), (Some("abc"), true));
        assert_eq!(parse_params(Some("q=a&match=prefix")).unwrap().tiers, Tiers::Prefix);
        let huge = parse_params(Some("q=a&k=18446744073709551616123")).unwrap();
        assert_eq!(huge.k, Some(usize::MAX), "capped later, like any k over the maximum");
        assert_eq!(parse_params(Some("q=")).unwrap().q, "");
        assert_eq!(parse_params(Some("q=caf%C3%A9%20")).unwrap().q, "café ");
        // Names as sent: an encoded `q` is another name, its value decoded all the same.
        let p = parse_params(Some("%71=X&q=Y&&k=2=3&keys")).unwrap_err();
        assert_eq!(p.code(), "invalid_k", "k is `2=3`");
        let p = parse_params(Some("%71=X&&q=Y%3D&keys=0&Q=Z&k=2")).unwrap();
        assert_eq!((p.q.as_str(), p.k, p.keys), ("Y=", Some(2), false));
        // A repeated parameter: the first counts, whatever the later ones hold.
        let p =
            parse_params(Some("q=a&q=b&k=5&k=x&match=prefix&match=bogus&keys=1&keys=0")).unwrap();
        assert_eq!((p.q.as_str(), p.k, p.tiers, p.keys), ("a", Some(5), Tiers::Prefix, true));
        for (raw, code) in [
            (None, "missing_query"),
            (Some("k=3"), "missing_query"),
            (Some("q=a&k=0"), "invalid_k"),
            (Some("q=a&k=x"), "invalid_k"),
            (Some("q=a&k=-1"), "invalid_k"),
            (Some("q=a&match=fuzzy"), "invalid_match"),
            // Not digits alone: a sign, a space (`+` is one), a full-width digit.
            (Some("q=a&k=%2B5"), "invalid_k"),
            (Some("q=a&k=+5"), "invalid_k"),
            (Some("q=a&k=5%20"), "invalid_k"),
            (Some("q=a&k=%EF%BC%95"), "invalid_k"),
            (Some("q=a&keys=yes"), "invalid_keys"),
            (Some("q=a&keys"), "invalid_keys"),
        ] {
            assert_eq!(parse_params(raw).unwrap_err().code(), code, "{raw:?}");
        }
        for t in ["google.com", "www.ebay", "http://x", "myspace.com/bob", "bbc.co.uk"] {
            assert!(looks_like_url(t), "{t}");
        }
        for t in ["google", "new york", "2.5 inch", "mr. smith", "v1.2", "a.b c"] {
            assert!(!looks_like_url(t), "{t}");
        }
        let long = format!("q={}", "a".repeat(MAX_QUERY_BYTES + 1));
        assert_eq!(parse_params(Some(&long)).unwrap_err().code(), "query_too_long");
        assert!(parse_params(Some(&format!("q={}", "a".repeat(MAX_QUERY_BYTES)))).is_ok());
    }
}

#[cfg(test)]
mod wire_tests {
    use proptest::prelude::*;

    use super::*;
    use crate::snapshot;

    fn suggestion() -> impl Strategy<Value = snapshot::Suggestion> {
        let tier = prop_oneof![Just(Match::Prefix), Just(Match::Words), Just(Match::Fuzzy)];
        (any::<String>(), proptest::option::of(any::<String>()), any::<f64>(), tier, 0u8..3)
            .prop_map(|(key, display, score, tier, typos)| {
                let score = if score.is_finite() { score } else { 0.0 };
                snapshot::Suggestion { key, display, score, tier, typos }
            })
    }

    proptest! {
        /// The server's borrowed body is byte for byte what the owned wire type serializes to,
        /// whatever the texts hold (quotes, control characters, any script).
        #[test]
        fn borrowed_body_serializes_as_the_owned_response(
            list in proptest::collection::vec(suggestion(), 0..12),
            query in any::<String>(),
            keys in any::<bool>(),
            cut in proptest::option::of(prop::sample::select(vec![Match::Words, Match::Fuzzy])),
        ) {
            let complete = cut.is_none();
            let borrowed = AnswerBody {
                query: &query,
                suggestions: Items { list: &list, keys },
                version: "v1",
                partial: false,
                complete,
                cut,
            };
            let owned = SuggestResponse {
                query: query.clone(),
                suggestions: list.iter().map(|s| Suggestion::of(s, keys)).collect(),
                version: "v1".into(),
                partial: false,
                complete,
                cut,
            };
            let json = borrowed.to_json().unwrap();
            prop_assert_eq!(&json, &serde_json::to_vec(&owned).unwrap());
            let back: SuggestResponse = serde_json::from_slice(&json).unwrap();
            prop_assert_eq!(back.suggestions.len(), list.len());
        }
    }
}
