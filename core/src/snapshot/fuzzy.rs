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
//! beyond it; within a bucket, a key that shares more with the key before than that key shares
//! with the target is below the target too, and its own bytes are not decoded.
//!
//! Most subtrees die within their first few characters, so the walk visits the keys' distinct
//! first bytes in memory first ([`upper`](super::upper)) and goes down into the key store only
//! under a beginning whose path is still alive after all of it.
//!
//! The rows themselves are [`osa`](super::osa)'s: a few machine words per character for typed texts up
//! to 63 characters, the diagonal band of the table beyond.

use super::Snapshot;
use super::frontcode::{Flow, Part, common_prefix_len, decode_buffer};
use super::osa::{Band, Bits, Rows};
use super::reader::{below_by_words, head_word};
use super::upper;

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
        match Bits::with(p, limit) {
            Some(bits) => self.walk_prefixes(Walk::new(p, limit, bits), budget),
            None => self.walk_prefixes(Walk::new(p, limit, Band::with(p, limit)), budget),
        }
    }

    fn walk_prefixes<R: Rows>(&self, mut walk: Walk<'_, R>, budget: &mut Budget) -> Vec<Emitted> {
        let Some(&first) = walk.p.first() else { return Vec::new() };
        let mut utf8 = [0u8; 4];
        let first = first.encode_utf8(&mut utf8).as_bytes();
        let upper = &self.upper;
        // The bounds are at most five bytes (a character, and 0xFF): neither straddles a cut.
        let (start, _) = upper.seek(first, 0);
        let (end, _) = upper.seek(&crate::normalize::prefix_end(first), start);
        let mut found = Found { prefixes: Vec::new(), buf: decode_buffer() };
        let mut target = Target::default();
        let mut next = Next::Cut(start);
        loop {
            next = match next {
                Next::Cut(i) if i >= end || !budget.spend(1) => break,
                Next::Cut(i) => {
                    let (bytes, len) = upper.cut(i);
                    let cut = &bytes[..len];
                    // The first key's position is read only for an emit: most cuts are
                    // pruned, and it lies in another array (a cache miss of its own).
                    let skip = walk.visit(cut, &mut target.bytes, |n, d| {
                        found.prefixes.push((upper.keys(i).start, d, cut[..n].to_vec()));
                    });
                    if skip {
                        Next::after(upper.seek(&target.bytes, i + 1))
                    } else if len < upper::CUT {
                        // A cut shorter than the limit is a whole key, and it was walked.
                        Next::Cut(i + 1)
                    } else {
                        Next::Keys { cut: i, skipping: false }
                    }
                }
                Next::Keys { cut, .. } if cut >= end => break,
                Next::Keys { cut, skipping } => {
                    let range = upper.keys(cut);
                    let skipping =
                        self.walk_keys(&mut walk, range, skipping, &mut target, budget, &mut found);
                    if budget.cut {
                        break;
                    }
                    if skipping {
                        Next::after(upper.seek(&target.bytes, cut + 1))
                    } else {
                        Next::Cut(cut + 1)
                    }
                }
            };
        }
        let Found { prefixes, mut buf } = found;
        prefixes
            .into_iter()
            .map(|(lo, d, path)| {
                let end = self.lower_bound(&crate::normalize::prefix_end(&path), &mut buf);
                Emitted { range: lo..end.max(lo), d, path }
            })
            .collect()
    }

    /// The walk below a cut, in the key store: the keys in `range`, from its start, skipping
    /// to `target` first when `skipping`. Returns whether it is still skipping at the end of
    /// the range (then every key in it is below `target`).
    fn walk_keys<R: Rows>(
        &self,
        walk: &mut Walk<'_, R>,
        range: std::ops::Range<u32>,
        mut skipping: bool,
        target: &mut Target,
        budget: &mut Budget,
        found: &mut Found,
    ) -> bool {
        let Found { prefixes, buf } = found;
        let (mut pos, hi) = (range.start, range.end);
        target.word = head_word(&target.bytes);
        let bs = self.bucket_size() as u32;
        // While skipping: the key before is below the target, and first differs from it at
        // this byte. A key that shares more than that with the key before is below the target
        // too, and is passed over without decoding its own bytes.
        let mut below: Option<usize> = None;
        while pos < hi {
            let bucket = (pos / bs) as usize;
            let mut stop = false;
            self.decode_bucket_with(bucket, buf, |at, part| {
                let key = match part {
                    Part::Shared(_) if at < pos => return Flow::Skip,
                    Part::Shared(_) if at >= hi || !budget.spend(1) => {
                        stop = true;
                        return Flow::Stop;
                    }
                    Part::Shared(shared) if skipping && below.is_some_and(|d| shared > d) => {
                        return Flow::Skip;
                    }
                    Part::Shared(_) => return Flow::Decode,
                    Part::Key(key, _) => key,
                };
                if skipping && target.above(key) {
                    below = Some(common_prefix_len(key, &target.bytes));
                    return Flow::Decode;
                }
                skipping = walk.visit(key, &mut target.bytes, |len, d| {
                    prefixes.push((at, d, key[..len].to_vec()));
                });
                if !skipping {
                    below = None;
                    return Flow::Decode;
                }
                target.word = head_word(&target.bytes);
                below = target.above(key).then(|| common_prefix_len(key, &target.bytes));
                // A target past the next bucket's head is past the rest of this bucket too:
                // gallop from there rather than decode the keys in between.
                if self.head_below(bucket + 1, &target.bytes, target.word) {
                    Flow::Stop
                } else {
                    Flow::Decode
                }
            });
            if stop {
                break;
            }
            pos = (bucket as u32 + 1) * bs;
            // (At the range's end there is nothing left to skip to: spending a step there
            // could cut a tier that lost nothing.)
            if skipping && pos < hi {
                if !budget.spend(1) {
                    break;
                }
                // The bucket resumed at may still begin below the target.
                pos = self.skip_past(target, pos, hi);
            }
        }
        skipping
    }
}

/// What a walk finds: each emitted prefix as the position of its first key, its distance and
/// its bytes; and the buffer the key store's buckets are decoded into, kept from one descent
/// to the next (a fresh one per descent was an allocation and a regrowth each: keeping it made
/// the one-typo answers at 10M about a tenth faster).
struct Found {
    prefixes: Vec<(u32, u8, Vec<u8>)>,
    buf: Vec<u8>,
}

/// Where the walk goes on: a cut to visit, or the keys of a cut to walk in the key store.
#[derive(Clone, Copy)]
enum Next {
    Cut(usize),
    Keys { cut: usize, skipping: bool },
}

impl Next {
    /// Past a skip, from [`Upper::seek`](super::upper::Upper::seek)'s answer: the cut found,
    /// or its keys when they straddle the target.
    fn after((cut, straddles): (usize, bool)) -> Next {
        if straddles { Next::Keys { cut, skipping: true } } else { Next::Cut(cut) }
    }
}

impl Snapshot {
    /// The bucket to go on from when every key before `pos` (a bucket start) is below
    /// `target`: the last bucket, up to the one holding position `hi - 1`, whose first key is
    /// below `target` (or `pos`'s own). Most skips land a bucket or two ahead, so this gallops
    /// over bucket heads from `pos` (their head words, a key read only on a tie) instead of
    /// binary-searching all of them.
    fn skip_past(&self, target: &Target, pos: u32, hi: u32) -> u32 {
        let bs = self.bucket_size() as u32;
        if pos >= hi {
            return pos;
        }
        let last = ((hi - 1) / bs) as usize;
        let below = |b: usize| self.head_below(b, &target.bytes, target.word);
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

/// A key the walk skips to, with its first eight bytes as a number ([`head_word`]): most
/// comparisons with it are decided by those, without a call to compare slices.
#[derive(Default)]
struct Target {
    bytes: Vec<u8>,
    word: u64,
}

impl Target {
    /// Whether `key` lies below the target.
    fn above(&self, key: &[u8]) -> bool {
        below_by_words(head_word(key), || Some(key), &self.bytes, self.word)
    }
}

/// The characters of `bytes`, decoded as they are read. Keys were verified to be UTF-8 when the
/// snapshot was opened, and a visit reads only the few characters past the shared prefix before
/// it prunes: validating the whole rest first was a tenth of the walk. Stops at a malformed
/// sequence, which a verified snapshot does not have.
fn chars_of(bytes: &[u8]) -> impl Iterator<Item = char> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let b = *bytes.get(at)?;
        let len = match b {
            0..=0x7F => {
                at += 1;
                return Some(char::from(b));
            }
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        let c = std::str::from_utf8(bytes.get(at..at + len)?).ok()?.chars().next()?;
        at += len;
        Some(c)
    })
}

/// The walk along the current key: its characters, and the OSA rows for them ([`osa`](super::osa)).
struct Walk<'p, R> {
    p: &'p [char],
    rows: R,
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

impl<'p, R: Rows> Walk<'p, R> {
    fn new(p: &'p [char], limit: u8, rows: R) -> Walk<'p, R> {
        let cap = limit + 1;
        Walk {
            p,
            rows,
            chars: Vec::new(),
            path: Vec::new(),
            mins: vec![0],
            ends: vec![0],
            best: vec![cap],
        }
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
        self.rows.truncate(common);
        // The rest of the key starts at a character boundary.
        for c in chars_of(&key[self.ends[common]..]) {
            self.chars.push(c);
            let j = self.chars.len();
            let row_min = self.rows.push(j, c, &self.chars);
            self.mins.push(row_min);
            let end = self.ends[j - 1] + c.len_utf8();
            self.ends.push(end);
            self.path.extend_from_slice(&key[end - c.len_utf8()..end]);
            let d = self.rows.last(j);
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
    /// to a row with a cell below `best` ([`Rows::continuations`]). `None` when the row has
    /// room for any character, or when no such character is left.
    fn next_useful(&self, j: usize, best: u8, after: char) -> Option<char> {
        let limit = best.checked_sub(1)?;
        if self.mins[j] != limit {
            return None;
        }
        let mut next: Option<char> = None;
        self.rows.continuations(j, limit, &self.chars, &mut |c| {
            if c > after && next.is_none_or(|n| c < n) {
                next = Some(c);
            }
        });
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn chars_are_decoded_as_std_does(text in "\\PC{0,12}") {
            prop_assert_eq!(chars_of(text.as_bytes()).collect::<String>(), text);
        }

        #[test]
        fn malformed_bytes_give_a_prefix(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let decoded: String = chars_of(&bytes).collect();
            prop_assert!(bytes.starts_with(decoded.as_bytes()));
        }

        #[test]
        fn targets_order_keys_bytewise(key in "[ab é]{0,12}", target in "[ab é\u{ff}]{0,12}") {
            let target = Target { word: head_word(target.as_bytes()), bytes: target.into_bytes() };
            prop_assert_eq!(target.above(key.as_bytes()), key.as_bytes() < target.bytes.as_slice());
        }
    }
}
