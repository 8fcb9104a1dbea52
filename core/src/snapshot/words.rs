//! The word index: which completions hold a word, best first. It serves the words tier
//! ([`crate::matching::Match::Words`]), whose candidates can start anywhere in key order.
//!
//! Words are numbered in byte order (an ordinal FST, like the node index), so the words that
//! start with a typed partial word are one contiguous id range. Each word's posting list holds
//! the *ranks* of the completions that contain it, ascending — best first, so a tier stops
//! reading as soon as it has enough — delta-coded as LEB128 gaps. Ranks rather than positions
//! because a tier reads them in answer order; the `RankPositions` section turns a rank back
//! into the key position the key store needs.
//!
//! ```text
//! WordIndex      | fst::Map: word -> word id (0, 1, 2, ... in byte order)
//! PostingSamples | u32 per SAMPLE-th word, + 1: where its list starts in Postings (the last
//!                | entry: where the lists end)
//! Postings       | per word, in id order: a list of one rank as the varint (rank << 1 | 1);
//!                | longer lists as the varint (count << 1), the varint byte length of what
//!                | follows, a block table when longer than 128 (see `encode`), then ranks:
//!                | absolute at each block start, else varint (gap - 1)
//! RankPositions  | packed, w bits per rank: the key position of that rank
//! ```
//!
//! Why samples and self-sized lists instead of one offset per word (format 2): at 10M
//! completions the synthetic vocabulary has 6.9M distinct words, and 5.0M of them are in one
//! key. An offset per word was 4 bytes for a list of 4-5; a list now says how long it is, so a
//! lookup starts at the nearest sample and skips at most `SAMPLE - 1` lists (a few headers in
//! one or two cache lines), and a word in one key costs its rank alone.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use super::error::{Error, Result};
use super::layout::u32_at;
use super::varint;
use crate::matching;

/// The three word sections (index FST, offsets, postings) of keys given in position order.
///
/// Each word occurrence becomes a (word id, position) pair, and a counting sort by id lays
/// every list out in one array: no list per word to grow, which at 10M completions (7M
/// distinct words) was most of the time this took. What is not linear is sorting the distinct
/// words once, and each list's ranks.
///
/// The ranks are asked for (`ranks()`, the key positions' ranks) only when the lists are
/// encoded, so the writer starts this before it has ranked the keys; `None` means the writer
/// gave up, and so does this.
pub(super) fn sections<'r>(
    keys: &[&[u8]],
    ranks: impl FnOnce() -> Option<&'r [u32]>,
) -> Result<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let (words, pairs) = occurrences(keys)?;
    // Ids in byte order of the words: the order of the index FST.
    let order = crate::bytesort::order(words.len(), |i| words[i]);
    let mut sorted_id = vec![0u32; words.len()];
    for (new, &old) in order.iter().enumerate() {
        sorted_id[old] = new as u32;
    }
    // Counting sort of the positions by sorted word id.
    let mut starts = vec![0usize; words.len() + 1];
    for &(id, _) in &pairs {
        starts[sorted_id[id as usize] as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut fill = starts.clone();
    let mut lists = vec![0u32; pairs.len()];
    for &(id, pos) in &pairs {
        let slot = &mut fill[sorted_id[id as usize] as usize];
        lists[*slot] = pos;
        *slot += 1;
    }
    drop((pairs, fill, sorted_id));
    // The FST and the lists need nothing from each other: at 10M words each is seconds, so
    // the FST is built on a second thread meanwhile.
    std::thread::scope(|scope| {
        let index = scope.spawn(|| {
            let mut index = fst::MapBuilder::memory();
            for (id, &old) in order.iter().enumerate() {
                index.insert(words[old], id as u64).map_err(super::writer::fst_error)?;
            }
            index.into_inner().map_err(super::writer::fst_error)
        });
        let lists = match ranks() {
            Some(ranks) => posting_lists(&lists, &starts, |pos| ranks[pos as usize]),
            None => Err(Error::InvalidInput("the keys were not ranked".into())),
        };
        let index = index.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        let (samples, postings) = lists?;
        Ok((index, samples, postings))
    })
}

/// The words by id, and every (word id, key position) pair.
type Occurrences<'k> = (Vec<&'k [u8]>, Vec<(u32, u32)>);

/// Every word occurrence as a (word id, key position) pair, and the words by id (in order of
/// first occurrence).
///
/// Keys come in key order, so a key mostly starts with the words of the one before it: a
/// word that ends (at a space) inside the prefix the two keys share is the previous key's
/// word at the same place, and its id is taken from there. At 10M completions that skips 8.6M
/// of 29.9M lookups; most of the time left is inserting the 6.9M distinct words.
fn occurrences<'k>(keys: &[&'k [u8]]) -> Result<Occurrences<'k>> {
    let mut ids: FxHashMap<&[u8], u32> = FxHashMap::default();
    let mut words: Vec<&[u8]> = Vec::new();
    // About 3.5 words per query: room for four spares the doubling of a large vector.
    let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(keys.len() * 4);
    // (end, id) of each word of the previous key, and of this one.
    let (mut before, mut here) = (Vec::<(usize, u32)>::new(), Vec::<(usize, u32)>::new());
    let mut previous: &[u8] = &[];
    for (pos, &key) in keys.iter().enumerate() {
        // Keys are UTF-8 (the writer's input is `String`s).
        let text = std::str::from_utf8(key).map_err(|e| Error::InvalidInput(e.to_string()))?;
        let shared = super::frontcode::common_prefix_len(previous, key);
        here.clear();
        for (start, word) in matching::word_spans(text) {
            let end = start + word.len();
            let id = match before.get(here.len()) {
                Some(&(e, id)) if e == end && end < shared => id,
                _ => *ids.entry(word.as_bytes()).or_insert_with(|| {
                    words.push(word.as_bytes());
                    (words.len() - 1) as u32
                }),
            };
            here.push((end, id));
            pairs.push((id, pos as u32));
        }
        std::mem::swap(&mut before, &mut here);
        previous = key;
    }
    Ok((words, pairs))
}

/// The samples and the encoded lists: list `id` is `lists[starts[id]..starts[id + 1]]`, its
/// key positions in any order, which `rank` turns into ranks.
fn posting_lists(
    lists: &[u32],
    starts: &[usize],
    rank: impl Fn(u32) -> u32,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let (mut samples, mut postings, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
    let mut ranks: Vec<u32> = Vec::new();
    for (id, range) in starts.windows(2).enumerate() {
        if id % SAMPLE == 0 {
            samples.extend_from_slice(&offset(postings.len())?.to_le_bytes());
        }
        ranks.clear();
        ranks.extend(lists[range[0]..range[1]].iter().map(|&pos| rank(pos)));
        ranks.sort_unstable();
        // A word twice in one key is listed once.
        ranks.dedup();
        encode(&ranks, &mut postings, &mut scratch);
    }
    samples.extend_from_slice(&offset(postings.len())?.to_le_bytes());
    Ok((samples, postings))
}

fn offset(len: usize) -> Result<u32> {
    u32::try_from(len).map_err(|_| Error::InvalidInput("posting lists exceed 4 GiB".into()))
}

/// Entries per block: every block starts with an absolute rank, and a list longer than one
/// block starts with a table of where each later block starts, so an intersection can jump.
const BLOCK: usize = 128;

/// Lists per sample: the start of every `SAMPLE`-th list is stored, the others are found by
/// skipping lists from there.
const SAMPLE: usize = 16;

/// One list (`ranks` ascending, not empty). One rank: the varint `rank << 1 | 1`. More: the
/// varint `count << 1`, the varint byte length of the rest, then per later block (there are
/// `(count - 1) / BLOCK`) `u32 first rank, u32 byte offset` (little-endian, offsets from the
/// start of the entries), then the entries: the first of a block as the rank itself, the
/// others as `gap - 1`. `scratch` is the rest's buffer, reused across lists.
fn encode(ranks: &[u32], out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    if let [rank] = ranks {
        varint::put(out, u64::from(*rank) << 1 | 1);
        return;
    }
    varint::put(out, (ranks.len() as u64) << 1);
    let later = ranks.len().saturating_sub(1) / BLOCK;
    scratch.clear();
    scratch.resize(later * 8, 0);
    let data = scratch.len();
    for (i, &r) in ranks.iter().enumerate() {
        if i % BLOCK == 0 {
            if i > 0 {
                let at = (i / BLOCK - 1) * 8;
                scratch[at..at + 4].copy_from_slice(&r.to_le_bytes());
                let offset = (scratch.len() - data) as u32;
                scratch[at + 4..at + 8].copy_from_slice(&offset.to_le_bytes());
            }
            varint::put(scratch, u64::from(r));
        } else {
            varint::put(scratch, u64::from(r - ranks[i - 1] - 1));
        }
    }
    varint::put(out, scratch.len() as u64);
    out.extend_from_slice(scratch);
}

/// The ranks of one posting list, ascending, with [`Postings::seek`] to jump ahead. Stops
/// early (and stays stopped) on malformed bytes; [`verify`] rejects a snapshot with such a
/// list, so that happens only in tests.
#[derive(Debug, Clone, Default)]
pub(super) struct Postings<'a> {
    /// The entries.
    data: &'a [u8],
    /// The block table: (first rank, offset) of every block after the first.
    table: &'a [u8],
    /// The rank of a list of one, which has no entries.
    single: Option<u32>,
    count: usize,
    /// Entries decoded so far.
    index: usize,
    at: usize,
    prev: Option<u32>,
    /// The last rank `seek` found, not yet passed.
    held: Option<u32>,
}

impl<'a> Postings<'a> {
    /// The list of word `id` of `words`; empty when out of range.
    pub(super) fn of(samples: &[u8], postings: &'a [u8], words: usize, id: usize) -> Postings<'a> {
        Self::run(samples, postings, words, id..id + 1).next().unwrap_or_default()
    }

    /// The lists of the words `ids`, in id order: each one is the next after the one before,
    /// so only the first is looked for. Stops at an id out of range (or malformed bytes).
    pub(super) fn run(
        samples: &[u8],
        postings: &'a [u8],
        words: usize,
        ids: std::ops::Range<usize>,
    ) -> impl Iterator<Item = Postings<'a>> {
        let first = ids.start;
        let mut at = (first < words).then(|| u32_at(samples, first / SAMPLE) as usize);
        for _ in 0..first % SAMPLE {
            at = at.and_then(|a| Some(a + Self::parse(postings.get(a..)?)?.1));
        }
        ids.take_while(move |&id| id < words).map_while(move |_| {
            let (list, len) = Self::parse(postings.get(at?..)?)?;
            at = at.map(|a| a + len);
            Some(list)
        })
    }

    /// The list at the start of `bytes`, and how many bytes it takes.
    fn parse(bytes: &'a [u8]) -> Option<(Postings<'a>, usize)> {
        let mut at = 0;
        let head = varint::get(bytes, &mut at)?;
        if head & 1 == 1 {
            let single = Some(u32::try_from(head >> 1).ok()?);
            return Some((Postings { single, count: 1, ..Postings::default() }, at));
        }
        let count = usize::try_from(head >> 1).ok()?;
        let len = usize::try_from(varint::get(bytes, &mut at)?).ok()?;
        let end = at.checked_add(len)?;
        let rest = bytes.get(at..end)?;
        let later = count.saturating_sub(1) / BLOCK;
        let (table, data) = rest.split_at_checked(later.checked_mul(8)?)?;
        Some((Postings { data, table, count, ..Postings::default() }, end))
    }

    /// How many ranks the list holds.
    pub(super) fn len(&self) -> u64 {
        self.count as u64
    }

    /// The smallest rank >= `target` still in the list (it stays there for the next `seek`;
    /// `next` passes it). Jumps over whole blocks that end before `target`.
    pub(super) fn seek(&mut self, target: u32) -> Option<u32> {
        if let Some(r) = self.held
            && r >= target
        {
            return Some(r);
        }
        self.held = None;
        // The last block that starts at or before `target`, if it is ahead of us.
        let blocks = self.table.len() / 8;
        let starts = |j: usize| u32_at(self.table, 2 * j);
        let (mut lo, mut hi) = (0, blocks);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if starts(mid) <= target { lo = mid + 1 } else { hi = mid }
        }
        if lo > 0 && lo * BLOCK > self.index {
            self.index = lo * BLOCK;
            self.at = u32_at(self.table, 2 * (lo - 1) + 1) as usize;
            self.prev = None;
        }
        while let Some(r) = self.decode() {
            if r >= target {
                self.held = Some(r);
                return Some(r);
            }
        }
        None
    }

    fn decode(&mut self) -> Option<u32> {
        if self.index >= self.count {
            return None;
        }
        let step = match self.single {
            Some(rank) => Some(rank),
            None => varint::get(self.data, &mut self.at).and_then(|v| u32::try_from(v).ok()),
        };
        let rank = match (self.index.is_multiple_of(BLOCK), self.prev, step) {
            (true, _, Some(v)) | (false, None, Some(v)) => Some(v),
            (false, Some(p), Some(v)) => p.checked_add(v).and_then(|r| r.checked_add(1)),
            (_, _, None) => None,
        };
        self.index = if rank.is_some() { self.index + 1 } else { self.count };
        self.prev = rank;
        rank
    }
}

impl Iterator for Postings<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        match self.held.take() {
            Some(r) => Some(r),
            None => self.decode(),
        }
    }
}

/// The union of posting lists (a partial word's: the lists of every word it starts),
/// ascending, each rank once, with [`Merged::seek`].
pub(super) struct Merged<'a> {
    lists: Vec<Postings<'a>>,
    /// (next rank, list) of every list not yet exhausted.
    heap: BinaryHeap<Reverse<(u32, usize)>>,
    last: Option<u32>,
    /// Ranks in all lists (an upper bound on the union's).
    len: u64,
    /// Lists moved by `seek` since [`Merged::take_moves`].
    moves: usize,
}

impl<'a> Merged<'a> {
    pub(super) fn new(mut lists: Vec<Postings<'a>>) -> Merged<'a> {
        let len = lists.iter().map(Postings::len).sum();
        let mut heap = BinaryHeap::with_capacity(lists.len());
        for (i, list) in lists.iter_mut().enumerate() {
            if let Some(rank) = list.next() {
                heap.push(Reverse((rank, i)));
            }
        }
        Merged { lists, heap, last: None, len, moves: 0 }
    }

    /// Ranks in all the lists.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// The smallest rank >= `target` in any list; it stays for the next `seek`. Each list
    /// behind the target jumps with its own [`Postings::seek`]; how many did is counted for
    /// [`Merged::take_moves`] (one `seek` can move every list: a budget pays for each). Not to
    /// be mixed with `next` on one union: a rank `next` passed can be found again.
    pub(super) fn seek(&mut self, target: u32) -> Option<u32> {
        while let Some(&Reverse((rank, i))) = self.heap.peek() {
            if rank >= target {
                return Some(rank);
            }
            self.heap.pop();
            self.moves += 1;
            let list = &mut self.lists[i];
            if list.seek(target).is_some()
                && let Some(next) = list.next()
            {
                self.heap.push(Reverse((next, i)));
            }
        }
        None
    }

    /// Lists moved by [`Merged::seek`] since the last call.
    pub(super) fn take_moves(&mut self) -> usize {
        std::mem::take(&mut self.moves)
    }
}

impl Iterator for Merged<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        while let Some(Reverse((rank, i))) = self.heap.pop() {
            if let Some(next) = self.lists[i].next() {
                self.heap.push(Reverse((next, i)));
            }
            if self.last != Some(rank) {
                self.last = Some(rank);
                return Some(rank);
            }
        }
        None
    }
}

/// Checks the word sections' structure: every sample where its list starts, every list
/// decoding to exactly its bytes with strictly increasing ranks below `keys`, the lists
/// covering the postings. Whether a listed key really holds the word is checked where it is
/// used (a candidate is always decoded before it is answered), so a crafted list can make an
/// answer short, never wrong.
pub(super) fn verify(words: usize, samples: &[u8], postings: &[u8], keys: usize) -> Result<()> {
    let bad = |what: &str| Err(Error::corrupt(format!("word index: {what}")));
    let expected = words.div_ceil(SAMPLE).checked_add(1).and_then(|n| n.checked_mul(4));
    if Some(samples.len()) != expected {
        return bad("samples length");
    }
    let mut at = 0;
    for id in 0..words {
        if id % SAMPLE == 0 && u32_at(samples, id / SAMPLE) as usize != at {
            return bad("a sample does not point at its list");
        }
        let Some((list, len)) = postings.get(at..).and_then(Postings::parse) else {
            return bad("a posting list header is malformed");
        };
        // Most words are in one key (5.03M of the 6.86M at 10M completions): their list is its
        // header, and its one rank is all there is to check.
        if let Some(rank) = list.single {
            if rank as usize >= keys {
                return bad("a posting list names a key past the last");
            }
            at += len;
            continue;
        }
        let count = list.count;
        if count < 2 || count > keys {
            return bad("a posting list is empty, too long or not in its shortest form");
        }
        if !entries_ok(list.data, list.table, count, keys) {
            return bad("a posting list is malformed, not increasing or unlike its block table");
        }
        at += len;
    }
    if at != postings.len() || u32_at(samples, words.div_ceil(SAMPLE)) as usize != at {
        return bad("the lists do not cover the postings");
    }
    Ok(())
}

/// Whether the entries of a list of `count` ranks (more than one) decode, as
/// [`Postings`] reads them, to strictly increasing ranks below `keys` that fill exactly
/// `data`, each later block starting where and with the rank `table` says. Reads them straight
/// off the bytes: through [`Postings`], checking the 25M entries of the longer lists at 10M
/// completions took about 250 ms of opening.
fn entries_ok(data: &[u8], table: &[u8], count: usize, keys: usize) -> bool {
    let mut at = 0;
    let mut previous = 0u64;
    for i in 0..count {
        let start = at;
        let Some(v) = varint::get(data, &mut at) else { return false };
        let rank = if i % BLOCK != 0 {
            // A gap, less one: strictly increasing by construction.
            match previous.checked_add(v).and_then(|r| r.checked_add(1)) {
                Some(r) => r,
                None => return false,
            }
        } else if i == 0 {
            v
        } else {
            let j = i / BLOCK - 1;
            let listed = u32_at(table, 2 * j + 1) as usize == start;
            if !listed || u64::from(u32_at(table, 2 * j)) != v || v <= previous {
                return false;
            }
            v
        };
        if rank >= keys as u64 {
            return false;
        }
        previous = rank;
    }
    at == data.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The sections `sections` would write for these lists, in word order.
    fn encoded(lists: &[Vec<u32>]) -> (Vec<u8>, Vec<u8>) {
        let mut starts = vec![0];
        starts.extend(lists.iter().scan(0, |end, list| {
            *end += list.len();
            Some(*end)
        }));
        posting_lists(&lists.concat(), &starts, |rank| rank).unwrap()
    }

    fn a_list() -> impl Strategy<Value = Vec<u32>> {
        // One in three lists holds one rank, as most do in real vocabularies; some span blocks.
        prop_oneof![
            (0u32..1_000_000).prop_map(|r| vec![r]),
            proptest::collection::btree_set(0u32..1_000_000, 2..300)
                .prop_map(|s| s.into_iter().collect()),
            (0u32..2).prop_map(|r| vec![r * 999_999]),
        ]
    }

    proptest! {
        /// A union of lists walks their ranks once each in order, and a seek finds the smallest
        /// rank at or after its target, whichever lists hold it.
        #[test]
        fn merged_lists_are_their_union(
            lists in proptest::collection::vec(a_list(), 1..12),
            targets in proptest::collection::vec(0u32..1_000_001, 0..40),
        ) {
            let union: std::collections::BTreeSet<u32> = lists.iter().flatten().copied().collect();
            let (samples, postings) = encoded(&lists);
            let open = || Merged::new(Postings::run(&samples, &postings, lists.len(), 0..lists.len()).collect());
            prop_assert_eq!(open().len(), lists.iter().map(Vec::len).sum::<usize>() as u64);
            prop_assert_eq!(open().collect::<Vec<u32>>(), union.iter().copied().collect::<Vec<u32>>());
            let mut targets = targets;
            targets.sort_unstable();
            let mut merged = open();
            for t in targets {
                prop_assert_eq!(merged.seek(t), union.range(t..).next().copied());
            }
        }

        /// Ids taken over from the previous key name the same words a lookup would.
        #[test]
        fn occurrences_name_each_keys_words(
            keys in proptest::collection::btree_set("[ab ]{0,3}[ é]{0,2}[ab ]{0,4}", 0..40),
        ) {
            let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            let (words, pairs) = occurrences(&keys).unwrap();
            let distinct: std::collections::BTreeSet<_> = words.iter().collect();
            prop_assert_eq!(distinct.len(), words.len());
            let mut pairs = pairs.into_iter();
            for (pos, key) in keys.iter().enumerate() {
                for word in matching::words(std::str::from_utf8(key).unwrap()) {
                    let (id, at) = pairs.next().unwrap();
                    prop_assert_eq!(at as usize, pos);
                    prop_assert_eq!(words[id as usize], word.as_bytes());
                }
            }
            prop_assert!(pairs.next().is_none());
        }

        #[test]
        fn lists_round_trip(
            lists in proptest::collection::vec(a_list(), 0..40),
            targets in proptest::collection::vec(0u32..1_100_000, 1..20),
            from in 0usize..45,
            span in 0usize..45,
        ) {
            let (samples, bytes) = encoded(&lists);
            let words = lists.len();
            prop_assert!(verify(words, &samples, &bytes, 1_000_000).is_ok());
            for (id, ranks) in lists.iter().enumerate() {
                let list = Postings::of(&samples, &bytes, words, id);
                prop_assert_eq!(list.len(), ranks.len() as u64);
                prop_assert_eq!(list.collect::<Vec<_>>(), ranks.clone());
                // Seeking ascending targets finds what a scan finds.
                let mut targets = targets.clone();
                targets.sort_unstable();
                let mut list = Postings::of(&samples, &bytes, words, id);
                for t in targets {
                    prop_assert_eq!(list.seek(t), ranks.iter().copied().find(|&r| r >= t));
                }
            }
            prop_assert_eq!(Postings::of(&samples, &bytes, words, words).len(), 0);
            // A run of lists is the lists of its ids, and stops at the last word.
            let run: Vec<Vec<u32>> =
                Postings::run(&samples, &bytes, words, from..from + span).map(Iterator::collect).collect();
            let expected = lists.get(from.min(words)..(from + span).min(words)).unwrap_or_default();
            prop_assert_eq!(run, expected.to_vec());
        }

        #[test]
        fn entries_are_checked_as_postings_read_them(
            ranks in proptest::collection::btree_set(0u32..1_000_000, 2..400),
            at in any::<prop::sample::Index>(),
            to in any::<u8>(),
            changed: bool,
        ) {
            let ranks: Vec<u32> = ranks.into_iter().collect();
            let (mut bytes, mut scratch) = (Vec::new(), Vec::new());
            encode(&ranks, &mut bytes, &mut scratch);
            if changed {
                let i = at.index(bytes.len());
                bytes[i] = to;
            }
            let Some((list, _)) = Postings::parse(&bytes) else { return Ok(()) };
            prop_assume!(list.single.is_none() && list.count >= 2);
            // What the check stood for before: every entry through `Postings`, each block's
            // first against its table.
            let reference = {
                let mut list = list.clone();
                let mut previous: Option<u32> = None;
                let mut ok = true;
                for i in 0..list.count {
                    if i > 0 && i % BLOCK == 0 {
                        let j = i / BLOCK - 1;
                        ok &= u32_at(list.table, 2 * j + 1) as usize == list.at
                            && list.clone().decode() == Some(u32_at(list.table, 2 * j));
                    }
                    let rank = list.decode();
                    ok &= rank.is_some_and(|r| r < 1_000_000 && previous.is_none_or(|p| p < r));
                    previous = rank;
                    if !ok { break; }
                }
                ok && list.at == list.data.len()
            };
            prop_assert_eq!(entries_ok(list.data, list.table, list.count, 1_000_000), reference);
            prop_assert!(changed || reference);
        }

        #[test]
        fn a_changed_byte_is_refused_or_still_safe(
            lists in proptest::collection::vec(a_list(), 1..20),
            at in any::<prop::sample::Index>(),
            to in any::<u8>(),
        ) {
            let (mut samples, mut bytes) = encoded(&lists);
            let words = lists.len();
            let total = samples.len() + bytes.len();
            let i = at.index(total);
            if i < samples.len() { samples[i] = to } else { bytes[i - samples.len()] = to }
            // Whatever verify says, reading every list must not panic; when it accepts, every
            // list decodes to exactly its count of increasing ranks.
            let accepted = verify(words, &samples, &bytes, 1_000_000).is_ok();
            for id in 0..words {
                let list = Postings::of(&samples, &bytes, words, id);
                let count = list.len() as usize;
                let ranks: Vec<u32> = list.collect();
                if accepted {
                    prop_assert_eq!(ranks.len(), count);
                    prop_assert!(ranks.windows(2).all(|w| w[0] < w[1]));
                }
            }
        }
    }
}
