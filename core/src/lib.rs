//! The data core of typeahead: what a query *is*, how suggestions are *ordered*, which ones are
//! *blocked*, and the *snapshot* file that carries them from the builder to the servers.
//!
//! Everything here is synchronous and does no networking: the builder (`typeahead-builder`) and
//! the HTTP servers (`typeahead`) both sit on top of it, so the rules they must agree on live in
//! exactly one place.
//!
//! - [`normalize`] — the one normalization of queries and typed prefixes.
//! - [`rank`] — the one ranking order (score descending, then key bytewise ascending).
//! - [`matching`] — the tiers after the exact prefix (words, fuzzy): their contract and order.
//! - [`blocklist`] — the blocked-terms file format and its whole-word matching rule.
//! - [`snapshot`] — the immutable snapshot file: writer, reader, and the top-k lookup.
//! - [`generation`] — one build's output as a unit: open a snapshot or a manifest directory,
//!   merge partitions' top-k lists.
//! - [`manifest`] — which snapshot serves which key range in a partitioned build.
//! - [`clock`] — the wall clock in unix seconds.
//! - [`file`] — reading files others may change: never mapped, never blocking on a FIFO.
//! - [`huge`] — buffers in transparent huge pages for as long as they live, no longer.
//! - [`report`] — an error with its causes, for log lines.
//! - [`atomic`] — write-to-temp, fsync, rename: how every file here is replaced.
//! - [`lockfile`] — one process at a time owns a directory's files (`flock`).
//! - [`bytesort`] — sorting millions of strings in byte order, fast.

pub mod atomic;
pub mod blocklist;
pub mod bytesort;
pub mod clock;
pub mod file;
pub mod generation;
pub mod huge;
pub mod lockfile;
pub mod manifest;
pub mod matching;
pub mod normalize;
pub mod rank;
pub mod report;
pub mod snapshot;
