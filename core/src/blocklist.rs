//! Blocked terms: the file format operators edit and the whole-word matching rule.
//!
//! Format: UTF-8 text, one entry per line; a line whose first non-blank character is `#` is a
//! comment; blank lines are ignored. Each entry is normalized with [`crate::normalize::key`], so
//! case, Unicode compatibility forms, diacritics and extra whitespace cannot bypass it. Entries
//! and keys are both compared in their [`crate::normalize::words`] form: folding can leave a
//! stray space in a key ("new\u{b4} york" has the key `"new  york"`), and that space must not
//! hide the phrase "new york". This blocks a little more than the contract's literal rule, only
//! for such keys, never less.
//!
//! Rule: an entry blocks a completion when `" " + entry + " "` is a substring of
//! `" " + completion_key + " "` — it occurs as whole words. `bomb` blocks "how to make a bomb"
//! but not "bombay"; a multi-word entry blocks that phrase anywhere.
//!
//! Matching uses one Aho-Corasick automaton over all padded entries, so checking a key costs the
//! same whether the list has ten entries or ten thousand.

use aho_corasick::AhoCorasick;

use crate::normalize;

/// A parsed, normalized blocklist, ready to test keys against.
#[derive(Debug, Clone)]
pub struct Blocklist {
    entries: Vec<String>,
    matcher: Option<AhoCorasick>,
}

/// The blocklist text could not be turned into a matcher.
#[derive(Debug, thiserror::Error)]
#[error("blocklist cannot be compiled: {0}")]
pub struct Error(#[from] aho_corasick::BuildError);

impl Blocklist {
    /// An empty list: blocks nothing.
    pub fn empty() -> Self {
        Blocklist { entries: Vec::new(), matcher: None }
    }

    /// Parses blocklist text (see the module docs for the format).
    pub fn parse(text: &str) -> Result<Self, Error> {
        let mut entries: Vec<String> = text
            .lines()
            .filter(|line| !line.trim_start().starts_with('#'))
            .map(|line| normalize::words(&normalize::key(line)).into_owned())
            .filter(|entry| !entry.is_empty())
            .collect();
        entries.sort();
        entries.dedup();
        Self::from_keys(entries)
    }

    fn from_keys(entries: Vec<String>) -> Result<Self, Error> {
        if entries.is_empty() {
            return Ok(Self::empty());
        }
        let padded = entries.iter().map(|e| format!(" {e} "));
        let matcher = AhoCorasick::new(padded)?;
        Ok(Blocklist { entries, matcher: Some(matcher) })
    }

    /// The normalized entries, sorted and deduplicated.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    /// Number of distinct entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the list blocks nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether a completion with this (normalized) key is blocked.
    pub fn blocks(&self, key: &str) -> bool {
        let Some(matcher) = &self.matcher else {
            return false;
        };
        let key = normalize::words(key);
        let mut padded = String::with_capacity(key.len() + 2);
        padded.push(' ');
        padded.push_str(&key);
        padded.push(' ');
        matcher.is_match(&padded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_comments_blanks_and_normalizes() {
        let list =
            Blocklist::parse("# comment\n\n  Bomb \n  # also comment\nNEW   York\nbomb\n").unwrap();
        assert_eq!(list.entries(), ["bomb", "new york"]);
    }

    #[test]
    fn blocks_whole_words_only() {
        let list = Blocklist::parse("bomb\nnew york\n").unwrap();
        assert!(list.blocks("how to make a bomb"));
        assert!(list.blocks("bomb"));
        assert!(list.blocks("bomb threat"));
        assert!(!list.blocks("bombay"));
        assert!(!list.blocks("a bombshell"));
        assert!(list.blocks("hotels new york city"));
        assert!(!list.blocks("new yorker"));
        assert!(!Blocklist::empty().blocks("bomb"));
    }

    #[test]
    fn cannot_be_bypassed_by_case_width_diacritics_or_spacing() {
        let list = Blocklist::parse("Café Bomb\n").unwrap();
        for q in
            ["cafe bomb", "CAFÉ BOMB", "ｃａｆｅ ｂｏｍｂ", "cafe\u{301}   bomb", " café\tbomb "]
        {
            assert!(list.blocks(&normalize::key(q)), "{q:?} must be blocked");
        }
    }

    #[test]
    fn stray_spaces_left_by_folding_neither_hide_nor_break_an_entry() {
        // U+00B4 is NFKC "space + U+0301"; the mark folds away after whitespace was collapsed.
        let list = Blocklist::parse("new york\n\u{b4}bomb\n").unwrap();
        assert_eq!(list.entries(), ["bomb", "new york"]);
        for q in ["new\u{b4} york", "\u{b4}bomb", "a\u{b4} bomb", "new york\u{b4}"] {
            assert!(
                list.blocks(&normalize::key(q)),
                "{q:?} (key {:?}) must be blocked",
                normalize::key(q)
            );
        }
        assert!(!list.blocks(&normalize::key("newyork bomber")));
    }

    proptest! {
        #[test]
        fn matches_the_padded_substring_rule(
            entries in proptest::collection::vec("[ab]{1,3}( [ab]{1,2})?", 1..4),
            key in "[ab ]{0,12}",
        ) {
            let key = normalize::key(&key);
            let list = Blocklist::parse(&entries.join("\n")).unwrap();
            let expected = list.entries().iter().any(|e| format!(" {key} ").contains(&format!(" {e} ")));
            prop_assert_eq!(list.blocks(&key), expected);
        }
    }
}
