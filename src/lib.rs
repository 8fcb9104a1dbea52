//! typeahead: a search-suggestion service. A person types into a search box; the service answers
//! within a millisecond with the ten most popular queries that start with what they typed.
//!
//! # Layout
//!
//! The work is split the way the data flows (see `ARCHITECTURE.md`):
//!
//! - `typeahead-core` (re-exported here): [`normalize`], [`rank`], [`blocklist`], [`snapshot`],
//!   [`atomic`] — the rules every component must agree on, and the snapshot file format.
//! - `typeahead-builder` (re-exported as [`builder`]): log ingestion, EMA scores, the state
//!   between hourly builds, and the build itself.
//! - `typeahead-synth` (re-exported as [`synth`]): SYNTHETIC query logs for the demo, `build
//!   --synthetic`, tests and benchmarks.
//! - This crate: the serving side — [`store`] (what is served, hot swap), [`server`] and
//!   [`aggregator`] (HTTP, on the shared plumbing of [`http`]), [`watch`] (file replacement),
//!   [`api`] (wire types), [`error`] (HTTP errors), [`metrics`], [`huge_pages`] (only the
//!   snapshot's while serving) — and the binary's commands ([`cmd`]).

pub use typeahead_builder as builder;
pub use typeahead_core::{
    atomic, blocklist, clock, generation, lockfile, manifest, matching, normalize, rank, snapshot,
};
pub use typeahead_synth as synth;

/// The release this binary was built from: the crate version and a digest of the sources
/// that shape an answer (`build.rs`). Answers' ETags carry it, so a release that matches
/// differently never revalidates a cached answer of the one before.
pub const RELEASE: &str = env!("TYPEAHEAD_RELEASE");

pub mod aggregator;
pub mod api;
pub mod cache;
pub mod cluster;
pub mod cmd;
pub mod demo;
pub mod error;
pub mod eval;
pub mod history;
pub mod http;
pub mod huge_pages;
pub mod metrics;
pub mod remote;
pub mod server;
pub mod store;
pub mod watch;
pub mod web;
