//! The fuzzy walk's upper level: the distinct beginnings of the keys, held in memory.
//!
//! A fuzzy walk that must prove nothing more lies within two edits (half of the one-typo texts
//! at 10M completions) visits thousands of trie prefixes, and most of them are pruned within
//! their first few characters. Visited in the key store, each costs a bucket decode: a cache
//! miss or two in a file of hundreds of megabytes. So the walk first visits the distinct
//! [`CUT`]-byte beginnings of the keys (the *cuts*), kept here as a sorted array of numbers,
//! and goes down into the key store only under a cut whose path is still alive after all of
//! it.
//!
//! The cuts are collected while the keys are verified, in the one pass that decodes them all,
//! so they cost no space in the file and no separate pass. They are not a format: nothing
//! here is read from the file.
//!
//! Keys are cut by bytes, not characters: a cut may end inside a character (the walk then
//! reads the complete characters before it and goes down), but cutting at a fixed byte length
//! keeps the cuts in the keys' order, which cutting at character boundaries would not.

use super::reader::head_word;
use super::search::gallop_point;

/// Bytes of a cut: a key's first `CUT` bytes, or the whole key when it is shorter.
pub(super) const CUT: usize = 7;

// A cut's number holds seven bytes and its length; the fuzzy walk's bounds (a character and
// 0xFF, at most five bytes) must not straddle a cut.
const _: () = assert!(CUT >= 5 && CUT <= 7);

/// Cuts per block of [`Upper::blocks`]: the array of every block's first cut is small enough
/// to stay in a core's cache (333 KB at 10M completions), and a block is four cache lines.
const BLOCK: usize = 32;

/// The cuts [`Upper::seek`] reads one by one before it looks at the blocks: about a cache line,
/// the one the walk has just read.
const NEAR: usize = 8;

/// The cuts of every key, in key order, each with the position of its first key.
#[derive(Debug, Default)]
pub(super) struct Upper {
    /// Each cut as one number: its bytes big-endian in the top seven bytes, zero-padded, and its
    /// length in the lowest. Two of them compare as the byte strings do (a shorter string that
    /// is a prefix of a longer one has the smaller length and the same bytes).
    cuts: Vec<u64>,
    /// The first cut of every [`BLOCK`] cuts: a far seek searches these, then one block.
    blocks: Vec<u64>,
    /// The position of the first key of each cut; keys of cut `i` end where cut `i + 1`'s start.
    starts: Vec<u32>,
    /// The number of keys.
    total: u32,
}

/// [`Upper::cuts`]' number for `bytes` (at most [`CUT`] of them, so [`head_word`] leaves the
/// lowest byte free for the length).
fn encode(bytes: &[u8]) -> u64 {
    head_word(bytes) | bytes.len() as u64
}

impl Upper {
    /// Bytes of memory held.
    pub(super) fn memory_bytes(&self) -> usize {
        (self.cuts.capacity() + self.blocks.capacity()) * 8 + self.starts.capacity() * 4
    }

    /// Gives back what the arrays reserved while growing (up to half their memory), once
    /// every key was pushed.
    pub(super) fn shrink_to_fit(&mut self) {
        self.cuts.shrink_to_fit();
        self.blocks.shrink_to_fit();
        self.starts.shrink_to_fit();
    }

    /// Adds the key at `pos`, given in key order, whose first `shared` bytes are those of the
    /// key before (any number up to their common prefix's length). A key that shares a whole
    /// cut with the key before is in that key's cut, with nothing to encode or compare.
    pub(super) fn push(&mut self, key: &[u8], pos: u32, shared: usize) {
        if shared < CUT {
            let cut = encode(&key[..key.len().min(CUT)]);
            if self.cuts.last() != Some(&cut) {
                if self.cuts.len().is_multiple_of(BLOCK) {
                    self.blocks.push(cut);
                }
                self.cuts.push(cut);
                self.starts.push(pos);
            }
        }
        self.total = pos + 1;
    }

    /// The bytes of cut `i` (in the first `len` of the array), and `len`.
    pub(super) fn cut(&self, i: usize) -> ([u8; 8], usize) {
        let word = self.cuts[i];
        (word.to_be_bytes(), (word & 0xFF) as usize)
    }

    /// The positions of the keys of cut `i`.
    pub(super) fn keys(&self, i: usize) -> std::ops::Range<u32> {
        self.starts[i]..self.starts.get(i + 1).copied().unwrap_or(self.total)
    }

    /// The first cut from `from` on that has a key at or above `target`, given that every
    /// key of the cuts before `from` is below it; and whether that cut's keys may begin below
    /// `target` (it is `target`'s own first [`CUT`] bytes, so its keys straddle `target` and
    /// are sought in the key store). Every other cut lies wholly on one side: a cut shorter
    /// than [`CUT`] is a whole key, and a full one is a prefix of all its keys.
    pub(super) fn seek(&self, target: &[u8], from: usize) -> (usize, bool) {
        let head = encode(&target[..target.len().min(CUT)]);
        let at = self.first_not_below(head, from);
        let straddles = target.len() > CUT && self.cuts.get(at) == Some(&head);
        (at, straddles)
    }

    /// The first cut from `from` on that is not below `head`, every cut before `from` being
    /// below it. Skips of a subtree land anywhere from the next cut to a hundred thousand
    /// ahead. The near ones are read where the walk just was; a far one galloping over the
    /// 10 MB array cost a cache miss per probe (a profile put 13% of the fuzzy answers' time
    /// in it), so it searches
    /// the cached block starts instead and then one block.
    fn first_not_below(&self, head: u64, from: usize) -> usize {
        let cuts = &self.cuts;
        let near = (from + NEAR).min(cuts.len());
        if let Some(i) = cuts.get(from..near).and_then(|c| c.iter().position(|&c| c >= head)) {
            return from + i;
        }
        if near >= cuts.len() {
            return cuts.len();
        }
        // Blocks after `from`'s own start after `from`; the first not below `head` ends the
        // range that holds the answer (or the answer is that block's first cut).
        let first = from / BLOCK + 1;
        let rest = self.blocks.get(first..).unwrap_or_default();
        let block = first + gallop_point(0, rest.len(), |i| rest[i] < head);
        let lo = near.max((block - 1) * BLOCK);
        let hi = (block * BLOCK).min(cuts.len());
        // Counted rather than binary-searched: the block's four cache lines are independent
        // loads, missed together, where a binary search's probes each waited for the last
        // (three quarters of this function's time in a profile of the fuzzy answers).
        lo + cuts[lo..hi].iter().filter(|&&c| c < head).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::frontcode::common_prefix_len;
    use proptest::prelude::*;

    fn upper_of(keys: &[String]) -> Upper {
        let mut upper = Upper::default();
        for (pos, key) in keys.iter().enumerate() {
            // As the key store's front coding says it, and at times less (a bucket's first key
            // shares nothing).
            let before = if pos == 0 { &[][..] } else { keys[pos - 1].as_bytes() };
            let shared = common_prefix_len(before, key.as_bytes());
            upper.push(key.as_bytes(), pos as u32, if pos % 3 == 0 { 0 } else { shared });
        }
        upper
    }

    proptest! {
        #[test]
        fn cuts_partition_the_keys_in_order(
            keys in proptest::collection::btree_set("[ab\u{e9}\u{4e2d}]{0,10}", 1..60),
        ) {
            let keys: Vec<String> = keys.into_iter().collect();
            let upper = upper_of(&keys);
            let mut next = 0;
            for i in 0..upper.cuts.len() {
                let (bytes, len) = upper.cut(i);
                let range = upper.keys(i);
                prop_assert_eq!(range.start, next);
                prop_assert!(range.start < range.end);
                for pos in range.clone() {
                    let key = keys[pos as usize].as_bytes();
                    prop_assert_eq!(&key[..key.len().min(CUT)], &bytes[..len]);
                }
                next = range.end;
            }
            prop_assert_eq!(next as usize, keys.len());
        }

        // Enough keys for many blocks of cuts, and starting points far before the target.
        #[test]
        fn seek_finds_the_first_key_at_or_above_a_target(
            keys in proptest::collection::btree_set("[ab\u{e9}]{0,10}", 1..600),
            target in "[ab\u{e9}\u{ff}]{0,10}",
            from in 0usize..200,
        ) {
            let keys: Vec<String> = keys.into_iter().collect();
            let upper = upper_of(&keys);
            let target = target.as_bytes();
            let first = keys.iter().position(|k| k.as_bytes() >= target).unwrap_or(keys.len());
            // `seek` may start only past cuts whose keys are all below the target.
            let from = (0..=from.min(upper.cuts.len()))
                .rev()
                .find(|&i| i == 0 || upper.keys(i - 1).end as usize <= first)
                .unwrap_or(0);
            let (at, straddles) = upper.seek(target, from);
            if straddles {
                let range = upper.keys(at);
                prop_assert!((range.start as usize..=range.end as usize).contains(&first));
            } else {
                let start = if at < upper.cuts.len() { upper.keys(at).start as usize } else { keys.len() };
                prop_assert_eq!(start, first);
            }
        }
    }
}
