//! The offline builder of typeahead: raw query logs in, a snapshot out, run every hour.
//!
//! ```text
//! logs (plain/.gz/.zst, any order) --ingest--> new counts per key --+
//!                                                                     merge (sorted) --> state (next build)
//! previous state (sorted by key, up to the watermark) ----------------+          \
//!                                                                                 --> snapshot (servers)
//! ```
//!
//! - [`logline`] — one raw line: `timestamp<TAB>query[<TAB>user]`, or `query<TAB>count`.
//! - [`input`] — files, directories, decompression, chunking for parallel parsing.
//! - [`privacy`] — queries that must never be served (e-mail, long numbers, URL secrets).
//! - [`ingest`] — parallel parse/normalize/count into per-key records.
//! - [`ema`] — the decayed-count score and its half-life.
//! - [`record`] — what is known of one key: surface forms, scores, distinct users.
//! - [`state`] — the sorted state file between builds.
//! - [`migrate`] — re-normalizing a state written under older rules.
//! - [`partition`] — splitting the key space into balanced prefix ranges.
//! - [`gate`] — the regression gate that refuses surprising generations.
//! - [`publish`] — publishing generations atomically, keeping a few for rollback.
//! - [`build`] — one build, end to end, crash-safe.
//! - [`summary`] — the human-readable report of a build.
//!
//! Normalization, ranking and the snapshot format are not here: they belong to
//! `typeahead-core`, which the servers share; synthetic logs for tests, benchmarks and the demo
//! come from `typeahead-synth`.

pub mod build;
pub mod ema;
pub mod gate;
pub mod ingest;
pub mod input;
pub mod logline;
pub mod migrate;
pub mod partition;
pub mod privacy;
pub mod publish;
pub mod record;
pub mod state;
pub mod summary;
