//! Finishing a replica exchange that nobody waits for any more, so its connection is kept.
//!
//! The aggregator drops tries it no longer needs: the loser of a hedge, a try overtaken by a
//! retry, everything still running at the deadline, and every ask of a request whose client
//! went away (the page aborts its request at each keystroke). hyper closes a connection whose
//! response future is dropped before the answer is read, so each of those cost a connection:
//! reopened for the next try, and left in TIME_WAIT on this side for a minute. At a few
//! hundred abandoned tries a second per replica that runs out of ephemeral ports, just when a
//! slow partition makes tries be abandoned. [`Detach`] instead hands an exchange it is dropped
//! in the middle of to a task of its own, which reads the answer (within a time limit) and
//! returns the connection to the pool.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// `inner`, finished in the background (for at most `limit`) when dropped before it is.
pub struct Detach<F: Future + Send + 'static>
where
    F::Output: Send,
{
    inner: Option<Pin<Box<F>>>,
    limit: Duration,
}

impl<F: Future + Send + 'static> Detach<F>
where
    F::Output: Send,
{
    pub fn new(inner: F, limit: Duration) -> Self {
        Detach { inner: Some(Box::pin(inner)), limit }
    }
}

impl<F: Future + Send + 'static> Future for Detach<F>
where
    F::Output: Send,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(inner) = self.inner.as_mut() else {
            panic!("Detach polled after it completed");
        };
        let output = std::task::ready!(inner.as_mut().poll(cx));
        self.inner = None;
        Poll::Ready(output)
    }
}

impl<F: Future + Send + 'static> Drop for Detach<F>
where
    F::Output: Send,
{
    fn drop(&mut self) {
        let (Some(inner), Ok(runtime)) = (self.inner.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let limit = self.limit;
        runtime.spawn(async move {
            let _ = tokio::time::timeout(limit, inner).await;
        });
    }
}
