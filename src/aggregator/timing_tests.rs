//! Replica picking, hedging, per-try timeouts, deadlines and ejection, on tokio's paused
//! clock: each replica is an in-memory [`Transport`] that answers after a set delay, so every
//! assertion is about exact times and exact calls, not about a loaded machine's wall clock.
//! (The same behaviour against real processes: `tests/it/cluster.rs`.)

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, advance};

use super::backends::{BackendError, Backends, Policy};
use super::fake::{Behaviour as Replica, Fake, addr, index};
use super::latency::DECAY_HALF_LIFE;
use crate::metrics::AggregatorMetrics as Metrics;

/// The production defaults, which the times asserted below follow.
fn policy() -> Policy {
    let policy = Policy::default();
    assert_eq!((policy.try_timeout, policy.hedge_after), (50 * MS, 10 * MS));
    assert_eq!((policy.eject_after, policy.eject_for), (3, Duration::from_secs(2)));
    assert_eq!((policy.hedge_budget, policy.hedge_burst), (0.1, 10));
    assert_eq!((policy.retry_budget, policy.retry_burst), (0.2, 20));
    policy
}

/// One partition whose replicas behave as given; the fake world to change and inspect.
fn partition(replicas: &[Replica]) -> (Arc<Backends<Fake>>, Fake, Arc<Metrics>) {
    partition_with(replicas, policy())
}

fn partition_with(
    replicas: &[Replica],
    policy: Policy,
) -> (Arc<Backends<Fake>>, Fake, Arc<Metrics>) {
    let fake = Fake::new(replicas, &["v1"]);
    let metrics = Arc::new(Metrics::default());
    let addrs = (0..replicas.len()).map(addr).collect();
    let backends = Backends::with_transport(vec![addrs], policy, metrics.clone(), fake.clone());
    (Arc::new(backends), fake, metrics)
}

/// Asks the partition with a deadline `deadline` from now: the outcome, which replica
/// answered, and how long it took.
async fn ask(
    b: &Arc<Backends<Fake>>,
    deadline: Duration,
) -> (Result<usize, BackendError>, Duration) {
    let started = Instant::now();
    let outcome = b.ask(0, "/v1/suggest?q=a&version=v1", "v1", 10, started + deadline).await;
    let by = outcome.map(|a| index(a.suggestions[0].text.parse().unwrap()));
    (by, started.elapsed())
}

fn calls(fake: &Fake) -> Vec<(Duration, usize)> {
    fake.world.lock().unwrap().calls.iter().map(|(t, a)| (*t, index(*a))).collect()
}

const MS: Duration = Duration::from_millis(1);
const DEADLINE: Duration = Duration::from_millis(100);

#[tokio::test(start_paused = true)]
async fn a_replica_that_answers_before_the_hedge_is_asked_alone() {
    let (b, fake, metrics) = partition(&[Replica::Answers(2 * MS), Replica::Answers(2 * MS)]);
    assert_eq!(ask(&b, DEADLINE).await, (Ok(0), 2 * MS), "ties go to the first in rotation");
    assert_eq!(calls(&fake), [(Duration::ZERO, 0)]);
    assert_eq!(metrics.hedges.get(), 0);
}

/// A partition asked once the deadline has passed (the second round of a request whose first
/// took it all) is not asked at all: a try sent then would be dropped at once and left to
/// finish in the background, load for nothing.
#[tokio::test(start_paused = true)]
async fn nothing_is_sent_past_the_deadline() {
    let (b, fake, _) = partition(&[Replica::Answers(2 * MS), Replica::Answers(2 * MS)]);
    // Many times: `ask` polls its branches in random order, so a try launched anyway would
    // reach the replica about every other time.
    for _ in 0..20 {
        let outcome = b.ask(0, "/v1/suggest?q=a", "v1", 10, Instant::now()).await;
        assert!(matches!(outcome, Err(BackendError::Deadline)), "{outcome:?}");
    }
    assert_eq!(calls(&fake), []);
}

/// An answer from another snapshot than the one asked for (a replica behind something that
/// drops `version=`) is not taken: merged, it would mix generations. The replica is healthy,
/// so that counts as no failure; the next one is asked at once, and the replica is not asked
/// for that version again until a probe says it holds it.
#[tokio::test(start_paused = true)]
async fn an_answer_of_another_version_is_not_taken() {
    let (b, fake, metrics) = partition(&[Replica::Answers(2 * MS), Replica::Answers(2 * MS)]);
    fake.set(0, |r| r.answers_from = Some("v0".into()));
    assert_eq!(ask(&b, DEADLINE).await, (Ok(1), 4 * MS), "replica 1, after replica 0's answer");
    assert_eq!(calls(&fake), [(Duration::ZERO, 0), (2 * MS, 1)]);
    for _ in 0..3 {
        assert_eq!(ask(&b, DEADLINE).await, (Ok(1), 2 * MS), "straight to replica 1");
    }
    assert_eq!(calls(&fake).len(), 2 + 3);
    assert_eq!((metrics.backend_errors.get(), metrics.ejections.get()), (0, 0), "no failure");
    // A probe reporting the version makes it a candidate again.
    fake.set(0, |r| r.answers_from = None);
    b.probe_all().await;
    let asked: Vec<usize> = {
        let before = calls(&fake).len();
        for _ in 0..4 {
            assert!(ask(&b, DEADLINE).await.0.is_ok());
        }
        calls(&fake)[before..].iter().map(|c| c.1).collect()
    };
    assert!(asked.contains(&0), "never asked again after the probe: {asked:?}");
}

/// A replica without the pinned version answers 409, as a server does: healthy, so no
/// failure; the next replica is asked at once.
#[tokio::test(start_paused = true)]
async fn a_409_moves_on_at_once_without_a_failure() {
    let (b, fake, metrics) = partition(&[Replica::Answers(2 * MS), Replica::Answers(2 * MS)]);
    fake.set(0, |r| r.versions = vec!["v0".into()]);
    assert_eq!(ask(&b, DEADLINE).await, (Ok(1), 4 * MS));
    assert_eq!(calls(&fake), [(Duration::ZERO, 0), (2 * MS, 1)]);
    assert_eq!((metrics.backend_errors.get(), metrics.ejections.get()), (0, 0), "no failure");
}

#[tokio::test(start_paused = true)]
async fn a_slow_try_is_hedged_after_hedge_after_and_the_first_answer_wins() {
    let (b, fake, metrics) = partition(&[Replica::Answers(40 * MS), Replica::Answers(2 * MS)]);
    assert_eq!(ask(&b, DEADLINE).await, (Ok(1), 12 * MS), "hedged at 10 ms, answered 2 ms later");
    assert_eq!(calls(&fake), [(Duration::ZERO, 0), (10 * MS, 1)]);
    assert_eq!(metrics.hedges.get(), 1);
}

/// When every replica is slow (as under overload) every ask passes the hedge delay, but only
/// the budget's share of them is hedged: the burst at once, then one per ten asks.
#[tokio::test(start_paused = true)]
async fn hedges_stay_within_the_budget_when_every_replica_is_slow() {
    let slow = [Replica::Answers(40 * MS), Replica::Answers(40 * MS)];
    let (b, fake, metrics) = partition_with(&slow, Policy { hedge_burst: 2, ..policy() });
    let mut hedged_asks = Vec::new();
    for n in 1..=30 {
        let before = metrics.hedges.get();
        assert_eq!(ask(&b, DEADLINE).await.1, 40 * MS, "ask {n}: the first try answers");
        if metrics.hedges.get() > before {
            hedged_asks.push(n);
        }
    }
    // Two from the burst; then each ask earns a tenth of a hedge.
    assert_eq!(hedged_asks, [1, 2, 11, 21]);
    assert_eq!(metrics.hedges_skipped.get(), 26);
    assert_eq!(calls(&fake).len(), 30 + 4);
}

/// A try past its timeout keeps running, so the retry next to it adds load as a hedge does:
/// it spends from a budget (its own), and with none left, overload (every try late) is not
/// doubled. Neither budget is charged, nor a skip counted, when no other replica is left.
#[tokio::test(start_paused = true)]
async fn a_retry_after_a_timeout_spends_from_the_retry_budget() {
    let slow = [Replica::Answers(70 * MS), Replica::Answers(70 * MS)];
    let none = Policy { hedge_burst: 0, hedge_budget: 0.0, ..policy() };
    let (b, fake, metrics) =
        partition_with(&slow, Policy { retry_burst: 1, retry_budget: 0.0, ..none });
    for n in 1..=4 {
        assert_eq!(ask(&b, DEADLINE).await.1, 70 * MS, "ask {n}: the late first try answers");
    }
    let calls = calls(&fake);
    // The first ask's retry (at 50 ms) spends the only token; no later ask has a second try.
    assert_eq!(calls.len(), 4 + 1, "{calls:?}");
    // Each ask's hedge is skipped, and each later ask's retry.
    assert_eq!((metrics.hedges_skipped.get(), metrics.retries_skipped.get()), (4, 3));
}

/// A replica shedding load (503) is moved past at once, but the retry is charged to the
/// retry budget: when the whole fleet sheds, each shed ask must not come back as one per
/// replica. A replica that fails otherwise (refused connections) is retried free, as before.
#[tokio::test(start_paused = true)]
async fn a_retry_after_a_shed_try_spends_from_the_retry_budget() {
    let none = Policy { hedge_burst: 0, hedge_budget: 0.0, ..policy() };
    let one_retry = Policy { retry_burst: 1, retry_budget: 0.0, ..none };
    let busy = [Replica::Busy(Duration::ZERO), Replica::Busy(Duration::ZERO)];
    let (b, fake, metrics) = partition_with(&busy, one_retry.clone());
    for n in 1..=4 {
        assert_eq!(ask(&b, DEADLINE).await, (Err(BackendError::AllFailed), Duration::ZERO), "{n}");
    }
    // The first ask's retry spends the only token; each later ask is shed once, and left.
    assert_eq!(calls(&fake).len(), 2 + 3);
    assert_eq!(metrics.retries_skipped.get(), 3);
    let failing = [Replica::Fails(Duration::ZERO), Replica::Fails(Duration::ZERO)];
    let (b, fake, metrics) = partition_with(&failing, one_retry);
    for _ in 0..4 {
        assert_eq!(ask(&b, DEADLINE).await.0, Err(BackendError::AllFailed));
    }
    assert_eq!((calls(&fake).len(), metrics.retries_skipped.get()), (8, 0));
}

/// An answer of more suggestions than the `k` asked for (a broken replica, or something else
/// at its address) is not merged: the next replica is asked, and it counts as a failure.
#[tokio::test(start_paused = true)]
async fn an_answer_of_more_suggestions_than_asked_for_is_not_taken() {
    let (b, fake, metrics) = partition(&[Replica::Answers(MS), Replica::Answers(MS)]);
    let deadline = Instant::now() + DEADLINE;
    let outcome = b.ask(0, "/v1/suggest?q=a&version=v1", "v1", 0, deadline).await;
    assert_eq!(outcome.map(|_| ()), Err(BackendError::AllFailed));
    assert_eq!(calls(&fake).len(), 2, "each replica asked once");
    assert_eq!(metrics.backend_errors.get(), 2);
}

/// Hedges turned off (or spent) leave a stalled replica's failover alone: the retry past the
/// try timeout has its own budget.
#[tokio::test(start_paused = true)]
async fn a_stalled_replica_fails_over_at_the_try_timeout_without_hedges() {
    let replicas = [Replica::Answers(500 * MS), Replica::Answers(MS)];
    let (b, _, _) =
        partition_with(&replicas, Policy { hedge_burst: 0, hedge_budget: 0.0, ..policy() });
    assert_eq!(ask(&b, DEADLINE).await, (Ok(1), 51 * MS));
}

#[tokio::test(start_paused = true)]
async fn the_replica_with_the_lowest_expected_wait_takes_the_traffic() {
    // Both answer before the hedge; the estimates then decide: (in flight + 1) x latency.
    let (b, fake, _) = partition(&[Replica::Answers(8 * MS), Replica::Answers(MS)]);
    for _ in 0..20 {
        ask(&b, DEADLINE).await.0.unwrap();
    }
    let to: Vec<usize> = calls(&fake).iter().map(|c| c.1).collect();
    assert_eq!(&to[..2], [0, 1], "each is tried once while the estimates are equal");
    assert!(to[2..].iter().all(|&r| r == 1), "then the faster one only: {to:?}");
}

#[tokio::test(start_paused = true)]
async fn a_failed_try_moves_on_at_once_and_repeated_failures_eject() {
    let (b, fake, metrics) = partition(&[Replica::Fails(Duration::ZERO), Replica::Answers(MS)]);
    assert_eq!(ask(&b, DEADLINE).await, (Ok(1), MS), "the failure is retried at once");
    // A failure counts as a try_timeout-long try, so the picker avoids replica 0 until the
    // estimates fade; then the rotation offers it again, and it fails again.
    let mut failures = 1;
    for _ in 0..20 {
        if !b.replicas(0)[0].healthy() {
            break;
        }
        advance(DECAY_HALF_LIFE * 20).await;
        assert_eq!(ask(&b, DEADLINE).await.0, Ok(1));
        failures = calls(&fake).iter().filter(|c| c.1 == 0).count();
    }
    assert_eq!(failures, 3, "ejected after eject_after = 3 failures in a row");
    assert!(!b.replicas(0)[0].healthy());
    assert_eq!(metrics.ejections.get(), 1);
    // While ejected it gets nothing, however far its estimate fades.
    advance(Duration::from_millis(1_900)).await;
    for _ in 0..5 {
        assert_eq!(ask(&b, DEADLINE).await.0, Ok(1));
    }
    assert_eq!(calls(&fake).iter().filter(|c| c.1 == 0).count(), 3);
    // After eject_for it is offered traffic again; it has recovered, so it answers.
    fake.set(0, |r| r.behaviour = Replica::Answers(MS));
    advance(Duration::from_millis(100)).await;
    assert!(b.replicas(0)[0].healthy());
    let mut back = false;
    for _ in 0..5 {
        advance(DECAY_HALF_LIFE * 20).await;
        back |= ask(&b, DEADLINE).await.0 == Ok(0);
    }
    assert!(back, "the recovered replica answers again: {:?}", calls(&fake));
}

/// A replica whose `/readyz` answers and whose answers fail: each probe round ends its
/// ejection, but the failures stand, so the next failed try ejects it again at once.
#[tokio::test(start_paused = true)]
async fn a_probe_ends_an_ejection_but_not_the_failures_behind_it() {
    let (b, fake, _) = partition(&[Replica::FailsAnswers(Duration::ZERO), Replica::Answers(MS)]);
    let tries_on_0 = || calls(&fake).iter().filter(|c| c.1 == 0).count();
    let healthy = || b.replicas(0)[0].healthy();
    for _ in 0..4 {
        b.probe_all().await;
        assert!(healthy(), "the probe reached it");
        let before = tries_on_0();
        while tries_on_0() == before {
            advance(DECAY_HALF_LIFE * 20).await;
            assert_eq!(ask(&b, DEADLINE).await.0, Ok(1));
        }
        if tries_on_0() >= 3 {
            assert!(!healthy(), "failure {} in a row ejects it", tries_on_0());
        }
    }
    assert_eq!(tries_on_0(), 4, "one try between two probes: {:?}", calls(&fake));
}

#[tokio::test(start_paused = true)]
async fn a_try_past_its_timeout_still_answers_before_the_deadline() {
    // One replica, 70 ms: past the 50 ms try timeout (counted as a failure) but inside the
    // 100 ms deadline, so its answer is taken.
    let (b, _, metrics) = partition(&[Replica::Answers(70 * MS)]);
    assert_eq!(ask(&b, DEADLINE).await, (Ok(0), 70 * MS));
    assert_eq!(metrics.backend_errors.get(), 1);
}

/// A try that passes its timeout counts as one failure, and failing later (before the
/// deadline) does not count it again: two such tries would otherwise eject the replica.
#[tokio::test(start_paused = true)]
async fn a_timed_out_try_that_fails_later_counts_once() {
    let (b, _, metrics) = partition(&[Replica::Fails(70 * MS)]);
    assert_eq!(ask(&b, DEADLINE).await, (Err(BackendError::AllFailed), 70 * MS));
    assert_eq!(metrics.backend_errors.get(), 1);
    assert_eq!(ask(&b, DEADLINE).await.0, Err(BackendError::AllFailed));
    assert_eq!(metrics.backend_errors.get(), 2);
    assert!(b.replicas(0)[0].healthy(), "two failed requests are two failures, not four");
}

/// A replica that is down fails its probes: counted as probe failures, not as failed
/// requests, which an idle aggregator would otherwise report at one a second.
#[tokio::test(start_paused = true)]
async fn failed_probes_are_not_counted_as_failed_requests() {
    let (b, _, metrics) = partition(&[Replica::Fails(MS), Replica::Answers(MS)]);
    b.probe_all().await;
    b.probe_all().await;
    assert_eq!(metrics.probe_failures.get(), 2);
    assert_eq!(metrics.backend_errors.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn past_the_deadline_the_partition_is_left_out_exactly_then() {
    let (b, fake, _) = partition(&[Replica::Answers(500 * MS), Replica::Answers(500 * MS)]);
    assert_eq!(ask(&b, DEADLINE).await, (Err(BackendError::Deadline), DEADLINE));
    // The first try, its hedge at 10 ms; nothing else is left to try.
    assert_eq!(calls(&fake), [(Duration::ZERO, 0), (10 * MS, 1)]);
}

#[tokio::test(start_paused = true)]
async fn every_replica_failing_fails_at_once() {
    let (b, fake, _) = partition(&[Replica::Fails(MS), Replica::Fails(MS)]);
    assert_eq!(ask(&b, DEADLINE).await, (Err(BackendError::AllFailed), 2 * MS));
    assert_eq!(calls(&fake), [(Duration::ZERO, 0), (MS, 1)]);
}

#[tokio::test(start_paused = true)]
async fn probed_only_once_a_whole_probe_round_has_ended() {
    let (b, _fake, _) = partition(&[Replica::Answers(2 * MS), Replica::Answers(30 * MS)]);
    assert!(!b.probed(), "nothing is known before the first round");
    let round = tokio::spawn({
        let b = Arc::clone(&b);
        async move { b.probe_all().await }
    });
    advance(10 * MS).await;
    assert!(!b.probed(), "one replica has answered, the other not yet");
    round.await.unwrap();
    assert!(b.probed());
}
