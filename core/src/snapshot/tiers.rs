//! The tiered answer ([`crate::matching`]): the exact prefix first, then completions holding
//! the typed words, then completions within a typo or two — each later tier only while the
//! answer is short, each exact (blocked completions skipped, the next ones filling in).
//!
//! Every words candidate is decoded and checked against the contract's own predicate before
//! it is answered, so the word index decides only *where to look*: a crafted snapshot can make
//! an answer short, never wrong. A fuzzy candidate is decoded and checked against the words
//! rule (a key the words tier holds is not fuzzy); its distance and first character are the
//! walk's over the verified key store, which the proptests hold to the plain definition
//! ([`crate::matching::fuzzy_distance`]).
//!
//! # Budget
//!
//! Each of the two later tiers examines at most [`TIER_BUDGET`] candidates (posting entries,
//! each check of a candidate against another typed word's list, keys walked, positions
//! scanned). Past it the tier stops; what it already answered is still
//! correct and in order, but may not be the best there is, and the answer says so
//! ([`Answer::cut`] names the first tier that stopped). The typed texts of the AOL sample
//! never reach it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;

use super::fuzzy::{Budget, Emitted};
use super::words::{Merged, Postings};
use super::{Filter, Snapshot, Suggestion};
use crate::matching::{self, Match, Tiers, Typed};

/// Candidates one later tier may examine for one answer.
pub const TIER_BUDGET: usize = 1 << 16;

/// A tiered answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Best first: the prefix tier, then words, then fuzzy ([`Suggestion::tier`]).
    pub suggestions: Vec<Suggestion>,
    /// The first tier that stopped at its budget (`None`: none did). What is there is correct
    /// and in order, but from that tier on it may not be the best.
    pub cut: Option<Match>,
    /// Candidates the later tiers examined (what [`TIER_BUDGET`] bounds per tier): the work
    /// an answer cost beyond the prefix tier.
    pub examined: usize,
}

impl Answer {
    /// Whether no tier was cut by its budget.
    pub fn complete(&self) -> bool {
        self.cut.is_none()
    }
}

/// A partial word that starts at most this many words takes part through its words' lists,
/// merged by rank ([`Merged`]): as the driver when they hold fewer ranks than the shortest
/// complete word's list, else sought in per candidate. Opening them is a header read each (they
/// lie side by side), and the budget pays for each one opened and each one a seek moves.
/// Beyond this many, candidates are checked on their decoded keys (a microsecond each), unless
/// the partial word was typed alone: then its lists drive whatever their number.
pub(super) const PARTIAL_LISTS: usize = 4096;

/// (position, rank) of a chosen completion.
type Hit = (u32, u32);

impl Snapshot {
    /// The answer of the tier contract for a normalized prefix: up to `k` suggestions.
    pub fn answer(&self, prefix: &str, k: usize, filter: Option<&Filter>, tiers: Tiers) -> Answer {
        let mut suggestions = self.suggest_filtered(prefix, k, filter);
        let k = k.min(self.max_k());
        let typed = Typed::of(prefix);
        let (mut cut, mut examined) = (None, 0);
        // A text of spaces only has no words (the words tier finds nothing) but has a fuzzy
        // tier from four characters on, like any other.
        if tiers == Tiers::Prefix || suggestions.len() >= k {
            return Answer { suggestions, cut, examined };
        }
        let mut budget = Budget::new(TIER_BUDGET);
        let hits = self.words_tier(prefix, &typed, k - suggestions.len(), filter, &mut budget);
        (cut, examined) = (budget.cut.then_some(Match::Words), budget.spent());
        suggestions.extend(self.tier_suggestions(&hits, Match::Words, |_| 0));
        if suggestions.len() < k {
            let mut budget = Budget::new(TIER_BUDGET);
            let hits = self.fuzzy_tier(prefix, &typed, k - suggestions.len(), filter, &mut budget);
            cut = cut.or(budget.cut.then_some(Match::Fuzzy));
            examined += budget.spent();
            let pairs: Vec<Hit> = hits.iter().map(|&(pos, rank, _)| (pos, rank)).collect();
            suggestions.extend(self.tier_suggestions(&pairs, Match::Fuzzy, |i| hits[i].2));
        }
        Answer { suggestions, cut, examined }
    }

    /// The words tier alone: up to `k` completions that hold the typed words of a normalized
    /// prefix but do not start with it, best first — what [`Snapshot::answer`] adds after the
    /// prefix tier (given the same room), under the same budget. Benchmarks time it apart from
    /// the other tiers.
    pub fn words_answer(&self, prefix: &str, k: usize, filter: Option<&Filter>) -> Answer {
        let typed = Typed::of(prefix);
        let k = k.min(self.max_k());
        if typed.is_empty() || k == 0 {
            return Answer { suggestions: Vec::new(), cut: None, examined: 0 };
        }
        let mut budget = Budget::new(TIER_BUDGET);
        let hits = self.words_tier(prefix, &typed, k, filter, &mut budget);
        let suggestions = self.tier_suggestions(&hits, Match::Words, |_| 0);
        let cut = budget.cut.then_some(Match::Words);
        Answer { suggestions, cut, examined: budget.spent() }
    }

    fn tier_suggestions(
        &self,
        hits: &[Hit],
        tier: Match,
        typos: impl Fn(usize) -> u8,
    ) -> Vec<Suggestion> {
        let mut out = self.materialize(hits, &mut super::frontcode::decode_buffer());
        for (i, s) in out.iter_mut().enumerate() {
            s.tier = tier;
            s.typos = typos(i);
        }
        out
    }

    fn hidden(filter: Option<&Filter>, pos: u32) -> bool {
        filter.is_some_and(|f| f.is_blocked(pos))
    }

    /// The words tier: the best `need` completions that hold the typed words of `prefix` and do
    /// not start with it (those are the prefix tier's). Whether a candidate starts with it is
    /// read off the key decoded for the words check, not off a key range: two binary searches
    /// over the keys fewer per answer.
    ///
    /// The shortest list drives (the partial word's being the lists of every word it starts,
    /// merged by rank, when it starts at most [`PARTIAL_LISTS`] or was typed alone); the others
    /// are intersected by seeking, so a candidate costs list seeks, not a key decode. A partial
    /// word that starts more words is checked on the decoded key; every answer is decoded and
    /// checked against the rule anyway.
    fn words_tier(
        &self,
        prefix: &str,
        typed: &Typed<'_>,
        need: usize,
        filter: Option<&Filter>,
        budget: &mut Budget,
    ) -> Vec<Hit> {
        let mut lists = Vec::with_capacity(typed.complete.len());
        for word in &typed.complete {
            match self.word_id(word) {
                Some(id) => lists.push(self.postings(id)),
                None => return Vec::new(),
            }
        }
        let ids = typed.partial.map(|w| self.word_range(w));
        if ids.as_ref().is_some_and(|ids| ids.is_empty()) {
            return Vec::new();
        }
        // The partial word's lists, when it starts few enough words to merge.
        let mut partial: Option<Merged<'_>> = match &ids {
            Some(ids) if ids.len() <= PARTIAL_LISTS || lists.is_empty() => {
                if !budget.spend(ids.len()) {
                    return Vec::new();
                }
                Some(Merged::new(self.postings_run(ids.clone()).collect()))
            }
            _ => None,
        };
        lists.sort_by_key(Postings::len);
        // The partial word's lists drive when they hold fewer ranks than any complete word's.
        let shorter = |p: &mut Merged<'_>| lists.first().is_none_or(|c| p.len() < c.len());
        let mut driver: Box<dyn Iterator<Item = u32> + '_> = match partial.take_if(shorter) {
            Some(merged) => Box::new(merged),
            None if lists.is_empty() => return Vec::new(),
            None => Box::new(lists.remove(0)),
        };
        let mut out = Vec::new();
        'candidates: while out.len() < need {
            let Some(rank) = driver.next() else { break };
            if !budget.spend(1) {
                break;
            }
            // Each other list's check is paid for too: a text of many common words would
            // otherwise cost its word count times the budget.
            for list in lists.iter_mut() {
                if !budget.spend(1) {
                    break 'candidates;
                }
                if list.seek(rank) != Some(rank) {
                    continue 'candidates;
                }
            }
            if let Some(partial) = partial.as_mut() {
                let found = partial.seek(rank);
                if !budget.spend(partial.take_moves()) {
                    break;
                }
                if found != Some(rank) {
                    continue;
                }
            }
            let pos = self.position_of(rank);
            if Self::hidden(filter, pos) {
                continue;
            }
            if self.key_at(pos).is_some_and(|key| !key.starts_with(prefix) && typed.matches(&key)) {
                out.push((pos, rank));
            }
        }
        out
    }

    /// The fuzzy tier: distance 1 first, and only if that leaves the answer short, a second walk
    /// up to distance 2. Returns (position, rank, distance), in answer order.
    fn fuzzy_tier(
        &self,
        prefix: &str,
        typed: &Typed<'_>,
        need: usize,
        filter: Option<&Filter>,
        budget: &mut Budget,
    ) -> Vec<(u32, u32, u8)> {
        let p: Vec<char> = prefix.chars().collect();
        let mut out = Vec::new();
        for limit in 1..=matching::max_typos_for_len(p.len()) {
            let emitted = self.fuzzy_prefixes(&p, limit, budget);
            if budget.cut {
                break;
            }
            let level = self.fuzzy_level(&emitted, limit, need - out.len(), typed, filter, budget);
            out.extend(level.into_iter().map(|(pos, rank)| (pos, rank, limit)));
            if out.len() >= need || budget.cut {
                break;
            }
        }
        out
    }

    /// The best `need` keys at exactly distance `level`: below a prefix emitted at `level`, but
    /// not below a deeper one emitted closer (which lies inside it), nor matching the words tier.
    fn fuzzy_level(
        &self,
        emitted: &[Emitted],
        level: u8,
        need: usize,
        typed: &Typed<'_>,
        filter: Option<&Filter>,
        budget: &mut Budget,
    ) -> Vec<Hit> {
        // The ranges of prefixes emitted closer, by start (widest first on a tie): the holes
        // of each range at `level` are found by a binary search, not a pass over all of them
        // (tens of thousands can be emitted).
        let mut closer: Vec<Range<u32>> =
            emitted.iter().filter(|f| f.d < level).map(|f| f.range.clone()).collect();
        closer.sort_unstable_by_key(|r| (r.start, Reverse(r.end)));
        let mut found: Vec<(u32, u32)> = Vec::new();
        for e in emitted.iter().filter(|e| e.d == level) {
            if budget.cut {
                break;
            }
            let holes = holes_in(&closer, &e.range);
            let keep = |pos: u32| !in_holes(&holes, pos) && !Self::hidden(filter, pos);
            let range = e.range.clone();
            found.extend(self.range_top(&e.path, range, need, keep, typed, filter, budget));
        }
        found.sort_unstable();
        found.truncate(need);
        found.into_iter().map(|(rank, pos)| (pos, rank)).collect()
    }

    /// The best `need` (rank, position) pairs of the keys in `range` (those starting with
    /// `path`) that `keep` accepts and that do not match the words tier: from the stored list
    /// when it has enough, else by scanning the range's ranks.
    #[allow(clippy::too_many_arguments)]
    fn range_top(
        &self,
        path: &[u8],
        range: Range<u32>,
        need: usize,
        keep: impl Fn(u32) -> bool,
        typed: &Typed<'_>,
        filter: Option<&Filter>,
        budget: &mut Budget,
    ) -> Vec<(u32, u32)> {
        let fits = |pos: u32| self.key_at(pos).is_some_and(|key| !typed.matches(&key));
        let mut out = Vec::new();
        if let Some(node) = self.list_node(path)
            && range.len() > self.small
        {
            // The stored list, or the filter's replacement of it when it holds a blocked
            // completion: the range's best unblocked completions either way, so what passes
            // is a correct start of the answer even if more is needed. (Read past its blocked
            // entries, the stored list would come up short and send a blocked term's range
            // to a scan.)
            let mut listed = 0;
            let mut take = |(pos, rank): (u32, u32)| {
                listed += 1;
                if keep(pos) && fits(pos) {
                    out.push((rank, pos));
                }
                out.len() == need
            };
            let full = match filter.and_then(|f| f.overlay(node)) {
                Some(list) => list.iter().copied().any(&mut take),
                None => self.node_list(node).take(self.max_k()).any(&mut take),
            };
            if full || listed < self.max_k() {
                return out;
            }
        }
        if !budget.spend(range.len()) {
            return out;
        }
        let scanned: Vec<Reverse<(u32, u32)>> =
            range.filter(|&pos| keep(pos)).map(|pos| Reverse((self.rank_of(pos), pos))).collect();
        let mut heap = BinaryHeap::from(scanned);
        out.clear();
        while let Some(Reverse((rank, pos))) = heap.pop() {
            if out.len() == need || !budget.spend(1) {
                break;
            }
            if fits(pos) {
                out.push((rank, pos));
            }
        }
        out
    }
}

/// The union of the ranges of `closer` (sorted by start) that lie inside `range`, as disjoint
/// sorted ranges for [`in_holes`]. (Prefix ranges nest or are apart; the union holds whatever
/// a crafted snapshot makes them.)
fn holes_in(closer: &[Range<u32>], range: &Range<u32>) -> Vec<Range<u32>> {
    let first = closer.partition_point(|r| r.start < range.start);
    let mut holes: Vec<Range<u32>> = Vec::new();
    for r in closer[first..].iter().take_while(|r| r.start < range.end) {
        if r.end > range.end {
            continue;
        }
        match holes.last_mut() {
            Some(h) if r.start <= h.end => h.end = h.end.max(r.end),
            _ => holes.push(r.clone()),
        }
    }
    holes
}

/// Whether `pos` lies in one of `holes` (disjoint, sorted).
fn in_holes(holes: &[Range<u32>], pos: u32) -> bool {
    let after = holes.partition_point(|h| h.start <= pos);
    after > 0 && holes[after - 1].contains(&pos)
}
