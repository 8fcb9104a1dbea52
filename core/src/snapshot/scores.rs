//! Scores by rank: the file's score runs, held in memory, and how a rank finds its run.
//!
//! Ranks follow scores, so the score is a step function of the rank, stored as runs (each
//! run's first rank and its score; 4,894 at 10M synthetic completions). Every suggestion an
//! answer returns looks up its score, and a binary search over all run starts is a dozen
//! dependent probes, each a compare waiting on the load before it. Two shortcuts replace it:
//!
//! - Starts rise from 0, so when run `rank` starts at `rank`, every run before it is one rank
//!   long and `rank` is that run's. That is the best ranks, where each completion has a score
//!   of its own: what the short prefixes answer.
//! - Past those ranks a table holds, for every block of ranks, the run of the block's first
//!   rank. A rank's run lies between its block's and the next block's, and only those are
//!   searched. Blocks are sized to hold one to two of the runs past the first ranks on
//!   average (at most 4,096 ranks), so the table never has many more entries than there are
//!   runs: 4,096 ranks at 10M synthetic completions (2.4K entries, 9.8 KB; 2,405 runs past
//!   the first 2,489 ranks, over 4,000 ranks each), 8 on the AOL sample (17K entries, 70 KB),
//!   whose moving averages leave a run about seven ranks long past the first 751: there,
//!   blocks of a fixed 4,096 ranks held some 600 runs each, and a rank's search was ten
//!   dependent probes again.
//!
//! Both together made prefix lookups with their data in cache (`cargo bench --bench scale --
//! --warm`) 11-16% faster at 1 and 4 characters. A table of every 256th rank alone (156 KB)
//! counted fewer instructions but ran no faster from a cold cache: its own entries missed.
//!
//! The table is made when a snapshot is opened, after its runs were verified (first start 0,
//! starts rising, scores falling); it is not part of the format.

/// log2 of the most ranks a block of [`ScoreRuns::blocks`] holds.
const MAX_SHIFT: u32 = 12;

/// The most ranks per block.
#[cfg(test)]
const BLOCK: u32 = 1 << MAX_SHIFT;

/// The score runs, and the run of every block's first rank.
#[derive(Debug, Default)]
pub(super) struct ScoreRuns {
    /// The first rank of each run, rising.
    starts: Vec<u32>,
    /// The score of each run.
    values: Vec<f64>,
    /// Runs `0..lead` start at their own index (each is one rank long, but for the last):
    /// ranks below `lead` need no table.
    lead: u32,
    /// `blocks[b]`: the run of rank `lead + (b << shift)`, for every block up to and including
    /// the one after the last rank's.
    blocks: Vec<u32>,
    /// log2 of the ranks per block: one to two runs' worth on average past `lead`, at most
    /// [`MAX_SHIFT`].
    shift: u32,
}

impl ScoreRuns {
    /// Bytes of memory held.
    pub(super) fn memory_bytes(&self) -> usize {
        (self.starts.capacity() + self.blocks.capacity()) * 4 + self.values.capacity() * 8
    }

    /// The runs of `ranks` ranks: `starts` rising from 0, a score for each.
    pub(super) fn new(starts: Vec<u32>, values: Vec<f64>, ranks: usize) -> ScoreRuns {
        let lead = leading_own_runs(&starts);
        // Sized to the runs past `lead`, so a table never outgrows them: where every rank has
        // a score of its own it is two entries, not one per two ranks.
        let tail_ranks = ranks.saturating_sub(lead);
        let per_run = tail_ranks / (starts.len() - lead).max(1);
        let shift = (per_run.max(1).ilog2() + 1).min(MAX_SHIFT);
        let count = (tail_ranks >> shift) + 2;
        let mut blocks = Vec::with_capacity(count);
        let mut run = lead.saturating_sub(1);
        for b in 0..count {
            let first = lead as u64 + ((b as u64) << shift);
            while starts.get(run + 1).is_some_and(|&s| u64::from(s) <= first) {
                run += 1;
            }
            blocks.push(run as u32);
        }
        let lead = u32::try_from(lead).unwrap_or(u32::MAX);
        ScoreRuns { starts, values, lead, blocks, shift }
    }

    /// The score of rank `rank`: its run's (0 when there are no runs).
    #[inline]
    pub(super) fn score(&self, rank: u32) -> f64 {
        // Starts rise from 0, so a run that starts at its own index is preceded by runs of
        // one rank each: the best ranks, where every completion has a score of its own.
        if self.starts.get(rank as usize) == Some(&rank) {
            return self.values.get(rank as usize).copied().unwrap_or(0.0);
        }
        let b = (rank.saturating_sub(self.lead) >> self.shift) as usize;
        // Runs before `lo` start at or below the block's first rank, and runs after `hi`
        // after the next block's: only those between can hold `rank`.
        let (lo, hi) = match (self.blocks.get(b), self.blocks.get(b + 1)) {
            (Some(&lo), Some(&hi)) => (lo as usize, hi as usize + 1),
            _ => (0, self.starts.len()),
        };
        let within = self.starts.get(lo..hi).unwrap_or_default();
        let run = (lo + within.partition_point(|&s| s <= rank)).saturating_sub(1);
        self.values.get(run).copied().unwrap_or(0.0)
    }
}

/// How many runs start at their own index: `starts[i] == i` holds for a first stretch of `i`
/// and for no `i` after it, as the starts rise from 0.
fn leading_own_runs(starts: &[u32]) -> usize {
    super::search::partition_point(starts.len(), |i| starts[i] as usize == i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The plain definition: the last run that starts at or below the rank.
    fn searched(starts: &[u32], values: &[f64], rank: u32) -> f64 {
        let run = starts.partition_point(|&s| s <= rank).saturating_sub(1);
        values.get(run).copied().unwrap_or(0.0)
    }

    /// Runs over `ranks` ranks: the first at 0, the others at distinct ranks below `ranks`.
    fn runs(ranks: u32, cuts: Vec<u32>) -> (Vec<u32>, Vec<f64>) {
        let mut starts: Vec<u32> = cuts.into_iter().map(|c| c % ranks.max(1)).collect();
        starts.push(0);
        starts.sort_unstable();
        starts.dedup();
        let values = (0..starts.len()).rev().map(|i| i as f64 + 0.5).collect();
        (starts, values)
    }

    proptest! {
        #[test]
        fn scores_are_the_searched_ones(
            ranks in 0u32..5 * BLOCK,
            // Dense runs (a score per rank) and sparse ones (long runs) both.
            cuts in prop_oneof![
                proptest::collection::vec(0u32..5 * BLOCK, 0..40),
                proptest::collection::vec(0u32..5 * BLOCK, 0..1200),
            ],
            probes in proptest::collection::vec(0u32..6 * BLOCK, 1..50),
        ) {
            let (starts, values) = runs(ranks, cuts);
            let table = ScoreRuns::new(starts.clone(), values.clone(), ranks as usize);
            let tail_runs = (starts.len() - table.lead as usize).max(1);
            prop_assert!(
                table.blocks.len() <= tail_runs + 2 || table.shift == MAX_SHIFT,
                "{} blocks of {} ranks for {} runs past {}",
                table.blocks.len(), 1 << table.shift, tail_runs, table.lead
            );
            for rank in probes.into_iter().chain([0, ranks.saturating_sub(1), ranks, u32::MAX]) {
                prop_assert_eq!(table.score(rank), searched(&starts, &values, rank), "rank {}", rank);
            }
        }
    }

    #[test]
    fn short_runs_past_the_first_tie_get_small_blocks() {
        // One rank each, then runs of 1 to 3 ranks: real logs' moving averages.
        let mut starts: Vec<u32> = (0..50).collect();
        while let Some(&last) = starts.last().filter(|&&s| s < 3 * BLOCK) {
            starts.push(last + 1 + last % 3);
        }
        let values: Vec<f64> = (0..starts.len()).rev().map(|i| i as f64).collect();
        let ranks = 3 * BLOCK + 5;
        let table = ScoreRuns::new(starts.clone(), values.clone(), ranks as usize);
        assert!(table.shift <= 2, "blocks of {} ranks", 1 << table.shift);
        for rank in 0..ranks + 3 {
            assert_eq!(table.score(rank), searched(&starts, &values, rank), "rank {rank}");
        }
    }

    #[test]
    fn no_runs_score_zero() {
        let table = ScoreRuns::new(Vec::new(), Vec::new(), 0);
        assert_eq!(table.score(0), 0.0);
        assert_eq!(table.score(u32::MAX), 0.0);
    }

    #[test]
    fn every_rank_of_a_run_per_rank_and_of_one_run() {
        let n = 3 * BLOCK + 7;
        let own: Vec<u32> = (0..n).collect();
        let values: Vec<f64> = (0..n).rev().map(f64::from).collect();
        let table = ScoreRuns::new(own.clone(), values.clone(), n as usize);
        assert_eq!((table.lead, table.blocks.len()), (n, 2), "no table where every rank has a run");
        let one = ScoreRuns::new(vec![0], vec![2.5], n as usize);
        for rank in 0..n + BLOCK {
            assert_eq!(table.score(rank), searched(&own, &values, rank));
            assert_eq!(one.score(rank), 2.5);
        }
    }
}
