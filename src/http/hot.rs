//! Answers sent before routing.
//!
//! A suggestion costs a map lookup when it is cached and a few microseconds when it is not,
//! but reaching it through the router costs about a microsecond more: axum clones each route's
//! boxed service per request (two of them where the admission layer wraps a route), and every
//! layer moves the request and its future into the next. Those, not the answer, were most of
//! what a cached `/v1/suggest` cost beyond `/healthz` (docs/performance.md, "Cached answers
//! sent before routing"). [`Front`] sits in front of the router and asks a [`Hot`] lookup
//! first; only what it declines goes the long way.
//!
//! The short way keeps the long way's rules by calling the same code, never a copy of it:
//! - it takes a place from the same [`AdmissionLayer`] (none free: the router sheds the
//!   request);
//! - [`super::end_request`] gives the answer the headers every response gets and counts it
//!   under its route, as [`super::record`] does;
//! - it answers only `GET`s of its one path without a body or a declared length, with a URI
//!   [`super::size_limits`] would pass; anything else (a preflight, `HEAD`, an oversized or
//!   unusual request) goes through the router, as does every request its lookup declines
//!   (the server's declines invalid parameters: the route writes the error).
//!
//! A lookup computes and never waits, so the request timeout cannot concern its answer, as it
//! cannot a route's answer made in the route's first poll.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::Response;
use futures_util::future::Either;
use tower::Service;

use super::admission::AdmissionLayer;
use crate::metrics::{self, HttpMetrics};

/// A lookup that answers a request at once, or declines it.
pub type Lookup = Arc<dyn Fn(&Uri, &HeaderMap) -> Option<Response> + Send + Sync>;

/// The one path a [`Front`] answers before routing, and how.
#[derive(Clone)]
pub struct Hot {
    path: &'static str,
    route: usize,
    lookup: Lookup,
    admission: AdmissionLayer,
    metrics: Arc<HttpMetrics>,
}

impl std::fmt::Debug for Hot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hot").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Hot {
    /// `GET path` answered by `lookup` when it can, inside `admission`'s limit, counted in
    /// `metrics` under the path's route.
    pub fn new(
        path: &'static str,
        lookup: Lookup,
        admission: AdmissionLayer,
        metrics: Arc<HttpMetrics>,
    ) -> Hot {
        let route = metrics::route_index(Some(path));
        Hot { path, route, lookup, admission, metrics }
    }

    fn answer<B>(&self, request: &Request<B>) -> Option<Response> {
        if request.method() != Method::GET || request.uri().path() != self.path {
            return None;
        }
        let headers = request.headers();
        let has_body = headers.contains_key(header::CONTENT_LENGTH)
            || headers.contains_key(header::TRANSFER_ENCODING);
        if super::uri_too_long(request.uri()) || has_body {
            return None;
        }
        let _place = self.admission.admit()?;
        // Timed from here, where `record` times from before the size limits and admission:
        // the difference is a few nanoseconds of checks.
        let started = Instant::now();
        let _in_flight = self.metrics.in_flight();
        let mut response = (self.lookup)(request.uri(), headers)?;
        super::end_request(&self.metrics, self.route, started, &mut response);
        Some(response)
    }
}

/// A router with a [`Hot`] path in front of it.
#[derive(Clone, Debug)]
pub struct Front {
    router: Router,
    // Behind one pointer: hyper clones the service for every request.
    hot: Option<Arc<Hot>>,
}

impl Front {
    /// `router`, with `hot` asked first when there is one.
    pub fn new(router: Router, hot: Option<Hot>) -> Front {
        Front { router, hot: hot.map(Arc::new) }
    }

    /// The answer to `request` without routing, if it has one.
    pub(crate) fn answer_before_routing<B>(&self, request: &Request<B>) -> Option<Response> {
        self.hot.as_ref().and_then(|hot| hot.answer(request))
    }
}

impl From<Router> for Front {
    fn from(router: Router) -> Front {
        Front::new(router, None)
    }
}

impl<B> Service<Request<B>> for Front
where
    B: HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, <Router as Service<Request>>::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<Request>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if let Some(response) = self.answer_before_routing(&request) {
            return Either::Left(ready(Ok(response)));
        }
        Either::Right(self.router.call(request.map(Body::new)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use axum::routing::any;
    use tower::ServiceExt;

    use crate::metrics::Registry;

    /// A front whose router answers every request 418 ("routed"), behind an admission limit
    /// of `max`, and whose lookup answers "hot" unless the query is `decline`; with the count
    /// of lookups made and the metrics.
    fn front(max: usize) -> (Front, Arc<AtomicUsize>, Registry) {
        let metrics = Arc::new(HttpMetrics::default());
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let admission = AdmissionLayer::new(max, Duration::from_secs(5));
        let routed = || async { (StatusCode::IM_A_TEAPOT, "routed") };
        let router = Router::new().route("/v1/suggest", any(routed)).layer(admission.clone());
        let looked = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&looked);
        let lookup: Lookup = Arc::new(move |uri, _| {
            count.fetch_add(1, Ordering::Relaxed);
            (uri.query() != Some("decline")).then(|| "hot".into_response())
        });
        let hot = Hot::new("/v1/suggest", lookup, admission, metrics);
        (Front::new(router, Some(hot)), looked, registry)
    }

    async fn send(front: &Front, request: Request) -> (u16, String, Response) {
        let response = front.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let (parts, body) = response.into_parts();
        let body = axum::body::to_bytes(body, 1 << 16).await.unwrap();
        let body = String::from_utf8_lossy(&body).into_owned();
        (status, body, Response::from_parts(parts, Body::empty()))
    }

    fn get(uri: &str) -> Request {
        Request::get(uri).body(Body::empty()).unwrap()
    }

    #[tokio::test]
    async fn a_hot_answer_gets_the_routes_headers_and_is_counted() {
        let (front, looked, registry) = front(1);
        for _ in 0..2 {
            let (status, body, response) = send(&front, get("/v1/suggest?q=a")).await;
            assert_eq!((status, body.as_str()), (200, "hot"));
            let headers = response.headers();
            assert_eq!(headers["x-content-type-options"], "nosniff");
            assert_eq!(headers["access-control-allow-origin"], "*");
        }
        assert_eq!(looked.load(Ordering::Relaxed), 2);
        let text = metrics::encode(&registry).unwrap();
        let line = "typeahead_requests_total{route=\"suggest\",status=\"200\"} 2";
        assert!(text.lines().any(|l| l == line), "{text}");
        assert!(text.lines().any(|l| l == "typeahead_in_flight_requests 0"), "{text}");
    }

    #[tokio::test]
    async fn everything_else_goes_through_the_router() {
        let (front, looked, _) = front(1);
        let long = format!("/v1/suggest?q={}", "a".repeat(super::super::MAX_URI_BYTES));
        let requests = [
            get("/v1/suggest?decline"),
            get("/v1/suggest/?q=a"),
            get(&long),
            Request::head("/v1/suggest?q=a").body(Body::empty()).unwrap(),
            Request::options("/v1/suggest?q=a").body(Body::empty()).unwrap(),
            Request::post("/v1/suggest?q=a").body(Body::from("x")).unwrap(),
            Request::get("/v1/suggest?q=a")
                .header("content-length", "0")
                .body(Body::empty())
                .unwrap(),
            Request::get("/v1/suggest?q=a")
                .header("transfer-encoding", "chunked")
                .body(Body::empty())
                .unwrap(),
        ];
        for request in requests {
            let what = format!("{} {}", request.method(), request.uri());
            let (status, _, _) = send(&front, request).await;
            assert_ne!(status, 200, "{what}");
        }
        assert_eq!(looked.load(Ordering::Relaxed), 1, "only the declined request was looked up");
    }

    /// No place free: the request is not looked up, and the router sheds it.
    #[tokio::test]
    async fn a_full_listener_sheds_hot_answers_too() {
        let (front, looked, _) = front(0);
        let (status, body, _) = send(&front, get("/v1/suggest?q=a")).await;
        assert_eq!(status, 503);
        assert!(body.contains("\"overloaded\""), "{body}");
        assert_eq!(looked.load(Ordering::Relaxed), 0);
    }
}
