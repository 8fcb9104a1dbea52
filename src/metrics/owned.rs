//! The counters only one process records; the other never registers them, so it does not
//! export them at zero.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

/// What only `typeahead serve` records: reloads and blocklist changes.
#[derive(Debug, Default)]
pub struct ServerMetrics {
    /// Snapshots published by a reload.
    pub swaps: Counter,
    /// Reloads rejected (the old snapshot kept serving).
    pub swaps_failed: Counter,
    /// Blocklist changes applied.
    pub blocklist_updates: Counter,
    /// Blocklist changes rejected.
    pub blocklist_failed: Counter,
    /// Manifest polls or downloads that failed (`serve --manifest`).
    pub manifest_failures: Counter,
    /// The same, by reason (`crate::remote::follow::FollowError::reason`).
    pub manifest_failures_by_reason: crate::remote::follow::ByReason,
    /// Bytes of snapshots fetched (`serve --manifest`), of downloads that failed midway too.
    pub downloaded_bytes: Counter,
    /// Answers sent from the answer cache.
    pub answer_cache_hits: Counter,
    /// Answers looked up (not in the cache).
    pub answer_cache_misses: Counter,
    /// Admin requests rejected for a missing or wrong token.
    pub admin_rejected: Counter,
    /// Candidates the words and fuzzy tiers examined, over every answer looked up: divided by
    /// the lookups, what an answer costs beyond the prefix tier.
    pub tier_candidates: Counter,
    /// Answers a later tier's budget cut (`"complete": false`).
    pub answers_cut: Counter,
}

impl ServerMetrics {
    /// Adds these metrics to the server's registry.
    pub fn register(&self, registry: &mut Registry) {
        let counters = [
            ("typeahead_snapshot_swaps", "Snapshots published by reloads", &self.swaps),
            (
                "typeahead_snapshot_swaps_failed",
                "Reloads rejected; the old snapshot kept serving",
                &self.swaps_failed,
            ),
            ("typeahead_blocklist_updates", "Blocklist changes applied", &self.blocklist_updates),
            (
                "typeahead_blocklist_updates_failed",
                "Blocklist changes rejected",
                &self.blocklist_failed,
            ),
            (
                "typeahead_manifest_poll_failures",
                "Manifest polls or downloads that failed; the current generation kept serving",
                &self.manifest_failures,
            ),
            (
                "typeahead_snapshot_downloaded_bytes",
                "Bytes of snapshots fetched by a manifest follower (failed downloads too)",
                &self.downloaded_bytes,
            ),
            ("typeahead_answer_cache_hits", "Answers sent from the cache", &self.answer_cache_hits),
            (
                "typeahead_answer_cache_misses",
                "Answers looked up in the snapshot (not cached)",
                &self.answer_cache_misses,
            ),
            (
                "typeahead_admin_rejected",
                "Admin requests rejected for a missing or wrong token",
                &self.admin_rejected,
            ),
            (
                "typeahead_tier_candidates",
                "Candidates the words and fuzzy tiers examined in answers looked up (per lookup: \
                 divide by typeahead_answer_cache_misses_total)",
                &self.tier_candidates,
            ),
            (
                "typeahead_answers_cut",
                "Answers a later tier's candidate budget cut (complete: false)",
                &self.answers_cut,
            ),
        ];
        register_all(registry, counters);
        // Every reason at 0 from the start, so a rate over it exists before the first failure.
        for reason in crate::remote::follow::FollowError::REASONS {
            drop(self.manifest_failures_by_reason.get_or_create(&[("reason", reason)]));
        }
        registry.register(
            "typeahead_manifest_poll_failures_by_reason",
            "Manifest polls or downloads that failed, by what failed (each also counts in \
             typeahead_manifest_poll_failures_total)",
            self.manifest_failures_by_reason.clone(),
        );
    }
}

/// What only `typeahead aggregate` records: its cache, its backends and its generations.
#[derive(Debug, Default)]
pub struct AggregatorMetrics {
    /// Suggestion answers served with `partial: true`.
    pub partial_answers: Counter,
    /// Cache hits.
    pub cache_hits: Counter,
    /// Cache misses.
    pub cache_misses: Counter,
    /// Cache misses answered by another request's fan-out for the same answer.
    pub coalesced_answers: Counter,
    /// Answers that asked the other partitions early, the first ones not having answered
    /// halfway to the deadline.
    pub early_asks: Counter,
    /// Backend requests that failed or timed out.
    pub backend_errors: Counter,
    /// Replica probes (`/readyz`) that failed or timed out.
    pub probe_failures: Counter,
    /// Hedged backend requests sent.
    pub hedges: Counter,
    /// Hedges not sent because the hedge budget was spent.
    pub hedges_skipped: Counter,
    /// Retries next to a try past its timeout, or after a 503 (a replica shedding load), not
    /// sent because the retry budget was spent.
    pub retries_skipped: Counter,
    /// Replicas ejected after repeated failures.
    pub ejections: Counter,
    /// Generations switched to.
    pub generation_flips: Counter,
    /// Manifest polls that failed or read a manifest it refused.
    pub manifest_failures: Counter,
}

impl AggregatorMetrics {
    /// Adds these metrics to the aggregator's registry.
    pub fn register(&self, registry: &mut Registry) {
        let counters = [
            ("typeahead_partial_answers", "Answers marked partial", &self.partial_answers),
            ("typeahead_cache_hits", "Aggregator cache hits", &self.cache_hits),
            ("typeahead_cache_misses", "Aggregator cache misses", &self.cache_misses),
            (
                "typeahead_coalesced_answers",
                "Cache misses answered by another request's fan-out for the same answer",
                &self.coalesced_answers,
            ),
            (
                "typeahead_early_asks",
                "Answers that asked the other partitions early, the first ones not having answered \
                 halfway to the deadline",
                &self.early_asks,
            ),
            (
                "typeahead_backend_errors",
                "Backend requests that failed or timed out (probes not included)",
                &self.backend_errors,
            ),
            (
                "typeahead_probe_failures",
                "Replica probes (/readyz) that failed or timed out",
                &self.probe_failures,
            ),
            ("typeahead_hedged_requests", "Hedged backend requests sent", &self.hedges),
            (
                "typeahead_hedges_skipped",
                "Hedges not sent because the hedge budget was spent",
                &self.hedges_skipped,
            ),
            (
                "typeahead_retries_skipped",
                "Retries next to a late try or after a shed one (503) not sent because the retry budget was spent",
                &self.retries_skipped,
            ),
            (
                "typeahead_replica_ejections",
                "Replicas ejected after repeated failures",
                &self.ejections,
            ),
            (
                "typeahead_generation_flips",
                "Generations the aggregator switched to",
                &self.generation_flips,
            ),
            (
                "typeahead_manifest_poll_failures",
                "Manifest polls that failed or read a manifest that was refused; the active \
                 generation kept serving",
                &self.manifest_failures,
            ),
        ];
        register_all(registry, counters);
    }
}

/// Registers counters by name (without `_total`: the encoder appends it) and help text.
fn register_all<'a>(
    registry: &mut Registry,
    counters: impl IntoIterator<Item = (&'static str, &'static str, &'a Counter)>,
) {
    for (name, help, counter) in counters {
        registry.register(name, help, counter.clone());
    }
}
