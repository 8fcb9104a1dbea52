//! The logic behind the `typeahead` subcommands. `main.rs` parses arguments and hands them to
//! `cli::commands`, which calls these, so everything here can be tested without spawning a
//! process.

pub mod inspect;
pub mod query;
