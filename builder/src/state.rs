//! The builder's state between hourly builds: every key above `--min-score` with its surface
//! forms, each with its decayed count as of the last hour it was searched in (at or before the
//! watermark, the last processed hour).
//!
//! The state is one file, sorted by key, so a build is a streaming merge of the old state with
//! the new hours (the LSM idea): records are read one at a time, never all at once.
//!
//! ```text
//! magic "TAHSTATE" | version u32 LE | header (MessagePack)
//! | (0x01, record: MessagePack (key, KeyRecord))...   in increasing key order
//! | 0x00 | record count u64 LE | crc32 u32 LE
//! ```
//!
//! The count sits at the end because a build writes records while it merges, before it knows
//! how many survive.
//!
//! The checksum covers every byte before it; a state whose checksum or structure is wrong is
//! rejected before anything is published. Files are replaced atomically ([`typeahead_core::atomic`]).

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::logline::Hour;
use crate::record::KeyRecord;

const MAGIC: &[u8; 8] = b"TAHSTATE";
const VERSION: u32 = 1;

/// File name of the state inside the `--state` directory.
pub const STATE_FILE: &str = "state.bin";
/// File name of the lock inside the `--state` directory.
pub const LOCK_FILE: &str = "lock";
/// How long [`Lock::acquire`] keeps trying before it reports the lock held.
pub const LOCK_WAIT: std::time::Duration = typeahead_core::lockfile::WAIT;

/// What the state says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Half-life the scores were computed with; a build must use the same.
    pub half_life_hours: f64,
    /// The last processed hour; `None` for a state that has seen no hour.
    pub watermark: Option<Hour>,
    /// The normalization and privacy rules its keys were made under
    /// (`typeahead_core::normalize::RULES_VERSION`; states from before the field are version 1).
    /// A build re-normalizes an older state as it loads it ([`crate::migrate`]).
    #[serde(default = "first_rules")]
    pub rules: u32,
}

fn first_rules() -> u32 {
    1
}

/// Why a state could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Reading or writing failed.
    #[error("state i/o error on {path}")]
    Io {
        /// The state file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The file is not a state of this format, or its content is damaged.
    #[error("state file {path} is corrupt: {what}")]
    Corrupt {
        /// The state file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Another builder holds the lock on this state directory.
    #[error("another build is using the state in {0} (lock held); try again when it finishes")]
    Locked(PathBuf),
}

impl Reader {
    /// Reads every remaining record (verifying the checksum), lets `f` rewrite them, and
    /// yields `f`'s records from then on; they must be sorted by key and the keys distinct.
    /// For a one-off migration: it holds the whole state in memory once.
    pub fn rewrite(
        &mut self,
        f: impl FnOnce(Vec<(String, KeyRecord)>) -> Vec<(String, KeyRecord)>,
    ) -> Result<(), StateError> {
        let mut all = Vec::new();
        while let Some(record) = self.next_record()? {
            all.push(record);
        }
        let rewritten = f(all);
        debug_assert!(rewritten.windows(2).all(|w| w[0].0 < w[1].0), "rewritten records unsorted");
        self.rewritten = Some(rewritten.into_iter());
        Ok(())
    }
}

/// Reads a state file record by record, verifying the checksum at the end.
#[derive(Debug)]
pub struct Reader {
    path: PathBuf,
    input: CrcRead<BufReader<File>>,
    header: Header,
    read: u64,
    /// Records that replace the file's from here on (see [`Reader::rewrite`]).
    rewritten: Option<std::vec::IntoIter<(String, KeyRecord)>>,
}

impl Reader {
    /// Opens the state at `path`, reading its header.
    pub fn open(path: &Path) -> Result<Reader, StateError> {
        // Streamed, never mapped; a FIFO is refused instead of blocking the build.
        let (file, _) = typeahead_core::file::open_regular(path)
            .map_err(|source| StateError::Io { path: path.to_owned(), source })?;
        let mut input = CrcRead::new(BufReader::with_capacity(1 << 20, file));
        let corrupt = |what: String| StateError::Corrupt { path: path.to_owned(), what };
        let mut magic = [0u8; 12];
        input.read_exact(&mut magic).map_err(|e| corrupt(format!("header: {e}")))?;
        if &magic[..8] != MAGIC {
            return Err(corrupt("not a typeahead state file".into()));
        }
        let version = u32::from_le_bytes([magic[8], magic[9], magic[10], magic[11]]);
        if version != VERSION {
            return Err(corrupt(format!("state format v{version}, this build reads v{VERSION}")));
        }
        let header: Header =
            rmp_serde::from_read(&mut input).map_err(|e| corrupt(format!("header: {e}")))?;
        Ok(Reader { path: path.to_owned(), input, header, read: 0, rewritten: None })
    }

    /// The state's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The next record in key order; after the last one, verifies the checksum and the end of
    /// the file.
    pub fn next_record(&mut self) -> Result<Option<(String, KeyRecord)>, StateError> {
        if let Some(records) = &mut self.rewritten {
            return Ok(records.next());
        }
        let corrupt = |what: String| StateError::Corrupt { path: self.path.clone(), what };
        let mut tag = [0u8; 1];
        self.input.read_exact(&mut tag).map_err(|e| corrupt(format!("record tag: {e}")))?;
        match tag[0] {
            1 => {
                self.read += 1;
                let record = rmp_serde::from_read(&mut self.input)
                    .map_err(|e| corrupt(format!("record: {e}")))?;
                Ok(Some(record))
            }
            0 => {
                let mut count = [0u8; 8];
                self.input.read_exact(&mut count).map_err(|e| corrupt(format!("trailer: {e}")))?;
                let expected = self.input.crc();
                let mut crc = [0u8; 4];
                self.input.read_exact(&mut crc).map_err(|e| corrupt(format!("checksum: {e}")))?;
                if u32::from_le_bytes(crc) != expected {
                    return Err(corrupt("checksum mismatch".into()));
                }
                if u64::from_le_bytes(count) != self.read {
                    return Err(corrupt("record count mismatch".into()));
                }
                if self.input.read(&mut [0u8; 1]).map_err(|e| corrupt(e.to_string()))? != 0 {
                    return Err(corrupt("trailing bytes after the checksum".into()));
                }
                Ok(None)
            }
            other => Err(corrupt(format!("bad record tag {other}"))),
        }
    }
}

/// A state file's length and the checksum its trailer stores, `None` when there is no file.
///
/// The checksum covers every byte before it, so two states with the same fingerprint hold the
/// same header and records (as far as a crc32 tells), and finding out reads four bytes, not
/// the whole state. A file too short to hold a trailer is fingerprinted by its length alone.
pub fn fingerprint(path: &Path) -> io::Result<Option<(u64, u32)>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let mut crc = [0u8; 4];
    if len >= crc.len() as u64 {
        file.seek(io::SeekFrom::End(-(crc.len() as i64)))?;
        file.read_exact(&mut crc)?;
    }
    Ok(Some((len, u32::from_le_bytes(crc))))
}

/// Writes a state file (to a temporary path; see [`typeahead_core::atomic`]).
#[derive(Debug)]
pub struct Writer<W: Write> {
    out: CrcWrite<W>,
    written: u64,
}

impl<W: Write> Writer<W> {
    /// Starts a state with `header`.
    pub fn new(out: W, header: &Header) -> io::Result<Self> {
        let mut out = CrcWrite::new(out);
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        rmp_serde::encode::write(&mut out, header).map_err(encode_error)?;
        Ok(Writer { out, written: 0 })
    }

    /// Appends one record; keys must come in increasing order.
    pub fn push(&mut self, key: &str, record: &KeyRecord) -> io::Result<()> {
        self.out.write_all(&[1])?;
        rmp_serde::encode::write(&mut self.out, &(key, record)).map_err(encode_error)?;
        self.written += 1;
        Ok(())
    }

    /// Number of records written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Writes the trailer (count and checksum) and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&[0])?;
        self.out.write_all(&self.written.to_le_bytes())?;
        let crc = self.out.crc();
        self.out.inner.write_all(&crc.to_le_bytes())?;
        Ok(self.out.inner)
    }
}

/// Holds the state directory's lock for the lifetime of a build.
#[derive(Debug)]
pub struct Lock {
    _held: typeahead_core::lockfile::Held,
}

impl Lock {
    /// Takes the lock of `dir` (creating the directory), failing if another build still has it
    /// after [`LOCK_WAIT`] (why it waits: [`typeahead_core::lockfile::WAIT`]).
    pub fn acquire(dir: &Path) -> Result<Lock, StateError> {
        use typeahead_core::lockfile::{self, LockError};
        let io = |source| StateError::Io { path: dir.to_owned(), source };
        std::fs::create_dir_all(dir).map_err(io)?;
        match lockfile::acquire(&dir.join(LOCK_FILE), LOCK_WAIT) {
            Ok(held) => Ok(Lock { _held: held }),
            Err(LockError::Busy(_)) => Err(StateError::Locked(dir.to_owned())),
            Err(LockError::Io { source, .. }) => Err(io(source)),
        }
    }
}

#[derive(Debug)]
struct CrcRead<R> {
    inner: R,
    hasher: crc32fast::Hasher,
}

impl<R> CrcRead<R> {
    fn new(inner: R) -> Self {
        CrcRead { inner, hasher: crc32fast::Hasher::new() }
    }

    fn crc(&self) -> u32 {
        self.hasher.clone().finalize()
    }
}

impl<R: Read> Read for CrcRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

#[derive(Debug)]
struct CrcWrite<W> {
    inner: W,
    hasher: crc32fast::Hasher,
}

impl<W> CrcWrite<W> {
    fn new(inner: W) -> Self {
        CrcWrite { inner, hasher: crc32fast::Hasher::new() }
    }

    fn crc(&self) -> u32 {
        self.hasher.clone().finalize()
    }
}

impl<W: Write> Write for CrcWrite<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes a whole state to `out` from records in key order (used by tests and tools).
pub fn write_all<W: Write>(
    out: W,
    header: &Header,
    records: &[(String, KeyRecord)],
) -> io::Result<W> {
    let mut w = Writer::new(out, header)?;
    for (k, r) in records {
        w.push(k, r)?;
    }
    w.finish()
}

/// The I/O error under an encoding error, so a full disk reads "File too large" or "No space
/// left on device" once instead of inside three layers of MessagePack context.
fn encode_error(e: rmp_serde::encode::Error) -> io::Error {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            return io::Error::new(io.kind(), io.to_string());
        }
        source = s.source();
    }
    io::Error::other(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ema::Decay;

    fn sample() -> Vec<(String, KeyRecord)> {
        let d = Decay::new(24.0).unwrap();
        ["apple", "banana", "café"]
            .iter()
            .map(|k| {
                let mut r = KeyRecord::default();
                r.add(k, k, 3.0, 100, d);
                r.users.add_user("u1");
                ((*k).to_owned(), r)
            })
            .collect()
    }

    fn header(n: usize) -> Header {
        let _ = n;
        Header { half_life_hours: 24.0, watermark: Some(100), rules: 2 }
    }

    #[test]
    fn round_trips_and_detects_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        let records = sample();
        let bytes = write_all(Vec::new(), &header(records.len()), &records).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let mut r = Reader::open(&path).unwrap();
        assert_eq!(r.header(), &header(3));
        assert_eq!(r.header().watermark, Some(100));
        let mut got = Vec::new();
        while let Some(rec) = r.next_record().unwrap() {
            got.push(rec);
        }
        assert_eq!(got, records);

        for at in [3, 20, bytes.len() - 10, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            let result = Reader::open(&path).and_then(|mut r| {
                while r.next_record()?.is_some() {}
                Ok(())
            });
            assert!(matches!(result, Err(StateError::Corrupt { .. })), "flip at {at}");
        }
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let mut r = Reader::open(&path).unwrap();
        let result = (|| {
            while r.next_record()?.is_some() {}
            Ok::<_, StateError>(())
        })();
        assert!(result.is_err());
    }

    #[test]
    fn a_fingerprint_tells_states_apart_by_their_trailer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        assert_eq!(fingerprint(&path).unwrap(), None);
        let records = sample();
        let bytes = write_all(Vec::new(), &header(3), &records).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let crc = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
        let first = fingerprint(&path).unwrap();
        assert_eq!(first, Some((bytes.len() as u64, crc)));

        let later = Header { watermark: Some(101), ..header(3) };
        std::fs::write(&path, write_all(Vec::new(), &later, &records).unwrap()).unwrap();
        assert_ne!(fingerprint(&path).unwrap(), first, "the header is covered");
        let mut fewer = records.clone();
        fewer.pop();
        std::fs::write(&path, write_all(Vec::new(), &header(2), &fewer).unwrap()).unwrap();
        assert_ne!(fingerprint(&path).unwrap(), first, "the records are covered");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(fingerprint(&path).unwrap(), first, "the same state, written again");
        std::fs::write(&path, b"TA").unwrap();
        assert_eq!(fingerprint(&path).unwrap(), Some((2, 0)));
    }

    #[test]
    fn lock_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let held = Lock::acquire(dir.path()).unwrap();
        let started = std::time::Instant::now();
        assert!(matches!(Lock::acquire(dir.path()), Err(StateError::Locked(_))));
        assert!(started.elapsed() >= LOCK_WAIT, "gave up before the wait");
        drop(held);
        assert!(Lock::acquire(dir.path()).is_ok());
    }
}
