//! The key store, as the reader searches and decodes it: where a key lies among the
//! front-coded buckets, and the buckets' keys themselves.
//!
//! A search never decodes its way to a key. The reader keeps every bucket's first eight bytes
//! in memory (its *head word*, [`head_word`]) and every [`HEAD_BLOCK`]-th of those apart, a copy
//! small enough to stay in cache; a search runs over those and decodes one bucket at the end.
//! The fuzzy walk and the cuts of [`Upper`](super::super::upper::Upper) compare by the same
//! words.

use std::ops::Range;

use super::super::frontcode::{Flow, Part, decode_bucket_with, decode_buffer};
use super::super::layout::{Section, u32_at};
use super::super::search::{self, gallop_point};
use super::{Snapshot, key_string};

/// Bucket heads per entry of [`Snapshot::head_blocks`]: the 64 head words of a block are eight
/// cache lines, loaded together before a search within the block.
pub(super) const HEAD_BLOCK: usize = 64;

/// The first eight bytes of `key`, big-endian, zero-padded. Comparing two of these orders the
/// keys the same way unless they are equal, which leaves the order undecided: a difference
/// within the first eight bytes (padding counts as the smallest byte, as a shorter key is
/// smaller) is the difference that decides the bytewise order.
#[inline]
pub(in crate::snapshot) fn head_word(key: &[u8]) -> u64 {
    // Built without a variable-length copy, which compiles to a call to memcpy: the fuzzy walk
    // takes this for every key it skips.
    match key.first_chunk::<8>() {
        Some(first) => u64::from_be_bytes(*first),
        None => key.iter().enumerate().fold(0, |w, (i, &b)| w | u64::from(b) << (56 - 8 * i)),
    }
}

/// Whether a key whose [`head_word`] is `word` lies below `target` (whose word is
/// `target_word`): the words decide unless they are equal, and only then is the key read
/// (`key()`; a key that cannot be read is not below).
#[inline]
pub(in crate::snapshot) fn below_by_words<K: AsRef<[u8]>>(
    word: u64,
    key: impl FnOnce() -> Option<K>,
    target: &[u8],
    target_word: u64,
) -> bool {
    match word.cmp(&target_word) {
        std::cmp::Ordering::Equal => key().is_some_and(|key| key.as_ref() < target),
        order => order.is_lt(),
    }
}

impl Snapshot {
    /// [`Snapshot::head_words`]; a head that cannot be read (in a corrupt file) counts as
    /// the largest.
    pub(super) fn read_head_words(&self) -> Vec<u64> {
        let mut buf = decode_buffer();
        let head_word_of = |b| {
            let mut word = u64::MAX;
            self.decode_bucket_from(b, 0, &mut buf, |_, head, _| {
                word = head_word(head);
                false
            });
            word
        };
        (0..self.bucket_count()).map(head_word_of).collect()
    }

    /// Loads the first byte of each bucket before any is decoded. The hits of a list lie far
    /// apart in a large snapshot, so each bucket is a cache miss; issued together, the misses
    /// overlap instead of queuing behind each other's decoding. (Touching every line of a
    /// bucket, not only the first, made no measurable difference.)
    pub(super) fn touch_buckets(&self, buckets: impl Iterator<Item = usize>) {
        let data = self.section(Section::KeyBuckets);
        let touched = buckets
            .fold(0u8, |acc, b| acc ^ data.get(self.bucket_span(b).start).copied().unwrap_or(0));
        std::hint::black_box(touched);
    }

    /// Where bucket `b`'s bytes lie in the key store.
    ///
    /// Inlined by force: it is on every bucket decode, and left to the compiler's choice the
    /// 1- and 2-character lookups at 10M took 7-10% longer (four alternating rounds).
    #[inline(always)]
    pub(super) fn bucket_span(&self, b: usize) -> Range<usize> {
        let offsets = self.section(Section::BucketOffsets);
        let start = u32_at(offsets, b) as usize;
        let end = if (b + 1) * 4 < offsets.len() {
            u32_at(offsets, b + 1) as usize
        } else {
            self.section(Section::KeyBuckets).len()
        };
        start..end
    }

    /// Whether `key` (normalized) is a completion of this snapshot.
    pub fn contains(&self, key: &str) -> bool {
        let mut buf = decode_buffer();
        let pos = self.lower_bound(key.as_bytes(), &mut buf);
        let (b, j) = (pos as usize / self.bucket_size(), pos as usize % self.bucket_size());
        let mut equal = false;
        if (pos as usize) < self.len {
            self.decode_bucket_from(b, j, &mut buf, |_, k, _| {
                equal = k == key.as_bytes();
                false
            });
        }
        equal
    }

    /// Position of the first key >= `key`.
    pub(in crate::snapshot) fn lower_bound(&self, key: &[u8], buf: &mut Vec<u8>) -> u32 {
        // The number of bucket heads below `key`, by their cached first eight bytes: first
        // among every HEAD_BLOCK-th, then within one block. A binary search over all of them
        // ended in half a dozen probes that each waited on a cache miss.
        let word = head_word(key);
        let below = |b| self.head_below(b, key, word);
        let sampled =
            |i: usize| below_by_words(self.head_blocks[i], || self.head(i * HEAD_BLOCK), key, word);
        let touch = |heads: Range<usize>| {
            let lines = self.head_words.get(heads).unwrap_or_default().iter().step_by(8);
            std::hint::black_box(lines.fold(0, |acc, &w| acc ^ w));
        };
        let n = self.head_words.len();
        let bucket = search::sampled_point(n, HEAD_BLOCK, sampled, touch, below);
        self.lower_bound_after(key, bucket, buf)
    }

    /// [`Self::lower_bound`] when every key before position `from` is known to be below `key`:
    /// gallops over the bucket heads from `from`'s bucket instead of binary-searching them all.
    pub(super) fn lower_bound_from(&self, key: &[u8], from: u32, buf: &mut Vec<u8>) -> u32 {
        let word = head_word(key);
        let first = from as usize / self.bucket_size();
        let bucket = gallop_point(first, self.head_words.len(), |b| self.head_below(b, key, word));
        self.lower_bound_after(key, bucket, buf)
    }

    /// The position of the first key >= `key`, given the number of bucket heads below it.
    pub(super) fn lower_bound_after(&self, key: &[u8], bucket: usize, buf: &mut Vec<u8>) -> u32 {
        if bucket == 0 {
            return 0;
        }
        // The first key >= `key` is either in the previous bucket, after its head, or is the head
        // of `bucket` itself.
        let mut found = (bucket * self.bucket_size()).min(self.len) as u32;
        self.decode_bucket_from(bucket - 1, 0, buf, |p, k, _| {
            if k >= key {
                found = p;
                return false;
            }
            true
        });
        found
    }

    /// The positions of the keys that start with `path`, when every key before position `from`
    /// is below `path`. A walk over paths in key order passes the previous path's start, and
    /// most ranges are short, so both ends are found by galloping from near by: a binary search
    /// over all the bucket heads for each is 20 probes spread over megabytes.
    pub(in crate::snapshot) fn path_range(
        &self,
        path: &[u8],
        from: u32,
        buf: &mut Vec<u8>,
    ) -> Range<u32> {
        let lo = self.lower_bound_from(path, from, buf);
        let hi = self.lower_bound_from(&crate::normalize::prefix_end(path), lo, buf);
        lo..hi
    }

    pub(in crate::snapshot) fn bucket_size(&self) -> usize {
        self.meta.bucket_size as usize
    }

    /// Decodes bucket `b` and calls `visit(position, key, has_display)` for its keys from index
    /// `from` on. The keys before `from` are decoded only as far as those after them need.
    pub(in crate::snapshot) fn decode_bucket_from(
        &self,
        b: usize,
        from: usize,
        buf: &mut Vec<u8>,
        mut visit: impl FnMut(u32, &[u8], bool) -> bool,
    ) -> Option<()> {
        let wanted = (b * self.bucket_size() + from) as u32;
        self.decode_bucket_with(b, buf, |at, part| match part {
            Part::Shared(_) if at < wanted => Flow::Skip,
            Part::Shared(_) => Flow::Decode,
            Part::Key(key, flag) if visit(at, key, flag) => Flow::Decode,
            Part::Key(..) => Flow::Stop,
        })
    }

    /// [`decode_bucket_with`] over bucket `b`, with key positions.
    pub(in crate::snapshot) fn decode_bucket_with(
        &self,
        b: usize,
        buf: &mut Vec<u8>,
        mut visit: impl FnMut(u32, Part<'_>) -> Flow,
    ) -> Option<()> {
        let data = self.section(Section::KeyBuckets);
        let count = self.bucket_size().min(self.len.saturating_sub(b * self.bucket_size()));
        let first = (b * self.bucket_size()) as u32;
        decode_bucket_with(data.get(self.bucket_span(b))?, count, &self.symbols, buf, |j, part| {
            visit(first + j as u32, part)
        })
    }

    /// Whether the first key of bucket `b` is below `target`, whose [`head_word`] is `word`
    /// (false past the last bucket). Decided by the cached first eight bytes unless they equal
    /// the target's.
    pub(in crate::snapshot) fn head_below(&self, b: usize, target: &[u8], word: u64) -> bool {
        let Some(&head) = self.head_words.get(b) else { return false };
        below_by_words(head, || self.head(b), target, word)
    }

    /// The first key of bucket `b`, decoded alone (a bucket's first key is stored whole).
    /// Allocates: it is read when opening a file and on the rare ties of [`Self::head_below`].
    pub(super) fn head(&self, b: usize) -> Option<Vec<u8>> {
        let mut key = None;
        self.decode_bucket_from(b, 0, &mut Vec::new(), |_, k, _| {
            key = Some(k.to_vec());
            false
        })?;
        key
    }

    /// The key at position `pos`.
    pub(in crate::snapshot) fn key_at(&self, pos: u32) -> Option<String> {
        let bs = self.bucket_size();
        let mut buf = decode_buffer();
        let mut key = None;
        if (pos as usize) < self.len {
            self.decode_bucket_from(pos as usize / bs, pos as usize % bs, &mut buf, |_, k, _| {
                key = Some(key_string(k));
                false
            });
        }
        key
    }

    /// Number of key buckets.
    pub(in crate::snapshot) fn bucket_count(&self) -> usize {
        self.len.div_ceil(self.bucket_size())
    }

    /// Calls `f(position, key, has_display)` for every key of the buckets in `buckets`, decoding
    /// each bucket once.
    pub(in crate::snapshot) fn for_each_key(
        &self,
        buckets: std::ops::Range<usize>,
        mut f: impl FnMut(u32, &str, bool),
    ) {
        let mut buf = decode_buffer();
        for b in buckets {
            self.decode_bucket_from(b, 0, &mut buf, |pos, key, flag| {
                // Keys were verified to be UTF-8 when the snapshot was opened.
                f(pos, std::str::from_utf8(key).unwrap_or_default(), flag);
                true
            });
        }
    }
}
