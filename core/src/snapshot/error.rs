//! Why a snapshot could not be opened or written.

use std::io;
use std::path::PathBuf;

/// Every variant says what went wrong in terms an operator can act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read or written.
    #[error("snapshot i/o error on {path}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The bytes do not start with the snapshot magic: not a snapshot, or badly truncated.
    #[error("not a typeahead snapshot (bad magic bytes or too short)")]
    NotASnapshot,
    /// Written by a builder with another format version.
    #[error(
        "snapshot format v{found} is not supported by this build (supports v{supported}); \
         rebuild the snapshot with a matching builder or run a matching server"
    )]
    UnsupportedVersion {
        /// Version found in the file.
        found: u32,
        /// The one version this build reads.
        supported: u32,
    },
    /// The bytes changed after the builder wrote them (or the file is truncated).
    #[error(
        "snapshot checksum mismatch: expected {expected:08x}, computed {actual:08x} (corrupt or truncated file)"
    )]
    ChecksumMismatch {
        /// Checksum stored in the file.
        expected: u32,
        /// Checksum of the bytes read.
        actual: u32,
    },
    /// The content breaks a format invariant: with a matching checksum, or (a file longer than
    /// its header says) before the rest was read.
    #[error("corrupt snapshot: {0}")]
    Corrupt(String),
    /// The load was given up before it finished ([`crate::snapshot::Snapshot::open_cancellable`]).
    #[error("the load was cancelled before it finished")]
    Cancelled,
    /// The entries handed to the writer break its preconditions.
    #[error("invalid snapshot input: {0}")]
    InvalidInput(String),
}

impl Error {
    pub(crate) fn corrupt(what: impl Into<String>) -> Self {
        Error::Corrupt(what.into())
    }
}

/// Result alias for snapshot operations.
pub type Result<T> = std::result::Result<T, Error>;
