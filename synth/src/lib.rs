//! Deterministic generator of **SYNTHETIC** search-query data.
//!
//! Everything this crate produces is SYNTHETIC: the words are invented
//! pseudo-words built from syllables and the queries random word n-grams, or
//! ([`english`], for the demo) real English words put into common query shapes
//! by hand-written lists; the popularity is invented and the "users" are numbers. No real search log, user or query is contained in
//! or derived from this code. It exists because real query logs cannot be
//! shipped (the AOL 2006 release showed that query logs identify people),
//! yet benchmarks, tests and the demo need data whose *shape* is realistic:
//! the performance of a typeahead index depends on prefix sharing, on the
//! skew of popularity and on the length of the strings, and the ingestion
//! path needs dirty input to exercise normalisation and rejection.
//!
//! It is a crate of its own, not part of the builder, because nothing in a
//! production build uses it: the builder is only a dependency here, for the
//! log-line format the generated logs must match.
//!
//! # The model
//!
//! The target is the statistical shape of the AOL 2006 log:
//!
//! * **Vocabulary** (`vocab`). Word rank `r` (0 = most frequent) is mapped
//!   deterministically and injectively to a word: a pronounceable pseudo-word
//!   of 1–4 syllables (2–12 characters, frequent words are short, as in
//!   natural language), or, for about 2.4 % of the ranks, a digit token such
//!   as `2006` or `911`, or, for about 0.5 % of the ranks, a word with
//!   diacritics (`café`, `münchen`, `são`, or a pseudo-word with one accented
//!   vowel) so that Unicode normalisation is exercised. Words are drawn from a
//!   Zipf law (exponent 1.0) over 2^26 ranks, so a handful of words dominate
//!   and the number of distinct words keeps growing with the amount of data,
//!   as Heaps' law predicts for real text.
//! * **Queries** ([`queries`]). A query has 1–8 words with the AOL shares
//!   (1: 20 %, 2: 26 %, 3: 23 %, 4: 14 %, 5: 8 %, 6: 4 %, 7: 2 %, 8: 3 %), which
//!   gives a mean length of about 22 characters. About 30 % of the multi-word
//!   queries extend a prefix of an earlier, typically common, query
//!   ("foo" → "foo bar baz"), so queries share prefixes the way refinements do
//!   in real logs; the other words are drawn independently, so popular first
//!   words are shared as well. Duplicates are rejected and generation
//!   continues until the requested number of distinct queries exists; each
//!   word count has a quota, so the shares hold exactly for the *distinct*
//!   queries.
//! * **Popularity.** The distinct queries are returned ordered by a synthetic
//!   popularity: the log-probability of the query under the generating model
//!   plus bounded noise (real popularity is not purely compositional). Index 0
//!   is the most popular query; short queries of frequent words come first,
//!   as in real logs. Consumers give rank `r` the weight of a Zipf law
//!   ([`zipf_weight`], [`ZipfRank`]); the query texts do not depend on the
//!   exponent, so the skew can be varied on identical texts.
//! * **Raw logs** ([`log`]) draw events from the Zipf law over the distinct
//!   queries, with a diurnal traffic curve, a few trending queries that rise
//!   and fade over a couple of days, users who repeat their favourite
//!   queries, surface variants of the same query (capitalisation, doubled
//!   spaces, a dropped diacritic) and a small share of malformed lines (no
//!   tab, bad timestamp, invalid UTF-8, an e-mail address or a 10-digit
//!   number as the query).
//!
//! # Randomness
//!
//! All sampling goes through `rand` and `rand_distr` with one generator,
//! [`Rng`] (ChaCha8), which the fuzz harness and the test support use too.
//! Every part of the model draws from its own stream, keyed by the seed and
//! the part (and the hour, user, …), so one hour of a log can be generated
//! without the hours before it. Output is deterministic for a given
//! configuration and `Cargo.lock` on one platform: ChaCha8 is value-stable
//! across platforms and versions, but the float functions the distributions
//! use (`ln`, `exp`, `powf`) come from the platform's math library, whose
//! last bit may differ elsewhere and move a draw across a boundary. The
//! distributions of `rand`/`rand_distr` may change their algorithms in a new
//! minor version, which would change the generated data (not its shape).
//! Generation is O(output): 10 M distinct queries take seconds on one core.

pub mod english;
pub mod log;
pub mod queries;
mod rng;
pub mod zipf;

mod dedup;
mod dirty;
mod vocab;

pub use log::{LogConfig, QueryText, write_log, write_temp_log};
pub use queries::{SynthConfig, distinct_queries};
/// The `rand` this crate samples with, so users need no version of their own.
pub use rand;
pub use rng::{Rng, rng};
pub use zipf::{ZipfRank, zipf_weight};

/// What can go wrong while generating data.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Zipf law that cannot be sampled (no items, or a negative exponent).
    #[error("no Zipf law over {n} items with exponent {exponent}")]
    Zipf {
        /// Number of items.
        n: usize,
        /// The exponent asked for.
        exponent: f64,
        /// Why `rand_distr` refused it.
        source: rand_distr::ZipfError,
    },
    /// A share of lines outside `[0, 1]`.
    #[error("the share of malformed lines must be within [0, 1], got {0}")]
    Share(f64),
    /// Shares of an hour's events that cannot be sampled (a bug, not a configuration error).
    #[error("event sources of hour {hour}")]
    EventSources {
        /// The hour, counted from the start of the log.
        hour: u64,
        /// Why `rand` refused the shares.
        source: rand::distr::weighted::Error,
    },
    /// Writing the log failed.
    #[error("writing the synthetic log")]
    Io(#[from] std::io::Error),
}
