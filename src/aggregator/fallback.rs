//! Where a new aggregator starts when the live generation is loaded nowhere yet.
//!
//! An aggregator starts on the generation the live manifest names and is ready once every
//! partition of it is served ([`super::Shared::ready`]). Running aggregators switch to a new
//! generation only once it is served everywhere, so when the replicas cannot load the newest
//! one (a partition file that fails verification, or one larger than a server's memory) the
//! fleet goes on serving the generation before it. A new aggregator (a restart, a scale-out, a
//! rollout of the aggregators) would wait for the live one for as long as that lasts: unready,
//! it adds no capacity, and once every aggregator has been replaced the service is down
//! although every replica is serving.
//!
//! So until it has been ready once, an aggregator looks for the newest kept generation that
//! every partition has loaded on some replica it reached, starts on it, and keeps the live one
//! pending, as an aggregator that had been running all along would. Kept generations are
//! `generations/*/manifest.json` beside the live manifest, in a directory and in a bucket alike
//! (a generation's own manifest is written once it has been live: an incomplete one has none).

use std::sync::Arc;

use super::Shared;
use super::backends::Backends;
use crate::manifest::{MAX_MANIFEST_BYTES, Manifest};
use crate::remote::Location;

/// How many of the newest kept generations are looked at (the builder keeps 3 by default).
const LOOKED_AT: usize = 8;

/// Once the replicas have been probed, while the aggregator has never been ready: starts on
/// the newest kept generation every partition has loaded, the live one pending. The store is
/// read only then, at most [`LOOKED_AT`] manifests a call, each within `deadline`.
pub(super) async fn fall_back_if_needed(
    state: &Shared,
    live: &Location,
    deadline: std::time::Duration,
) {
    if !state.backends.probed() || state.ready() {
        return;
    }
    let active = state.generations.active();
    let older = tokio::time::timeout(deadline, newest_served(live, &active, &state.backends));
    let Ok(Some(older)) = older.await else { return };
    tracing::warn!(
        live = %active.generation,
        serving = %older.generation,
        "the live generation is not loaded on every partition: starting on the newest kept \
         generation that is, until the live one is"
    );
    state.generations.fall_back(older);
}

/// The newest kept generation other than `active`, of the same number of partitions, whose
/// every partition some reached replica has loaded.
async fn newest_served(
    live: &Location,
    active: &Manifest,
    backends: &Backends,
) -> Option<Manifest> {
    let kept = live.sibling("generations");
    let names = kept.children().await.ok()?;
    for name in names.iter().rev().filter(|n| !n.ends_with("-pending")).take(LOOKED_AT) {
        let own = kept.join(name).join(crate::generation::MANIFEST_FILE);
        let Ok(Some((bytes, _))) = own.get(MAX_MANIFEST_BYTES).await else { continue };
        let Ok(manifest) = Manifest::parse(&bytes) else { continue };
        if manifest.generation != active.generation
            && manifest.partitions.len() == backends.partition_count()
            && manifest.partitions.iter().all(|p| backends.loaded_anywhere(&p.checksum))
        {
            return Some(manifest);
        }
    }
    None
}

impl super::Generations {
    /// Serves `older` until the generation being waited for (the pending one, else the
    /// active one) is served everywhere.
    pub fn fall_back(&self, older: Manifest) {
        let waited_for = self.pending().unwrap_or_else(|| self.active());
        self.active.store(Arc::new(older));
        self.pending.store(Some(waited_for));
    }
}

#[cfg(test)]
mod tests {
    use super::super::Generations;
    use crate::manifest::{MANIFEST_FORMAT, Manifest};

    fn manifest(generation: &str) -> Manifest {
        let (format, created_unix, watermark_hour) = (MANIFEST_FORMAT, 0, None);
        Manifest {
            format,
            generation: generation.into(),
            created_unix,
            watermark_hour,
            partitions: vec![],
        }
    }

    #[test]
    fn falling_back_keeps_waiting_for_the_newest_generation() {
        let generations = Generations::new(manifest("live"));
        generations.fall_back(manifest("old"));
        assert_eq!(generations.active().generation, "old");
        assert_eq!(generations.pending().unwrap().generation, "live");
        // Announced meanwhile: the newer one is still the one waited for.
        generations.announce(manifest("newer"), 0);
        generations.fall_back(manifest("older"));
        assert_eq!(generations.active().generation, "older");
        assert_eq!(generations.pending().unwrap().generation, "newer");
    }
}
