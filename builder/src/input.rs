//! Opening builder inputs: expanding CLI paths, transparent decompression, and line-aligned
//! chunking for parallel parsing.
//!
//! Logs arrive as plain text, gzip or zstd, often as directory trees of rotated files. The
//! format is detected from magic bytes rather than file extensions because rotated log names
//! (`queries.log.3`, `part-00017`) rarely say how they are compressed.
//!
//! Parsing is parallel, but decompression is inherently sequential, so a single reader cuts the
//! decompressed stream into large chunks that end on line boundaries; workers then parse whole
//! chunks without any further coordination. Each chunk carries the number of its first line so
//! that error messages can still point at `file:line`.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};

/// Capacity of the buffer in front of every opened input.
const READ_BUFFER_BYTES: usize = 256 * 1024;

/// Upper bound on the up-front allocation for a chunk, so a huge `target_bytes` doesn't
/// reserve memory that a small input never uses.
const MAX_CHUNK_PREALLOC: usize = 64 * 1024 * 1024;

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// Failure to find or open an input, always naming the offending path.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The path exists (or may exist) but could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
    /// The path does not exist.
    #[error("input not found: {path}")]
    NotFound {
        /// The missing path.
        path: PathBuf,
    },
}

impl InputError {
    /// Classifies an I/O error on `path`, singling out "not found" for a clearer message.
    fn from_io(path: &Path, source: io::Error) -> Self {
        let path = path.to_path_buf();
        if source.kind() == io::ErrorKind::NotFound {
            InputError::NotFound { path }
        } else {
            InputError::Io { path, source }
        }
    }
}

/// Expand CLI inputs: a file stays itself; a directory is walked recursively and yields every
/// regular file (skipping names starting with '.'), sorted by path. Missing path -> error
/// naming the path.
///
/// Anything given explicitly that is not a directory is kept as-is (so `/dev/stdin` or a named
/// pipe works), and the order of the CLI arguments is preserved. Inside a directory, hidden
/// entries (`.git`, editor swap files) are skipped, whether files or directories. Symlinks are
/// followed, to files and to directories (an archive linked in must not be skipped in silence:
/// with a state, its hours would be late for good once the watermark passed them); a directory
/// reached twice (a link cycle, two links to one place) is walked once, at its first place in
/// name order; a link to nothing is skipped with a warning, one whose target cannot be looked
/// at is an error. A file named
/// more than once (a directory and a file in it, a link to a file also given) is kept at its
/// first place only: reading it twice would count its searches twice.
pub fn expand_inputs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut files = Vec::new();
    for path in paths {
        let meta = fs::metadata(path).map_err(|e| InputError::from_io(path, e))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk_dir(path, &meta, &mut found, &mut std::collections::HashSet::new())?;
            found.sort();
            files.append(&mut found);
        } else {
            files.push(path.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    files.retain(|path| {
        use std::os::unix::fs::MetadataExt;
        // A file that cannot be looked at now is kept: opening it reports why.
        let Ok(meta) = fs::metadata(path) else { return true };
        let first = seen.insert((meta.dev(), meta.ino()));
        if !first {
            tracing::warn!(path = %path.display(), "input named more than once; it is read once");
        }
        first
    });
    Ok(files)
}

/// Appends every non-hidden regular file below `dir` (whose metadata, links followed, is
/// `meta`) to `out`, in name order, following links; `walked` holds the (device, inode) of the
/// directories walked so far, so that none is walked twice and a link cycle ends.
fn walk_dir(
    dir: &Path,
    meta: &fs::Metadata,
    out: &mut Vec<PathBuf>,
    walked: &mut std::collections::HashSet<(u64, u64)>,
) -> Result<(), InputError> {
    use std::os::unix::fs::MetadataExt;
    if !walked.insert((meta.dev(), meta.ino())) {
        tracing::warn!(path = %dir.display(), "directory reached twice (a link); it is read once");
        return Ok(());
    }
    // In name order, so that which of two links to one directory is walked (and so the order
    // of the files found, which `eval --history-log` replays) does not depend on the file
    // system's.
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| InputError::from_io(dir, e))? {
        let entry = entry.map_err(|e| InputError::from_io(dir, e))?;
        if !entry.file_name().as_encoded_bytes().starts_with(b".") {
            entries.push(entry);
        }
    }
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        let file_type = entry.file_type().map_err(|e| InputError::from_io(&path, e))?;
        // A link is looked at through its target; anything else as it is (`DirEntry`'s own
        // metadata does not follow links).
        let meta = if file_type.is_symlink() {
            match fs::metadata(&path) {
                Ok(target) => target,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // Dangling: nothing to read, but not in silence.
                    tracing::warn!(path = %path.display(), "input link to nothing skipped");
                    continue;
                }
                // A target that cannot be looked at (forbidden, a loop of links) fails the
                // build as a directory that cannot be read does: skipped, its hours would be
                // late for good once the watermark passed them.
                Err(e) => return Err(InputError::from_io(&path, e)),
            }
        } else if file_type.is_dir() {
            entry.metadata().map_err(|e| InputError::from_io(&path, e))?
        } else {
            if file_type.is_file() {
                out.push(path);
            }
            continue;
        };
        if meta.is_dir() {
            walk_dir(&path, &meta, out, walked)?;
        } else if meta.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// Compression formats recognized by their leading magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Plain,
    Gzip,
    Zstd,
}

impl Format {
    fn detect(head: &[u8]) -> Self {
        // A zstd file may start with a skippable frame (magic 0x184D2A50..=0x184D2A5F, little
        // endian): `pzstd` writes one before each frame. The decoder skips it; read as plain
        // text, the whole file became bad lines, and its hours were late when re-read.
        let skippable =
            head.len() == 4 && head[0] & 0xF0 == 0x50 && head[1..] == [0x2A, 0x4D, 0x18];
        if head.starts_with(ZSTD_MAGIC) || skippable {
            Format::Zstd
        } else if head.starts_with(GZIP_MAGIC) {
            Format::Gzip
        } else {
            Format::Plain
        }
    }
}

/// Open a file for reading as a decompressed byte stream, detecting the format by magic bytes
/// (gzip `1f 8b` -> [`flate2::read::MultiGzDecoder`], zstd `28 b5 2f fd` or a skippable
/// frame `5? 2a 4d 18` -> [`zstd::stream::read::Decoder`]), else plain. The returned reader is buffered
/// (256 KiB).
///
/// The magic bytes are read and then replayed in front of the rest of the file instead of
/// seeking back, so non-seekable inputs such as pipes work too. Multi-member gzip and
/// multi-frame zstd (what `cat a.gz b.gz` produces) are read to the end. Decompression
/// errors surface later as `io::Error`s from the returned reader.
pub fn open(path: &Path) -> Result<Box<dyn BufRead + Send>, InputError> {
    let mut file = File::open(path).map_err(|e| InputError::from_io(path, e))?;
    let mut magic = [0u8; ZSTD_MAGIC.len()];
    let len = read_up_to(&mut file, &mut magic).map_err(|e| InputError::from_io(path, e))?;
    let head = &magic[..len];
    let format = Format::detect(head);
    tracing::debug!(path = %path.display(), ?format, "opening input");
    let stream = Cursor::new(head.to_vec()).chain(file);
    let reader: Box<dyn Read + Send> = match format {
        Format::Plain => Box::new(stream),
        Format::Gzip => Box::new(flate2::read::MultiGzDecoder::new(stream)),
        Format::Zstd => Box::new(
            zstd::stream::read::Decoder::new(stream).map_err(|e| InputError::from_io(path, e))?,
        ),
    };
    Ok(Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, reader)))
}

/// Fills as much of `buf` as the reader provides before end of input, returning the length.
///
/// A single `read` may return fewer bytes than available (pipes do), which would make
/// format detection flaky.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// A run of whole lines read from a stream.
#[derive(Debug)]
pub struct Chunk {
    /// The bytes; every line but possibly the stream's last ends with `\n`.
    pub data: Vec<u8>,
    /// 1-based line number of the first line in `data`.
    pub first_line: u64,
}

/// Longest log line, in bytes. A longer line is cut to its first `MAX_LINE_BYTES + 1` bytes
/// while it streams by (the rest is never buffered) and counted as `line_too_long`, so a
/// build's memory is bounded by the data's distinct keys, not by its worst line (a 1 GB line,
/// a gzip bomb of NULs). Real queries are a few hundred bytes at most.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// The UTF-8 byte order mark, dropped from the start of an input.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads a stream in chunks of whole lines for parallel processing.
///
/// Each chunk holds up to about `target_bytes` bytes and ends at a line boundary. A line that
/// straddles the target is finished rather than split, so a chunk can exceed the target by
/// up to one line, and a single line longer than the target becomes a chunk on its own. Lines
/// longer than [`MAX_LINE_BYTES`] are cut short (see there).
pub struct ChunkReader<R> {
    reader: R,
    target_bytes: usize,
    next_line: u64,
    /// Bytes of the line in progress (after the last newline taken).
    partial: usize,
    /// The line in progress was cut: discard input up to its newline.
    discarding: bool,
}

// Manual impl: the inner reader (often a boxed decoder) is usually not `Debug`.
impl<R> fmt::Debug for ChunkReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkReader")
            .field("target_bytes", &self.target_bytes)
            .field("next_line", &self.next_line)
            .finish_non_exhaustive()
    }
}

impl<R: BufRead> ChunkReader<R> {
    /// Wraps `reader`; a `target_bytes` of 0 yields one line per chunk.
    pub fn new(reader: R, target_bytes: usize) -> Self {
        ChunkReader { reader, target_bytes, next_line: 1, partial: 0, discarding: false }
    }

    /// The next chunk, or `None` at the end of the stream. Never returns an empty chunk.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, io::Error> {
        let mut data = Vec::with_capacity(self.target_bytes.min(MAX_CHUNK_PREALLOC));
        while !self.fill_step(&mut data)? {}
        if data.is_empty() {
            return Ok(None);
        }
        let first_line = self.next_line;
        self.next_line += count_newlines(&data);
        if first_line == 1 && data.starts_with(UTF8_BOM) {
            // Editors and Windows tools start a file with one; it would spoil the first
            // line's timestamp (or query).
            data.drain(..UTF8_BOM.len());
        }
        Ok(Some(Chunk { data, first_line }))
    }

    /// Moves the next piece of buffered input into `data`; returns true when the chunk is
    /// complete (at a line boundary past the target, or at end of input).
    ///
    /// Works on whole `fill_buf` buffers so that the per-byte cost is a copy plus, once near
    /// the target, one backwards scan for a newline; there is no per-line work.
    fn fill_step(&mut self, data: &mut Vec<u8>) -> io::Result<bool> {
        let buf = match self.reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(false),
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(true);
        }
        if self.discarding {
            // The rest of an over-long line: drop it, keep its newline for the next step.
            let (drop, found) = match buf.iter().position(|&b| b == b'\n') {
                Some(nl) => (nl, true),
                None => (buf.len(), false),
            };
            self.reader.consume(drop);
            self.discarding = !found;
            return Ok(false);
        }
        let room = self.target_bytes.saturating_sub(data.len());
        let (take, complete) = if buf.len() <= room {
            (buf.len(), false)
        } else if let Some(nl) = buf[..room].iter().rposition(|&b| b == b'\n') {
            // Cut at the last line that still fits.
            (nl + 1, true)
        } else if data.last() == Some(&b'\n') {
            // Already at a line boundary and the next line doesn't fit: stop here.
            (0, true)
        } else {
            // Mid-line (or the first line is longer than the target): finish that line.
            match buf.iter().position(|&b| b == b'\n') {
                Some(nl) => (nl + 1, true),
                None => (buf.len(), false),
            }
        };
        self.partial = match buf[..take].iter().rposition(|&b| b == b'\n') {
            Some(nl) => take - nl - 1,
            None => self.partial + take,
        };
        data.extend_from_slice(&buf[..take]);
        self.reader.consume(take);
        if self.partial > MAX_LINE_BYTES {
            // Keep one byte more than the limit, so the line parser sees it is too long.
            data.truncate(data.len() - (self.partial - MAX_LINE_BYTES - 1));
            self.partial = MAX_LINE_BYTES + 1;
            self.discarding = true;
            return Ok(false);
        }
        Ok(complete)
    }
}

fn count_newlines(data: &[u8]) -> u64 {
    // Lossless: a slice length always fits in u64 on supported targets.
    data.iter().filter(|&&b| b == b'\n').count() as u64
}

/// Calls `line` with every line of the file at `path` ([`open`]: decompressed), read as a build
/// reads them: a leading byte-order mark dropped, and lines longer than [`MAX_LINE_BYTES`] left
/// out (returned as their count) without being held whole. For the tools that replay a log
/// line by line (`eval`).
pub fn for_each_line(path: &Path, mut line: impl FnMut(&[u8])) -> Result<u64, InputError> {
    let io = |source| InputError::Io { path: path.to_owned(), source };
    let mut reader = ChunkReader::new(open(path)?, 1 << 20);
    let mut too_long = 0;
    while let Some(chunk) = reader.next_chunk().map_err(io)? {
        for (_, text) in lines(&chunk) {
            if text.len() > MAX_LINE_BYTES {
                too_long += 1;
            } else {
                line(text);
            }
        }
    }
    Ok(too_long)
}

/// Iterate lines of a chunk: yields (line_number, line_bytes_without_newline). Handles a final
/// line without '\n'. A `\r` before the newline is left in place for the line parser.
pub fn lines(chunk: &Chunk) -> impl Iterator<Item = (u64, &[u8])> {
    let body = chunk.data.strip_suffix(b"\n").unwrap_or(&chunk.data);
    // `split` yields one (empty) piece for empty input, but an empty chunk has no lines.
    let pieces = if chunk.data.is_empty() { 0 } else { usize::MAX };
    (chunk.first_line..).zip(body.split(|&b| b == b'\n').take(pieces))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    const TEXT: &str = "1700000000\tfoo\tu1\n1700000001\tbar\n1700000002\tbaz";

    fn read_all(path: &Path) -> Vec<u8> {
        let mut out = Vec::new();
        open(path).unwrap().read_to_end(&mut out).unwrap();
        out
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    fn write_file(path: &Path, data: &[u8]) {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(path, data).unwrap();
    }

    /// All (line number, line) pairs from chunking `input` with the given target.
    fn chunked_lines(input: &[u8], target: usize) -> Vec<(u64, Vec<u8>)> {
        let mut reader = ChunkReader::new(Cursor::new(input), target);
        let mut out = Vec::new();
        while let Some(chunk) = reader.next_chunk().unwrap() {
            assert!(!chunk.data.is_empty());
            out.extend(lines(&chunk).map(|(n, l)| (n, l.to_vec())));
        }
        out
    }

    fn expected_lines(input: &str) -> Vec<(u64, Vec<u8>)> {
        (1..).zip(input.lines().map(|l| l.as_bytes().to_vec())).collect()
    }

    #[test]
    fn open_plain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.txt");
        write_file(&path, TEXT.as_bytes());
        assert_eq!(read_all(&path), TEXT.as_bytes());
    }

    #[test]
    fn open_tiny_and_empty_files() {
        let dir = tempfile::tempdir().unwrap();
        for data in [&b""[..], b"a", b"\x1f", b"\x28\xb5\x2f"] {
            let path = dir.path().join("f");
            write_file(&path, data);
            assert_eq!(read_all(&path), data);
        }
    }

    #[test]
    fn open_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.gz");
        write_file(&path, &gzip(TEXT.as_bytes()));
        assert_eq!(read_all(&path), TEXT.as_bytes());
    }

    #[test]
    fn open_concatenated_gzip_members() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut data = gzip(b"first\n");
        data.extend(gzip(b"second\n"));
        write_file(&path, &data);
        assert_eq!(read_all(&path), b"first\nsecond\n");
    }

    #[test]
    fn open_zstd_that_starts_with_a_skippable_frame() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.zst");
        // pzstd's frame: magic, then a 4-byte length of the 4 bytes that follow.
        let mut data = vec![0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 0, 0, 0, 0];
        data.extend(zstd::stream::encode_all(TEXT.as_bytes(), 3).unwrap());
        write_file(&path, &data);
        assert_eq!(read_all(&path), TEXT.as_bytes());
    }

    #[test]
    fn open_zstd() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.zst");
        let mut data = zstd::stream::encode_all(TEXT.as_bytes(), 3).unwrap();
        data.extend(zstd::stream::encode_all(&b"\nmore"[..], 3).unwrap());
        write_file(&path, &data);
        assert_eq!(read_all(&path), format!("{TEXT}\nmore").as_bytes());
    }

    #[test]
    fn open_corrupt_gzip_fails_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.gz");
        write_file(&path, b"\x1f\x8bnot really gzip at all");
        let mut out = Vec::new();
        assert!(open(&path).unwrap().read_to_end(&mut out).is_err());
    }

    #[test]
    fn open_missing_names_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.log");
        let err = open(&path).err().unwrap();
        assert!(matches!(&err, InputError::NotFound { path: p } if *p == path));
        assert!(err.to_string().contains("nope.log"));
    }

    #[test]
    fn expand_walks_directories_sorted_and_skips_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("logs");
        for name in ["b.log", "a/z.log", "a/b/c.log.gz", "c", ".hidden", "a/.swp", ".git/x"] {
            write_file(&root.join(name), b"x");
        }
        fs::create_dir_all(root.join("empty")).unwrap();
        let single = dir.path().join("single.log");
        write_file(&single, b"x");

        let got = expand_inputs(&[single.clone(), root.clone()]).unwrap();
        let want: Vec<PathBuf> = std::iter::once(single)
            .chain(["a/b/c.log.gz", "a/z.log", "b.log", "c"].map(|n| root.join(n)))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn expand_reads_a_file_named_twice_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("logs");
        for name in ["a.log", "b.log"] {
            write_file(&root.join(name), b"x");
        }
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(root.join("b.log"), &link).unwrap();
        let got = expand_inputs(&[root.join("b.log"), root.clone(), link]).unwrap();
        assert_eq!(got, [root.join("b.log"), root.join("a.log")]);
    }

    /// A directory linked in is walked (an archive skipped in silence loses its hours for good
    /// once a state's watermark passes them), once, and a link cycle ends.
    #[test]
    fn expand_follows_linked_directories_once() {
        let dir = tempfile::tempdir().unwrap();
        let (root, archive) = (dir.path().join("logs"), dir.path().join("archive"));
        write_file(&root.join("today.log"), b"x");
        write_file(&archive.join("2025/day1.log"), b"x");
        std::os::unix::fs::symlink(archive.join("2025"), root.join("2025")).unwrap();
        std::os::unix::fs::symlink(archive.join("2025"), root.join("again")).unwrap();
        std::os::unix::fs::symlink(&archive, archive.join("2025/up")).unwrap();
        std::os::unix::fs::symlink(root.join("gone"), root.join("dangling")).unwrap();
        let got = expand_inputs(std::slice::from_ref(&root)).unwrap();
        let names: Vec<_> = got.iter().map(|p| p.strip_prefix(&root).unwrap()).collect();
        // The first link in name order is the one walked.
        assert_eq!(names, [Path::new("2025/day1.log"), Path::new("today.log")]);
        // A link whose target cannot be looked at fails, as an unreadable directory does.
        std::os::unix::fs::symlink(root.join("loop"), root.join("loop")).unwrap();
        assert!(expand_inputs(std::slice::from_ref(&root)).is_err());
    }

    /// Line by line as a build reads: the byte-order mark dropped (`eval` read the first
    /// line's timestamp with it, and skipped the line), an over-long line counted, not held.
    #[test]
    fn each_line_is_read_as_a_build_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later.tsv");
        let long = "x".repeat(MAX_LINE_BYTES + 10);
        write_file(&path, format!("\u{feff}first\n{long}\nlast").as_bytes());
        let mut seen = Vec::new();
        let too_long = for_each_line(&path, |line| seen.push(line.to_vec())).unwrap();
        assert_eq!((seen, too_long), (vec![b"first".to_vec(), b"last".to_vec()], 1));
    }

    #[test]
    fn expand_keeps_explicit_hidden_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".explicit");
        write_file(&path, b"x");
        assert_eq!(expand_inputs(std::slice::from_ref(&path)).unwrap(), [path]);
    }

    #[test]
    fn expand_missing_path_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing-dir");
        let err = expand_inputs(&[dir.path().to_path_buf(), missing.clone()]).unwrap_err();
        assert!(matches!(&err, InputError::NotFound { path } if *path == missing));
        assert_eq!(err.to_string(), format!("input not found: {}", missing.display()));
    }

    #[test]
    fn expand_empty_list() {
        assert!(expand_inputs(&[]).unwrap().is_empty());
    }

    #[test]
    fn chunks_end_on_line_boundaries() {
        let input = b"aa\nbb\ncc\ndd\n";
        let mut reader = ChunkReader::new(Cursor::new(&input[..]), 7);
        let first = reader.next_chunk().unwrap().unwrap();
        assert_eq!((first.data.as_slice(), first.first_line), (&b"aa\nbb\n"[..], 1));
        let second = reader.next_chunk().unwrap().unwrap();
        assert_eq!((second.data.as_slice(), second.first_line), (&b"cc\ndd\n"[..], 3));
        assert!(reader.next_chunk().unwrap().is_none());
        assert!(reader.next_chunk().unwrap().is_none());
    }

    #[test]
    fn long_line_is_delivered_whole() {
        let long = "x".repeat(100);
        let input = format!("a\n{long}\nb\n");
        let mut reader = ChunkReader::new(Cursor::new(input.as_bytes()), 4);
        let mut chunks = Vec::new();
        while let Some(chunk) = reader.next_chunk().unwrap() {
            chunks.push((chunk.first_line, String::from_utf8(chunk.data).unwrap()));
        }
        let want = [(1, "a\n".to_string()), (2, format!("{long}\n")), (3, "b\n".to_string())];
        assert_eq!(chunks, want);
    }

    #[test]
    fn over_long_lines_are_cut_while_streaming() {
        let long = "x".repeat(MAX_LINE_BYTES * 3 + 7);
        let input = format!("1\tshort\n2\t{long}\n3\tafter\n4\t{long}");
        for (target, buffer) in [(1 << 20, 8192), (100, 4096), (0, 3), (1 << 20, 1 << 20)] {
            let mut reader =
                ChunkReader::new(BufReader::with_capacity(buffer, input.as_bytes()), target);
            let mut lines = Vec::new();
            let mut largest = 0;
            while let Some(chunk) = reader.next_chunk().unwrap() {
                largest = largest.max(chunk.data.len());
                // A long line that arrived whole inside one read buffer is not cut (that
                // would cost a per-line scan); it is bounded by the buffer and the parser
                // counts it as too long all the same.
                lines.extend(
                    super::lines(&chunk).map(|(n, l)| (n, l.len().min(MAX_LINE_BYTES + 1))),
                );
            }
            let cut = MAX_LINE_BYTES + 1;
            assert_eq!(
                lines,
                [(1, 7), (2, cut), (3, 7), (4, cut)],
                "target {target}, buffer {buffer}"
            );
            // Memory stays bounded by the limit, the target and one read buffer.
            assert!(largest <= cut + target.max(buffer) + 16, "a chunk of {largest} bytes");
        }
    }

    #[test]
    fn last_line_without_newline() {
        let got = chunked_lines(b"one\ntwo\nthree", 5);
        assert_eq!(got, expected_lines("one\ntwo\nthree"));
        let mut reader = ChunkReader::new(Cursor::new(&b"x\ny"[..]), 1 << 20);
        let chunk = reader.next_chunk().unwrap().unwrap();
        assert_eq!(chunk.data, b"x\ny");
        assert_eq!(lines(&chunk).count(), 2);
    }

    /// A byte order mark starts the input only: later chunks, and later lines, keep theirs.
    #[test]
    fn a_leading_byte_order_mark_is_dropped() {
        let input = b"\xEF\xBB\xBFone\ntwo\n\xEF\xBB\xBFthree\n";
        let mut reader = ChunkReader::new(Cursor::new(&input[..]), 1);
        let first = reader.next_chunk().unwrap().unwrap();
        assert_eq!((first.data.as_slice(), first.first_line), (&b"one\n"[..], 1));
        assert_eq!(reader.next_chunk().unwrap().unwrap().data, b"two\n");
        assert_eq!(reader.next_chunk().unwrap().unwrap().data, b"\xEF\xBB\xBFthree\n");
    }

    #[test]
    fn empty_input_has_no_chunks() {
        let mut reader = ChunkReader::new(Cursor::new(&b""[..]), 16);
        assert!(reader.next_chunk().unwrap().is_none());
        let empty = Chunk { data: Vec::new(), first_line: 1 };
        assert_eq!(lines(&empty).count(), 0);
    }

    #[test]
    fn empty_lines_are_kept() {
        assert_eq!(chunked_lines(b"\n\n", 1), expected_lines("\n\n"));
        assert_eq!(chunked_lines(b"\n", 0), [(1, Vec::new())]);
    }

    #[test]
    fn chunking_through_small_read_buffer() {
        // A BufReader smaller than the lines forces lines to span several `fill_buf` calls.
        let input = "alpha\nbeta\ngamma delta\n\nepsilon";
        for target in [0, 1, 3, 8, 100] {
            let buffered = BufReader::with_capacity(2, input.as_bytes());
            let mut reader = ChunkReader::new(buffered, target);
            let mut got = Vec::new();
            while let Some(chunk) = reader.next_chunk().unwrap() {
                got.extend(lines(&chunk).map(|(n, l)| (n, l.to_vec())));
            }
            assert_eq!(got, expected_lines(input), "target {target}");
        }
    }

    #[test]
    fn chunk_reader_over_opened_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.gz");
        write_file(&path, &gzip(TEXT.as_bytes()));
        let mut reader = ChunkReader::new(open(&path).unwrap(), 20);
        let mut got = Vec::new();
        while let Some(chunk) = reader.next_chunk().unwrap() {
            got.extend(lines(&chunk).map(|(n, l)| (n, l.to_vec())));
        }
        assert_eq!(got, expected_lines(TEXT));
        assert!(format!("{reader:?}").contains("next_line"));
    }

    proptest! {
        #[test]
        fn chunk_lines_match_str_lines(
            input in "[ab\n\u{e9}]{0,200}",
            target in 0usize..40,
            buf_cap in 1usize..16,
        ) {
            let buffered = BufReader::with_capacity(buf_cap, input.as_bytes());
            let mut reader = ChunkReader::new(buffered, target);
            let mut got = Vec::new();
            let mut data = Vec::new();
            while let Some(chunk) = reader.next_chunk().unwrap() {
                // Only the stream's last chunk may end without a newline.
                prop_assert!(data.is_empty() || data.last() == Some(&b'\n'));
                // Chunks only exceed the target to finish a line.
                let before_last_line = chunk.data[..chunk.data.len() - 1]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                prop_assert!(before_last_line <= target);
                got.extend(lines(&chunk).map(|(n, l)| (n, l.to_vec())));
                data.extend_from_slice(&chunk.data);
            }
            prop_assert_eq!(data, input.as_bytes());
            prop_assert_eq!(got, expected_lines(&input));
        }
    }
}
