//! Admission control for a listener: at most `max` requests in flight, each cut at a deadline.
//!
//! One tower layer instead of the four it replaces (tower's `GlobalConcurrencyLimit`,
//! `LoadShed` and `Timeout` under axum's `HandleError`). Those acquire a semaphore permit in
//! `poll_ready`, box the request's future and convert a boxed error back into a response on
//! every request; here admission is one atomic counter, the future is a plain enum, and the
//! timer is armed only for a request that has to wait for something (`Admitted::poll`). The
//! behaviour is theirs: a request over the limit is shed at once with 503 (never queued, so a
//! burst cannot build a backlog that outlives it), and one that takes longer than the timeout
//! is answered with 503 and its handler dropped.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep, sleep_until};
use tower::{Layer, Service};

use crate::error::ApiError;

/// The layer: one shared count of requests in flight for every route it wraps (a per-route
/// count would multiply the limit by the number of routes).
#[derive(Debug, Clone)]
pub struct AdmissionLayer {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    in_flight: AtomicUsize,
    max: usize,
    timeout: Duration,
}

impl AdmissionLayer {
    /// At most `max` requests at once, each answered within `timeout`.
    pub fn new(max: usize, timeout: Duration) -> AdmissionLayer {
        AdmissionLayer { shared: Arc::new(Shared { in_flight: AtomicUsize::new(0), max, timeout }) }
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Admission<S> {
        Admission { inner, shared: Arc::clone(&self.shared) }
    }
}

/// A service behind [`AdmissionLayer`].
#[derive(Debug, Clone)]
pub struct Admission<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Service<Request> for Admission<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Admitted<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let place = Place::take(&self.shared);
        if place.ahead >= self.shared.max {
            return Admitted::Shed;
        }
        let deadline = Instant::now() + self.shared.timeout;
        Admitted::Running { answer: self.inner.call(request), deadline, timer: None, _place: place }
    }
}

/// One of the places in flight, given back when the request ends: answered, timed out, or
/// dropped because its client went away.
#[derive(Debug)]
struct Place {
    shared: Arc<Shared>,
    /// Requests in flight when this one arrived.
    ahead: usize,
}

impl Place {
    fn take(shared: &Arc<Shared>) -> Place {
        let ahead = shared.in_flight.fetch_add(1, Ordering::AcqRel);
        Place { shared: Arc::clone(shared), ahead }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.shared.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

pin_project! {
    /// The answer of an [`Admission`] service.
    #[project = AdmittedProj]
    pub enum Admitted<F> {
        /// Admitted: the inner service's answer, cut at `deadline`.
        Running {
            #[pin]
            answer: F,
            deadline: Instant,
            // Armed only once the answer has made the request wait (see `poll`).
            timer: Option<Pin<Box<Sleep>>>,
            _place: Place,
        },
        /// Over the limit.
        Shed,
    }
}

impl<F> Future for Admitted<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            AdmittedProj::Running { answer, deadline, timer, .. } => {
                // The answer first, as tokio's `Timeout` does: one ready by the time it is
                // polled is never refused. Most are ready at the first poll (a server's
                // lookups never wait), and those need no timer at all: registering one in
                // tokio's timer wheel and removing it again was most of this layer's cost.
                if let Poll::Ready(answered) = answer.poll(cx) {
                    return Poll::Ready(answered);
                }
                let timer = timer.get_or_insert_with(|| Box::pin(sleep_until(*deadline)));
                ready!(timer.as_mut().poll(cx));
                Poll::Ready(Ok(ApiError::Timeout.into_response()))
            }
            AdmittedProj::Shed => Poll::Ready(Ok(ApiError::Overloaded.into_response())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    async fn slow(_: Request) -> Result<Response, Infallible> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok("late".into_response())
    }

    #[tokio::test(start_paused = true)]
    async fn sheds_past_the_limit_and_gives_places_back() {
        let layer = AdmissionLayer::new(1, Duration::from_secs(5));
        let service = layer.layer(tower::service_fn(slow));
        let first = tokio::spawn(service.clone().oneshot(Request::new(axum::body::Body::empty())));
        tokio::task::yield_now().await;
        let shed = service.clone().oneshot(Request::new(axum::body::Body::empty())).await;
        assert_eq!(shed.map(|r| r.status().as_u16()).ok(), Some(503));
        // The first times out at 5 s, which gives its place back.
        let timed_out = first.await.ok().and_then(Result::ok);
        assert_eq!(timed_out.map(|r| r.status().as_u16()), Some(503));
        assert_eq!(layer.shared.in_flight.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn a_dropped_request_gives_its_place_back() {
        let layer = AdmissionLayer::new(1, Duration::from_secs(5));
        let service = layer.layer(tower::service_fn(slow));
        let pending = service.clone().oneshot(Request::new(axum::body::Body::empty()));
        let within = tokio::time::timeout(Duration::from_millis(10), pending).await;
        assert!(within.is_err(), "the slow handler cannot have answered");
        assert_eq!(layer.shared.in_flight.load(Ordering::Acquire), 0);
    }
}
