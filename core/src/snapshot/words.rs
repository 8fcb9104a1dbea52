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
//! Postings       | per word: varint count, varint first rank, varint (gap - 1) for the rest
//! RankPositions  | packed, w bits per rank: the key position of that rank
//! ```

use std::collections::HashMap;

use super::error::{Error, Result};
use super::layout::u32_at;
use super::varint;
use crate::matching;

/// The three word sections (index FST, offsets, postings) of keys given in position order.
pub(super) fn sections(keys: &[&[u8]], ranks: &[u32]) -> Result<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let mut lists: HashMap<&[u8], Vec<u32>> = HashMap::new();
    for (key, &rank) in keys.iter().zip(ranks) {
        // Keys are UTF-8 (the writer's input is `String`s).
        let key = std::str::from_utf8(key).map_err(|e| Error::InvalidInput(e.to_string()))?;
        for word in matching::words(key) {
            let list = lists.entry(word.as_bytes()).or_default();
            // A word twice in one key is listed once.
            if list.last() != Some(&rank) {
                list.push(rank);
            }
        }
    }
    let mut words: Vec<(&[u8], Vec<u32>)> = lists.into_iter().collect();
    words.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut index = fst::MapBuilder::memory();
    let (mut offsets, mut postings) = (Vec::new(), Vec::new());
    for (id, (word, mut ranks)) in words.into_iter().enumerate() {
        index.insert(word, id as u64).map_err(super::writer::fst_error)?;
        offsets.extend_from_slice(&offset(postings.len())?.to_le_bytes());
        ranks.sort_unstable();
        ranks.dedup();
        encode(&ranks, &mut postings);
    }
    offsets.extend_from_slice(&offset(postings.len())?.to_le_bytes());
    Ok((index.into_inner().map_err(super::writer::fst_error)?, offsets, postings))
}

fn offset(len: usize) -> Result<u32> {
    u32::try_from(len).map_err(|_| Error::InvalidInput("posting lists exceed 4 GiB".into()))
}

fn encode(ranks: &[u32], out: &mut Vec<u8>) {
    varint::put(out, ranks.len() as u64);
    let mut prev: Option<u32> = None;
    for &r in ranks {
        varint::put(out, u64::from(prev.map_or(r, |p| r - p - 1)));
        prev = Some(r);
    }
}

/// The ranks of one posting list, ascending. Stops early (and stays stopped) on malformed
/// bytes; [`verify`] rejects a snapshot with such a list, so that happens only in tests.
#[derive(Debug, Clone)]
pub(super) struct Postings<'a> {
    bytes: &'a [u8],
    at: usize,
    left: u64,
    prev: Option<u32>,
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
        let bytes = postings.get(start..end).unwrap_or_default();
        let mut at = 0;
        let left = varint::get(bytes, &mut at).unwrap_or(0);
        Postings { bytes, at, left, prev: None }
    }

    /// How many ranks the list holds.
    pub(super) fn len(&self) -> u64 {
        self.left
    }
}

impl Iterator for Postings<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let step = varint::get(self.bytes, &mut self.at).and_then(|v| u32::try_from(v).ok());
        let rank = match (self.prev, step) {
            (None, Some(v)) => Some(v),
            (Some(p), Some(v)) => p.checked_add(v).and_then(|r| r.checked_add(1)),
            (_, None) => None,
        };
        if rank.is_none() {
            self.left = 0;
        }
        self.prev = rank;
        rank
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
        let mut at = 0;
        let count = varint::get(bytes, &mut at).unwrap_or(0);
        if count == 0 || count > keys as u64 {
            return bad("a posting list is empty or too long");
        }
        let mut list = Postings { bytes, at, left: count, prev: None };
        let mut seen = 0u64;
        for rank in list.by_ref() {
            if rank as usize >= keys {
                return bad("rank out of range");
            }
            seen += 1;
        }
        if seen != count || list.at != bytes.len() {
            return bad("a posting list is malformed");
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
        fn lists_round_trip(mut ranks in proptest::collection::vec(0u32..1_000_000, 1..50)) {
            ranks.sort_unstable();
            ranks.dedup();
            let mut bytes = Vec::new();
            encode(&ranks, &mut bytes);
            let offsets: Vec<u8> = [0u32, bytes.len() as u32].iter().flat_map(|v| v.to_le_bytes()).collect();
            prop_assert!(verify(1, &offsets, &bytes, 1_000_000).is_ok());
            let list = Postings::of(&offsets, &bytes, 0);
            prop_assert_eq!(list.len(), ranks.len() as u64);
            prop_assert_eq!(list.collect::<Vec<_>>(), ranks);
        }
    }
}
