//! The stored top-k lists with their keys decoded, held in memory.
//!
//! A prefix with a stored list (a subtree of more than [`super::SMALL_SUBTREE`] completions:
//! every 1- and 2-character prefix, most 4-character ones) is answered from its node's list of
//! (position, rank) pairs. Read from the file, each of the ten positions costs a bucket offset,
//! a bucket far from the others (a cache miss at 10M completions) and a front-coded decode
//! from the bucket's head up to the key: a 4-character lookup waited on memory for about half
//! its time, and decoding was most of the rest (docs/performance.md, "Memory against
//! computation").
//!
//! Here every list's keys lie side by side, already decoded and validated as UTF-8, with the
//! rank and position each suggestion needs: a lookup reads one run of bytes. The lists are
//! made when a snapshot is opened, after it was verified, in one pass over the key store in
//! position order; they are not part of the format. The price is memory: at 10M completions
//! about 3.7 bytes per completion (1.44M list entries, their keys 13 bytes each on average).

use super::reader::Snapshot;
use crate::huge::Huge;

/// The display flag in [`Entry::end`]: the key has a display text.
const FLAG: u32 = 1 << 31;

/// One suggestion of a stored list.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Entry {
    /// Its rank, which gives its score.
    pub(super) rank: u32,
    /// Its key position, which finds its display text.
    pub(super) pos: u32,
    /// Where its key ends in [`DecodedLists::text`], with [`FLAG`] set when it has a display
    /// text. It starts where the entry before it ends (the node's start for the first).
    end: u32,
}

impl Entry {
    /// Whether the key has a display text.
    pub(super) fn has_display(&self) -> bool {
        self.end & FLAG != 0
    }
}

/// Every stored list, decoded. Empty for a snapshot without lists.
#[derive(Debug, Default)]
pub(super) struct DecodedLists {
    /// Entries per list (the snapshot's `top_k`; every stored list is full).
    k: usize,
    /// Where each node's first key starts in [`Self::text`].
    starts: Vec<u32>,
    /// Node `n`'s entries are `entries[n * k..(n + 1) * k]`, best first.
    entries: Huge<Vec<Entry>>,
    /// The keys, list after list.
    text: Huge<String>,
}

impl DecodedLists {
    /// Decodes every stored list of a verified snapshot. `None` when the keys of all lists
    /// together take more bytes than the file or than the 2 GiB [`Entry::end`] can address,
    /// or when the snapshot contradicts its verification: lookups then read the file's lists.
    ///
    /// The file's size bounds them because a key's bytes are decoded once per list it is in:
    /// a small crafted file of long keys (up to 256 bytes) sharing one front-coded prefix, each
    /// in hundreds of lists, would otherwise decode to gigabytes at every opening. A file the
    /// builder wrote stays far below it (at 10M completions the lists' keys take 19 MB of a
    /// 278 MB file).
    pub(super) fn new(snapshot: &Snapshot) -> Option<DecodedLists> {
        Self::within(snapshot, snapshot.size_bytes())
    }

    /// [`DecodedLists::new`] with at most `budget` bytes of keys (and less than 2 GiB).
    pub(super) fn within(snapshot: &Snapshot, budget: usize) -> Option<DecodedLists> {
        let budget = budget.min(FLAG as usize - 1);
        let k = snapshot.max_k();
        let nodes = snapshot.node_count();
        // Every (position, slot), in position order, so the key store is read front to back.
        let mut wanted: Vec<(u32, u32)> = Vec::with_capacity(nodes.checked_mul(k)?);
        for node in 0..nodes {
            let before = wanted.len();
            for (i, (pos, _)) in snapshot.node_list(node).enumerate() {
                wanted.push((pos, u32::try_from(node * k + i).ok()?));
            }
            // Entries are found by `node * k`: a list shorter than `k` would shift the rest.
            if wanted.len() - before != k {
                return None;
            }
        }
        wanted.sort_unstable();
        let (keys, slots) = decode_keys(snapshot, &wanted, budget)?;
        drop(wanted);
        let total = slots.iter().try_fold(0usize, |sum, &(_, len)| {
            sum.checked_add((len & !FLAG) as usize).filter(|&t| t <= budget)
        })?;
        // Lookups land anywhere in these; huge pages spare them a TLB miss per place touched,
        // as for the file's own buffer (`file::read_regular_random`).
        // (Each advice is declared after its buffer: a `?` below drops it, withdrawing the
        // advice, before the buffer is freed.)
        let mut entries = Vec::with_capacity(slots.len());
        let entries_advice = crate::huge::advise(&entries);
        let mut text = String::with_capacity(total);
        let text_advice = crate::huge::advise(&text);
        let mut starts = Vec::with_capacity(nodes);
        for node in 0..nodes {
            starts.push(text.len() as u32);
            for (i, (pos, rank)) in snapshot.node_list(node).enumerate() {
                let (start, len) = slots[node * k + i];
                let end = start as usize + (len & !FLAG) as usize;
                text.push_str(keys.get(start as usize..end)?);
                let end = text.len() as u32 | (len & FLAG);
                entries.push(Entry { rank, pos, end });
            }
        }
        Some(DecodedLists {
            k,
            starts,
            entries: Huge::new(entries, entries_advice),
            text: Huge::new(text, text_advice),
        })
    }

    /// The first `k` entries of node `node`'s list with their keys, best first; `None` when
    /// the lists were not decoded.
    #[inline]
    pub(super) fn list(
        &self,
        node: usize,
        k: usize,
    ) -> Option<impl Iterator<Item = (&str, Entry)>> {
        let from = node.checked_mul(self.k)?;
        let entries = self.entries.get(from..from.checked_add(k.min(self.k))?)?;
        let mut start = *self.starts.get(node)? as usize;
        Some(entries.iter().map(move |&e| {
            let end = (e.end & !FLAG) as usize;
            let key = self.text.get(start..end).unwrap_or_default();
            start = end;
            (key, e)
        }))
    }

    /// Bytes of memory held.
    pub(super) fn memory_bytes(&self) -> usize {
        self.starts.len() * 4 + self.entries.len() * std::mem::size_of::<Entry>() + self.text.len()
    }

    /// Bytes of keys held.
    #[cfg(test)]
    pub(super) fn text_bytes(&self) -> usize {
        self.text.len()
    }
}

/// Decodes the keys at `wanted`'s positions (sorted; with their slots), each once, bucket by
/// bucket: the keys one after another, and for each slot its key's start and length (with
/// [`FLAG`] for a display text). `None` past `budget` bytes of keys.
fn decode_keys(
    snapshot: &Snapshot,
    wanted: &[(u32, u32)],
    budget: usize,
) -> Option<(String, Vec<(u32, u32)>)> {
    let bs = snapshot.bucket_size() as u32;
    let mut text = String::new();
    let mut slots = vec![(0u32, 0u32); wanted.len()];
    let mut buf = super::frontcode::decode_buffer();
    let mut failed = false;
    let mut i = 0;
    while i < wanted.len() {
        let (first, bucket) = (wanted[i].0, wanted[i].0 / bs);
        let before = i;
        let from = (first % bs) as usize;
        snapshot.decode_bucket_from(bucket as usize, from, &mut buf, |p, key, flag| {
            if wanted.get(i).is_some_and(|&(pos, _)| pos == p) {
                let start = text.len() as u32;
                let len = key.len() as u32 | if flag { FLAG } else { 0 };
                match std::str::from_utf8(key) {
                    Ok(key) if text.len() + key.len() <= budget => text.push_str(key),
                    _ => failed = true,
                }
                while let Some(&(_, slot)) = wanted.get(i).filter(|&&(pos, _)| pos == p) {
                    slots[slot as usize] = (start, len);
                    i += 1;
                }
            }
            !failed && wanted.get(i).is_some_and(|&(pos, _)| pos / bs == bucket)
        });
        if failed || i == before {
            return None;
        }
    }
    Some((text, slots))
}
