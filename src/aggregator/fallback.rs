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
//! pending, as an aggregator that had been running all along would. Never one built under
//! older privacy rules than those in force (`generation::rules_in_force`): it may hold what
//! they withhold. Kept generations are
//! `generations/*/manifest.json` beside the live manifest, in a directory and in a bucket alike
//! (a generation's own manifest is written once it has been live: an incomplete one has none).

use std::sync::Arc;

use super::Shared;
use crate::generation::{OlderRules, check_rules, rules_in_force};
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
    let search = newest_served(live, state);
    let Ok(Some(older)) = tokio::time::timeout(deadline, search).await else { return };
    // The probes went on meanwhile: the active generation may be served everywhere by now.
    if state.ready() {
        return;
    }
    let generation = older.generation.clone();
    if state.generations.fall_back(&active, older) {
        tracing::warn!(
            live = %active.generation,
            serving = %generation,
            "the live generation is not loaded on every partition: starting on the newest kept \
             generation that is, until the live one is"
        );
    }
}

/// The newest kept generation other than the active and the pending one, of the same number
/// of partitions, whose every partition some reached replica has loaded, and built under
/// rules no older than theirs.
async fn newest_served(live: &Location, state: &Shared) -> Option<Manifest> {
    let (generations, backends) = (&state.generations, &state.backends);
    let known: Vec<Arc<Manifest>> =
        [Some(generations.active()), generations.pending()].into_iter().flatten().collect();
    let kept = live.sibling(crate::remote::bucket::GENERATIONS);
    let names = match kept.children().await {
        Ok(names) => names,
        Err(e) => {
            // Read-only keys without the right to list the prefix end up here on every try.
            tracing::warn!(error = %crate::error::chain(&e), "cannot list the kept generations; no fallback generation");
            return None;
        }
    };
    let (mut read, mut unread) = (Vec::new(), false);
    for name in names.iter().rev().filter(|n| !n.ends_with("-pending")).take(LOOKED_AT) {
        let own = kept.join(name).join(crate::generation::MANIFEST_FILE);
        // One that cannot be read or parsed (a newer format) may hold the newest rules.
        let bytes = match own.get(MAX_MANIFEST_BYTES).await {
            Ok(Some((bytes, _))) => bytes,
            Ok(None) => continue,
            Err(e) => {
                tracing::debug!(error = %crate::error::chain(&e), %own, "cannot read a kept manifest");
                unread = true;
                continue;
            }
        };
        let Ok(manifest) = Manifest::parse(&bytes) else {
            unread = true;
            continue;
        };
        read.push(manifest);
    }
    let floor = floor(&known, &read, unread);
    let partitions = backends.partition_count();
    let mut older = Vec::new();
    for manifest in read {
        match may_serve(&manifest, &known, partitions, |id| backends.loaded_anywhere(id), floor) {
            Ok(true) => return Some(manifest),
            Ok(false) => {}
            Err(refused) => older.push(refused.id),
        }
    }
    warn_once(&state.passed_over, older, floor);
    None
}

/// The rules a generation must have been built under to be fallen back to
/// ([`rules_in_force`]): the newest the `known` generations (the active and the pending one)
/// recorded, else the newest the `kept` ones did, else this build's. When a kept manifest
/// could not be read (`unread`), it may be the one with the newest rules: this build's count
/// too, rather than a floor lowered by a timeout.
fn floor(known: &[Arc<Manifest>], kept: &[Manifest], unread: bool) -> u32 {
    let known_rules = known.iter().filter_map(|m| m.rules).max();
    let unknown = unread.then_some(crate::normalize::RULES_VERSION);
    rules_in_force(known_rules, kept.iter().map(|m| m.rules).chain([unknown]))
}

/// Says which kept generations were passed over for their rules, when that differs from what
/// was `warned` last: this runs on every manifest poll while the aggregator is not ready,
/// which may last.
fn warn_once(warned: &std::sync::Mutex<Vec<String>>, older: Vec<String>, floor: u32) {
    let mut warned = warned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if older.is_empty() || *warned == older {
        return;
    }
    tracing::warn!(
        generations = %older.join(", "),
        rules_in_force = floor,
        "kept generations every partition serves were not started on: they were built under \
         older privacy rules than those in force"
    );
    *warned = older;
}

/// Whether the kept generation `kept` may be served instead of the `known` ones (the active
/// and the pending one): another generation, of `partitions` partitions, each `loaded`
/// somewhere, and built under rules no older than `floor` ([`floor`]; refused with
/// [`OlderRules`] when it is otherwise servable). A generation built under older rules may
/// hold what the newer ones withhold; served again, it would publish that.
fn may_serve(
    kept: &Manifest,
    known: &[Arc<Manifest>],
    partitions: usize,
    loaded: impl Fn(&str) -> bool,
    floor: u32,
) -> Result<bool, OlderRules> {
    let servable = known.iter().all(|m| m.generation != kept.generation)
        && kept.partitions.len() == partitions
        && kept.partitions.iter().all(|p| loaded(&p.checksum));
    if servable {
        check_rules(&kept.generation, kept.rules, floor)?;
    }
    Ok(servable)
}

impl super::Generations {
    /// Serves `older` until the generation being waited for (the pending one, else the
    /// active one) is served everywhere, unless the active one is no longer `expected` (a
    /// switch happened meanwhile, which is never undone). Returns whether it fell back.
    pub fn fall_back(&self, expected: &Arc<Manifest>, older: Manifest) -> bool {
        let pending = self.pending.load_full();
        let waited_for = pending.clone().unwrap_or_else(|| Arc::clone(expected));
        let was = self.active.compare_and_swap(expected, Arc::new(older));
        if !Arc::ptr_eq(&was, expected) {
            return false;
        }
        // Unless a newer one was announced meanwhile, which stays the one waited for.
        self.pending.compare_and_swap(&pending, Some(waited_for));
        true
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
            rules: None,
        }
    }

    #[test]
    fn falling_back_keeps_waiting_for_the_newest_generation() {
        let generations = Generations::new(manifest("live"));
        assert!(generations.fall_back(&generations.active(), manifest("old")));
        assert_eq!(generations.active().generation, "old");
        assert_eq!(generations.pending().unwrap().generation, "live");
        // Announced meanwhile: the newer one is still the one waited for.
        generations.announce(manifest("newer"), 0);
        assert!(generations.fall_back(&generations.active(), manifest("older")));
        assert_eq!(generations.active().generation, "older");
        assert_eq!(generations.pending().unwrap().generation, "newer");
    }

    /// A kept generation is served instead of the live one only when it is another one, has
    /// as many partitions, each loaded, and was built under rules no older than the live one's.
    #[test]
    fn a_kept_generation_under_older_rules_is_not_fallen_back_to() {
        use super::{floor, may_serve};
        use crate::manifest::Partition;
        use std::sync::Arc;
        let with = |generation: &str, rules: Option<u32>| {
            let partition = Partition {
                index: 0,
                start: String::new(),
                end: None,
                file: "part-000.snap".into(),
                bytes: 1,
                checksum: format!("{generation}-0"),
                keys: 1,
            };
            Manifest { rules, partitions: vec![partition], ..manifest(generation) }
        };
        let live = [Arc::new(with("live", Some(9)))];
        let all = |_: &str| true;
        let serve = |kept: &Manifest, known: &[Arc<Manifest>], n: usize| {
            let floor = floor(known, std::slice::from_ref(kept), false);
            may_serve(kept, known, n, all, floor).map_err(|refused| refused.floor)
        };
        assert_eq!(serve(&with("old", Some(9)), &live, 1), Ok(true));
        assert_eq!(serve(&with("old", Some(10)), &live, 1), Ok(true));
        assert_eq!(serve(&with("old", Some(8)), &live, 1), Err(9), "older rules");
        assert_eq!(serve(&with("old", None), &live, 1), Err(9), "unrecorded rules");
        assert_eq!(serve(&with("live", Some(9)), &live, 1), Ok(false), "the live one itself");
        assert_eq!(serve(&with("old", Some(8)), &live, 2), Ok(false), "another layout");
        let not_loaded = may_serve(&with("old", Some(9)), &live, 1, |id| id != "old-0", 9);
        assert_eq!(not_loaded, Ok(false));
        // The newest rules of the active and the pending one are the floor.
        let both = [Arc::new(with("kept", Some(8))), Arc::new(with("live", Some(9)))];
        assert_eq!(serve(&with("old", Some(8)), &both, 1), Err(9));
    }

    /// With the live generation unrecorded (published before rules were recorded, or again by
    /// an older binary), the newest rules a kept generation recorded are in force, and this
    /// build's only when none did.
    #[test]
    fn an_unrecorded_live_generation_takes_its_floor_from_the_kept_ones() {
        use super::floor;
        use std::sync::Arc;
        let with =
            |generation: &str, rules: Option<u32>| Manifest { rules, ..manifest(generation) };
        let unrecorded = [Arc::new(with("live", None))];
        let kept = [with("b", Some(7)), with("a", Some(6)), with("old", None)];
        assert_eq!(floor(&unrecorded, &kept, false), 7);
        let rules = crate::normalize::RULES_VERSION;
        assert_eq!(floor(&unrecorded, &[with("old", None)], false), rules);
        // A kept manifest that could not be read may have held the newest rules.
        assert_eq!(floor(&unrecorded, &kept, true), rules.max(7));
        // A recorded live generation is the floor, whatever the kept ones say.
        assert_eq!(floor(&[Arc::new(with("live", Some(5)))], &kept, true), 5);
    }

    /// A switch made while the kept generations were being read is never undone.
    #[test]
    fn a_fall_back_after_a_switch_does_nothing() {
        let generations = Generations::new(manifest("live"));
        let seen = generations.active();
        generations.announce(manifest("newer"), 0);
        // What `switch_if_ready` does once "newer" is served everywhere.
        generations.active.store(generations.pending().unwrap());
        generations.pending.store(None);
        assert!(!generations.fall_back(&seen, manifest("old")));
        assert_eq!(generations.active().generation, "newer");
        assert!(generations.pending().is_none());
    }
}
