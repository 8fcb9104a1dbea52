//! Reading a snapshot: read it into memory (never mapped: see [`crate::file`]), verify every
//! invariant once ([`verify`]), then answer prefix lookups without allocation beyond the answer
//! itself.

use std::cell::Cell;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use fst::raw::Fst;

use super::error::{Error, Result};
use super::filter::Filter;
use super::frontcode::{Symbols, decode_buffer};
use super::layout::{self, SECTION_COUNT, Section, f64_at, u32_at};
use super::lists::{DecodedLists, Entry};
use super::scores::ScoreRuns;
use super::search::partition_point;
use super::upper::Upper;
use super::words::Postings;
use super::{Meta, fstwalk, packed};
use crate::huge::Huge;
use crate::matching::Match;
use verify::go_on;

mod keys;
mod verify;

use keys::HEAD_BLOCK;
pub(super) use keys::{below_by_words, head_word};

/// The file bytes, owned by this process: nobody can change them under a lookup. Read from a
/// file, they ask for huge pages while they live ([`Huge`]).
type Backing = Huge<Vec<u8>>;

/// Bytes of every snapshot alive in this process (see [`Snapshot::bytes_held`]).
static HELD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A section of the shared backing, handed to the `fst` crate as its byte source.
#[derive(Debug, Clone)]
struct SectionBytes {
    backing: Arc<Backing>,
    range: Range<usize>,
}

impl AsRef<[u8]> for SectionBytes {
    fn as_ref(&self) -> &[u8] {
        let bytes: &[u8] = self.backing.as_slice();
        &bytes[self.range.clone()]
    }
}

/// One suggestion of an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    /// The normalized key.
    pub key: String,
    /// The most frequent surface form, when it differs from the key (most keys have none, which
    /// saves an allocation per suggestion on the request path).
    pub display: Option<String>,
    /// The EMA score.
    pub score: f64,
    /// The tier that answered it ([`crate::matching`]).
    pub tier: Match,
    /// For [`Match::Fuzzy`]: the distance to the nearest prefix (1 or 2); 0 otherwise.
    pub typos: u8,
}

impl Suggestion {
    /// What users see: the most frequent surface form.
    pub fn text(&self) -> &str {
        self.display.as_deref().unwrap_or(&self.key)
    }
}

/// A loaded, verified snapshot. Cheap to share behind an `Arc`; all lookups take `&self`.
pub struct Snapshot {
    backing: Arc<Backing>,
    ranges: [Range<usize>; SECTION_COUNT],
    node_index: Fst<SectionBytes>,
    word_index: Fst<SectionBytes>,
    /// The key store's symbol table ([`Symbols`]).
    symbols: Symbols,
    meta: Meta,
    id: String,
    len: usize,
    top_k: usize,
    pub(super) small: usize,
    /// Bits per packed position or rank.
    width: u32,
    /// The first eight bytes of every bucket's first key ([`head_word`]). The fuzzy walk's
    /// skips compare a target with bucket heads far more often than anything else it does;
    /// these 8 bytes a bucket stay in cache, where each head in the file is a cache miss or two.
    head_words: Vec<u64>,
    /// Every [`HEAD_BLOCK`]-th of [`Self::head_words`]: 156 KB at 10M completions, which stays
    /// in cache where the 10 MB of all head words do not (see [`Self::lower_bound`]).
    head_blocks: Vec<u64>,
    /// The score runs (first rank, score), copied out of the file, with a table that finds a
    /// rank's run ([`ScoreRuns`]): every answer looks up a score per completion.
    scores: ScoreRuns,
    /// The distinct beginnings of the keys, which the fuzzy walk visits before the key store
    /// ([`Upper`]); collected while the keys are verified.
    pub(super) upper: Upper,
    /// The stored lists with their keys decoded ([`DecodedLists`]), made after verification.
    lists: DecodedLists,
    /// [`Self::derived_bytes`] as added to [`HELD`] once everything was made (0 for a file
    /// that failed verification), which [`Drop`] takes off again.
    derived_counted: usize,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("id", &self.id)
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let held = self.backing.len() + self.derived_counted;
        HELD.fetch_sub(held as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Snapshot {
    /// Memory held by every snapshot alive in this process, in bytes: its file and what was
    /// made from it at opening ([`Snapshot::memory_bytes`]). A server holds the current and the
    /// previous generation, plus any still in use by a request. An outgoing snapshot is freed
    /// when its last request finishes, so this does not grow across swaps.
    pub fn bytes_held() -> u64 {
        HELD.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Reads the snapshot at `path` into memory and verifies it.
    ///
    /// Read, not mapped: a mapped file truncated or overwritten in place by someone else would
    /// kill the process with SIGBUS on the next lookup. A FIFO or other non-regular file at the
    /// path is refused at once instead of blocking. The memory asks for huge pages
    /// ([`crate::file::read_regular_random`]): lookups touch it at random.
    pub fn open(path: &Path) -> Result<Snapshot> {
        Self::open_cancellable(path, &AtomicBool::new(false))
    }

    /// [`Snapshot::open`] that gives up with [`Error::Cancelled`] once `cancel` is set.
    ///
    /// A server abandons a load that takes too long; without this the abandoned thread would
    /// go on to the end, holding a whole file's worth of memory next to the load that replaces
    /// it. The flag is checked before the read and between the phases of verifying, each well
    /// under a second of CPU at 10M completions. The read itself is not interrupted: one from a
    /// hung file system holds its thread until the file system answers.
    pub fn open_cancellable(path: &Path, cancel: &AtomicBool) -> Result<Snapshot> {
        Self::open_with_metadata(path, cancel).map(|(snapshot, _)| snapshot)
    }

    /// [`Snapshot::open_cancellable`], also returning the metadata of the file read. It comes
    /// from the open file, so it describes the bytes verified even when the path was renamed
    /// over during the read: a server remembers by it which file it verified.
    pub fn open_with_metadata(
        path: &Path,
        cancel: &AtomicBool,
    ) -> Result<(Snapshot, std::fs::Metadata)> {
        go_on(cancel)?;
        let io = |source| Error::Io { path: path.to_owned(), source };
        // A file of another kind is refused by its header before its size is taken in memory
        // (a misplaced 10 GB file used to be read whole first, and a server OOM-killed on it
        // restarted into the same read); the length checked bounds the read that follows.
        let (head, len) = crate::file::read_head(path, layout::HEADER_LEN).map_err(io)?;
        layout::check_head(&head, len)?;
        let (bytes, metadata) = crate::file::read_regular_random(path, len).map_err(io)?;
        Ok((Self::from_backing(bytes, cancel)?, metadata))
    }

    /// Verifies and wraps snapshot bytes held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Snapshot> {
        Self::from_backing(Huge::plain(bytes), &AtomicBool::new(false))
    }

    fn from_backing(backing: Backing, cancel: &AtomicBool) -> Result<Snapshot> {
        go_on(cancel)?;
        let backing = Arc::new(backing);
        let bytes = backing.as_slice();
        let ranges = layout::parse(bytes)?;
        let meta: Meta = rmp_serde::from_slice(&bytes[ranges[Section::Meta as usize].clone()])
            .map_err(|e| Error::corrupt(format!("metadata: {e}")))?;
        let fst_of = |s: Section| {
            let bytes =
                SectionBytes { backing: Arc::clone(&backing), range: ranges[s as usize].clone() };
            Fst::new(bytes).map_err(|e| Error::corrupt(format!("{}: {e}", s.name())))
        };
        let node_index = fst_of(Section::NodeIndex)?;
        let word_index = fst_of(Section::WordIndex)?;
        let symbols = Symbols::parse(&bytes[ranges[Section::KeySymbols as usize].clone()])
            .ok_or_else(|| Error::corrupt("key symbol table"))?;
        let len = usize::try_from(meta.keys).map_err(|_| Error::corrupt("key count"))?;
        // Balanced by `Drop`, which runs for a snapshot that fails verification too.
        HELD.fetch_add(backing.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let mut snapshot = Snapshot {
            id: layout::snapshot_id(bytes),
            top_k: meta.top_k as usize,
            small: meta.small_subtree as usize,
            width: packed::width_for(meta.keys.saturating_sub(1)),
            len,
            meta,
            node_index,
            word_index,
            symbols,
            ranges,
            backing,
            head_words: Vec::new(),
            head_blocks: Vec::new(),
            scores: ScoreRuns::default(),
            upper: Upper::default(),
            lists: DecodedLists::default(),
            derived_counted: 0,
        };
        // The sizes first: the head words are read by them. Then the words, before the other
        // checks, which find key ranges through them; a head out of order fails the key
        // checks, which read the buckets in order and look nothing up.
        snapshot.verify_sizes()?;
        go_on(cancel)?;
        snapshot.head_words = snapshot.read_head_words();
        go_on(cancel)?;
        snapshot.head_blocks = snapshot.head_words.iter().step_by(HEAD_BLOCK).copied().collect();
        snapshot.upper = snapshot.verify(cancel)?;
        // Made from runs the checks above found in order.
        let starts = snapshot.section(Section::ScoreRunStarts);
        let starts = (0..starts.len() / 4).map(|i| u32_at(starts, i)).collect();
        let values = snapshot.section(Section::ScoreRunValues);
        let values = (0..values.len() / 8).map(|i| f64_at(values, i)).collect();
        snapshot.scores = ScoreRuns::new(starts, values, snapshot.len);
        go_on(cancel)?;
        snapshot.lists = DecodedLists::new(&snapshot).unwrap_or_default();
        snapshot.derived_counted = snapshot.derived_bytes();
        HELD.fetch_add(snapshot.derived_counted as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(snapshot)
    }

    /// The metadata written by the builder.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// A short identifier unique to this file's content (its checksum, hex).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether `other` answers exactly as this snapshot does, for the same reasons: every
    /// section byte for byte, and the metadata but for the build time. Two builds that counted
    /// the same hours under the same settings make such a pair, with different [`Self::id`]s
    /// (the checksum covers the build time); the builder publishes the second of them as
    /// nothing new.
    pub fn same_content(&self, other: &Snapshot) -> bool {
        let sections_equal = Section::ALL
            .iter()
            .filter(|&&s| s != Section::Meta)
            .all(|&s| self.section(s) == other.section(s));
        let undated = |m: &Meta| Meta { build_time_unix: 0, ..m.clone() };
        sections_equal && undated(&self.meta) == undated(&other.meta)
    }

    /// Number of completions.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the snapshot holds no completion.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Largest k this snapshot answers exactly.
    pub fn max_k(&self) -> usize {
        self.top_k
    }

    /// Total size of the file in bytes.
    pub fn size_bytes(&self) -> usize {
        self.backing.as_slice().len()
    }

    /// Memory this snapshot holds in bytes: the file, and what was made from it at opening
    /// to answer faster (at 10M completions 278 MB and 63 MB).
    pub fn memory_bytes(&self) -> usize {
        self.size_bytes() + self.derived_bytes()
    }

    /// Drops the decoded lists, so lookups read the file's lists; whether there were any.
    #[cfg(test)]
    pub(super) fn forget_decoded_lists(&mut self) -> bool {
        std::mem::take(&mut self.lists).memory_bytes() > 0
    }

    /// What was made from the file at opening: the bucket heads, the score runs, the keys'
    /// beginnings and the decoded lists.
    fn derived_bytes(&self) -> usize {
        let heads = (self.head_words.len() + self.head_blocks.len()) * 8;
        heads + self.scores.memory_bytes() + self.upper.memory_bytes() + self.lists.memory_bytes()
    }

    /// Bytes per section, in layout order (for `inspect`).
    pub fn section_sizes(&self) -> Vec<(&'static str, usize)> {
        Section::ALL.iter().map(|&s| (s.name(), self.ranges[s as usize].len())).collect()
    }

    pub(super) fn section(&self, s: Section) -> &[u8] {
        &self.backing.as_slice()[self.ranges[s as usize].clone()]
    }

    /// The top `k` completions of a normalized prefix ([`crate::normalize::prefix`]), best first.
    pub fn suggest(&self, prefix: &str, k: usize) -> Vec<Suggestion> {
        self.suggest_filtered(prefix, k, None)
    }

    /// Like [`Snapshot::suggest`], leaving out what `filter` blocks: the answer is the exact
    /// top `k` of the completions that are not blocked.
    pub fn suggest_filtered(
        &self,
        prefix: &str,
        k: usize,
        filter: Option<&Filter>,
    ) -> Vec<Suggestion> {
        let k = k.min(self.top_k);
        if k == 0 || self.len == 0 {
            return Vec::new();
        }
        Scratch::with(|scratch| self.suggest_with(prefix, k, filter, scratch))
    }

    fn suggest_with(
        &self,
        prefix: &str,
        k: usize,
        filter: Option<&Filter>,
        scratch: &mut Scratch,
    ) -> Vec<Suggestion> {
        let buf = &mut scratch.buf;
        match fstwalk::first_with_prefix(&self.node_index, prefix.as_bytes()) {
            Some(node) => {
                // A filter replaces exactly the lists that hold a blocked completion.
                let node = node as usize;
                if let Some(list) = filter.and_then(|f| f.overlay(node)) {
                    return self.materialize(&list[..k.min(list.len())], buf);
                }
                if let Some(list) = self.lists.list(node, k) {
                    return list.map(|(key, e)| self.decoded_suggestion(key, e)).collect();
                }
                let mut on_stack = [(0u32, 0u32); ON_STACK];
                let mut on_heap = Vec::new();
                let hits = on_stack_or_heap(&mut on_stack, &mut on_heap, k);
                for (hit, entry) in hits.iter_mut().zip(self.node_list(node)) {
                    *hit = entry;
                }
                self.materialize(hits, buf)
            }
            None => self.suggest_small(prefix.as_bytes(), k, filter, scratch),
        }
    }

    /// Suggestions for (position, rank) hits given best first. Buckets are decoded in position
    /// order, so hits that share a bucket (typical for long prefixes) share one decode.
    pub(super) fn materialize(&self, hits: &[(u32, u32)], buf: &mut Vec<u8>) -> Vec<Suggestion> {
        let bs = self.bucket_size() as u32;
        self.touch_buckets(hits.iter().map(|&(p, _)| (p / bs) as usize));
        let mut out: Vec<Suggestion> = hits
            .iter()
            .map(|&(_, rank)| Suggestion {
                key: String::new(),
                display: None,
                score: self.score(rank),
                tier: Match::Prefix,
                typos: 0,
            })
            .collect();
        // (position, index in `hits`), in position order.
        let mut on_stack = [(0u32, 0u32); ON_STACK];
        let mut on_heap = Vec::new();
        let order = on_stack_or_heap(&mut on_stack, &mut on_heap, hits.len());
        for (slot, (i, &(pos, _))) in order.iter_mut().zip(hits.iter().enumerate()) {
            *slot = (pos, i as u32);
        }
        order.sort_unstable();
        let mut i = 0;
        while i < order.len() {
            let first = order[i].0;
            let mut j = i;
            let (b, from) = ((first / bs) as usize, (first % bs) as usize);
            self.decode_bucket_from(b, from, buf, |p, key, flag| {
                while j < order.len() && order[j].0 == p {
                    let s = &mut out[order[j].1 as usize];
                    s.key = key_string(key);
                    s.display = self.display_if(flag, p);
                    j += 1;
                }
                j < order.len() && order[j].0 / bs == first / bs
            });
            i = j.max(i + 1);
        }
        out
    }

    fn decoded_suggestion(&self, key: &str, entry: Entry) -> Suggestion {
        Suggestion {
            key: key.to_owned(),
            display: self.display_if(entry.has_display(), entry.pos),
            score: self.score(entry.rank),
            tier: Match::Prefix,
            typos: 0,
        }
    }

    /// The top `k` of a prefix whose subtree is small: enumerate it (keeping the decoded keys)
    /// and select.
    fn suggest_small(
        &self,
        prefix: &[u8],
        k: usize,
        filter: Option<&Filter>,
        scratch: &mut Scratch,
    ) -> Vec<Suggestion> {
        let Scratch { buf, arena, found } = scratch;
        arena.clear();
        found.clear();
        let mut pos = self.lower_bound(prefix, buf);
        // A consistent snapshot has at most `small` completions here; the bound keeps a
        // lookup's cost fixed whatever the file says.
        let end = pos.saturating_add(self.small as u32 + 1).min(self.len as u32);
        while pos < end {
            let bucket = pos as usize / self.bucket_size();
            let mut more = true;
            let from = pos as usize % self.bucket_size();
            self.decode_bucket_from(bucket, from, buf, |p, key, flag| {
                if p >= end || !key.starts_with(prefix) {
                    more = false;
                    return false;
                }
                if !filter.is_some_and(|f| f.is_blocked(p)) {
                    let start = arena.len() as u32;
                    arena.extend_from_slice(key);
                    found.push((self.rank(p), p, start, arena.len() as u32, flag));
                }
                true
            });
            if !more {
                break;
            }
            pos = ((bucket + 1) * self.bucket_size()) as u32;
        }
        found.sort_unstable();
        found
            .iter()
            .take(k)
            .map(|&(rank, pos, start, end, flag)| Suggestion {
                key: key_string(&arena[start as usize..end as usize]),
                display: self.display_if(flag, pos),
                score: self.score(rank),
                tier: Match::Prefix,
                typos: 0,
            })
            .collect()
    }

    fn rank(&self, pos: u32) -> u32 {
        packed::get(self.section(Section::Ranks), self.width, pos as usize)
    }

    /// The stored (position, rank) list of a list node, best first.
    pub(super) fn node_list(&self, node: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        let lists = self.section(Section::NodeLists);
        let first = node * self.top_k * 2;
        (first..first + self.top_k * 2).step_by(2).map(move |i| {
            (packed::get(lists, self.width, i), packed::get(lists, self.width, i + 1))
        })
    }

    pub(super) fn node_count(&self) -> usize {
        self.node_index.len()
    }

    pub(super) fn node_paths(&self) -> impl Iterator<Item = (Vec<u8>, usize)> + '_ {
        use fst::Streamer;
        let mut stream = self.node_index.stream();
        std::iter::from_fn(move || stream.next().map(|(k, v)| (k.to_vec(), v.value() as usize)))
    }

    pub(super) fn rank_of(&self, pos: u32) -> u32 {
        self.rank(pos)
    }

    /// The list node whose subtree holds exactly the keys starting with `path`, if that subtree
    /// is large enough to have a stored list.
    pub(super) fn list_node(&self, path: &[u8]) -> Option<usize> {
        fstwalk::first_with_prefix(&self.node_index, path).map(|n| n as usize)
    }

    /// The key position of the completion with rank `rank`.
    pub(super) fn position_of(&self, rank: u32) -> u32 {
        packed::get(self.section(Section::RankPositions), self.width, rank as usize)
    }

    /// The id of a word of the word index.
    pub(super) fn word_id(&self, word: &str) -> Option<usize> {
        self.word_index.get(word.as_bytes()).map(|out| out.value() as usize)
    }

    /// The ids of the words that start with `partial` (ids follow byte order).
    pub(super) fn word_range(&self, partial: &str) -> Range<usize> {
        let lo = fstwalk::lower_bound(&self.word_index, partial.as_bytes()) as usize;
        let end = crate::normalize::prefix_end(partial.as_bytes());
        lo..(fstwalk::lower_bound(&self.word_index, &end) as usize).max(lo)
    }

    /// The ranks of the completions that hold word `id`, ascending.
    pub(super) fn postings(&self, id: usize) -> Postings<'_> {
        let (samples, postings) = self.word_sections();
        Postings::of(samples, postings, self.word_index.len(), id)
    }

    /// The lists of the words `ids` (from [`Snapshot::word_range`]), in id order.
    pub(super) fn postings_run(&self, ids: Range<usize>) -> impl Iterator<Item = Postings<'_>> {
        let (samples, postings) = self.word_sections();
        Postings::run(samples, postings, self.word_index.len(), ids)
    }

    fn word_sections(&self) -> (&[u8], &[u8]) {
        (self.section(Section::PostingSamples), self.section(Section::Postings))
    }

    /// The score of the completion with rank `rank`.
    fn score(&self, rank: u32) -> f64 {
        self.scores.score(rank)
    }

    /// The display text of `pos`, looked up only when its key's flag says it has one.
    fn display_if(&self, flag: bool, pos: u32) -> Option<String> {
        if flag { self.display(pos).map(str::to_owned) } else { None }
    }

    /// The display text of position `pos` if it differs from its key.
    fn display(&self, pos: u32) -> Option<&str> {
        let positions = self.section(Section::DisplayPositions);
        let n = positions.len() / 4;
        let i = partition_point(n, |i| u32_at(positions, i) < pos);
        if i >= n || u32_at(positions, i) != pos {
            return None;
        }
        let offsets = self.section(Section::DisplayOffsets);
        let (start, end) = (u32_at(offsets, i) as usize, u32_at(offsets, i + 1) as usize);
        std::str::from_utf8(self.section(Section::DisplayText).get(start..end)?).ok()
    }

    /// Every completion in key order. For oracles, tools and partition splitting; not for the
    /// request path.
    pub fn entries(&self) -> impl Iterator<Item = Suggestion> + '_ {
        (0..self.bucket_count()).flat_map(move |b| {
            let mut out = Vec::with_capacity(self.bucket_size());
            self.for_each_key(b..b + 1, |pos, key, flag| {
                out.push(Suggestion {
                    key: key.to_owned(),
                    display: self.display_if(flag, pos),
                    score: self.score(self.rank(pos)),
                    tier: Match::Prefix,
                    typos: 0,
                });
            });
            out
        })
    }
}

thread_local! {
    /// A thread's lookup buffers between lookups ([`Scratch::with`]).
    static SCRATCH: Cell<Option<Scratch>> = const { Cell::new(None) };
}

/// The buffers of a lookup ([`Snapshot::suggest_filtered`]). A thread's lookups reuse them
/// instead of allocating them each time: the decode buffer alone was 4-5% of a lookup's time
/// at 10M. Buffers that grew past [`SCRATCH_KEPT`] are not kept.
struct Scratch {
    /// Where keys are decoded.
    buf: Vec<u8>,
    /// A small subtree's keys, one after another.
    arena: Vec<u8>,
    /// A small subtree's completions.
    found: Vec<SmallHit>,
}

/// A completion of a small subtree: (rank, position, start and end of its key in
/// [`Scratch::arena`], has a display text).
type SmallHit = (u32, u32, u32, u32, bool);

impl Scratch {
    fn new() -> Scratch {
        Scratch { buf: decode_buffer(), arena: Vec::with_capacity(512), found: Vec::new() }
    }

    /// Runs `f` with this thread's buffers, taken out for the call: a nested call (or one while
    /// the thread exits) gets new ones instead of a panic.
    fn with<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
        let mut scratch = SCRATCH.try_with(Cell::take).ok().flatten().unwrap_or_else(Scratch::new);
        let out = f(&mut scratch);
        let found = scratch.found.capacity() * size_of::<SmallHit>();
        let held = scratch.buf.capacity() + scratch.arena.capacity() + found;
        if held <= SCRATCH_KEPT {
            let _ = SCRATCH.try_with(|cell| cell.set(Some(scratch)));
        }
        out
    }
}

/// The most a thread keeps in lookup buffers between lookups, in bytes: what a small subtree of
/// typical keys needs, not what a crafted one may.
const SCRATCH_KEPT: usize = 256 << 10;

/// Up to this many hits, a lookup keeps its lists of hits on the stack ([`on_stack_or_heap`]).
const ON_STACK: usize = 32;

/// `n` pairs: the front of `stack` when they fit (the usual `k`), else `heap` resized. Saves a
/// stored-list lookup two of its 15 or so allocations.
fn on_stack_or_heap<'a>(
    stack: &'a mut [(u32, u32); ON_STACK],
    heap: &'a mut Vec<(u32, u32)>,
    n: usize,
) -> &'a mut [(u32, u32)] {
    if n <= ON_STACK {
        &mut stack[..n]
    } else {
        heap.resize(n, (0, 0));
        heap
    }
}

/// Largest `small_subtree` a snapshot may declare.
pub(super) const MAX_SMALL_SUBTREE: usize = 1 << 12;

/// A key as a `String` (keys are verified UTF-8; the lossy branch only guards the invariant).
fn key_string(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}
