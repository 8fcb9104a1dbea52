//! `typeahead query`: answer prefixes from a snapshot on the command line.
//!
//! One output line per prefix, in input order, so the output can be pasted next to the input:
//! - text: `prefix<TAB>suggestion<TAB>suggestion...` (display texts, best first);
//! - `--json`: `{"q": "<prefix as given>", "suggestions": [{"text": "...", "score": <f64>}]}`.

use std::io::{self, BufRead, Write};

use serde::Serialize;

use crate::normalize;
use crate::snapshot::Snapshot;

#[derive(Serialize)]
struct JsonLine<'a> {
    q: &'a str,
    suggestions: Vec<JsonSuggestion<'a>>,
}

#[derive(Serialize)]
struct JsonSuggestion<'a> {
    text: &'a str,
    score: f64,
}

/// Writes the answer for one prefix as one line.
pub fn answer(
    snapshot: &Snapshot,
    prefix: &str,
    k: usize,
    json: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    let suggestions = snapshot.suggest(&normalize::prefix(prefix), k);
    if json {
        let line = JsonLine {
            q: prefix,
            suggestions: suggestions
                .iter()
                .map(|s| JsonSuggestion { text: s.text(), score: s.score })
                .collect(),
        };
        serde_json::to_writer(&mut *out, &line).map_err(io::Error::other)?;
    } else {
        // Tabs and newlines cannot occur in normalized text, but can in what was typed.
        out.write_all(prefix.replace(['\t', '\n'], " ").as_bytes())?;
        for s in &suggestions {
            write!(out, "\t{}", s.text())?;
        }
    }
    out.write_all(b"\n")
}

/// Answers every line of `input` (a line is a prefix, empty and blank lines included; a CRLF
/// line ending is not part of the prefix).
pub fn answer_lines(
    snapshot: &Snapshot,
    input: impl BufRead,
    k: usize,
    json: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    for line in input.split(b'\n') {
        let mut line = line?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        answer(snapshot, &String::from_utf8_lossy(&line), k, json, out)?;
    }
    Ok(())
}
