//! `typeahead query`: answer prefixes from a snapshot on the command line.
//!
//! One output line per prefix, in input order, so the output can be pasted next to the input:
//! - text: `prefix<TAB>suggestion<TAB>suggestion...` (display texts, best first);
//! - `--json`: `{"q": "<prefix as given>", "suggestions": [{"text": "...", "score": <f64>,
//!   "match": "prefix"}]}`, plus `"complete": false` when a tier stopped at its budget.
//!
//! `--match prefix` answers the prefix tier only; the default is every tier
//! ([`crate::matching`]).

use std::io::{self, BufRead, BufReader, Read, Write};

use serde::Serialize;

use crate::api::{Items, is_true};
use crate::matching::{Match, Tiers};
use crate::normalize;
use crate::snapshot::Snapshot;

/// One `--json` line: the items serialize as the HTTP answer's do ([`Items`]).
#[derive(Serialize)]
struct JsonLine<'a> {
    q: &'a str,
    suggestions: Items<'a>,
    /// Sent only when false.
    #[serde(skip_serializing_if = "is_true")]
    complete: bool,
    /// With `complete: false`, the first tier that stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    cut: Option<Match>,
}

/// Writes the answer for one prefix as one line.
pub fn answer(
    snapshot: &Snapshot,
    prefix: &str,
    k: usize,
    tiers: Tiers,
    json: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    let answer = snapshot.answer(&normalize::prefix(prefix), k, None, tiers);
    let suggestions = &answer.suggestions;
    if json {
        let line = JsonLine {
            q: prefix,
            suggestions: Items { list: suggestions, keys: false },
            complete: answer.complete(),
            cut: answer.cut,
        };
        serde_json::to_writer(&mut *out, &line).map_err(io::Error::other)?;
    } else {
        // Tabs and newlines cannot occur in normalized text, but can in what was typed.
        out.write_all(prefix.replace(['\t', '\n'], " ").as_bytes())?;
        for s in suggestions {
            write!(out, "\t{}", s.text())?;
        }
    }
    out.write_all(b"\n")
}

/// Answers every line of `input` (a line is a prefix, empty and blank lines included; a CRLF
/// line ending is not part of the prefix).
///
/// The output is flushed whenever the input has nothing more buffered, that is before a read
/// that may wait: a program that writes a prefix and waits for its answer gets it, and a file
/// of prefixes is still answered in large writes.
pub fn answer_lines<R: Read>(
    snapshot: &Snapshot,
    input: &mut BufReader<R>,
    k: usize,
    tiers: Tiers,
    json: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut line = Vec::new();
    loop {
        if input.buffer().is_empty() {
            out.flush()?;
        }
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        answer(snapshot, &String::from_utf8_lossy(&line), k, tiers, json, out)?;
    }
}
