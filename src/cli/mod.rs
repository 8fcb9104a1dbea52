//! The binary's side of every command: [`args`] parses and validates the command line into the
//! library's configuration types, [`commands`] hands each to the library and prints what the
//! person asked for. Errors become `anyhow` here, at the edge, and nowhere else.

pub mod args;
pub mod commands;
