//! Writing a snapshot from scored entries. The builder hands entries in; only this module turns
//! them into bytes.

use std::path::Path;
use std::sync::OnceLock;

use super::error::{Error, Result};
use super::frontcode::{self, BUCKET_SIZE};
use super::layout::{self, SECTION_COUNT, Section};
use super::{Meta, SMALL_SUBTREE, packed, trie, words};
use crate::{atomic, rank};

/// One completion to store.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The normalized key ([`crate::normalize::key`]); entries must be sorted by key, distinct.
    pub key: String,
    /// What users see, when it differs from the key (e.g. with diacritics).
    pub display: Option<String>,
    /// The EMA score; finite and non-negative.
    pub score: f64,
}

/// Provenance recorded in the snapshot's metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildInfo {
    /// When the build ran, unix seconds.
    pub build_time_unix: i64,
    /// The last processed hour, if any.
    pub watermark_hour: Option<u32>,
    /// EMA half-life in hours.
    pub half_life_hours: f64,
    /// Minimum score a key needed to be kept.
    pub min_score: f64,
    /// Largest k the snapshot must answer.
    pub top_k: usize,
    /// Key range covered: start (inclusive).
    pub range_start: String,
    /// Key range covered: end (exclusive), `None` for unbounded.
    pub range_end: Option<String>,
    /// The normalized entries of the blocklist the builder applied (nothing they block is in
    /// the snapshot). Servers keep them out of the previous generation too.
    pub blocklist: Vec<String>,
    /// The normalization and privacy rules the entries were made under (the builder's
    /// [`crate::normalize::RULES_VERSION`]); `None` when unknown.
    pub rules: Option<u32>,
    /// Subtrees with at most this many completions (or `top_k`, if larger) store no list
    /// ([`super::SMALL_SUBTREE`] by default). Tests lower it to put most of a small trie in
    /// the node index.
    pub small_subtree: usize,
}

impl Default for BuildInfo {
    /// The whole key space, top 10, nothing dropped, no provenance: what tests and tools that
    /// write snapshots directly (not through the builder) start from. The half-life is only
    /// recorded, never used to rank.
    fn default() -> Self {
        BuildInfo {
            build_time_unix: 0,
            watermark_hour: None,
            half_life_hours: 168.0,
            min_score: 0.0,
            top_k: 10,
            range_start: String::new(),
            range_end: None,
            blocklist: Vec::new(),
            rules: None,
            small_subtree: SMALL_SUBTREE,
        }
    }
}

/// Sizes of what was written, for build summaries.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteStats {
    /// The snapshot id (what servers report as `version`).
    pub id: String,
    /// The metadata as written.
    pub meta: Meta,
    /// Total file size in bytes.
    pub bytes: u64,
    /// Bytes per section, in layout order.
    pub sections: Vec<(&'static str, u64)>,
}

/// Serializes `entries` (sorted by key, distinct) into snapshot bytes.
pub fn write(entries: &[Entry], info: &BuildInfo) -> Result<(Vec<u8>, WriteStats)> {
    check_input(entries, info)?;
    write_unchecked(entries, info)
}

/// [`write`] without its checks of the input, for tests that make what the reader must refuse.
pub(super) fn write_unchecked(
    entries: &[Entry],
    info: &BuildInfo,
) -> Result<(Vec<u8>, WriteStats)> {
    let keys: Vec<&[u8]> = entries.iter().map(|e| e.key.as_bytes()).collect();
    // The word index needs nothing else this writes and takes as long as all the rest: it is
    // built on a second core meanwhile, from the start (it needs the ranks only at its end).
    let ranked: OnceLock<Vec<u32>> = OnceLock::new();
    let (trie, mut sections) = std::thread::scope(|scope| -> Result<_> {
        let (tell, ready) = std::sync::mpsc::channel::<()>();
        let (keys, ranked) = (&keys, &ranked);
        let word_sections = scope.spawn(move || {
            words::sections(keys, move || {
                ready.recv().ok()?;
                ranked.get().map(Vec::as_slice)
            })
        });
        let order = rank_order(entries);
        let ranks = ranked.get_or_init(|| {
            let mut ranks = vec![0u32; entries.len()];
            for (r, &i) in order.iter().enumerate() {
                ranks[i as usize] = r as u32;
            }
            ranks
        });
        // A send fails only when the word thread is gone, and its join reports why.
        let _ = tell.send(());
        let k = info.top_k;
        let small = info.small_subtree.max(k);
        let trie = trie::build(keys, ranks, k, small);

        let mut sections: [Vec<u8>; SECTION_COUNT] = Default::default();
        let flagged: Vec<(&[u8], bool)> = entries
            .iter()
            .map(|e| (e.key.as_bytes(), e.display.as_deref().is_some_and(|d| d != e.key)))
            .collect();
        let (buckets, offsets, symbols) = key_sections(&flagged)?;
        sections[Section::KeyBuckets as usize] = buckets;
        sections[Section::BucketOffsets as usize] = offsets;
        sections[Section::KeySymbols as usize] = symbols;
        let width = packed::width_for(entries.len().saturating_sub(1) as u64);
        sections[Section::Ranks as usize] = packed::pack(ranks.iter().copied(), width);
        let (node_index, node_lists) = node_sections(&trie, ranks, width)?;
        sections[Section::NodeIndex as usize] = node_index;
        sections[Section::NodeLists as usize] = node_lists;
        let (positions, offsets, text) = display_sections(entries)?;
        sections[Section::DisplayPositions as usize] = positions;
        sections[Section::DisplayOffsets as usize] = offsets;
        sections[Section::DisplayText as usize] = text;
        let (starts, values) = score_sections(entries, &order);
        sections[Section::ScoreRunStarts as usize] = starts;
        sections[Section::ScoreRunValues as usize] = values;
        sections[Section::RankPositions as usize] = packed::pack(order.iter().copied(), width);
        let (word_index, word_samples, postings) =
            word_sections.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        sections[Section::WordIndex as usize] = word_index;
        sections[Section::PostingSamples as usize] = word_samples;
        sections[Section::Postings as usize] = postings;
        Ok((trie, sections))
    })?;
    let k = info.top_k;
    let small = info.small_subtree.max(k);

    let meta = Meta {
        build_time_unix: info.build_time_unix,
        watermark_hour: info.watermark_hour,
        half_life_hours: info.half_life_hours,
        min_score: info.min_score,
        keys: entries.len() as u64,
        trie_nodes: trie.nodes,
        list_nodes: trie.lists.len() as u64,
        top_k: k as u32,
        small_subtree: small as u32,
        bucket_size: BUCKET_SIZE as u32,
        range_start: info.range_start.clone(),
        range_end: info.range_end.clone(),
        blocklist: info.blocklist.clone(),
        rules: info.rules,
    };
    sections[Section::Meta as usize] =
        rmp_serde::to_vec_named(&meta).map_err(|e| Error::InvalidInput(e.to_string()))?;
    let bytes = layout::assemble(&sections);
    let stats = WriteStats {
        id: layout::snapshot_id(&bytes),
        meta,
        bytes: bytes.len() as u64,
        sections: Section::ALL
            .iter()
            .map(|s| (s.name(), sections[*s as usize].len() as u64))
            .collect(),
    };
    Ok((bytes, stats))
}

/// Writes the snapshot to `path` atomically (temp file, fsync, rename).
pub fn write_file(path: &Path, entries: &[Entry], info: &BuildInfo) -> Result<WriteStats> {
    let (bytes, stats) = write(entries, info)?;
    atomic::write(path, &bytes).map_err(|source| Error::Io { path: path.to_owned(), source })?;
    Ok(stats)
}

fn check_input(entries: &[Entry], info: &BuildInfo) -> Result<()> {
    if entries.len() >= u32::MAX as usize {
        return Err(Error::InvalidInput("too many entries for one snapshot".into()));
    }
    if !(1..=super::MAX_TOP_K).contains(&info.top_k) {
        let max = super::MAX_TOP_K;
        return Err(Error::InvalidInput(format!("top_k must be 1..={max}, got {}", info.top_k)));
    }
    let small = info.small_subtree.max(info.top_k);
    if small > super::reader::MAX_SMALL_SUBTREE {
        return Err(Error::InvalidInput(format!(
            "small_subtree must be at most {}, got {small}",
            super::reader::MAX_SMALL_SUBTREE
        )));
    }
    let max = crate::normalize::MAX_KEY_BYTES;
    if let Some(e) = entries.iter().find(|e| e.key.len() > max) {
        return Err(Error::InvalidInput(format!(
            "key of {} bytes, longer than {max}: {:?}",
            e.key.len(),
            e.key
        )));
    }
    if let Some(w) = entries.windows(2).find(|w| w[0].key >= w[1].key) {
        return Err(Error::InvalidInput(format!(
            "keys not strictly increasing at {:?}, {:?}",
            w[0].key, w[1].key
        )));
    }
    // `-0.0` too: ranking orders it after `0.0` (total order), which stores two runs of
    // "equal" scores that the reader's verification rejects as not decreasing.
    if let Some(e) = entries.iter().find(|e| !e.score.is_finite() || e.score.is_sign_negative()) {
        return Err(Error::InvalidInput(format!("bad score {} for {:?}", e.score, e.key)));
    }
    Ok(())
}

/// Key positions in rank order: the best completion first. Entries are sorted by key, so
/// positions break ties as the keys would.
fn rank_order(entries: &[Entry]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..entries.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        rank::cmp_by_position(entries[a as usize].score, a, entries[b as usize].score, b)
    });
    order
}

pub(super) fn fst_error(e: fst::Error) -> Error {
    Error::InvalidInput(format!("fst build failed: {e}"))
}

/// Front-coded buckets, their offsets, and the symbol table of their codes (empty when a
/// table would not make the keys smaller: text unlike its sample; the keys are then stored as
/// they are).
fn key_sections(keys: &[(&[u8], bool)]) -> Result<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let trained = frontcode::Symbols::train(&symbol_sample(keys));
    let (buckets, offsets) = key_buckets(keys, &trained)?;
    let table = trained.to_bytes();
    let none = frontcode::Symbols::none();
    if buckets.len() + table.len() < plain_len(keys, &none) {
        return Ok((buckets, offsets, table));
    }
    let (buckets, offsets) = key_buckets(keys, &none)?;
    Ok((buckets, offsets, Vec::new()))
}

/// The bytes of the key buckets without a symbol table, one bucket at a time.
fn plain_len(keys: &[(&[u8], bool)], none: &frontcode::Symbols) -> usize {
    let encoder = frontcode::Encoder::new(none);
    let (mut bucket, mut scratch) = (Vec::new(), Vec::new());
    keys.chunks(BUCKET_SIZE)
        .map(|chunk| {
            bucket.clear();
            frontcode::encode_bucket(chunk, &encoder, &mut bucket, &mut scratch);
            bucket.len()
        })
        .sum()
}

/// About 64K of the parts of keys the key store holds, spread over all of them: what the
/// symbol table is trained on (FSST trains on a small sample too).
fn symbol_sample<'k>(keys: &[(&'k [u8], bool)]) -> Vec<&'k [u8]> {
    let buckets = keys.len().div_ceil(BUCKET_SIZE);
    let step = (buckets / 4096).max(1);
    keys.chunks(BUCKET_SIZE).step_by(step).flat_map(frontcode::stored_parts).collect()
}

fn key_buckets(keys: &[(&[u8], bool)], symbols: &frontcode::Symbols) -> Result<(Vec<u8>, Vec<u8>)> {
    let encoder = frontcode::Encoder::new(symbols);
    let (mut buckets, mut offsets, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
    for chunk in keys.chunks(BUCKET_SIZE) {
        let offset = u32::try_from(buckets.len())
            .map_err(|_| Error::InvalidInput("key data exceeds 4 GiB".into()))?;
        offsets.extend_from_slice(&offset.to_le_bytes());
        frontcode::encode_bucket(chunk, &encoder, &mut buckets, &mut scratch);
    }
    Ok((buckets, offsets))
}

/// The FST over list-node paths and the fixed-stride table of their (position, rank) lists.
fn node_sections(trie: &trie::Trie, ranks: &[u32], width: u32) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut index = fst::MapBuilder::memory();
    for (i, node) in trie.lists.iter().enumerate() {
        index.insert(&node.path, i as u64).map_err(fst_error)?;
    }
    let pairs = trie.lists.iter().flat_map(|n| n.top.iter().flat_map(|&p| [p, ranks[p as usize]]));
    Ok((index.into_inner().map_err(fst_error)?, packed::pack(pairs, width)))
}

fn display_sections(entries: &[Entry]) -> Result<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let (mut positions, mut offsets, mut text) = (Vec::new(), Vec::new(), Vec::new());
    for (i, e) in entries.iter().enumerate() {
        if let Some(display) = e.display.as_deref().filter(|d| *d != e.key) {
            positions.extend_from_slice(&(i as u32).to_le_bytes());
            offsets.extend_from_slice(&display_offset(text.len())?.to_le_bytes());
            text.extend_from_slice(display.as_bytes());
        }
    }
    offsets.extend_from_slice(&display_offset(text.len())?.to_le_bytes());
    Ok((positions, offsets, text))
}

/// A display text's offset as stored (four bytes), or the error of a table past 4 GiB, which
/// would otherwise wrap into a file the reader rejects.
fn display_offset(len: usize) -> Result<u32> {
    u32::try_from(len).map_err(|_| Error::InvalidInput("display texts exceed 4 GiB".into()))
}

/// Scores by rank are non-increasing, so they are stored once per run of equal values.
fn score_sections(entries: &[Entry], order: &[u32]) -> (Vec<u8>, Vec<u8>) {
    let (mut starts, mut values) = (Vec::new(), Vec::new());
    let mut last: Option<u64> = None;
    for (r, &i) in order.iter().enumerate() {
        let bits = entries[i as usize].score.to_bits();
        if last != Some(bits) {
            starts.extend_from_slice(&(r as u32).to_le_bytes());
            values.extend_from_slice(&bits.to_le_bytes());
            last = Some(bits);
        }
    }
    (starts, values)
}
