//! One fan-out per missed answer: requests for an answer another request is already making
//! wait for it instead of sending their own.
//!
//! The aggregator's cache misses come in bursts of the same key: a new blocklist epoch or
//! generation empties the cache at once, and a hot prefix ("a", "face") is asked for by many
//! clients within the milliseconds its first fan-out takes. Without this each of them asked
//! every partition again, multiplying the load on the replicas at the moment the cache could
//! not absorb any of it.
//!
//! The first request for a key leads: it makes the answer itself, as a lone request would. The
//! others follow: they wait for the leader's answer, which they could not have made sooner (it
//! started first, with an earlier deadline). A leader dropped before it answers (its client went
//! away) leaves its followers to make the answer themselves, the first of them leading again;
//! the others then follow a leader that came after them, so each waits only until its own
//! deadline, and past it makes its answer alone (with no time left: a partial one, at once).

use std::future::Future;
use std::sync::{Mutex, PoisonError};

use hashbrown::HashMap;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::cache::Key;

/// Answers being made, by key.
#[derive(Debug)]
pub struct Coalesce<V> {
    making: Mutex<HashMap<Key, watch::Receiver<Option<V>>>>,
}

impl<V> Default for Coalesce<V> {
    fn default() -> Self {
        Coalesce { making: Mutex::new(HashMap::new()) }
    }
}

/// Whether an answer was made by this request or taken from another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// This request made it.
    Here,
    /// Another request, already making it, did.
    Joined,
}

/// A leader's claim on a key, given up when it ends, answered or dropped: the next request for
/// the key then leads. The claim is removed before the sender closes, so followers that see it
/// closed unanswered find no stale claim when they ask again.
struct Lead<'a, V> {
    key: Key,
    making: &'a Mutex<HashMap<Key, watch::Receiver<Option<V>>>>,
    sender: watch::Sender<Option<V>>,
}

impl<V> Drop for Lead<'_, V> {
    fn drop(&mut self) {
        self.making.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.key);
    }
}

/// What a request does about a key: make the answer, or wait for the one being made.
enum Role<'a, V> {
    Lead(Lead<'a, V>),
    Follow(watch::Receiver<Option<V>>),
}

impl<V: Clone> Coalesce<V> {
    /// The answer for `key`: made by `make` here, unless another request is making it and
    /// answers by `deadline` (this request's).
    pub async fn get<F, Fut>(&self, key: Key, deadline: Instant, make: F) -> (V, Made)
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = V>,
    {
        let lead = loop {
            match self.role(&key) {
                Role::Lead(lead) => break Some(lead),
                Role::Follow(mut receiver) => {
                    let waited =
                        tokio::time::timeout_at(deadline, receiver.wait_for(Option::is_some));
                    match waited.await {
                        Ok(Ok(value)) => {
                            if let Some(value) = value.clone() {
                                return (value, Made::Joined);
                            }
                        }
                        // The leader was dropped unanswered: lead, or follow a new leader.
                        Ok(Err(_)) => {}
                        // A leader that came after this request would answer past its deadline.
                        Err(_) => break None,
                    }
                }
            }
        };
        let value = make().await;
        if let Some(lead) = lead {
            lead.sender.send_replace(Some(value.clone()));
        }
        (value, Made::Here)
    }

    /// Claims `key`, or finds who has (the lock is held only here, never across an await).
    fn role(&self, key: &Key) -> Role<'_, V> {
        let mut making = self.making.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(receiver) = making.get(key) {
            return Role::Follow(receiver.clone());
        }
        let (sender, receiver) = watch::channel(None);
        making.insert(key.clone(), receiver);
        Role::Lead(Lead { key: key.clone(), making: &self.making, sender })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::time::Duration;

    fn key(text: &str) -> Key {
        Key::new(&["v"], text, 10)
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    /// Ten requests for one key while its answer takes 10 ms: one makes it, nine take it; a
    /// request for another key makes its own.
    #[tokio::test(start_paused = true)]
    async fn concurrent_requests_for_one_key_make_it_once() {
        let coalesce = Arc::new(Coalesce::<u32>::default());
        let made = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for i in 0..11 {
            let (coalesce, made) = (Arc::clone(&coalesce), Arc::clone(&made));
            let text = if i == 10 { "b" } else { "a" };
            tasks.push(tokio::spawn(async move {
                coalesce
                    .get(key(text), far(), || async {
                        made.fetch_add(1, Relaxed);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        if text == "a" { 1 } else { 2 }
                    })
                    .await
            }));
        }
        let mut joined = 0;
        for (i, task) in tasks.into_iter().enumerate() {
            let (value, how) = task.await.unwrap();
            assert_eq!(value, if i == 10 { 2 } else { 1 });
            joined += usize::from(how == Made::Joined);
        }
        assert_eq!(made.load(Relaxed), 2, "one answer per key");
        assert_eq!(joined, 9);
        assert!(coalesce.making.lock().unwrap().is_empty(), "claims outlived their answers");
        // Once made, the next request makes its own (the cache, not this, keeps answers).
        let (value, how) = coalesce.get(key("a"), far(), || async { 3 }).await;
        assert_eq!((value, how), (3, Made::Here));
    }

    /// A request leading on "a" that answers 1 after `takes`.
    fn leading(
        coalesce: &Arc<Coalesce<u32>>,
        takes: Duration,
    ) -> tokio::task::JoinHandle<(u32, Made)> {
        let coalesce = Arc::clone(coalesce);
        tokio::spawn(async move {
            let make = || async {
                tokio::time::sleep(takes).await;
                1
            };
            coalesce.get(key("a"), far(), make).await
        })
    }

    /// A leader whose request is dropped before it answers (its client went away) does not
    /// leave its followers waiting: one of them makes the answer.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_leader_hands_over_to_a_follower() {
        let coalesce = Arc::new(Coalesce::<u32>::default());
        let leader = leading(&coalesce, Duration::from_secs(3600));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let follower = {
            let coalesce = Arc::clone(&coalesce);
            tokio::spawn(async move { coalesce.get(key("a"), far(), || async { 2 }).await })
        };
        tokio::time::sleep(Duration::from_millis(1)).await;
        leader.abort();
        let answer = tokio::time::timeout(Duration::from_secs(1), follower).await;
        assert_eq!(answer.expect("the follower still waits").unwrap(), (2, Made::Here));
        assert!(coalesce.making.lock().unwrap().is_empty());
    }

    /// A follower waits for a slower leader only until its own deadline, then makes its answer
    /// alone (the leader, here one that came after it, answers later still).
    #[tokio::test(start_paused = true)]
    async fn a_follower_waits_only_until_its_own_deadline() {
        let coalesce = Arc::new(Coalesce::<u32>::default());
        let leader = leading(&coalesce, Duration::from_secs(1));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let started = Instant::now();
        let deadline = started + Duration::from_millis(100);
        let answer = coalesce.get(key("a"), deadline, || async { 2 }).await;
        assert_eq!(answer, (2, Made::Here));
        assert_eq!(started.elapsed(), Duration::from_millis(100));
        assert_eq!(leader.await.unwrap(), (1, Made::Here), "the leader is not disturbed");
    }
}
