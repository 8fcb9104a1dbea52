//! Verifying a snapshot once, when it is opened: every invariant a lookup relies on, so that
//! lookups can index without checks and a crafted or damaged file is refused whole (the old
//! snapshot keeps serving) instead of answering wrongly or panicking later.
//!
//! The checks run as two independent chains, one on a second thread ([`Snapshot::verify`]),
//! and give up between phases when the caller of [`Snapshot::open_cancellable`] stopped
//! waiting ([`go_on`]).

use std::sync::atomic::{AtomicBool, Ordering};

use super::super::error::{Error, Result};
use super::super::frontcode::{Flow, Part, decode_buffer, follows, utf8_after};
use super::super::layout::{Section, f64_at, u32_at};
use super::super::upper::Upper;
use super::super::{fstwalk, words};
use super::{MAX_SMALL_SUBTREE, Snapshot};

impl Snapshot {
    /// The parameters, and the sizes everything else is read by (see [`Snapshot::verify`]).
    pub(super) fn verify_sizes(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::corrupt(what));
        let n = self.len;
        let bs = self.bucket_size();
        // Bounds as the writer sets them: a crafted file must not make a lookup allocate or
        // scan without limit.
        let sane = (1..=super::super::MAX_TOP_K).contains(&self.top_k)
            && (self.top_k..=MAX_SMALL_SUBTREE).contains(&self.small)
            && (1..=1024).contains(&bs);
        if !sane {
            return bad("bad metadata parameters");
        }
        // Positions are u32 everywhere (the writer refuses more keys): a larger count would
        // wrap them and leave keys past the wrap unchecked.
        if u32::try_from(n).is_err() {
            return bad("more keys than positions can address");
        }
        let buckets = n.div_ceil(bs);
        // Sizes come from the file: checked, so a crafted key count cannot overflow them.
        if Some(self.section(Section::BucketOffsets).len()) != buckets.checked_mul(4) {
            return bad("bucket offsets length");
        }
        if Some(self.section(Section::Ranks).len()) != packed_len(n, self.width) {
            return bad("ranks length");
        }
        Ok(())
    }

    /// Checks every other invariant listed in the module docs, after [`Snapshot::verify_sizes`]
    /// and [`Snapshot::read_head_words`]. Returns the keys' [`Upper`] level, collected as the
    /// keys are decoded for their checks.
    pub(super) fn verify(&self, cancel: &AtomicBool) -> Result<Upper> {
        // Two independent chains, one on a second thread: opening a 10M-completion file
        // is seconds of checks (a server's reload, every `typeahead query`). The word sections
        // need the ranks verified first (they index by rank); nothing else needs either.
        std::thread::scope(|scope| {
            let words = scope.spawn(|| {
                self.verify_ranks_and_scores()?;
                go_on(cancel)?;
                self.verify_words()
            });
            let keys = (|| {
                fstwalk::verify(&self.node_index, self.meta.list_nodes, 1 << 16)
                    .map_err(Error::corrupt)?;
                go_on(cancel)?;
                let upper = self.verify_keys()?;
                go_on(cancel)?;
                self.verify_lists()?;
                go_on(cancel)?;
                self.verify_display()?;
                Ok(upper)
            })();
            let words = words.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            keys.and_then(|upper| words.map(|()| upper))
        })
    }

    /// The word sections are well-formed (after [`Snapshot::verify_ranks_and_scores`]).
    fn verify_words(&self) -> Result<()> {
        let count = self.word_index.len();
        fstwalk::verify(&self.word_index, count as u64, 1 << 16).map_err(Error::corrupt)?;
        let (samples, postings) = self.word_sections();
        words::verify(count, samples, postings, self.len)
    }

    fn verify_keys(&self) -> Result<Upper> {
        let bs = self.bucket_size();
        let offsets = self.section(Section::BucketOffsets);
        if (1..offsets.len() / 4).any(|b| u32_at(offsets, b - 1) > u32_at(offsets, b)) {
            return Err(Error::corrupt("bucket offsets decrease"));
        }
        // Each key is checked against the one before by what differs after their shared
        // prefix, which the front coding gives: the order by the first byte past it, and UTF-8
        // from the last character boundary before it. Comparing and validating whole keys
        // was a third of this pass at 10M completions.
        let mut prev: Vec<u8> = Vec::new();
        let mut buf = decode_buffer();
        let displays = self.section(Section::DisplayPositions);
        let mut next_display = 0;
        let mut upper = Upper::default();
        // No key is longer than the builder makes them: what a crafted file could hold beyond
        // that would cost every walk and decoded list its length.
        let max = crate::normalize::MAX_KEY_BYTES;
        let mut long = None;
        for b in 0..self.len.div_ceil(bs) {
            let mut ok = true;
            let mut seen = 0;
            let mut shared = 0;
            let decoded = self.decode_bucket_with(b, &mut buf, |p, part| match part {
                Part::Shared(n) => {
                    shared = n;
                    Flow::Decode
                }
                Part::Key(key, flag) => {
                    // A bucket's first key shares nothing with the one before, in the bucket
                    // before: it is checked whole.
                    let shared = shared.min(prev.len());
                    let has_display =
                        next_display < displays.len() / 4 && u32_at(displays, next_display) == p;
                    next_display += usize::from(has_display);
                    if key.len() > max {
                        long = Some(p);
                        return Flow::Stop;
                    }
                    ok &= (p == 0 || follows(&prev, key, shared))
                        && flag == has_display
                        && utf8_after(&prev, key, shared);
                    upper.push(key, p, shared);
                    prev.truncate(shared);
                    prev.extend_from_slice(key.get(shared..).unwrap_or_default());
                    seen += 1;
                    if ok { Flow::Decode } else { Flow::Stop }
                }
            });
            if let Some(p) = long {
                return Err(Error::corrupt(format!("key {p} is longer than {max} bytes")));
            }
            let expected = bs.min(self.len - b * bs);
            if decoded.is_none() || !ok || seen != expected {
                return Err(Error::corrupt(format!("key bucket {b} is malformed or out of order")));
            }
        }
        if next_display != displays.len() / 4 {
            return Err(Error::corrupt("display table names keys without the display flag"));
        }
        upper.shrink_to_fit();
        Ok(upper)
    }

    /// The ranks are a permutation of the positions, the rank -> position table inverts them,
    /// the score runs are a non-increasing step function, and ties are ranked in key order.
    fn verify_ranks_and_scores(&self) -> Result<()> {
        let n = self.len;
        if Some(self.section(Section::RankPositions).len()) != packed_len(n, self.width) {
            return Err(Error::corrupt("rank positions length"));
        }
        // One pass proves both: when every position's rank is below n and leads back to that
        // position, no two positions share a rank. (A table of the ranks seen, as before, was
        // a second pass of random writes.)
        for pos in 0..n as u32 {
            let r = self.rank(pos);
            if r as usize >= n || self.position_of(r) != pos {
                return Err(Error::corrupt(
                    "ranks are not a permutation inverted by rank positions",
                ));
            }
        }
        let starts = self.section(Section::ScoreRunStarts);
        let values = self.section(Section::ScoreRunValues);
        let runs = starts.len() / 4;
        if !starts.len().is_multiple_of(4) || values.len() != runs * 8 || (n > 0 && runs == 0) {
            return Err(Error::corrupt("score runs length"));
        }
        for i in 0..runs {
            let (s, v) = (u32_at(starts, i), f64_at(values, i));
            let ok = if i == 0 {
                s == 0
            } else {
                s > u32_at(starts, i - 1) && v < f64_at(values, i - 1)
            };
            if !ok || s as usize >= n.max(1) || !v.is_finite() || v < 0.0 {
                return Err(Error::corrupt("score runs are not a non-increasing step function"));
            }
        }
        self.verify_ties(starts)
    }

    /// Within a run of equal scores, ranks follow the keys' order (positions): the ranking
    /// order's tie-break ([`crate::rank`]). Without it a crafted file answers ties out of order.
    fn verify_ties(&self, starts: &[u8]) -> Result<()> {
        let runs = starts.len() / 4;
        for i in 0..runs {
            let start = u32_at(starts, i);
            let end = if i + 1 < runs { u32_at(starts, i + 1) } else { self.len as u32 };
            let mut last = None;
            for r in start..end {
                let pos = self.position_of(r);
                if last.is_some_and(|last| pos <= last) {
                    return Err(Error::corrupt("equal scores are not ranked in key order"));
                }
                last = Some(pos);
            }
        }
        Ok(())
    }

    fn verify_lists(&self) -> Result<()> {
        let nodes = self.node_count();
        let values = nodes.checked_mul(self.top_k * 2);
        if Some(self.section(Section::NodeLists).len())
            != values.and_then(|v| packed_len(v, self.width))
        {
            return Err(Error::corrupt("node lists length"));
        }
        // Every node (the node index holds each exactly once, checked above) lists completions
        // of its own path only. Keys are in position order, so the completions of path P are
        // the positions in [lower_bound(P), lower_bound(prefix_end(P))), as in `filter`: two
        // bucket decodes per node instead of a key decode per entry. Without
        // this check a crafted list answers "a" with "cafe weather" (found by fuzzing).
        // The fst crate's streamer can panic on crafted bytes that the walk in `fstwalk::verify`
        // accepts; a panic here is corruption, and a snapshot that loads streams cleanly later.
        let check = std::panic::AssertUnwindSafe(|| self.verify_list_ranges());
        std::panic::catch_unwind(check)
            .unwrap_or_else(|_| Err(Error::corrupt("node index is malformed")))
    }

    fn verify_list_ranges(&self) -> Result<()> {
        let mut buf = decode_buffer();
        // The node index yields its paths in key order, so each starts at or after the last.
        let mut lo = 0;
        for (path, node) in self.node_paths() {
            let range = self.path_range(&path, lo, &mut buf);
            lo = range.start;
            let mut previous: Option<u32> = None;
            for (pos, rank) in self.node_list(node) {
                let ok = range.contains(&pos)
                    && self.rank(pos) == rank
                    && previous.is_none_or(|p| p < rank);
                if !ok {
                    return Err(Error::corrupt(format!("node list {node} is malformed")));
                }
                previous = Some(rank);
            }
        }
        Ok(())
    }

    fn verify_display(&self) -> Result<()> {
        let positions = self.section(Section::DisplayPositions);
        let offsets = self.section(Section::DisplayOffsets);
        let text = self.section(Section::DisplayText);
        let n = positions.len() / 4;
        let sorted = (1..n).all(|i| u32_at(positions, i - 1) < u32_at(positions, i));
        let in_range = n == 0 || (u32_at(positions, n - 1) as usize) < self.len;
        let offsets_ok = Some(offsets.len()) == (n + 1).checked_mul(4)
            && (0..n).all(|i| u32_at(offsets, i) <= u32_at(offsets, i + 1))
            && u32_at(offsets, n) as usize == text.len();
        if !positions.len().is_multiple_of(4) || !sorted || !in_range || !offsets_ok {
            return Err(Error::corrupt("display table is malformed"));
        }
        let utf8 = (0..n).all(|i| {
            let range = u32_at(offsets, i) as usize..u32_at(offsets, i + 1) as usize;
            text.get(range).is_some_and(|t| std::str::from_utf8(t).is_ok())
        });
        if !utf8 {
            return Err(Error::corrupt("display text is not UTF-8"));
        }
        Ok(())
    }
}

/// `Err(Cancelled)` once the caller of [`Snapshot::open_cancellable`] gave up on the load.
pub(super) fn go_on(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::Relaxed) { Err(Error::Cancelled) } else { Ok(()) }
}

/// Bytes of a packed section of `values` values of `width` bits; `None` if that overflows
/// (only a crafted count can).
fn packed_len(values: usize, width: u32) -> Option<usize> {
    values.checked_mul(width as usize)?.div_ceil(8).checked_add(8)
}

#[cfg(test)]
mod tests {
    use super::super::super::packed;
    use super::super::super::{BuildInfo, Entry, write};
    use super::*;

    /// Ties ranked against the keys' order, in a file whose checksum is valid: refused. Every
    /// other check passes such a file (the ranks are a permutation, the scores a step function,
    /// each list's completions its own), and it answered ties out of the ranking order.
    #[test]
    fn ties_ranked_out_of_key_order_are_refused() {
        let entries: Vec<Entry> = [("alpha", 1.0), ("beta", 1.0), ("gamma", 2.0)]
            .map(|(key, score)| Entry { key: key.to_owned(), display: None, score })
            .into();
        let info = BuildInfo { top_k: 10, ..BuildInfo::default() };
        let (mut bytes, _) = write(&entries, &info).unwrap();
        let s = Snapshot::from_bytes(bytes.clone()).unwrap();
        // gamma, then the tie in key order: ranks by position [1, 2, 0].
        assert_eq!((0..3).map(|pos| s.rank(pos)).collect::<Vec<_>>(), [1, 2, 0]);
        // alpha and beta swap ranks; ranks by position and positions by rank are both [2, 1, 0].
        for section in [Section::Ranks, Section::RankPositions] {
            let range = s.ranges[section as usize].clone();
            let swapped = packed::pack([2, 1, 0].into_iter(), s.width);
            bytes[range.clone()].copy_from_slice(&swapped[..range.len()]);
        }
        let body = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
        let refused = Snapshot::from_bytes(bytes).map(|_| ()).unwrap_err();
        assert!(refused.to_string().contains("key order"), "{refused}");
    }
}
