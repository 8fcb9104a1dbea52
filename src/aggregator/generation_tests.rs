//! The aggregator's generation switch against a model. Random steps announce manifests (a
//! rollback is an announcement of the active generation again), let
//! replicas load versions, take replicas down and up, and run probe rounds; after every round
//! the active generation must be what the rule says: a pending generation becomes active once
//! every partition has its version loaded on at least one healthy replica that the last probe
//! reached, as it reported (a replica is unhealthy after `eject_after` failed probes in a row,
//! until one succeeds).

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use super::Generations;
use super::backends::{Backends, Policy};
use super::fake::{Behaviour, Fake, addr};
use crate::manifest::{MANIFEST_FORMAT, Manifest, Partition};
use crate::metrics::AggregatorMetrics as Metrics;

const PARTITIONS: usize = 2;
const REPLICAS: usize = 2;
const GENERATIONS: [&str; 3] = ["a", "b", "c"];

/// Partition `p`'s snapshot version in generation `g`.
fn version(g: usize, p: usize) -> String {
    format!("{}{p}", GENERATIONS[g])
}

fn manifest(g: usize) -> Manifest {
    let partitions = (0..PARTITIONS)
        .map(|p| Partition {
            index: p,
            start: if p == 0 { String::new() } else { "m".into() },
            end: (p == 0).then(|| "m".into()),
            file: Partition::file_name(p, &version(g, p)),
            bytes: 1,
            checksum: version(g, p),
            keys: 1,
        })
        .collect();
    Manifest {
        format: MANIFEST_FORMAT,
        generation: GENERATIONS[g].into(),
        created_unix: 0,
        watermark_hour: None,
        partitions,
        rules: None,
    }
}

#[derive(Debug, Clone)]
enum Step {
    /// The builder published generation `g`; the aggregator read its manifest.
    Announce(usize),
    /// Replica `r` loaded its partition's file of generation `g` (keeping its previous one).
    Load(usize, usize),
    /// Replica `r` stops answering / answers again.
    Down(usize),
    Up(usize),
    /// A probe round, then the switch decision.
    Probe,
}

fn step() -> impl Strategy<Value = Step> {
    let replicas = PARTITIONS * REPLICAS;
    prop_oneof![
        1 => (0..GENERATIONS.len()).prop_map(Step::Announce),
        3 => (0..replicas, 0..GENERATIONS.len()).prop_map(|(r, g)| Step::Load(r, g)),
        1 => (0..replicas).prop_map(Step::Down),
        1 => (0..replicas).prop_map(Step::Up),
        3 => Just(Step::Probe),
    ]
}

/// What the rules say, per replica and for the aggregator.
#[derive(Debug)]
struct Model {
    active: usize,
    pending: Option<usize>,
    /// Per replica: answering now, versions loaded now, versions last reported, failed
    /// probes since its last answer (a probe that reaches it ends an ejection, but only an
    /// answered request clears its failures), ejected.
    up: Vec<bool>,
    loaded: Vec<Vec<String>>,
    reported: Vec<Option<Vec<String>>>,
    failures: Vec<u32>,
    ejected: Vec<bool>,
}

impl Model {
    fn probe(&mut self, eject_after: u32) {
        for r in 0..self.up.len() {
            if self.up[r] {
                self.reported[r] = Some(self.loaded[r].clone());
                self.ejected[r] = false;
            } else {
                self.failures[r] += 1;
                self.ejected[r] |= self.failures[r] >= eject_after;
            }
        }
        let Some(g) = self.pending else { return };
        let everywhere = (0..PARTITIONS).all(|p| {
            (p * REPLICAS..(p + 1) * REPLICAS).any(|r| {
                self.up[r]
                    && !self.ejected[r]
                    && self.reported[r].as_ref().is_some_and(|v| v.contains(&version(g, p)))
            })
        });
        if everywhere {
            self.active = g;
            self.pending = None;
        }
    }
}

/// A paused clock and `PARTITIONS` x `REPLICAS` answering replicas reporting `versions`.
fn world(versions: &[&str]) -> (tokio::runtime::Runtime, Fake, Arc<Backends<Fake>>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let fake = Fake::new(&[Behaviour::Answers(Duration::ZERO); PARTITIONS * REPLICAS], versions);
    let addrs =
        (0..PARTITIONS).map(|p| (p * REPLICAS..(p + 1) * REPLICAS).map(addr).collect()).collect();
    let backends = Arc::new(Backends::with_transport(
        addrs,
        Policy::default(),
        Arc::new(Metrics::default()),
        fake.clone(),
    ));
    (runtime, fake, backends)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn the_active_generation_follows_the_rule(steps in proptest::collection::vec(step(), 1..40)) {
        let (runtime, fake, backends) = world(&[]);
        let replicas = PARTITIONS * REPLICAS;
        let partition_of = |r: usize| r / REPLICAS;
        for r in 0..replicas {
            fake.set(r, |x| x.versions = vec![version(0, partition_of(r))]);
        }
        let policy = Policy::default();
        let generations = Generations::new(manifest(0));
        let mut model = Model {
            active: 0,
            pending: None,
            up: vec![true; replicas],
            loaded: (0..replicas).map(|r| vec![version(0, partition_of(r))]).collect(),
            reported: vec![None; replicas],
            failures: vec![0; replicas],
            ejected: vec![false; replicas],
        };
        for step in steps {
            match step {
                Step::Announce(g) => {
                    generations.announce(manifest(g), PARTITIONS);
                    // The manifest names the one generation to switch to: the active one
                    // again (a rollback) leaves nothing pending.
                    model.pending = (g != model.active).then_some(g);
                }
                Step::Load(r, g) => {
                    let new = version(g, partition_of(r));
                    let loaded = &mut model.loaded[r];
                    // A server keeps the version it served as the previous one; loading the
                    // version it already serves changes nothing.
                    if loaded[0] != new {
                        *loaded = vec![new, loaded[0].clone()];
                    }
                    let now = loaded.clone();
                    fake.set(r, |x| x.versions = now);
                }
                Step::Down(r) => {
                    model.up[r] = false;
                    fake.set(r, |x| x.behaviour = Behaviour::Fails(Duration::ZERO));
                }
                Step::Up(r) => {
                    model.up[r] = true;
                    fake.set(r, |x| x.behaviour = Behaviour::Answers(Duration::ZERO));
                }
                Step::Probe => {
                    runtime.block_on(backends.probe_all());
                    generations.switch_if_ready(&backends);
                    model.probe(policy.eject_after);
                }
            }
            prop_assert_eq!(&generations.active().generation, GENERATIONS[model.active]);
            prop_assert_eq!(
                generations.pending().map(|m| m.generation.clone()),
                model.pending.map(|g| GENERATIONS[g].to_owned())
            );
        }
    }
}

/// The blocklist epoch after one probe round.
fn probed_epoch(runtime: &tokio::runtime::Runtime, backends: &Arc<Backends<Fake>>) -> Arc<String> {
    runtime.block_on(backends.probe_all());
    backends.blocklist_epoch()
}

/// The blocklist epoch that keys cached answers changes whenever any replica's blocklist
/// version does, also with a replica down on the old version: as a set of versions it read
/// {old, new} both while the change spread and after it, so answers cached in between (from a
/// replica still on the old list) were served until they expired.
#[test]
fn the_blocklist_epoch_follows_every_replica_with_one_down() {
    let (runtime, fake, backends) = world(&["a0"]);
    let replicas = PARTITIONS * REPLICAS;
    let probe = || probed_epoch(&runtime, &backends);
    probe();
    fake.set(0, |x| x.blocklist = "b1".into());
    let spreading = probe();
    // Down after one probe on the old list: missed one probe only, so not yet silent (which
    // alone would change the epoch), and the set of versions is {b0, b1} before and after.
    fake.set(replicas - 1, |x| x.behaviour = Behaviour::Fails(Duration::ZERO));
    for r in 1..replicas - 1 {
        fake.set(r, |x| x.blocklist = "b1".into());
    }
    let applied = probe();
    assert_ne!(spreading, applied);
}

/// A blocklist changed and changed back gives a new epoch, not the first one again: answers
/// cached (and ETags sent) under the first may come from replicas already on the second list
/// (a probe round trails them), and would show what the second one unblocked once the first
/// list is back. Unchanged reports keep the epoch, so the cache is not emptied every round.
#[test]
fn a_blocklist_changed_back_never_brings_an_earlier_epoch_back() {
    let (runtime, fake, backends) = world(&["a0"]);
    let probe = || probed_epoch(&runtime, &backends);
    let set_all = |version: &str| {
        for r in 0..PARTITIONS * REPLICAS {
            fake.set(r, |x| x.blocklist = version.into());
        }
    };
    let first = probe();
    assert_eq!(probe(), first, "nothing changed");
    set_all("b1");
    let changed = probe();
    set_all("b0");
    let back = probe();
    assert!(back != first && back != changed, "{first} {changed} {back}");
    let (other_runtime, _, other_process) = world(&["a0"]);
    let other = probed_epoch(&other_runtime, &other_process);
    assert_ne!(other, back, "another process, the same reports");
}

/// A replica that answered on the old list, then took the change but stopped answering probes
/// before reporting it: its last report is stale, so answers cached meanwhile must not outlive
/// the change. The epoch changes once a replica has missed two probes in a row (one, on a
/// loaded replica, must not empty the cache), and again when it is back; it used to keep the
/// stale report until the entries expired.
#[test]
fn the_blocklist_epoch_changes_when_a_replica_stops_answering() {
    let (runtime, fake, backends) = world(&["a0"]);
    let probe = || probed_epoch(&runtime, &backends);
    fake.set(0, |x| x.blocklist = "b1".into());
    let spreading = probe();
    fake.set(1, |x| {
        x.blocklist = "b1".into();
        x.behaviour = Behaviour::Fails(Duration::ZERO);
    });
    assert_eq!(probe(), spreading, "one missed probe changes nothing");
    let silent = probe();
    assert_ne!(spreading, silent, "answers cached while replica 1 held the old list stay");
    fake.set(1, |x| x.behaviour = Behaviour::Answers(Duration::ZERO));
    assert_ne!(probe(), silent);
}

/// While the replicas of one partition report different blocklists (a change spreading, or a
/// `PUT /admin/blocklist` to one replica only), answers are not cached: the cache kept
/// whichever replica answered first, and an audit got a blocked term in 30 answers of 30 while
/// the other replica hid it. Replicas of different partitions, or one that stopped answering
/// probes, do not count; agreeing again (on any list), answers are cached again. One that
/// answers without saying which list it holds counts as disagreeing.
#[test]
fn answers_are_not_cached_while_a_partition_s_replicas_disagree_on_the_blocklist() {
    let (runtime, fake, backends) = world(&["a0"]);
    let probe = || runtime.block_on(backends.probe_all());
    probe();
    assert!(backends.lists_agree(), "every replica on b0");
    fake.set(0, |x| x.blocklist = "b1".into());
    probe();
    assert!(!backends.lists_agree(), "replica 0 on b1, its twin on b0");
    for r in 0..REPLICAS {
        fake.set(r, |x| x.blocklist = "b1".into());
    }
    probe();
    assert!(backends.lists_agree(), "partition 0 on b1, the others on b0");
    fake.set(REPLICAS, |x| x.blocklist = "b2".into());
    probe();
    assert!(!backends.lists_agree(), "partition 1 split");
    fake.set(REPLICAS, |x| x.behaviour = Behaviour::Fails(Duration::ZERO));
    probe();
    probe();
    assert!(backends.lists_agree(), "a silent replica's last report does not count");
    // Back, and answering without saying which list it holds: it may hold any.
    fake.set(REPLICAS, |x| {
        x.behaviour = Behaviour::Answers(Duration::ZERO);
        x.blocklist = String::new();
    });
    probe();
    assert!(!backends.lists_agree(), "a replica whose list is unknown");
    // A 200 that is no readiness report (a proxy's page) is no answer: a failed probe, so the
    // replica's last report (b2 here) counts until it is silent, as after any failed probe.
    fake.set(REPLICAS, |x| x.blocklist = "b2".into());
    probe();
    assert!(!backends.lists_agree(), "b2 against its twin's b0");
    fake.set(REPLICAS, |x| x.garbled_readyz = true);
    probe();
    assert!(!backends.replicas(1)[0].answering(), "a garbled /readyz is a failed probe");
    assert!(!backends.lists_agree(), "one failed probe: its last report still counts");
    probe();
    assert!(backends.lists_agree(), "silent: its last report no longer counts");
}

/// Replicas of one partition on two releases (a rolling upgrade) may answer alike requests
/// differently, as on two blocklists: answers are neither cached nor tagged meanwhile, and the
/// epoch (in ETags and cache keys) moves once the upgrade is through, so an answer of the old
/// release is never revalidated. The aggregator's own release alone said nothing of theirs.
#[test]
fn a_rolling_upgrade_of_the_replicas_moves_the_epoch() {
    let (runtime, fake, backends) = world(&["a0"]);
    let probe = || runtime.block_on(backends.probe_all());
    probe();
    assert!(backends.lists_agree());
    let before = backends.blocklist_epoch();
    fake.set(0, |x| x.release = "r2".into());
    probe();
    assert!(!backends.lists_agree(), "replica 0 on r2, its twin on r1");
    for r in 0..PARTITIONS * REPLICAS {
        fake.set(r, |x| x.release = "r2".into());
    }
    probe();
    assert!(backends.lists_agree(), "every replica on r2");
    assert_ne!(backends.blocklist_epoch(), before, "a new epoch for the new release");
}

/// `k` is capped by the snapshots an answer comes from, not by the replicas' current ones:
/// mid-rollout, replicas serve a generation built with a larger `--top-k` while the aggregator
/// still answers from the one before, whose servers answer at most its `max_k` each, and a
/// larger `k` would merge a made-up tail. It used to take the current snapshots' `max_k`.
#[test]
fn k_is_capped_by_the_snapshots_answered_from() {
    let (runtime, fake, backends) = world(&[]);
    assert_eq!(backends.max_k(&manifest(0)), crate::snapshot::DEFAULT_TOP_K, "nothing reported");
    for r in 0..PARTITIONS * REPLICAS {
        let p = r / REPLICAS;
        fake.set(r, |x| {
            x.versions = vec![version(1, p), version(0, p)];
            x.max_k = [20, 5];
        });
    }
    // One replica answers 8 from the new generation: the smallest report counts.
    fake.set(1, |x| x.max_k = [8, 5]);
    runtime.block_on(backends.probe_all());
    assert_eq!(backends.max_k(&manifest(0)), 5, "the previous generation, pinned");
    assert_eq!(backends.max_k(&manifest(1)), 8, "the current one");
    // None reported for any of its snapshots: the smallest reported for any other stands in.
    assert_eq!(backends.max_k(&manifest(2)), 5, "none holds it");
    // Servers of an older release report no `max_k` for the snapshot they keep: the smallest
    // reported for any snapshot stands in for it.
    for r in 0..PARTITIONS * REPLICAS {
        fake.set(r, |x| x.max_k = [20, 0]);
    }
    fake.set(1, |x| x.max_k = [8, 0]);
    runtime.block_on(backends.probe_all());
    assert_eq!(backends.max_k(&manifest(0)), 8);
}
