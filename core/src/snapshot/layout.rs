//! The container: magic, version, section table, checksum (see the module docs of `snapshot`).

use super::error::{Error, Result};

/// The first bytes of every snapshot file.
pub const MAGIC: [u8; 8] = *b"TYPEAHED";

/// The one format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 4;

/// The sections, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Meta,
    KeyBuckets,
    BucketOffsets,
    KeySymbols,
    Ranks,
    NodeIndex,
    NodeLists,
    DisplayPositions,
    DisplayOffsets,
    DisplayText,
    ScoreRunStarts,
    ScoreRunValues,
    RankPositions,
    WordIndex,
    PostingSamples,
    Postings,
}

pub(crate) const SECTION_COUNT: usize = 16;

impl Section {
    pub(crate) const ALL: [Section; SECTION_COUNT] = [
        Section::Meta,
        Section::KeyBuckets,
        Section::BucketOffsets,
        Section::KeySymbols,
        Section::Ranks,
        Section::NodeIndex,
        Section::NodeLists,
        Section::DisplayPositions,
        Section::DisplayOffsets,
        Section::DisplayText,
        Section::ScoreRunStarts,
        Section::ScoreRunValues,
        Section::RankPositions,
        Section::WordIndex,
        Section::PostingSamples,
        Section::Postings,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Section::Meta => "meta",
            Section::KeyBuckets => "key_buckets",
            Section::BucketOffsets => "bucket_offsets",
            Section::KeySymbols => "key_symbols",
            Section::Ranks => "ranks",
            Section::NodeIndex => "node_index_fst",
            Section::NodeLists => "node_lists",
            Section::DisplayPositions => "display_positions",
            Section::DisplayOffsets => "display_offsets",
            Section::DisplayText => "display_text",
            Section::ScoreRunStarts => "score_run_starts",
            Section::ScoreRunValues => "score_run_values",
            Section::RankPositions => "rank_positions",
            Section::WordIndex => "word_index_fst",
            Section::PostingSamples => "posting_samples",
            Section::Postings => "postings",
        }
    }
}

/// Bytes of the header: magic, version, section count and table.
pub(crate) const HEADER_LEN: usize = 8 + 4 + 4 + 16 * SECTION_COUNT;

/// Serializes sections into the container, in `Section::ALL` order.
pub(crate) fn assemble(sections: &[Vec<u8>; SECTION_COUNT]) -> Vec<u8> {
    let total: usize = sections.iter().map(|s| s.len() + 8).sum::<usize>() + HEADER_LEN + 4;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(SECTION_COUNT as u32).to_le_bytes());
    let mut offset = HEADER_LEN;
    let mut table = Vec::with_capacity(16 * SECTION_COUNT);
    for s in sections {
        offset = offset.next_multiple_of(8);
        table.extend_from_slice(&(offset as u64).to_le_bytes());
        table.extend_from_slice(&(s.len() as u64).to_le_bytes());
        offset += s.len();
    }
    out.extend_from_slice(&table);
    for s in sections {
        out.resize(out.len().next_multiple_of(8), 0);
        out.extend_from_slice(s);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks magic, version, checksum and the section table (sections inside the file, ending
/// where the checksum starts, as [`assemble`] writes them); returns the byte range of every
/// section.
pub(crate) fn parse(bytes: &[u8]) -> Result<[std::ops::Range<usize>; SECTION_COUNT]> {
    check_kind(bytes, bytes.len() as u64)?;
    let body = bytes.len() - 4;
    let expected = read_u32(bytes, body);
    let actual = crc32fast::hash(&bytes[..body]);
    if expected != actual {
        return Err(Error::ChecksumMismatch { expected, actual });
    }
    if read_u32(bytes, 12) as usize != SECTION_COUNT {
        return Err(Error::corrupt("unexpected number of sections"));
    }
    let mut ranges: [std::ops::Range<usize>; SECTION_COUNT] = Default::default();
    for (i, range) in ranges.iter_mut().enumerate() {
        let (start, end) = table_entry(bytes, i);
        let end = usize::try_from(end).ok().filter(|&end| start >= HEADER_LEN && end <= body);
        let end = end.ok_or_else(|| Error::corrupt("section outside the file"))?;
        *range = start..end;
    }
    if ranges.iter().map(|r| r.end).max() != Some(body) {
        return Err(Error::corrupt("bytes after the last section"));
    }
    Ok(ranges)
}

/// What can be told of a snapshot file of `len` bytes from its first [`HEADER_LEN`] bytes
/// (`head`), before it is read: magic, version, and a length no greater than its section
/// table says. A reader checks this first, so a file of another kind at the snapshot's path
/// (a misplaced log, a disk image) is refused by its first bytes rather than after its whole
/// size was taken in memory, and the length checked bounds the read. (A shorter file, one
/// still being copied, is read: its checksum then says what is wrong.)
pub(crate) fn check_head(head: &[u8], len: u64) -> Result<()> {
    check_kind(head, len)?;
    let end = (0..SECTION_COUNT).map(|i| table_entry(head, i).1).max().unwrap_or(0);
    if len > end.saturating_add(4) {
        return Err(Error::corrupt("bytes after the last section"));
    }
    Ok(())
}

/// Section `i`'s start and end as the table says (the end saturated: the table is unchecked).
fn table_entry(head: &[u8], i: usize) -> (usize, u64) {
    let at = 16 + 16 * i;
    let (start, len) = (read_u64(head, at), read_u64(head, at + 8));
    (usize::try_from(start).unwrap_or(usize::MAX), start.saturating_add(len))
}

/// Magic and version, in a file of `len` bytes long enough for the header and the checksum.
fn check_kind(head: &[u8], len: u64) -> Result<()> {
    if len < (HEADER_LEN + 4) as u64 || head.len() < HEADER_LEN || head[..8] != MAGIC {
        return Err(Error::NotASnapshot);
    }
    let version = read_u32(head, 8);
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion { found: version, supported: FORMAT_VERSION });
    }
    Ok(())
}

/// The id of a snapshot: its checksum in hex. Unique per content, so two builds with different
/// settings (or build times) have different ids.
pub(crate) fn snapshot_id(bytes: &[u8]) -> String {
    format!("{:08x}", read_u32(bytes, bytes.len().saturating_sub(4)))
}

/// Reads a little-endian u32 at byte `at`; 0 when out of range (callers checked lengths).
pub(crate) fn read_u32(bytes: &[u8], at: usize) -> u32 {
    at.checked_add(4)
        .and_then(|end| bytes.get(at..end))
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    at.checked_add(8)
        .and_then(|end| bytes.get(at..end))
        .map_or(0, |b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
}

/// Reads the `i`-th u32 of an array section.
#[inline]
pub(crate) fn u32_at(section: &[u8], i: usize) -> u32 {
    read_u32(section, i.wrapping_mul(4))
}

/// Reads the `i`-th f64 of an array section.
pub(crate) fn f64_at(section: &[u8], i: usize) -> f64 {
    f64::from_bits(read_u64(section, i.wrapping_mul(8)))
}
