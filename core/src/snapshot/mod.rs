//! The snapshot: one immutable file that carries every completion, its score and the top-k of
//! every large trie node from the builder to the servers. This module owns the bytes — both
//! [`write`] and [`Snapshot`] live here, and nothing else reads or writes them.
//!
//! # Why this shape
//!
//! A lookup must cost the same for "a" (millions of completions) as for a whole query, so the
//! top-k of a prefix is never found by scanning: it is either stored with the prefix's trie node
//! or, when the node's subtree is small (at most `small_subtree` completions), enumerated
//! directly. Completions are numbered by rank (score desc, key asc — [`crate::rank`]), so a node's
//! top-k is just its k smallest ranks and needs no scores to order.
//!
//! The keys themselves are stored once, front-coded in key order (positions 0..n are *key
//! positions*). A prefix's position is found by a search over the first eight bytes of every
//! bucket's first key, which the reader keeps in memory (1 B per completion with buckets of
//! `frontcode::BUCKET_SIZE` = 8, derived from the buckets when the file is opened, so not
//! stored). The search is sampled: first over every 64th head, a small copy that stays in
//! cache, then within the one block of 64 that holds the answer, loaded at once
//! (`search::sampled_point`), because a plain binary search over all of them ended in probes
//! that each missed the cache. An FST over the paths of the nodes that store lists finds a
//! prefix's node.
//!
//! # Layout (all integers little-endian)
//!
//! ```text
//! +--------------------+----------------------------------------------------------+
//! | magic       8 B    | b"TYPEAHED"                                              |
//! | version     u32    | FORMAT_VERSION                                           |
//! | sections    u32    | number of sections (SECTION_COUNT)                       |
//! | table       16 B*N | (offset u64, length u64) of each section, in Section order|
//! | sections ...       | each starts 8-byte aligned                               |
//! | crc32       u32    | crc32 (IEEE) of every byte before it                     |
//! +--------------------+----------------------------------------------------------+
//!
//! Section          | content
//! -----------------+---------------------------------------------------------------
//! Meta             | MessagePack map (rmp-serde, named fields): Meta
//! KeyBuckets       | front-coded keys, BUCKET_SIZE per bucket, their stored parts as codes
//!                  | of the KeySymbols table (see frontcode)
//! BucketOffsets    | u32 per bucket: byte offset of the bucket in KeyBuckets
//! KeySymbols       | per code: length (1-8), 8 bytes zero-padded; empty: keys stored as is
//! Ranks            | packed, w bits per key position: its rank (0 = best)
//! NodeIndex        | fst::Map: path of the i-th list node (sorted) -> i
//! NodeLists        | packed, w bits each: top_k (position, rank) pairs per list node, best first
//! DisplayPositions | u32, sorted: key positions whose display text differs from the key
//! DisplayOffsets   | u32 per display entry + 1: byte ranges in DisplayText
//! DisplayText      | UTF-8 display texts
//! ScoreRunStarts   | u32, strictly increasing from 0: first rank of each run of equal scores
//! ScoreRunValues   | f64 per run: the score of the run
//! RankPositions    | packed, w bits per rank: its key position
//! WordIndex        | fst::Map: every word of every key (byte order) -> word id
//! PostingSamples   | u32 per 16th word + 1: where its list starts in Postings
//! Postings         | per word: ranks of the keys holding it, ascending, varint gaps; each
//!                  | list says how long it is (see `words`)
//! ```
//!
//! The last four serve the tiers after the exact prefix ([`crate::matching`]): the word index
//! finds the completions that hold typed words (see `words`), and the fuzzy tier walks the key
//! store itself (see `fuzzy`); both are read by `tiers`. Older formats are refused with
//! [`Error::UnsupportedVersion`]: rebuild from the state, which did not change. Version 1 had
//! no word sections; version 2 had an FST over every bucket's first key (1.3 B per completion,
//! unused once lookups searched the cached head words) and one u32 offset per word's list
//! (2.8 B per completion at 10M, where most words are in one key); version 3 stored the keys'
//! bytes as they are (6.5 B per completion more at 10M than version 4's symbol codes).
//!
//! "packed" arrays hold `w = ceil(log2(keys))` bits per value (see `packed`), plus 8 bytes of
//! padding. Lists carry each completion's rank next to its position so that answering from a
//! list costs no extra random read.
//!
//! Invariants checked by [`Snapshot::open`] before anything is served: checksum, version,
//! section bounds, keys strictly increasing and valid UTF-8, both FSTs ordinal and consistent,
//! ranks a permutation consistent with the scores, lists in range, scores finite and
//! non-increasing by rank.

mod error;
mod filter;
mod frontcode;
mod fstwalk;
mod fuzzy;
mod layout;
mod lists;
mod osa;
mod packed;
mod reader;
mod scores;
mod search;
mod tiers;
mod trie;
mod upper;
mod varint;
mod words;
mod writer;

pub use error::{Error, Result};
pub use filter::Filter;
pub use layout::{FORMAT_VERSION, MAGIC};
pub use reader::{Snapshot, Suggestion};
pub use tiers::{Answer, TIER_BUDGET};
pub use writer::{BuildInfo, Entry, WriteStats, write, write_file};

use serde::{Deserialize, Serialize};

/// Default and usual maximum number of suggestions per prefix.
pub const DEFAULT_TOP_K: usize = 10;

/// The most suggestions a snapshot may store per prefix (the writer refuses more, the reader
/// a file that says more: a crafted file must not make a lookup allocate without limit).
pub const MAX_TOP_K: usize = 1000;

/// Subtrees with at most this many completions (or `top_k`, if larger) store no list: they are
/// enumerated at query time, which costs about as much as decoding the answer itself.
pub const SMALL_SUBTREE: usize = 32;

/// Descriptive metadata stored in the snapshot (the `Meta` section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// When the builder wrote the file, unix seconds.
    pub build_time_unix: i64,
    /// The last processed hour (hours since the epoch), `None` if no hour was ever processed.
    pub watermark_hour: Option<u32>,
    /// Half-life of the EMA scores, in hours.
    pub half_life_hours: f64,
    /// Minimum score a key needed to be kept.
    pub min_score: f64,
    /// Number of completions.
    pub keys: u64,
    /// Nodes of the compacted trie.
    pub trie_nodes: u64,
    /// Nodes that store a top-k list.
    pub list_nodes: u64,
    /// Largest k this snapshot answers.
    pub top_k: u32,
    /// Subtree size up to which completions are enumerated instead of stored.
    pub small_subtree: u32,
    /// Keys per front-coded bucket.
    pub bucket_size: u32,
    /// First key of the key range this snapshot covers (inclusive).
    pub range_start: String,
    /// End of the covered key range (exclusive); `None` means unbounded.
    pub range_end: Option<String>,
    /// Normalized entries of the blocklist the builder applied (absent in older snapshots).
    #[serde(default)]
    pub blocklist: Vec<String>,
    /// The normalization and privacy rules the builder applied
    /// ([`crate::normalize::RULES_VERSION`]); `None` in snapshots from before the field and in
    /// those written directly, not by the builder. A `rollback` refuses older rules than the
    /// live generation's ([`crate::generation::check_rules`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<u32>,
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tiers_tests;
