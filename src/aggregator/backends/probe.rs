//! Probing the replicas: what each reports at `/readyz` (versions, key range, blocklist and
//! release), and what the aggregator derives from a round of reports (the cache epoch, each
//! snapshot's largest `k`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::time::Duration;

use tokio::task::JoinSet;

use super::replica::Loaded;
use super::{Backends, MAX_READINESS_BYTES, Replica, Transport, UNASSIGNED, epoch_token, lock};

/// Probes in a row a replica must miss before the cache epoch counts it as silent: one probe
/// past its timeout on a loaded replica must not empty the cache when it is needed most.
const SILENT_AFTER: u32 = 2;

impl<T: Transport> Backends<T> {
    /// Recomputes [`Backends::max_k`]'s table after a probe round: per snapshot version, the
    /// smallest `max_k` any replica reported for it (replicas of one release agree).
    fn update_max_ks(&self) {
        let mut known: HashMap<String, usize> = HashMap::new();
        for replica in self.members() {
            for loaded in lock(&replica.versions).iter().filter(|l| l.max_k > 0) {
                let k = known.entry(loaded.version.clone()).or_insert(loaded.max_k);
                *k = (*k).min(loaded.max_k);
            }
        }
        if **self.max_ks.load() != known {
            self.max_ks.store(Arc::new(known));
        }
    }

    /// Per replica, not the set of versions: with a replica down on the old version (it keeps
    /// what it last reported), the set during a change ({old, new}) was the set after it, so
    /// answers cached while a replica still served the old list outlived the change. (A new
    /// member, a restarted pod's address, changes it too: a cache flush, the price of never
    /// keying an answer by a list some replica answering it may not hold.) Whether probes
    /// reach the replica is part of it: one that stops answering them ([`SILENT_AFTER`] in a
    /// row) may have taken a change it could not report, and what it answered before must not
    /// outlive that.
    ///
    /// Each change gives a new token, never one used before, even when the reports are those
    /// of an earlier epoch (a blocklist changed back, a silent replica back): a probe round
    /// trails the replicas, so answers cached (and ETags sent) under an epoch may have come
    /// from replicas already on the next list, and changed back, a term unblocked in between
    /// would come back from the cache and in 304s. The count starts at the process's start
    /// time, so tokens of an earlier process are not reused either.
    fn update_epoch(&self) {
        let mut lists: HashMap<usize, String> = HashMap::new();
        let mut agree = true;
        let mut versions: Vec<String> = Vec::new();
        for r in &self.members() {
            let silent = r.missed_probes.load(Relaxed) >= SILENT_AFTER;
            let partition = r.partition.load(Relaxed);
            let Some(list) = lock(&r.answers_by).clone() else {
                // Answering, and its list unknown (a release that does not report it): what
                // it answers may hold what the others block, so nothing is kept for everyone.
                agree &= partition == UNASSIGNED || silent || !r.answering();
                continue;
            };
            if partition != UNASSIGNED && !silent {
                agree &= *lists.entry(partition).or_insert_with(|| list.clone()) == list;
            }
            let up = if silent { "silent" } else { "up" };
            versions.push(format!("{} {list} {up}", r.addr));
        }
        self.lists_agree.store(agree, Relaxed);
        versions.sort();
        let digest = crate::http::digest(&versions);
        let mut source = lock(&self.epoch_source);
        if source.0 != digest {
            source.1 = source.1.wrapping_add(1);
            self.epoch.store(Arc::new(epoch_token(&digest, source.1)));
            source.0 = digest;
        }
    }

    /// Sets the version each partition is answered from (the active generation's), which
    /// the probes name: a replica keeps that version loaded through its reloads while no
    /// probe pins the newer one it serves ([`crate::store::Store::pin`]).
    pub fn answer_from(&self, manifest: &crate::manifest::Manifest) {
        let versions: Vec<String> =
            manifest.partitions.iter().map(|p| p.checksum.clone()).collect();
        if **self.answered_from.load() != versions {
            self.answered_from.store(Arc::new(versions));
        }
    }

    /// Asks every replica's `/readyz` which versions and range it has loaded, naming the
    /// version its partition is answered from. A replica that answers is no longer ejected
    /// (this is how an ejected one is probed back).
    pub async fn probe_all(self: &Arc<Self>) {
        let mut probes = JoinSet::new();
        let answered_from = self.answered_from.load_full();
        for replica in self.members() {
            let me = Arc::clone(self);
            let path = match answered_from.get(replica.partition.load(Relaxed)) {
                // Written into the path as the asks write theirs (`routes::Merged::ask`).
                Some(version) => format!("/readyz?version={version}"),
                None => "/readyz".to_owned(),
            };
            probes.spawn(async move {
                let outcome = tokio::time::timeout(
                    Duration::from_millis(500),
                    me.transport.get(replica.addr, &path, MAX_READINESS_BYTES),
                )
                .await;
                // A 200 whose body is no readiness report says nothing of what the replica
                // holds (its versions, its blocklist): as good as no answer.
                let ready = match outcome {
                    Ok(Ok((200, body))) => {
                        serde_json::from_slice::<crate::api::Readiness>(&body).ok()
                    }
                    _ => None,
                };
                match ready {
                    Some(ready) => {
                        let current = ready.version.map(|v| (v, ready.max_k));
                        let previous = (ready.previous_version)
                            .map(|v| (v, ready.previous_max_k.unwrap_or(0)));
                        *lock(&replica.versions) = current
                            .into_iter()
                            .chain(previous)
                            .map(|(version, max_k)| Loaded { version, max_k })
                            .collect();
                        *lock(&replica.answered_other) = None;
                        *lock(&replica.answers_by) = ready.blocklist_version.map(|list| {
                            ready.release.map_or_else(|| list.clone(), |r| format!("{list} {r}"))
                        });
                        *lock(&replica.range) = ready.range.map(|r| (r.start, r.end));
                        replica.answering.store(true, Relaxed);
                        replica.missed_probes.store(0, Relaxed);
                        me.probed_back(&replica);
                    }
                    None => {
                        replica.answering.store(false, Relaxed);
                        replica.missed_probes.fetch_add(1, Relaxed);
                        me.probe_failed(&replica);
                    }
                }
            });
        }
        while probes.join_next().await.is_some() {}
        self.update_epoch();
        self.update_max_ks();
        // Release, paired with `probed`'s Acquire: whoever sees the round done also sees what it
        // recorded (versions, ranges, the epoch).
        self.probed.store(true, Release);
    }

    /// A probe reached it: an ejection ends (a restarted replica gets traffic at once), but its
    /// failures in a row stand, since `/readyz` answering says nothing of its answers: one more
    /// failed try ejects it again, not three more between every two probe rounds.
    fn probed_back(&self, replica: &Replica) {
        *lock(&replica.ejected_until) = None;
    }

    /// A probe of `replica` failed: counted apart from requests (a dead replica fails a probe a
    /// second with no traffic at all), and towards its ejection as a failed try is.
    fn probe_failed(&self, replica: &Replica) {
        self.metrics.probe_failures.inc();
        self.count_failure(replica);
    }
}
