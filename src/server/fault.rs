//! Fault injection for tests, benchmarks and demos (`serve --inject-delay-ms`): a layer that
//! delays suggestion answers, so hedging, deadlines and a page facing a slow server can be
//! exercised against the real binary. It lives outside the serving state and the handlers, and
//! is not mounted at all unless asked for.

use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;

/// Faults to inject; the default injects none.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Added to every `/v1/suggest` answer.
    pub suggest_delay: Duration,
}

impl Faults {
    /// Whether no fault is injected.
    pub fn is_none(&self) -> bool {
        self.suggest_delay.is_zero()
    }

    /// `router` with the faults mounted (unchanged when there are none), inside the request
    /// limits: a delayed answer still meets the request timeout and counts as in flight.
    pub fn mount<S: Clone + Send + Sync + 'static>(self, router: Router<S>) -> Router<S> {
        if self.is_none() {
            return router;
        }
        router.layer(middleware::from_fn_with_state(self.suggest_delay, delay_suggestions))
    }
}

async fn delay_suggestions(
    State(delay): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path() == super::routes::SUGGEST {
        tokio::time::sleep(delay).await;
    }
    next.run(request).await
}
