//! The fuzzy tier's walk: which trie prefixes lie within the typo limit of what was typed.
//!
//! Keys are visited in key order from the first key that starts with the typed first character,
//! carrying one row of the optimal-string-alignment table per character of the current key
//! (rows are shared with the previous key up to their common prefix, as a trie walk would). A
//! prefix whose distance improves on every shorter prefix of the same key is *emitted*: each key
//! below it has that distance unless a deeper emitted prefix improves it again. As soon as a
//! row's minimum cannot beat the best distance on its path, no longer prefix can either (the
//! minimum of an OSA row never decreases with depth), so every key sharing that prefix is
//! skipped. When a row has one useful edit left, only the few characters that continue a cell
//! at that distance (or complete a swap) can keep a child alive, so the walk jumps straight to
//! the next such sibling. Skips compare keys within a bucket and gallop over bucket heads
//! beyond it.
//!
//! Only cells within `limit + 1` of the diagonal can hold a distance within the limit, so a row
//! stores just that band: a visit costs a few cells per character whatever the typed length.

use super::Snapshot;

/// A trie prefix within the limit: the keys in `range` (those that start with `path`) are at
/// distance `d` unless a deeper emitted prefix says less.
#[derive(Debug, Clone)]
pub(super) struct Emitted {
    pub(super) path: Vec<u8>,
    pub(super) range: std::ops::Range<u32>,
    pub(super) d: u8,
}

/// Counts the work of one tier; past its limit the tier stops.
#[derive(Debug)]
pub(super) struct Budget {
    limit: usize,
    left: usize,
    /// Whether the tier stopped early.
    pub(super) cut: bool,
}

impl Budget {
    pub(super) fn new(limit: usize) -> Budget {
        Budget { limit, left: limit, cut: false }
    }

    /// Steps taken so far.
    pub(super) fn spent(&self) -> usize {
        self.limit - self.left
    }

    /// Takes `n` steps; false (and cut from then on) when fewer are left.
    pub(super) fn spend(&mut self, n: usize) -> bool {
        if self.cut || n > self.left {
            self.cut = true;
            return false;
        }
        self.left -= n;
        true
    }
}

impl Snapshot {
    /// Every emitted prefix for the typed characters `p` up to distance `limit` (1 or 2), in
    /// key order. Incomplete when `budget` runs out (then `budget.cut` is set).
    pub(super) fn fuzzy_prefixes(
        &self,
        p: &[char],
        limit: u8,
        budget: &mut Budget,
    ) -> Vec<Emitted> {
        let Some(&first) = p.first() else { return Vec::new() };
        let mut utf8 = [0u8; 4];
        let first = first.encode_utf8(&mut utf8).as_bytes();
        let mut buf = Vec::with_capacity(64);
        let hi = self.lower_bound(&crate::normalize::prefix_end(first), &mut buf);
        let mut pos = self.lower_bound(first, &mut buf);
        let mut walk = Walk::new(p, limit);
        let mut found: Vec<(usize, u32, u8, Vec<u8>)> = Vec::new();
        // While `skipping`, keys below `target` are skipped: past a pruned subtree, or up to the
        // next child that can still match.
        let (mut target, mut skipping) = (Vec::with_capacity(64), false);
        let bs = self.bucket_size() as u32;
        while pos < hi {
            let (bucket, from) = ((pos / bs) as usize, (pos % bs) as usize);
            let mut stop = false;
            self.decode_bucket_from(bucket, from, &mut buf, |at, key, _| {
                if at >= hi || !budget.spend(1) {
                    stop = true;
                    return false;
                }
                if skipping && key < target.as_slice() {
                    return true;
                }
                skipping = walk.visit(key, &mut target, |len, d| {
                    found.push((len, at, d, key[..len].to_vec()))
                });
                // A target past the next bucket's head is past the rest of this bucket too:
                // gallop from there rather than decode the keys in between.
                !(skipping && self.head_below(bucket + 1, &target))
            });
            if stop {
                break;
            }
            pos = (bucket as u32 + 1) * bs;
            if skipping {
                if !budget.spend(1) {
                    break;
                }
                // The bucket resumed at may still begin below the target.
                pos = self.skip_past(&target, pos, hi);
            }
        }
        found
            .into_iter()
            .map(|(_, lo, d, path)| {
                let end = self.lower_bound(&crate::normalize::prefix_end(&path), &mut buf);
                Emitted { range: lo..end.max(lo), d, path }
            })
            .collect()
    }
}

impl Snapshot {
    /// The bucket to go on from when every key before `pos` (a bucket start) is below
    /// `target`: the last bucket, up to the one holding position `hi - 1`, whose first key is
    /// below `target` (or `pos`'s own). Most skips land a bucket or two ahead, so this gallops
    /// over bucket heads from `pos` (each a cheap decode of one whole key) instead of searching
    /// the bucket index from its top.
    fn skip_past(&self, target: &[u8], pos: u32, hi: u32) -> u32 {
        let bs = self.bucket_size() as u32;
        if pos >= hi {
            return pos;
        }
        let last = ((hi - 1) / bs) as usize;
        let below = |b: usize| self.head_below(b, target);
        let mut lo = (pos / bs) as usize;
        if !below(lo) {
            return pos;
        }
        // Invariant: head(lo) < target; find `up` with head(up) >= target (or past `last`).
        let mut step = 1;
        let mut up = loop {
            let probe = lo + step;
            if probe > last {
                break last + 1;
            }
            if !below(probe) {
                break probe;
            }
            lo = probe;
            step *= 2;
        };
        while up - lo > 1 {
            let mid = lo + (up - lo) / 2;
            if below(mid) { lo = mid } else { up = mid }
        }
        lo as u32 * bs
    }
}

/// The OSA rows along the current key, banded.
struct Walk<'p> {
    p: &'p [char],
    /// Distances are capped here (one more than the limit): nothing beyond matters.
    cap: u8,
    /// Cells per row: the band `i in j-cap ..= j+cap`.
    width: usize,
    rows: Vec<u8>,
    chars: Vec<char>,
    /// The path's bytes.
    path: Vec<u8>,
    /// `mins[j]`: the minimum of row `j`.
    mins: Vec<u8>,
    /// `ends[j]`: bytes of the first `j` characters of the path.
    ends: Vec<usize>,
    /// `best[j]`: the smallest distance emitted on the path up to depth `j`.
    best: Vec<u8>,
}

impl<'p> Walk<'p> {
    fn new(p: &'p [char], limit: u8) -> Walk<'p> {
        let cap = limit + 1;
        let width = 2 * usize::from(cap) + 1;
        let mut walk = Walk {
            p,
            cap,
            width,
            rows: vec![cap; width],
            chars: Vec::new(),
            path: Vec::new(),
            mins: vec![0],
            ends: vec![0],
            best: vec![cap],
        };
        for i in 0..=usize::from(cap).min(p.len()) {
            let at = walk.slot(0, i);
            walk.rows[at] = (i as u8).min(cap);
        }
        walk
    }

    /// Index of cell (i, j) in `rows`; callers keep `i` within the band of row `j`.
    fn slot(&self, j: usize, i: usize) -> usize {
        j * self.width + i + usize::from(self.cap) - j
    }

    /// Cell (i, j): the distance between `p[..i]` and the path's first `j` characters.
    fn cell(&self, j: usize, i: usize) -> u8 {
        let cap = usize::from(self.cap);
        if i + cap < j || i > j + cap { self.cap } else { self.rows[self.slot(j, i)] }
    }

    /// Extends the walk along `key`, reusing the rows of the common prefix with the previous
    /// key. Calls `emit(prefix bytes, d)` for each improving prefix; returns true with the key
    /// the walk can skip to in `target` (every key below it is useless), false when the whole
    /// key was walked.
    ///
    /// A prefix whose row cannot improve is skipped whole. When its parent's row had already
    /// spent all but the last useful edit, only a few next characters can keep a row alive
    /// (those that continue a cell at that distance, or complete a swap), so the walk skips to
    /// the parent's next child with such a character instead of visiting every sibling.
    fn visit(&mut self, key: &[u8], target: &mut Vec<u8>, mut emit: impl FnMut(usize, u8)) -> bool {
        // The characters shared with the path: whole characters within the common bytes.
        let bytes = key.iter().zip(&self.path).take_while(|(a, b)| a == b).count();
        let common = self.ends.partition_point(|&e| e <= bytes) - 1;
        self.chars.truncate(common);
        self.ends.truncate(common + 1);
        self.best.truncate(common + 1);
        self.mins.truncate(common + 1);
        self.path.truncate(self.ends[common]);
        self.rows.truncate((common + 1) * self.width);
        // Keys were verified to be UTF-8 when the snapshot was opened; the rest of this one
        // starts at a character boundary.
        let Ok(rest) = std::str::from_utf8(&key[self.ends[common]..]) else { return false };
        for c in rest.chars() {
            let j = self.chars.len() + 1;
            let row_min = self.push_row(j, c);
            self.mins.push(row_min);
            self.chars.push(c);
            let end = self.ends[j - 1] + c.len_utf8();
            self.ends.push(end);
            self.path.extend_from_slice(&key[end - c.len_utf8()..end]);
            let d = self.cell(j, self.p.len());
            let before = self.best[j - 1];
            let best = if d < before {
                emit(end, d);
                d
            } else {
                before
            };
            self.best.push(best);
            if row_min >= best {
                let parent = j - 1;
                let start = self.ends[parent];
                let next = (best == before && parent >= 1)
                    .then(|| self.next_useful(parent, before, c))
                    .flatten();
                target.clear();
                match next {
                    Some(n) => {
                        target.extend_from_slice(&key[..start]);
                        target.extend_from_slice(n.encode_utf8(&mut [0; 4]).as_bytes());
                    }
                    None if best == before && parent >= 1 && self.mins[parent] + 1 == before => {
                        // No sibling left that can match: past the parent's whole subtree.
                        target.extend_from_slice(&key[..start]);
                        target.push(0xFF);
                    }
                    None => {
                        target.extend_from_slice(&key[..end]);
                        target.push(0xFF);
                    }
                }
                return true;
            }
        }
        false
    }

    /// When row `j` (the path's first `j` characters) has its minimum at `best - 1` — one edit
    /// short of being useless — the smallest character after `after` that can extend the path
    /// to a row with a cell below `best`: `p[i - 1]` where cell (i - 1, j) is `best - 1` (a
    /// match), or `p[i - 2]` where a swap completes. `None` when the row has room for any
    /// character, or when no such character is left.
    fn next_useful(&self, j: usize, best: u8, after: char) -> Option<char> {
        let limit = best.checked_sub(1)?;
        if self.mins[j] != limit {
            return None;
        }
        let cap = usize::from(self.cap);
        let (lo, hi) = (j.saturating_sub(cap), (j + cap).min(self.p.len()));
        let mut next: Option<char> = None;
        let mut consider = |c: char| {
            if c > after && next.is_none_or(|n| c < n) {
                next = Some(c);
            }
        };
        for i in (lo + 1)..=(hi + 1).min(self.p.len()) {
            if self.cell(j, i - 1) == limit {
                consider(self.p[i - 1]);
            }
            let swap = i >= 2
                && j >= 1
                && self.p[i - 1] == self.chars[j - 1]
                && self.cell(j - 1, i - 2) < limit;
            if swap {
                consider(self.p[i - 2]);
            }
        }
        next
    }

    /// Computes row `j` for the path extended by `c`; returns the row's minimum.
    fn push_row(&mut self, j: usize, c: char) -> u8 {
        let cap = usize::from(self.cap);
        self.rows.extend(std::iter::repeat_n(self.cap, self.width));
        let (lo, hi) = (j.saturating_sub(cap), (j + cap).min(self.p.len()));
        let mut row_min = self.cap;
        for i in lo..=hi {
            let mut d = if i == 0 {
                j
            } else {
                let p = self.p[i - 1];
                let sub = usize::from(self.cell(j - 1, i - 1)) + usize::from(p != c);
                let del = usize::from(self.cell(j - 1, i)) + 1;
                let ins = usize::from(self.cell(j, i - 1)) + 1;
                sub.min(del).min(ins)
            };
            if i >= 2 && j >= 2 && self.p[i - 1] == self.chars[j - 2] && self.p[i - 2] == c {
                d = d.min(usize::from(self.cell(j - 2, i - 2)) + 1);
            }
            let d = d.min(cap) as u8;
            let at = self.slot(j, i);
            self.rows[at] = d;
            row_min = row_min.min(d);
        }
        row_min
    }
}
