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
//!
//! Those tasks are bounded (a permit of a shared [`Semaphore`] each): a replica that stalls
//! leaves one behind for every try given up on, each holding a connection, and past the bound
//! an exchange is dropped as it would have been without this module (its connection closes).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Semaphore;

/// `inner`, finished in the background (for at most `limit`, while `detached` has a permit)
/// when dropped before it is.
pub struct Detach<F: Future + Send + 'static>
where
    F::Output: Send,
{
    inner: Option<Pin<Box<F>>>,
    limit: Duration,
    detached: Arc<Semaphore>,
}

impl<F: Future + Send + 'static> Detach<F>
where
    F::Output: Send,
{
    pub fn new(inner: F, limit: Duration, detached: &Arc<Semaphore>) -> Self {
        Detach { inner: Some(Box::pin(inner)), limit, detached: Arc::clone(detached) }
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
        // Full: dropped here, and its connection closes.
        let Ok(permit) = Arc::clone(&self.detached).try_acquire_owned() else { return };
        let limit = self.limit;
        runtime.spawn(async move {
            let _ = tokio::time::timeout(limit, inner).await;
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

    /// Sets its flag when dropped.
    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Relaxed);
        }
    }

    /// A future that never ends, and whether it has been dropped.
    fn endless() -> (impl Future<Output = ()> + Send + 'static, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = Flag(Arc::clone(&dropped));
        let future = async move {
            let _flag = flag;
            std::future::pending::<()>().await
        };
        (future, dropped)
    }

    /// Polls `detach` once (it does not end), then drops it.
    fn start_and_drop<F: Future<Output = ()> + Send + 'static>(detach: Detach<F>) {
        let mut detach = Box::pin(detach);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(detach.as_mut().poll(&mut cx).is_pending());
    }

    /// Past the bound an abandoned exchange is dropped at once; within it, it is finished
    /// until its limit and its place is given back.
    #[tokio::test(start_paused = true)]
    async fn abandoned_exchanges_are_finished_up_to_the_bound() {
        let detached = Arc::new(Semaphore::new(2));
        let running = || 2 - detached.available_permits();
        let mut flags = Vec::new();
        for _ in 0..3 {
            let (future, dropped) = endless();
            // Started, then abandoned.
            start_and_drop(Detach::new(future, Duration::from_secs(5), &detached));
            flags.push(dropped);
        }
        tokio::task::yield_now().await;
        assert_eq!(running(), 2);
        let dropped: Vec<bool> = flags.iter().map(|f| f.load(Relaxed)).collect();
        assert_eq!(dropped, [false, false, true], "the third is over the bound");
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(running(), 0, "finished at their limit");
        assert!(flags.iter().all(|f| f.load(Relaxed)));
        // Room again.
        let (future, dropped) = endless();
        start_and_drop(Detach::new(future, Duration::from_secs(5), &detached));
        tokio::task::yield_now().await;
        assert_eq!((running(), dropped.load(Relaxed)), (1, false));
    }
}
