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
use tokio::task::{Unconstrained, unconstrained};
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

    /// A listener's limit and timeout ([`super::Limits`]).
    pub fn for_limits(limits: &super::Limits) -> AdmissionLayer {
        AdmissionLayer::new(limits.max_concurrency, limits.request_timeout)
    }

    /// A place for a request answered without this layer's service (one that never waits,
    /// so needs no timeout), or `None` when every place is taken.
    pub(crate) fn admit(&self) -> Option<Place> {
        Place::take(&self.shared)
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
        let Some(place) = Place::take(&self.shared) else {
            return Admitted::Shed;
        };
        let deadline = Instant::now() + self.shared.timeout;
        Admitted::Running { answer: self.inner.call(request), deadline, timer: None, _place: place }
    }
}

/// One of the places in flight, given back when the request ends: answered, timed out, or
/// dropped because its client went away.
#[derive(Debug)]
pub(crate) struct Place {
    shared: Arc<Shared>,
}

impl Place {
    /// A place if one is free. Counted only when taken: were shed requests counted too, even
    /// for a moment, one arriving while others were being shed could be refused a free place.
    fn take(shared: &Arc<Shared>) -> Option<Place> {
        let taken = shared.in_flight.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < shared.max).then_some(n + 1)
        });
        taken.ok().map(|_| Place { shared: Arc::clone(shared) })
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
            timer: Option<Pin<Box<Unconstrained<Sleep>>>>,
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
                // Outside the task's budget, as tokio's `Timeout` polls its delay: a handler
                // that spends the budget on every poll must not keep the timer from firing.
                let timer =
                    timer.get_or_insert_with(|| Box::pin(unconstrained(sleep_until(*deadline))));
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

    fn request() -> Request {
        Request::new(axum::body::Body::empty())
    }

    async fn slow(_: Request) -> Result<Response, Infallible> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok("late".into_response())
    }

    async fn error_code(response: Response) -> (u16, String) {
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap_or_default();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    fn in_flight(layer: &AdmissionLayer) -> usize {
        layer.shared.in_flight.load(Ordering::Acquire)
    }

    #[tokio::test(start_paused = true)]
    async fn sheds_past_the_limit_at_once_and_times_out_at_the_deadline() {
        let layer = AdmissionLayer::new(1, Duration::from_secs(5));
        let service = layer.layer(tower::service_fn(slow));
        let started = Instant::now();
        let first = tokio::spawn(service.clone().oneshot(request()));
        tokio::task::yield_now().await;
        assert_eq!(in_flight(&layer), 1);
        let shed = service.clone().oneshot(request()).await.map(IntoResponse::into_response);
        let (status, body) = error_code(shed.unwrap()).await;
        assert_eq!((status, started.elapsed()), (503, Duration::ZERO), "shed at once");
        assert!(body.contains("\"overloaded\""), "{body}");
        assert_eq!(in_flight(&layer), 1, "a shed request takes no place");

        let timed_out = first.await.ok().and_then(Result::ok).map(IntoResponse::into_response);
        let (status, body) = error_code(timed_out.unwrap()).await;
        assert_eq!((status, started.elapsed()), (503, Duration::from_secs(5)));
        assert!(body.contains("\"timeout\""), "{body}");
        assert_eq!(in_flight(&layer), 0, "the timed-out request gave its place back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_woken_and_waiting_again_is_still_cut_at_the_deadline() {
        async fn restless(_: Request) -> Result<Response, Infallible> {
            loop {
                tokio::time::sleep(Duration::from_millis(700)).await;
            }
        }
        let layer = AdmissionLayer::new(4, Duration::from_secs(2));
        let started = Instant::now();
        let answer = layer.layer(tower::service_fn(restless)).oneshot(request()).await;
        let (status, body) = error_code(answer.unwrap()).await;
        assert_eq!((status, started.elapsed()), (503, Duration::from_secs(2)));
        assert!(body.contains("\"timeout\""), "{body}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_ready_at_once_needs_no_timer_and_keeps_its_place_until_done() {
        let layer = AdmissionLayer::new(1, Duration::from_secs(5));
        let service = layer.layer(tower::service_fn(|_: Request| async {
            Ok::<_, Infallible>("now".into_response())
        }));
        for _ in 0..3 {
            let (status, body) =
                error_code(service.clone().oneshot(request()).await.unwrap()).await;
            assert_eq!((status, body.as_str()), (200, "now"));
        }
        assert_eq!(in_flight(&layer), 0);
    }

    #[tokio::test]
    async fn a_dropped_request_gives_its_place_back() {
        let layer = AdmissionLayer::new(1, Duration::from_secs(5));
        let service = layer.layer(tower::service_fn(slow));
        let mut pending = Box::pin(service.clone().oneshot(request()));
        let polled = pending.as_mut().poll(&mut Context::from_waker(std::task::Waker::noop()));
        assert!(polled.is_pending(), "the slow handler cannot have answered");
        assert_eq!(in_flight(&layer), 1);
        drop(pending);
        assert_eq!(in_flight(&layer), 0);
    }
}
