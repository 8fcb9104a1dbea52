//! Asking one partition: picking a replica, hedging, retrying and timing each try, and
//! counting what failed towards ejection.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
// Tokio's clock: tests run picking, hedging, timeouts and ejection under paused time.
use tokio::time::Instant;

use super::{BackendError, Backends, Replica, Transport, answer_limit, lock};
use crate::api::SuggestResponse;

/// What one try asks a replica: the request path, the snapshot version the answer must be
/// from, and the most suggestions it may hold.
#[derive(Clone, Copy)]
struct Asked<'a> {
    path: &'a str,
    version: &'a str,
    max_items: usize,
}

/// Whether a try without an answer was refused by a replica shedding load (503).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Busy {
    Yes,
    No,
}

/// One try on one replica, counted in flight and timed until it ends — however it ends: a try
/// aborted because another replica won (or the deadline passed) must not leave its replica
/// looking busy, and the time it ran says how slow the replica was.
struct Try<'a> {
    replica: &'a Replica,
    started: Instant,
    /// `None` while it runs: a try dropped before it ended was aborted.
    ended: Option<Ended>,
}

#[derive(Clone, Copy)]
enum Ended {
    /// An answer (or a 409): the time it took is the replica's latency.
    Answered,
    /// A failure counts as taking at least this long, so a replica that refuses connections at
    /// once does not look fast.
    Failed(Duration),
}

impl<'a> Try<'a> {
    fn enter(replica: &'a Replica) -> Self {
        replica.in_flight.fetch_add(1, Relaxed);
        Try { replica, started: Instant::now(), ended: None }
    }
}

impl Drop for Try<'_> {
    fn drop(&mut self) {
        self.replica.in_flight.fetch_sub(1, Relaxed);
        let ran = self.started.elapsed();
        let latency = &self.replica.latency;
        match self.ended {
            Some(Ended::Answered) => latency.record(ran),
            Some(Ended::Failed(penalty)) => latency.record(ran.max(penalty)),
            // Lost to a hedge 0.3 ms after it was sent, a try says only that this replica
            // takes at least 0.3 ms: it may raise the estimate, never lower it.
            None => latency.record_at_least(ran),
        }
    }
}

impl<T: Transport> Backends<T> {
    /// The best replica of `replicas` to try next: not yet tried, not ejected, known to have
    /// `version` if any replica reported it, lowest expected wait (in flight x recent
    /// latency), ties in rotation.
    fn pick(&self, replicas: &[Arc<Replica>], version: &str, tried: &[usize]) -> Option<usize> {
        let now = Instant::now();
        let open: Vec<usize> = (0..replicas.len()).filter(|i| !tried.contains(i)).collect();
        let live: Vec<usize> =
            open.iter().copied().filter(|&i| !replicas[i].ejected(now)).collect();
        // When every untried replica is ejected, try one anyway: better than no answer.
        let pool = if live.is_empty() { open } else { live };
        let with_version: Vec<usize> = pool
            .iter()
            .copied()
            .filter(|&i| replicas[i].has_version(version) != Some(false))
            .collect();
        let pool = if with_version.is_empty() { pool } else { with_version };
        if pool.is_empty() {
            return None;
        }
        // Start the scan at a rotating offset so that equally loaded replicas take turns.
        let start = self.next.fetch_add(1, Relaxed) % pool.len();
        let cost = |i: usize| replicas[i].latency.cost(replicas[i].in_flight.load(Relaxed));
        pool.iter()
            .cycle()
            .skip(start)
            .take(pool.len())
            .map(|&i| (i, cost(i)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }

    /// Asks one partition, hedging and retrying across its replicas until `deadline`.
    ///
    /// A try that passes the per-try timeout counts as a failure and makes room for another
    /// replica, but it keeps running: its answer is still taken if it comes before the deadline.
    /// Cutting it would turn "one replica down, the other briefly stalled" into a partial answer
    /// although the stalled one answers in time.
    ///
    /// An answer of more than `max_items` suggestions (the `k` asked for) is no answer: a
    /// replica that sends one is broken or is not what the backends list says, and merged, its
    /// items would be kept for everyone.
    pub async fn ask(
        self: &Arc<Self>,
        partition: usize,
        path: &str,
        version: &str,
        max_items: usize,
        deadline: Instant,
    ) -> Result<SuggestResponse, BackendError> {
        // Past the deadline a try would be dropped at once, and finished in the background.
        if Instant::now() >= deadline {
            return Err(BackendError::Deadline);
        }
        // One view of the partition's replicas for the whole request: indexes stay valid.
        let replicas = self.replicas(partition);
        self.hedge_budget.earn();
        self.retry_budget.earn();
        let mut tried: Vec<usize> = Vec::new();
        // Tries not yet past their timeout: replica index and when the timeout falls.
        let mut timing: Vec<(usize, Instant)> = Vec::new();
        // Per replica: its try passed the timeout, which counted as its failure; the same try
        // failing later must not count again (two slow requests would eject it, not three).
        let counted: Vec<AtomicBool> = replicas.iter().map(|_| AtomicBool::new(false)).collect();
        // Polled by this task, not spawned: a spawned try cost a task and, as often as not, a
        // wake-up of another worker thread per request. Dropping the set aborts what still runs.
        let mut tries = FuturesUnordered::new();
        // Sends a try to replica `i` (picked by the caller, which may first charge a budget).
        let launch = |i: usize,
                      tried: &mut Vec<usize>,
                      timing: &mut Vec<(usize, Instant)>,
                      tries: &mut FuturesUnordered<_>| {
            tried.push(i);
            timing.push((i, Instant::now() + self.policy.try_timeout));
            let (replica, counted) = (&replicas[i], &counted[i]);
            tries.push(async move {
                let asked = Asked { path, version, max_items };
                self.try_once(replica, asked, counted).await.map_err(|busy| (i, busy))
            });
        };
        let Some(first) = self.pick(&replicas, version, &tried) else {
            return Err(BackendError::AllFailed);
        };
        launch(first, &mut tried, &mut timing, &mut tries);
        let mut hedged = false;
        loop {
            let hedge = tokio::time::sleep(self.policy.hedge_after);
            let timeout = timing.iter().map(|t| t.1).min();
            tokio::select! {
                done = tries.next() => match done {
                    Some(Ok(answer)) => return Ok(answer),
                    Some(Err((i, busy))) => {
                        timing.retain(|t| t.0 != i);
                        match self.pick(&replicas, version, &tried) {
                            // A replica shedding load says the fleet may be overloaded: the
                            // retry is charged, or every shed ask came back as R asks.
                            Some(next) if busy == Busy::No || self.retry_budget.spend() => {
                                launch(next, &mut tried, &mut timing, &mut tries);
                            }
                            Some(_) => {
                                self.metrics.retries_skipped.inc();
                            }
                            None => {}
                        }
                        if tries.is_empty() {
                            return Err(BackendError::AllFailed);
                        }
                    }
                    None => return Err(BackendError::AllFailed),
                },
                () = hedge, if !hedged => {
                    hedged = true;
                    // Only a hedge that has a replica to go to is charged (or counted skipped).
                    if let Some(next) = self.pick(&replicas, version, &tried) {
                        if self.hedge_budget.spend() {
                            launch(next, &mut tried, &mut timing, &mut tries);
                            self.metrics.hedges.inc();
                        } else {
                            self.metrics.hedges_skipped.inc();
                        }
                    }
                }
                () = tokio::time::sleep_until(timeout.unwrap_or(deadline)),
                    if timeout.is_some() =>
                {
                    let now = Instant::now();
                    let (late, on_time): (Vec<_>, Vec<_>) = timing.iter().partition(|t| t.1 <= now);
                    timing = on_time;
                    for (i, _) in late {
                        tracing::debug!(replica = %replicas[i].addr, "try timed out");
                        counted[i].store(true, Relaxed);
                        self.failed(&replicas[i]);
                        // The late try keeps running, so another one next to it adds load as a
                        // hedge does, and overload (every try late) is when it would add most.
                        if let Some(next) = self.pick(&replicas, version, &tried) {
                            if self.retry_budget.spend() {
                                launch(next, &mut tried, &mut timing, &mut tries);
                            } else {
                                self.metrics.retries_skipped.inc();
                            }
                        }
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Err(BackendError::Deadline);
                }
            }
        }
    }

    /// One request to one replica, bounded only by the caller (`ask` stops waiting at the
    /// deadline, which aborts it); records the outcome (a failure only when `counted` does not
    /// say the caller already counted this try's timeout). An error: no answer from this
    /// replica, and whether it was shedding load.
    async fn try_once(
        &self,
        replica: &Replica,
        asked: Asked<'_>,
        counted: &AtomicBool,
    ) -> Result<SuggestResponse, Busy> {
        let Asked { path, version, max_items } = asked;
        let failed = || {
            if !counted.load(Relaxed) {
                self.failed(replica);
            }
        };
        let mut attempt = Try::enter(replica);
        let outcome = self.transport.get(replica.addr, path, answer_limit(max_items)).await;
        attempt.ended = Some(if matches!(outcome, Ok((200 | 409, _))) {
            Ended::Answered
        } else {
            Ended::Failed(self.policy.try_timeout)
        });
        drop(attempt);
        match outcome {
            Ok((200, body)) => match serde_json::from_slice::<SuggestResponse>(&body) {
                // Answered from another snapshot than the one asked for (`version=` ignored: a
                // proxy, another release): merged, it would mix generations. Healthy, though,
                // so not a failure, as a 409 is not: the next replica is asked.
                Ok(answer) if answer.version != version => {
                    // Once per probe interval at most: until a probe, it is not asked again.
                    tracing::warn!(replica = %replica.addr, asked = version, answered = %answer.version, "answer of another version");
                    *lock(&replica.answered_other) = Some(version.to_owned());
                    Err(Busy::No)
                }
                Ok(answer) if answer.suggestions.len() > max_items => {
                    let items = answer.suggestions.len();
                    tracing::warn!(replica = %replica.addr, items, max_items, "answer of more suggestions than asked for");
                    failed();
                    Err(Busy::No)
                }
                Ok(answer) => {
                    self.succeeded(replica);
                    Ok(answer)
                }
                Err(e) => {
                    tracing::debug!(replica = %replica.addr, error = %e, "unreadable answer");
                    failed();
                    Err(Busy::No)
                }
            },
            // The replica is healthy but does not have the pinned version (yet, or any more).
            Ok((409, _)) => Err(Busy::No),
            // Shedding load (its admission control's answer, or its request timeout): a
            // failure as any other, but the caller charges the retry it makes.
            Ok((503, _)) => {
                tracing::debug!(replica = %replica.addr, "replica busy");
                failed();
                Err(Busy::Yes)
            }
            Ok((status, _)) => {
                tracing::debug!(replica = %replica.addr, status, "try failed");
                failed();
                Err(Busy::No)
            }
            Err(e) => {
                tracing::debug!(replica = %replica.addr, error = %e, "try failed");
                failed();
                Err(Busy::No)
            }
        }
    }

    fn succeeded(&self, replica: &Replica) {
        replica.failures.store(0, Relaxed);
        *lock(&replica.ejected_until) = None;
    }

    /// A try on `replica` failed: counted, and it is ejected after enough in a row.
    fn failed(&self, replica: &Replica) {
        self.metrics.backend_errors.inc();
        self.count_failure(replica);
    }

    pub(super) fn count_failure(&self, replica: &Replica) {
        let failures = replica.failures.fetch_add(1, Relaxed) + 1;
        if failures >= self.policy.eject_after {
            let mut until = lock(&replica.ejected_until);
            if until.is_none_or(|u| u <= Instant::now()) {
                self.metrics.ejections.inc();
                tracing::warn!(replica = %replica.addr, failures, "replica ejected");
            }
            *until = Some(Instant::now() + self.policy.eject_for);
        }
    }
}
