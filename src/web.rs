//! The browser side, served by servers and aggregators alike at `/`: the search page (embedded
//! at compile time, so a fresh install needs nothing else), the OpenSearch description that
//! lets browsers add the service as a search engine with live suggestions, and a minimal
//! results page that records which suggestion was picked.

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;

use crate::metrics::HttpMetrics;

const INDEX: &str = include_str!("../web/index.html");
/// The search box, its list and the history controls: on the page and atop every results page.
const SEARCH: &str = include_str!("../web/search.html");

const JS: &str = "text/javascript; charset=utf-8";
static APP_JS: Asset = Asset::new(include_str!("../web/app.js"), JS);
static HISTORY_JS: Asset = Asset::new(include_str!("../web/history.js"), JS);
static PRIVACY_JS: Asset = Asset::new(include_str!("../web/privacy.js"), JS);
static STYLE_CSS: Asset = Asset::new(include_str!("../web/style.css"), "text/css; charset=utf-8");
static FAVICON: Asset = Asset::new(include_str!("../web/favicon.svg"), "image/svg+xml");

/// What the pages put in their asset URLs (`?v=`): a checksum of the assets, so that a page
/// never runs with another release's scripts or styles from a browser's cache (the pages are
/// revalidated on every load, the assets kept for minutes).
fn assets_version() -> String {
    let mut crc = crc32fast::Hasher::new();
    for asset in [&APP_JS, &HISTORY_JS, &PRIVACY_JS, &STYLE_CSS] {
        crc.update(asset.plain.as_bytes());
    }
    format!("{:08x}", crc.finalize())
}

/// How the page behaves and where it sends people.
#[derive(Debug, Clone, Default)]
pub struct WebConfig {
    /// Public base URL (behind a proxy it differs from the listen address); default: the
    /// request's `Host`.
    pub public_url: Option<String>,
    /// Results URL template with `{searchTerms}`; default: this service's `/search`.
    pub results_url: Option<String>,
    /// Characters typed before suggestions are asked for.
    pub min_chars: usize,
}

#[derive(Debug)]
struct Page {
    config: WebConfig,
    index: String,
    /// [`SEARCH`] with the page settings in, `{{QUERY}}` still to fill.
    search: String,
    /// [`assets_version`].
    assets: String,
    metrics: Arc<HttpMetrics>,
}

/// The page routes, for any server state.
pub fn router<S: Clone + Send + Sync + 'static>(
    config: WebConfig,
    metrics: Arc<HttpMetrics>,
) -> Router<S> {
    let settings = serde_json::json!({
        "api": "",
        "resultsUrl": config.results_url.as_deref().unwrap_or(DEFAULT_RESULTS),
        "minChars": config.min_chars.max(1),
        "debounceMs": 50,
        "maxQueryBytes": crate::api::MAX_QUERY_BYTES,
    });
    let assets = assets_version();
    // `</` would end the script element early; JSON allows `<\/` instead.
    let search = SEARCH
        .replace("{{CONFIG}}", &settings.to_string().replace("</", "<\\/"))
        .replace("{{ASSETS}}", &assets);
    let index = INDEX
        .replace("{{SEARCH}}", &search.replace("{{QUERY}}", ""))
        .replace("{{ASSETS}}", &assets);
    let page = Arc::new(Page { config, index, search, assets, metrics });
    // The pages are compressed per response; the assets never (they are sent as stored, and a
    // header they would not honour must not let the layer compress them after all).
    let pages = Router::new()
        .route("/", get(index_page))
        .route("/opensearch.xml", get(opensearch_description))
        .route("/search", get(results))
        .layer(crate::http::compression());
    Router::new()
        .route("/app.js", asset_route(&APP_JS))
        .route("/history.js", asset_route(&HISTORY_JS))
        .route("/privacy.js", asset_route(&PRIVACY_JS))
        .route("/style.css", asset_route(&STYLE_CSS))
        .route("/favicon.svg", asset_route(&FAVICON))
        .merge(pages)
        // As the API routes answer it: JSON, not an empty 405 (which the listener would
        // relabel as a malformed request).
        .method_not_allowed_fallback(|| async { crate::error::ApiError::MethodNotAllowed })
        .layer(axum::middleware::map_response(locked_down))
        .with_state(page)
}

/// The route of `asset`, answered as the request's `Accept-Encoding` and `?v=` ask.
fn asset_route(asset: &'static Asset) -> axum::routing::MethodRouter<Arc<Page>> {
    get(
        move |State(page): State<Arc<Page>>, RawQuery(query): RawQuery, headers: HeaderMap| async move {
            asset.response(&headers, Freshness::of(query.as_deref(), &page.assets))
        },
    )
}

/// How long a browser may keep an asset, from the version its URL names (`?v=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freshness {
    /// This release's version: the URL's content never changes.
    Immutable,
    /// Another release's (a rolling update sends a new page's request to an old server, or an
    /// old page's to a new one): kept, the wrong bytes would stay under that URL.
    NotStored,
    /// No version named: minutes.
    Minutes,
}

impl Freshness {
    fn of(query: Option<&str>, version: &str) -> Freshness {
        let named =
            query.and_then(|q| crate::api::query_pairs(q).find(|(k, _)| *k == "v").map(|(_, v)| v));
        match named {
            Some(v) if v == version => Freshness::Immutable,
            Some(_) => Freshness::NotStored,
            None => Freshness::Minutes,
        }
    }

    fn cache_control(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Freshness::Immutable => "public, max-age=31536000, immutable",
            Freshness::NotStored => "no-store",
            Freshness::Minutes => "public, max-age=300",
        })
    }
}

/// What the page may load and who may frame it: its own scripts, styles and images only (the
/// settings block is JSON, not script), requests to its own origin (`api` is always ""), and
/// no framing, so no other site can overlay the history buttons ("Turn history off" clears
/// the history) with its own and have them clicked.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
    connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Every page response gets [`POLICY`], and `nosniff` so that no content type is guessed.
async fn locked_down(mut r: Response) -> Response {
    let headers = r.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    r
}

/// A page asset, compressed once with each encoding at its first request and sent from then on
/// as it is. Compressed per request (by [`crate::http::compression`]), `app.js` cost about half
/// a millisecond of CPU a request, and the page's routes are outside admission control: a
/// client fetching it in a loop held a core that no load shedding would give back.
struct Asset {
    plain: &'static str,
    content_type: &'static str,
    gzip: OnceLock<Bytes>,
    br: OnceLock<Bytes>,
}

impl Asset {
    const fn new(plain: &'static str, content_type: &'static str) -> Asset {
        Asset { plain, content_type, gzip: OnceLock::new(), br: OnceLock::new() }
    }

    /// The asset in the encoding `request_headers` accept best ([`Encoding::accepted`]).
    fn response(&self, request_headers: &HeaderMap, freshness: Freshness) -> Response {
        let encoding = Encoding::accepted(request_headers);
        let body = match encoding {
            Encoding::Brotli => self.br.get_or_init(|| brotli(self.plain.as_bytes())).clone(),
            Encoding::Gzip => self.gzip.get_or_init(|| gzip(self.plain.as_bytes())).clone(),
            Encoding::Identity => Bytes::from_static(self.plain.as_bytes()),
        };
        let mut r = body.into_response();
        let headers = r.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        headers.insert(header::CACHE_CONTROL, freshness.cache_control());
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        if let Some(name) = encoding.name() {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(name));
        }
        r
    }
}

/// The content codings assets are sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Brotli,
    Gzip,
    Identity,
}

impl Encoding {
    /// The coding `Accept-Encoding` prefers (RFC 9110 12.5.3): the highest `q` of `br` and
    /// `gzip`, brotli on a tie (smaller), `*` standing for either one not named; none with
    /// `q=0`. A coding named twice counts at its highest `q`. No header, or neither
    /// acceptable: the asset as it is.
    fn accepted(headers: &HeaderMap) -> Encoding {
        let (mut br, mut gzip, mut any) = (None, None, None);
        let raise = |slot: &mut Option<f32>, q: f32| *slot = Some(slot.map_or(q, |s| s.max(q)));
        for value in headers.get_all(header::ACCEPT_ENCODING) {
            let Ok(value) = value.to_str() else { continue };
            for item in value.split(',') {
                let mut parts = item.split(';');
                let name = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
                let q = parts
                    .filter_map(|p| p.trim().strip_prefix("q=").or(p.trim().strip_prefix("Q=")))
                    .find_map(|q| q.trim().parse::<f32>().ok())
                    .unwrap_or(1.0);
                match name.as_str() {
                    "br" => raise(&mut br, q),
                    "gzip" | "x-gzip" => raise(&mut gzip, q),
                    "*" => raise(&mut any, q),
                    _ => {}
                }
            }
        }
        let (br, gzip) = (br.or(any).unwrap_or(0.0), gzip.or(any).unwrap_or(0.0));
        if br > 0.0 && br >= gzip {
            Encoding::Brotli
        } else if gzip > 0.0 {
            Encoding::Gzip
        } else {
            Encoding::Identity
        }
    }

    /// The `Content-Encoding` value, none for the asset as it is.
    fn name(self) -> Option<&'static str> {
        match self {
            Encoding::Brotli => Some("br"),
            Encoding::Gzip => Some("gzip"),
            Encoding::Identity => None,
        }
    }
}

/// `bytes` compressed with brotli at quality 9 (most of quality 11's gain, at a tenth of
/// its time, which a debug build's first request pays too).
fn brotli(bytes: &[u8]) -> Bytes {
    let mut out = Vec::new();
    {
        let mut writer = brotli::CompressorWriter::new(&mut out, 4096, 9, 22);
        // Writing to a Vec cannot fail.
        let _ = std::io::Write::write_all(&mut writer, bytes);
    }
    Bytes::from(out)
}

/// `bytes` compressed with gzip at the best level.
fn gzip(bytes: &[u8]) -> Bytes {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = std::io::Write::write_all(&mut encoder, bytes);
    Bytes::from(encoder.finish().unwrap_or_default())
}

async fn index_page(State(page): State<Arc<Page>>) -> Response {
    let mut r = Html(page.index.clone()).into_response();
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn html_escape(s: &str) -> String {
    xml_escape(s).replace('\'', "&#39;")
}

/// Where picking a suggestion goes unless configured: this service's results page.
const DEFAULT_RESULTS: &str = "/search?q={searchTerms}";

/// A results URL template as the page's browser reads it (`new URL(template, location)`,
/// the page being `base/`): absolute (`https://...`, any case), scheme-relative (`//host/...`)
/// or relative to the page. The OpenSearch description must send people where the page does.
pub fn resolve(template: &str, base: &str) -> Result<String, url::ParseError> {
    const TERMS: &str = "{searchTerms}";
    // Parsing percent-encodes braces in a path: the placeholder goes through as lowercase
    // letters, which no part of a URL changes.
    const STAND_IN: &str = "typeaheadsearchtermsstandin";
    let page = url::Url::parse(&format!("{}/", base.trim_end_matches('/')))?;
    let joined = page.join(&template.replace(TERMS, STAND_IN))?;
    Ok(joined.as_str().replace(STAND_IN, TERMS))
}

/// The base URL the browser should use: configured, or the one it used to reach us. `None`
/// for a `Host` that is not a bare `host[:port]` (a path, a query, user info): it would be
/// copied into every URL the description advertises.
fn base_url(page: &Page, headers: &HeaderMap) -> Option<String> {
    if let Some(url) = &page.config.public_url {
        return Some(url.trim_end_matches('/').to_owned());
    }
    let Some(host) = headers.get(header::HOST) else {
        return Some("http://127.0.0.1".to_owned());
    };
    let host = host.to_str().ok()?;
    is_host_and_port(host).then(|| format!("http://{host}"))
}

/// Whether `text` is a host (a name, an IPv4 address, or an IPv6 address in brackets) with an
/// optional port of digits, and nothing else. `http::uri::Authority` takes any port text
/// (`example.com:abc`) and anything after a bracket (`[::1]evil`).
fn is_host_and_port(text: &str) -> bool {
    // The port's colon is the first one after the host: after the bracket, for IPv6.
    let host_end = text.rfind(']').map_or(0, |i| i + 1);
    let (host, port) = match text[host_end..].find(':') {
        Some(i) => (&text[..host_end + i], Some(&text[host_end + i + 1..])),
        None => (text, None),
    };
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => {
            v6.contains(':') && v6.chars().all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'))
        }
        None => {
            !host.is_empty()
                && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        }
    };
    // An empty port is the scheme's (RFC 9110: `port = *DIGIT`).
    let port_ok =
        |p: &str| p.is_empty() || p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok();
    host_ok && port.is_none_or(port_ok)
}

async fn opensearch_description(State(page): State<Arc<Page>>, headers: HeaderMap) -> Response {
    let Some(base) = base_url(&page, &headers) else {
        let why = "the Host header must be a host name or address, with an optional port";
        return crate::error::ApiError::bad_request("invalid_host", why).into_response();
    };
    let template = page.config.results_url.as_deref().unwrap_or(DEFAULT_RESULTS);
    // Only a `Host` header no URL can hold fails here; the template alone is the best guess.
    let results = resolve(template, &base).unwrap_or_else(|_| template.to_owned());
    let body = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<OpenSearchDescription xmlns="http://a9.com/-/spec/opensearch/1.1/" xmlns:moz="http://www.mozilla.org/2006/browser/search/">
  <ShortName>typeahead</ShortName>
  <Description>Search with typeahead suggestions</Description>
  <InputEncoding>UTF-8</InputEncoding>
  <Image height="32" width="32" type="image/svg+xml">{}/favicon.svg</Image>
  <Url type="text/html" method="get" template="{}"/>
  <Url type="application/x-suggestions+json" method="get" template="{}/v1/opensearch?q={{searchTerms}}"/>
  <moz:SearchForm>{}/</moz:SearchForm>
</OpenSearchDescription>
"#,
        xml_escape(&base),
        xml_escape(&results),
        xml_escape(&base),
        xml_escape(&base)
    );
    let mut r = body.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/opensearchdescription+xml; charset=utf-8"),
    );
    if page.config.public_url.is_none() {
        // The URLs came from the request's Host: a shared cache that keys on another host
        // than the one it forwards must not hand them to anyone else.
        r.headers_mut().insert(header::VARY, HeaderValue::from_static("host"));
        r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    r
}

/// A minimal results page. It counts which suggestion position was picked (the signal for
/// offline quality analysis) without logging the query at info level.
async fn results(
    State(page): State<Arc<Page>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let (mut q, mut prefix, mut index) = (None, None, None);
    // Held to what a search box sends: the text is echoed three times, escaped (up to six
    // bytes for one), into every page.
    let limited =
        |v: std::borrow::Cow<'_, str>| truncated(&v, crate::api::MAX_QUERY_BYTES).to_owned();
    // The first of a repeated parameter counts, as in the API (`api::parse_params`).
    for (k, v) in crate::api::query_pairs(raw.as_deref().unwrap_or_default()) {
        match k {
            "q" if q.is_none() => q = Some(limited(v)),
            "suggestionPrefix" if prefix.is_none() => prefix = Some(limited(v)),
            "suggestionIndex" if index.is_none() => index = Some(v.parse::<usize>().ok()),
            _ => {}
        }
    }
    let (q, index) = (q.unwrap_or_default(), index.flatten());
    if let Some(i) = index.filter(|_| prefix.is_some() && from_this_site(&headers)) {
        page.metrics.picked(i);
        tracing::debug!(
            index = i,
            prefix_chars = prefix.as_ref().map_or(0, |p| p.chars().count()),
            "suggestion picked"
        );
    }
    let picked = match (&prefix, index) {
        (Some(p), Some(i)) => {
            format!(
                "<p>Picked suggestion {} after typing “{}”.</p>",
                i.saturating_add(1),
                html_escape(p)
            )
        }
        _ => String::new(),
    };
    // The search box comes first, so a person can search again (with suggestions).
    let search = page.search.replace("{{QUERY}}", &html_escape(&q));
    let mut response = Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <title>{q} - typeahead</title><link rel=\"icon\" type=\"image/svg+xml\" href=\"/favicon.svg\">\
         <link rel=\"stylesheet\" href=\"/style.css?v={assets}\"></head>\
         <body><main class=\"results\">{search}<h1>Results for “{q}”</h1>{picked}\
         <p><a href=\"/\">New search</a></p></main></body></html>",
        q = html_escape(&q),
        assets = page.assets,
    ))
    .into_response();
    // The page holds the query: no cache between the person and us keeps it.
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The longest start of `s` of at most `max` bytes that ends at a character boundary.
fn truncated(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Whether the request came from a page of this site, as far as the browser says
/// (`Sec-Fetch-Site`; browsers before 2020-2023 send none and are believed): a pick counted
/// from an `<img>` on another site, or a link made up there, would skew the quality signal.
fn from_this_site(headers: &HeaderMap) -> bool {
    headers.get("sec-fetch-site").is_none_or(|site| site.as_bytes() == b"same-origin")
}

#[cfg(test)]
mod tests {
    use super::{APP_JS, Encoding, Freshness, HeaderMap, HeaderValue, header};
    use std::io::Read;

    fn accepted(values: &[&'static str]) -> Encoding {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(header::ACCEPT_ENCODING, HeaderValue::from_static(v));
        }
        Encoding::accepted(&headers)
    }

    #[test]
    fn the_coding_is_the_one_accept_encoding_prefers() {
        use Encoding::{Brotli, Gzip, Identity};
        let cases = [
            (&[][..], Identity),
            (&["gzip"], Gzip),
            (&["GZIP"], Gzip),
            (&["gzip, deflate, br, zstd"], Brotli),
            (&["br;q=0, gzip"], Gzip),
            (&["gzip;q=1, br;q=0.5"], Gzip),
            (&["gzip;q=0.5, br;q=0.5"], Brotli),
            (&["br;q=0"], Identity),
            (&["identity"], Identity),
            (&["*"], Brotli),
            (&["*;q=0, gzip"], Gzip),
            (&["br;q=0, *"], Gzip),
            (&["deflate", "gzip"], Gzip),
            (&["gzip ; q=0.8 , br ; q=0.9"], Brotli),
            (&["gzip;q=0.0"], Identity),
            (&["gzip, gzip;q=0"], Gzip),
            (&["br, br;q=0"], Brotli),
            (&["gzip", "gzip;q=0"], Gzip),
            (&["identity;q=0"], Identity),
        ];
        for (values, want) in cases {
            assert_eq!(accepted(values), want, "{values:?}");
        }
    }

    /// The stored bodies decode to the asset, in both codings, and are sent as such.
    #[test]
    fn compressed_assets_decode_to_the_asset() {
        let plain = APP_JS.plain.as_bytes();
        for (coding, name) in [(Encoding::Brotli, "br"), (Encoding::Gzip, "gzip")] {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(name));
            assert_eq!(Encoding::accepted(&headers), coding);
            let r = APP_JS.response(&headers, Freshness::Minutes);
            assert_eq!(r.headers()[header::CONTENT_ENCODING], name);
            assert_eq!(r.headers()[header::VARY], "accept-encoding");
            let body = match coding {
                Encoding::Brotli => APP_JS.br.get().unwrap().clone(),
                _ => APP_JS.gzip.get().unwrap().clone(),
            };
            let mut unpacked = Vec::new();
            match coding {
                Encoding::Brotli => {
                    brotli::Decompressor::new(&body[..], 4096).read_to_end(&mut unpacked)
                }
                _ => flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut unpacked),
            }
            .unwrap();
            assert_eq!(unpacked, plain, "{name}");
            assert!(body.len() * 5 < plain.len() * 2, "{name}: {} of {}", body.len(), plain.len());
        }
        let r = APP_JS.response(&HeaderMap::new(), Freshness::Minutes);
        assert!(r.headers().get(header::CONTENT_ENCODING).is_none());
    }

    /// An asset named by this release's version is kept for good; by another's, not at all
    /// (a rolling update sends one release's page to another's server); by none, minutes.
    #[test]
    fn assets_are_kept_as_long_as_their_version_says() {
        let version = super::assets_version();
        let of = |q: &str| Freshness::of(Some(q), &version);
        assert_eq!(of(&format!("v={version}")), Freshness::Immutable);
        assert_eq!(of(&format!("x=1&v={version}")), Freshness::Immutable);
        assert_eq!(of("v=00000000"), Freshness::NotStored);
        assert_eq!(of("x=1"), Freshness::Minutes);
        assert_eq!(Freshness::of(None, &version), Freshness::Minutes);
        let r = APP_JS.response(&HeaderMap::new(), of("v=old"));
        assert_eq!(r.headers()[header::CACHE_CONTROL], "no-store");
    }

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(super::truncated("abc", 2), "ab");
        assert_eq!(super::truncated("aé", 2), "a");
        assert_eq!(super::truncated("aé", 3), "aé");
        assert_eq!(super::truncated("", 0), "");
    }

    /// A Host header goes into every URL of the description: a host and a port of digits only.
    #[test]
    fn hosts_are_a_host_and_a_port_and_nothing_else() {
        let good = ["example.com", "EXAMPLE.com.", "h:8080", "10.0.0.1:80", "[::1]", "[::1]:8080"];
        for host in
            good.into_iter().chain(["my_host-1", "[::ffff:10.0.0.1]:443", "h:", "xn--bcher-kva.de"])
        {
            assert!(super::is_host_and_port(host), "{host}");
        }
        let bad = ["", "example.com:abc", "h:99999", "h:+80", "[::1]evil", "[::1", "::1"];
        let worse = ["a'b", "user@h", "h/path", "h:1/x?\"<>", "[]", "[h]", "h h", "h:80:80"];
        for host in bad.into_iter().chain(worse) {
            assert!(!super::is_host_and_port(host), "{host}");
        }
    }

    /// The description's results URL is where the page's `new URL(template, location)` goes.
    #[test]
    fn results_templates_resolve_as_a_browser_resolves_them() {
        for (template, base, resolved) in [
            ("/search?q={searchTerms}", "http://h", "http://h/search?q={searchTerms}"),
            (
                "HTTPS://Example.com/?q={searchTerms}",
                "http://h",
                "https://example.com/?q={searchTerms}",
            ),
            (
                "//example.com/s?q={searchTerms}",
                "https://h",
                "https://example.com/s?q={searchTerms}",
            ),
            ("httpdocs/s?q={searchTerms}", "http://h/ta", "http://h/ta/httpdocs/s?q={searchTerms}"),
            ("/s/{searchTerms}", "http://h/ta/", "http://h/s/{searchTerms}"),
            (
                "https://x.com/r/{searchTerms}?l=en",
                "http://h",
                "https://x.com/r/{searchTerms}?l=en",
            ),
        ] {
            assert_eq!(super::resolve(template, base).as_deref(), Ok(resolved), "{template}");
        }
        assert!(super::resolve("http://[::1/s", "http://h").is_err());
    }

    #[test]
    fn escaping() {
        assert_eq!(
            super::html_escape("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }
}
