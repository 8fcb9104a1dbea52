//! One replica of one partition: where it listens, what it reported at its last probe, and
//! the load and failures the aggregator's own tries saw. [`super::Backends`] reads and updates
//! these (the fields are the `backends` module's, not the aggregator's); everyone else asks the
//! questions below.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize};

// Tokio's clock, as everywhere in `backends`: ejection is tested under paused time.
use tokio::time::Instant;

use super::{Range, lock};
use crate::aggregator::latency::Latency;

/// One replica of one partition.
#[derive(Debug)]
pub struct Replica {
    /// Where it listens.
    pub addr: SocketAddr,
    pub(super) in_flight: AtomicUsize,
    pub(super) latency: Latency,
    pub(super) failures: AtomicU32,
    pub(super) ejected_until: Mutex<Option<Instant>>,
    /// Snapshots it reported loaded, current first.
    pub(super) versions: Mutex<Vec<Loaded>>,
    /// A version it was asked for and answered from another one, since its last probe: not
    /// asked for again until a probe reports it (it is healthy, so not ejected, and without
    /// this it would be picked first, and answer wrong, on every request).
    pub(super) answered_other: Mutex<Option<String>>,
    /// Version of the blocklist it reported applying, with the release it reported running:
    /// what its answers depend on besides the snapshot. Replicas of one partition on two
    /// releases (a rolling upgrade) may answer alike requests differently, as on two lists:
    /// answers are then neither cached nor tagged, and the epoch (in ETags and cache keys)
    /// moves once the upgrade is through, so no answer of the old release is revalidated.
    pub(super) answers_by: Mutex<Option<String>>,
    /// The key range it reported serving.
    pub(super) range: Mutex<Option<Range>>,
    /// The partition it is grouped under ([`super::UNASSIGNED`]: none yet).
    pub(super) partition: AtomicUsize,
    /// Whether the last probe reached it.
    pub(super) answering: AtomicBool,
    /// Probes in a row that did not reach it.
    pub(super) missed_probes: AtomicU32,
}

/// A snapshot a replica reported loaded.
#[derive(Debug, Clone)]
pub(super) struct Loaded {
    pub(super) version: String,
    /// The largest `k` it answers exactly from it (0: not reported).
    pub(super) max_k: usize,
}

impl Replica {
    pub(super) fn new(addr: SocketAddr, partition: usize) -> Self {
        Replica {
            addr,
            in_flight: AtomicUsize::new(0),
            latency: Latency::default(),
            failures: AtomicU32::new(0),
            ejected_until: Mutex::new(None),
            versions: Mutex::new(Vec::new()),
            answered_other: Mutex::new(None),
            answers_by: Mutex::new(None),
            range: Mutex::new(None),
            partition: AtomicUsize::new(partition),
            answering: AtomicBool::new(false),
            missed_probes: AtomicU32::new(0),
        }
    }

    /// The snapshot versions it reported loaded, current first.
    pub fn versions(&self) -> Vec<String> {
        lock(&self.versions).iter().map(|l| l.version.clone()).collect()
    }

    /// The key range it reported serving.
    pub fn range(&self) -> Option<Range> {
        lock(&self.range).clone()
    }

    pub(super) fn ejected(&self, now: Instant) -> bool {
        lock(&self.ejected_until).is_some_and(|until| now < until)
    }

    /// Whether the replica reported `version` loaded (`None`: it has not reported yet).
    pub fn has_version(&self, version: &str) -> Option<bool> {
        if lock(&self.answered_other).as_deref() == Some(version) {
            return Some(false);
        }
        let versions = lock(&self.versions);
        (!versions.is_empty()).then(|| versions.iter().any(|l| l.version == version))
    }

    /// Whether it is serving traffic (not ejected).
    pub fn healthy(&self) -> bool {
        !self.ejected(Instant::now())
    }

    /// Whether the last probe reached it. Ejection takes several failures, and until then
    /// a replica that just died still looks healthy with the versions it reported.
    pub fn answering(&self) -> bool {
        self.answering.load(Relaxed)
    }

    /// Whether it serves `version`: the last probe reached it, it is not ejected, and it has
    /// that version loaded. What a generation switch, readiness, the fallback and the
    /// `typeahead_serving_replicas` gauge all count. ("Not ejected" alone is also true of a
    /// replica never reached, or one that just died still holding the versions it reported,
    /// since ejection takes three failures.)
    pub fn serves(&self, version: &str) -> bool {
        self.healthy() && self.answering() && self.has_version(version) == Some(true)
    }
}
