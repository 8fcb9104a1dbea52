//! The manifest of a partitioned build: which snapshot file serves which key range, for one
//! generation. The builder writes it after every partition file; the aggregator follows it.
//!
//! ```json
//! {"format": 1, "generation": "5f3a09c1", "created_unix": 1767600000, "watermark_hour": 490999,
//!  "partitions": [{"index": 0, "start": "", "end": "m", "file": "part-000-a1b2c3d4.snap",
//!                  "bytes": 1234, "checksum": "a1b2c3d4", "keys": 100}, ...],
//!  "rules": 9}
//! ```
//!
//! A manifest names files that belong to its generation alone ([`Partition::file_name`]:
//! index and checksum), so a file it names is never replaced while it is live: a build killed
//! between two files of its publication leaves the live manifest naming files that are all
//! there and all of its own generation. Servers that follow a fixed path read the partition's
//! *live* name ([`Partition::live_file`], `part-NNN.snap`), which each publication re-links.
//!
//! Ranges are `[start, end)` in key (byte) order, contiguous, the first starting at `""` and the
//! last with `end: null` (unbounded). `checksum` is the file's crc32 — which is also the snapshot
//! id a server reports as its `version` — so the aggregator can tell which generation a server
//! has loaded.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The one manifest format this build reads and writes.
pub const MANIFEST_FORMAT: u32 = 1;

/// One generation of a partitioned build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version ([`MANIFEST_FORMAT`]).
    pub format: u32,
    /// Identifies this generation (derived from the partitions' snapshot ids).
    pub generation: String,
    /// When the build wrote it, unix seconds.
    pub created_unix: i64,
    /// The last processed hour.
    pub watermark_hour: Option<u32>,
    /// The partitions, in key order.
    pub partitions: Vec<Partition>,
    /// The normalization and privacy rules the builder applied
    /// ([`crate::normalize::RULES_VERSION`]); absent in manifests from before the field. A
    /// `rollback` and the aggregator's fallback never go back to older rules than the live
    /// generation's ([`crate::generation::check_rules`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<u32>,
}

/// One partition of a generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partition {
    /// Position in key order.
    pub index: usize,
    /// First key of the range (inclusive).
    pub start: String,
    /// End of the range (exclusive); `None` is unbounded.
    pub end: Option<String>,
    /// Snapshot file name, relative to the manifest's directory.
    pub file: String,
    /// File size.
    pub bytes: u64,
    /// Checksum of the file (crc32, hex): the snapshot id servers report as `version`.
    pub checksum: String,
    /// Completions in the partition.
    pub keys: u64,
}

/// Why a manifest cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading failed.
    #[error("cannot read manifest {path}")]
    Io {
        /// The manifest path.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid JSON of this shape.
    #[error("manifest {path} is malformed: {message}")]
    Malformed {
        /// The manifest path.
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl Partition {
    /// The generation-specific file name of partition `index` whose snapshot id is `checksum`.
    pub fn file_name(index: usize, checksum: &str) -> String {
        format!("part-{index:03}-{checksum}.snap")
    }

    /// Whether `name` is a generation-specific partition file ([`Partition::file_name`]).
    pub fn is_generation_file(name: &str) -> bool {
        let Some(rest) = name.strip_prefix("part-").and_then(|r| r.strip_suffix(".snap")) else {
            return false;
        };
        rest.split_once('-').is_some_and(|(index, id)| {
            index.bytes().all(|b| b.is_ascii_digit()) && !id.is_empty() && !id.contains('-')
        })
    }

    /// Whether `name` has the shape of a stable live name ([`Partition::live_file`]).
    pub fn is_live_file(name: &str) -> bool {
        name.strip_prefix("part-")
            .and_then(|r| r.strip_suffix(".snap"))
            .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
    }

    /// The partition's stable live name (`part-NNN.snap`): a hard link to the file of the
    /// generation published last, for servers started on a path.
    pub fn live_file(&self) -> String {
        format!("part-{:03}.snap", self.index)
    }

    /// Whether any key that starts with `prefix` falls in this partition's range.
    pub fn may_hold_prefix(&self, prefix: &str) -> bool {
        let below_end = self.end.as_deref().is_none_or(|end| prefix.as_bytes() < end.as_bytes());
        below_end
            && self.start.as_bytes() < crate::normalize::prefix_end(prefix.as_bytes()).as_slice()
    }

    /// Whether `key` falls in this partition's range.
    pub fn contains(&self, key: &str) -> bool {
        self.start.as_str() <= key && self.end.as_deref().is_none_or(|end| key < end)
    }
}

/// Whether `file` names a file in the manifest's directory or below it (`part-000-x.snap`,
/// `generations/<dir>/part-000-x.snap` in a bucket): never absolute, never `..`, so a manifest
/// cannot point a reader at anything else.
fn is_relative_file(file: &str) -> bool {
    !file.contains('\\') && file.split('/').all(|segment| !matches!(segment, "" | "." | ".."))
}

/// Whether `id` (a generation or snapshot id) is at most 128 ASCII letters, digits, `-`, `_`
/// and `.`: what can go into a URL's query and a file name as it is.
fn is_token(id: &str) -> bool {
    id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Largest manifest read, from a file or an object store: a few hundred bytes per partition.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;

impl Manifest {
    /// Reads and validates a manifest file (never mapped, never blocking on a FIFO).
    pub fn read(path: &Path) -> Result<Manifest, Error> {
        let text = crate::file::read_regular_string(path, MAX_MANIFEST_BYTES)
            .map_err(|source| Error::Io { path: path.to_owned(), source })?;
        Manifest::parse(text.as_bytes())
            .map_err(|message| Error::Malformed { path: path.to_owned(), message })
    }

    /// Parses and validates manifest bytes (from a file or an object store).
    pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Checks the format version and that the ranges are contiguous and cover every key.
    pub fn validate(&self) -> Result<(), String> {
        if self.format != MANIFEST_FORMAT {
            return Err(format!(
                "format {} is not supported (this build reads {MANIFEST_FORMAT})",
                self.format
            ));
        }
        let Some(first) = self.partitions.first() else { return Err("no partitions".into()) };
        if !first.start.is_empty() {
            return Err("the first partition must start at the empty key".into());
        }
        for (i, pair) in self.partitions.windows(2).enumerate() {
            match &pair[0].end {
                Some(end) if *end == pair[1].start && pair[0].start < *end => {}
                _ => return Err(format!("partitions {i} and {} are not contiguous", i + 1)),
            }
        }
        if self.partitions.iter().enumerate().any(|(i, p)| p.index != i) {
            return Err("partition indexes must be 0, 1, 2, ...".into());
        }
        if self.partitions.last().is_some_and(|p| p.end.is_some()) {
            return Err("the last partition must be unbounded".into());
        }
        // Both go into replica URLs (`?version=`) and file names: plain tokens only.
        if !is_token(&self.generation) {
            return Err(format!("generation {:?} is not a plain token", self.generation));
        }
        if let Some(p) = self.partitions.iter().find(|p| !is_token(&p.checksum)) {
            return Err(format!(
                "partition {}: checksum {:?} is not a plain token",
                p.index, p.checksum
            ));
        }
        if let Some(p) = self.partitions.iter().find(|p| !is_relative_file(&p.file)) {
            return Err(format!(
                "partition {}: file {:?} is not a path below the manifest",
                p.index, p.file
            ));
        }
        Ok(())
    }

    /// The manifest as it is written to a file or a bucket (pretty JSON), once it validates: no
    /// writer publishes a manifest that readers refuse.
    pub fn to_json(&self) -> Result<Vec<u8>, String> {
        self.validate()?;
        serde_json::to_vec_pretty(self).map_err(|e| e.to_string())
    }

    /// Indexes of the partitions that may hold keys starting with `prefix`.
    pub fn partitions_for(&self, prefix: &str) -> Vec<usize> {
        self.partitions.iter().filter(|p| p.may_hold_prefix(prefix)).map(|p| p.index).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn manifest(bounds: &[&str]) -> Manifest {
        let mut partitions = Vec::new();
        let mut starts = vec![""];
        starts.extend_from_slice(bounds);
        for (i, start) in starts.iter().enumerate() {
            partitions.push(Partition {
                index: i,
                start: (*start).to_owned(),
                end: starts.get(i + 1).map(|s| (*s).to_owned()),
                file: format!("part-{i:03}.snap"),
                bytes: 0,
                checksum: String::new(),
                keys: 0,
            });
        }
        Manifest {
            format: 1,
            generation: "g".into(),
            created_unix: 0,
            watermark_hour: None,
            partitions,
            rules: None,
        }
    }

    #[test]
    fn generation_files_are_told_from_live_names() {
        let name = Partition::file_name(3, "a1b2c3d4");
        assert_eq!(name, "part-003-a1b2c3d4.snap");
        assert!(Partition::is_generation_file(&name));
        for other in
            ["part-003.snap", "manifest.json", "part-003-.snap", "part-x-ab.snap", "p.snap"]
        {
            assert!(!Partition::is_generation_file(other), "{other}");
        }
    }

    #[test]
    fn routes_like_the_seed_example() {
        // Server 1: [A, AABD), server 2: [AABD, BXB), server 3: [BXB, ...)
        let m = manifest(&["aabd", "bxb"]);
        assert!(m.validate().is_ok());
        assert_eq!(m.partitions_for("a"), [0, 1]);
        assert_eq!(m.partitions_for("aa"), [0, 1]);
        assert_eq!(m.partitions_for("aab"), [0, 1]);
        assert_eq!(m.partitions_for("aaa"), [0]);
        assert_eq!(m.partitions_for("bx"), [1, 2]);
        assert_eq!(m.partitions_for("c"), [2]);
        assert_eq!(m.partitions_for(""), [0, 1, 2]);
    }

    #[test]
    fn rejects_gaps_and_bad_formats() {
        let mut m = manifest(&["m"]);
        m.partitions[0].end = Some("n".into());
        assert!(m.validate().is_err());
        let mut m = manifest(&["m"]);
        m.format = 9;
        assert!(m.validate().is_err());
        for bad in ["", "/etc/passwd", "../x.snap", "a//b.snap", "a/./b.snap", "a\\b.snap"] {
            let mut m = manifest(&["m"]);
            m.partitions[1].file = bad.into();
            assert!(m.validate().is_err(), "{bad:?}");
        }
        let mut m = manifest(&["m"]);
        m.partitions[1].file = "generations/17-ab/part-001-ab.snap".into();
        assert!(m.validate().is_ok());
        // What is written reads back; what would not validate is not written.
        assert_eq!(Manifest::parse(&m.to_json().unwrap()).unwrap(), m);
        m.partitions[1].file = "../x.snap".into();
        assert!(m.to_json().is_err());
        // Ids go into replica URLs as they are.
        for bad in ["a b", "a&version=x", "é", "a\"b", &"a".repeat(129)] {
            let mut m = manifest(&["m"]);
            m.partitions[1].checksum = bad.into();
            assert!(m.validate().is_err(), "{bad:?}");
            let mut m = manifest(&["m"]);
            m.generation = bad.into();
            assert!(m.validate().is_err(), "{bad:?}");
        }
    }

    proptest! {
        /// A partition is asked exactly when it holds a key with the prefix.
        #[test]
        fn routing_matches_brute_force(
            mut bounds in proptest::collection::btree_set("[a-c]{1,3}", 0..4),
            keys in proptest::collection::btree_set("[a-c]{0,4}", 1..40),
            prefix in "[a-c]{0,3}",
        ) {
            bounds.remove("");
            let bounds: Vec<&str> = bounds.iter().map(String::as_str).collect();
            let m = manifest(&bounds);
            let routed = m.partitions_for(&prefix);
            for p in &m.partitions {
                let holds = keys.iter().any(|k| k.starts_with(&prefix) && p.contains(k));
                if holds {
                    prop_assert!(routed.contains(&p.index), "partition {} holds a key but is not asked", p.index);
                }
            }
            // Exactly the partitions whose range can hold a key with the prefix. The smallest
            // such key of a range is the prefix itself or the range's start, so those are the
            // witnesses.
            let witnesses: Vec<&str> = std::iter::once(prefix.as_str())
                .chain(m.partitions.iter().map(|p| p.start.as_str()).filter(|s| s.starts_with(&prefix)))
                .collect();
            let can_hold: Vec<usize> = m
                .partitions
                .iter()
                .filter(|p| witnesses.iter().any(|w| p.contains(w)))
                .map(|p| p.index)
                .collect();
            prop_assert_eq!(routed, can_hold);
        }
    }
}
