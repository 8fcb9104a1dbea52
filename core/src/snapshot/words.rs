//! The word index: which completions hold a word, best first. It serves the words tier
//! ([`crate::matching::Match::Words`]), whose candidates can start anywhere in key order.
//!
//! Words are numbered in byte order (an ordinal FST, like the other two), so the words that
//! start with a typed partial word are one contiguous id range. Each word's posting list holds
//! the *ranks* of the completions that contain it, ascending — best first, so a tier stops
//! reading as soon as it has enough — delta-coded as LEB128 gaps. Ranks rather than positions
//! because their gaps compress; the `RankPositions` section turns a rank back into the key
//! position the key store needs.
//!
//! ```text
//! WordIndex      | fst::Map: word -> word id (0, 1, 2, ... in byte order)
//! PostingOffsets | u32 per word + 1: byte range of each list in Postings
//! Postings       | per word: varint count, a block table when longer than 128 (see
//!                | `encode`), then ranks: absolute at each block start, else varint (gap - 1)
//! RankPositions  | packed, w bits per rank: the key position of that rank
//! ```

use rustc_hash::FxHashMap;

use super::error::{Error, Result};
use super::layout::u32_at;
use super::varint;
use crate::matching;

/// The three word sections (index FST, offsets, postings) of keys given in position order.
///
/// Each word occurrence becomes a (word id, rank) pair, and a counting sort by id lays every
/// list out in one array: no list per word to grow, which at 10M completions (7M distinct
/// words) was most of the time this took. What is not linear is sorting the distinct words
/// once, and each list's ranks.
pub(super) fn sections(keys: &[&[u8]], ranks: &[u32]) -> Result<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let mut ids: FxHashMap<&[u8], u32> = FxHashMap::default();
    let mut words: Vec<&[u8]> = Vec::new();
    // About 3.5 words per query: room for four spares the doubling of a large vector.
    let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(keys.len() * 4);
    for (key, &rank) in keys.iter().zip(ranks) {
        // Keys are UTF-8 (the writer's input is `String`s).
        let key = std::str::from_utf8(key).map_err(|e| Error::InvalidInput(e.to_string()))?;
        for word in matching::words(key) {
            let id = *ids.entry(word.as_bytes()).or_insert_with(|| {
                words.push(word.as_bytes());
                (words.len() - 1) as u32
            });
            pairs.push((id, rank));
        }
    }
    drop(ids);
    // Ids in byte order of the words: the order of the index FST.
    let order = crate::bytesort::order(words.len(), |i| words[i]);
    let mut sorted_id = vec![0u32; words.len()];
    for (new, &old) in order.iter().enumerate() {
        sorted_id[old] = new as u32;
    }
    // Counting sort of the ranks by sorted word id.
    let mut starts = vec![0usize; words.len() + 1];
    for &(id, _) in &pairs {
        starts[sorted_id[id as usize] as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut fill = starts.clone();
    let mut lists = vec![0u32; pairs.len()];
    for &(id, rank) in &pairs {
        let slot = &mut fill[sorted_id[id as usize] as usize];
        lists[*slot] = rank;
        *slot += 1;
    }
    drop(pairs);
    let mut index = fst::MapBuilder::memory();
    let (mut offsets, mut postings) = (Vec::new(), Vec::new());
    let mut ranks: Vec<u32> = Vec::new();
    for (id, &old) in order.iter().enumerate() {
        index.insert(words[old], id as u64).map_err(super::writer::fst_error)?;
        offsets.extend_from_slice(&offset(postings.len())?.to_le_bytes());
        ranks.clear();
        ranks.extend_from_slice(&lists[starts[id]..starts[id + 1]]);
        ranks.sort_unstable();
        // A word twice in one key is listed once.
        ranks.dedup();
        encode(&ranks, &mut postings);
    }
    offsets.extend_from_slice(&offset(postings.len())?.to_le_bytes());
    Ok((index.into_inner().map_err(super::writer::fst_error)?, offsets, postings))
}

fn offset(len: usize) -> Result<u32> {
    u32::try_from(len).map_err(|_| Error::InvalidInput("posting lists exceed 4 GiB".into()))
}

/// Entries per block: every block starts with an absolute rank, and a list longer than one
/// block starts with a table of where each later block starts, so an intersection can jump.
const BLOCK: usize = 128;

/// One list: `varint count`, then per later block (there are `(count - 1) / BLOCK`) `u32 first rank, u32
/// byte offset` (little-endian, offsets from the start of the entries), then the entries: the
/// first of a block as the rank itself, the others as `gap - 1`.
fn encode(ranks: &[u32], out: &mut Vec<u8>) {
    varint::put(out, ranks.len() as u64);
    let later = ranks.len().saturating_sub(1) / BLOCK;
    let table = out.len();
    out.resize(table + later * 8, 0);
    let data = out.len();
    for (i, &r) in ranks.iter().enumerate() {
        if i % BLOCK == 0 {
            if i > 0 {
                let at = table + (i / BLOCK - 1) * 8;
                out[at..at + 4].copy_from_slice(&r.to_le_bytes());
                let offset = (out.len() - data) as u32;
                out[at + 4..at + 8].copy_from_slice(&offset.to_le_bytes());
            }
            varint::put(out, u64::from(r));
        } else {
            varint::put(out, u64::from(r - ranks[i - 1] - 1));
        }
    }
}

/// The ranks of one posting list, ascending, with [`Postings::seek`] to jump ahead. Stops
/// early (and stays stopped) on malformed bytes; [`verify`] rejects a snapshot with such a
/// list, so that happens only in tests.
#[derive(Debug, Clone)]
pub(super) struct Postings<'a> {
    /// The entries.
    data: &'a [u8],
    /// The block table: (first rank, offset) of every block after the first.
    table: &'a [u8],
    count: usize,
    /// Entries decoded so far.
    index: usize,
    at: usize,
    prev: Option<u32>,
    /// The last rank `seek` found, not yet passed.
    held: Option<u32>,
}

impl<'a> Postings<'a> {
    /// The list of word `id`; empty when out of range.
    pub(super) fn of(offsets: &[u8], postings: &'a [u8], id: usize) -> Postings<'a> {
        let words = (offsets.len() / 4).saturating_sub(1);
        let (start, end) = if id < words {
            (u32_at(offsets, id) as usize, u32_at(offsets, id + 1) as usize)
        } else {
            (0, 0)
        };
        Self::parse(postings.get(start..end).unwrap_or_default()).unwrap_or(Postings {
            data: &[],
            table: &[],
            count: 0,
            index: 0,
            at: 0,
            prev: None,
            held: None,
        })
    }

    fn parse(bytes: &'a [u8]) -> Option<Postings<'a>> {
        let mut at = 0;
        let count = usize::try_from(varint::get(bytes, &mut at)?).ok()?;
        let later = count.saturating_sub(1) / BLOCK;
        let data_start = at.checked_add(later.checked_mul(8)?)?;
        let table = bytes.get(at..data_start)?;
        let data = bytes.get(data_start..)?;
        Some(Postings { data, table, count, index: 0, at: 0, prev: None, held: None })
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
        let step = varint::get(self.data, &mut self.at).and_then(|v| u32::try_from(v).ok());
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

/// Checks the word sections' structure: offsets in order and in bounds, every list decoding to
/// exactly its bytes with strictly increasing ranks below `keys`. Whether a listed key really
/// holds the word is checked where it is used (a candidate is always decoded before it is
/// answered), so a crafted list can make an answer short, never wrong.
pub(super) fn verify(words: usize, offsets: &[u8], postings: &[u8], keys: usize) -> Result<()> {
    let bad = |what: &str| Err(Error::corrupt(format!("word index: {what}")));
    if Some(offsets.len()) != words.checked_add(1).and_then(|n| n.checked_mul(4)) {
        return bad("offsets length");
    }
    if u32_at(offsets, 0) != 0 || u32_at(offsets, words) as usize != postings.len() {
        return bad("offsets do not cover the postings");
    }
    for id in 0..words {
        let (start, end) = (u32_at(offsets, id), u32_at(offsets, id + 1));
        let Some(bytes) = postings.get(start as usize..end as usize) else {
            return bad("offsets decrease or leave the postings");
        };
        let Some(mut list) = Postings::parse(bytes) else {
            return bad("a posting list header is malformed");
        };
        let count = list.count;
        if count == 0 || count > keys || list.table.len() / 8 != (count - 1) / BLOCK {
            return bad("a posting list is empty, too long or has a wrong block table");
        }
        let mut previous: Option<u32> = None;
        for i in 0..count {
            if i > 0 && i % BLOCK == 0 {
                let j = i / BLOCK - 1;
                let offset_ok = u32_at(list.table, 2 * j + 1) as usize == list.at;
                let first = list.clone().decode();
                if !offset_ok || first != Some(u32_at(list.table, 2 * j)) {
                    return bad("a block table disagrees with its list");
                }
            }
            let rank = list.decode();
            let ok = rank.is_some_and(|r| (r as usize) < keys && previous.is_none_or(|p| p < r));
            if !ok {
                return bad("a posting list is malformed or not increasing");
            }
            previous = rank;
        }
        if list.at != list.data.len() {
            return bad("a posting list has trailing bytes");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lists_round_trip(
            mut ranks in proptest::collection::vec(0u32..1_000_000, 1..700),
            targets in proptest::collection::vec(0u32..1_100_000, 1..20),
        ) {
            ranks.sort_unstable();
            ranks.dedup();
            let mut bytes = Vec::new();
            encode(&ranks, &mut bytes);
            let offsets: Vec<u8> = [0u32, bytes.len() as u32].iter().flat_map(|v| v.to_le_bytes()).collect();
            prop_assert!(verify(1, &offsets, &bytes, 1_000_000).is_ok());
            let list = Postings::of(&offsets, &bytes, 0);
            prop_assert_eq!(list.len(), ranks.len() as u64);
            prop_assert_eq!(list.collect::<Vec<_>>(), ranks.clone());
            // Seeking ascending targets finds what a scan finds.
            let mut targets = targets;
            targets.sort_unstable();
            let mut list = Postings::of(&offsets, &bytes, 0);
            for t in targets {
                prop_assert_eq!(list.seek(t), ranks.iter().copied().find(|&r| r >= t));
            }
        }
    }
}
