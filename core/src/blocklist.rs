//! Blocked terms: the file format operators edit and the whole-word matching rule.
//!
//! Format: UTF-8 text, one entry per line (lines end in LF, CRLF or CR; a byte order mark at
//! the start is not text); a line whose first non-blank character is `#` is a comment; blank
//! lines are ignored. Each entry is normalized with [`crate::normalize::key`], so
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
//! Look-alike letters must not bypass an entry either: "bаd word" with a Cyrillic `а` is the
//! key people see as "bad word" (and keys keep their letters: people who type Cyrillic must
//! get Cyrillic). So an entry also blocks a completion when the entry's confusable *skeleton*
//! (Unicode TS #39, computed word by word) occurs as whole words in the completion's skeleton.
//! Skeletons are deliberately coarse ("rn" and "m" share one), so this can block a completion
//! that only looks like an entry; it never blocks less than the literal rule.
//!
//! Matching uses one Aho-Corasick automaton over the entries' padded skeletons (which also
//! decides the literal rule, see [`Blocklist::blocks`]), so checking a key costs the same
//! whether the list has ten entries or ten thousand.

use std::cell::Cell;
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

use crate::normalize;

/// What ends a line of blocklist text: LF, CR, or both (CRLF leaves an empty line between).
pub const LINE_ENDS: [char; 2] = ['\n', '\r'];

/// The lines of blocklist text. An editor's BOM would make the first line an entry even when it
/// is a comment, and a file with CR line ends (classic Mac) would be one long phrase that
/// blocks nothing.
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.strip_prefix('\u{feff}').unwrap_or(text).split(LINE_ENDS)
}

/// A parsed, normalized blocklist, ready to test keys against.
#[derive(Debug, Clone)]
pub struct Blocklist {
    entries: Vec<String>,
    /// The entries' padded skeletons (see [`Blocklist::blocks`] for why no literal matcher).
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
        let mut entries: Vec<String> = lines(text)
            .filter(|line| !line.trim_start().starts_with('#'))
            .map(|line| normalize::words(&normalize::key(line)).into_owned())
            .filter(|entry| !entry.is_empty())
            .collect();
        entries.sort();
        entries.dedup();
        Self::from_keys(entries)
    }

    /// This list plus already-normalized `entries` (e.g. another list's [`Blocklist::entries`]).
    pub fn union(&self, entries: &[String]) -> Result<Self, Error> {
        let mut all: Vec<String> = self.entries.iter().chain(entries).cloned().collect();
        all.sort();
        all.dedup();
        Self::from_keys(all)
    }

    fn from_keys(entries: Vec<String>) -> Result<Self, Error> {
        if entries.is_empty() {
            return Ok(Self::empty());
        }
        let mut skeletons: Vec<String> = entries.iter().map(|e| padded_skeleton(e)).collect();
        skeletons.sort();
        skeletons.dedup();
        let skeleton = AhoCorasick::new(skeletons)?;
        Ok(Blocklist { entries, matcher: Some(skeleton) })
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
    ///
    /// One search of the key's padded skeleton decides both rules: when an entry occurs as whole
    /// words of the key, those words' skeletons are the entry's, in the same order between the
    /// same spaces, so the skeleton rule holds too. A blocklist update tests every key of a
    /// snapshot with this (10M at scale), so the skeleton is written into a buffer the thread
    /// keeps: a search and two allocations per key were 80% of that update's time.
    pub fn blocks(&self, key: &str) -> bool {
        let Some(matcher) = &self.matcher else {
            return false;
        };
        thread_local! {
            static PADDED: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
        }
        let mut padded = PADDED.try_with(Cell::take).unwrap_or_default();
        write_padded_skeleton(key, &mut padded);
        let hit = matcher.is_match(&padded);
        let _ = PADDED.try_with(|cell| cell.set(padded));
        hit
    }
}

/// `" " + skeleton(w1) + " " + skeleton(w2) ... + " "` for the words of `text`.
///
/// Word by word, so a skeleton never joins or splits words. A unit test checks the ASCII
/// table against the per-word skeleton.
pub fn padded_skeleton(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len() + 2);
    write_padded_skeleton(text, &mut out);
    // Only whole characters and skeletons (strings) were written.
    String::from_utf8_lossy(&out).into_owned()
}

/// [`padded_skeleton`] into `out` (cleared first). An ASCII text (most keys) is one pass over
/// its bytes, most of which are their own skeleton (the exceptions: `m` -> `rn`, `0` -> `O`,
/// `1` -> `l`, ...); runs of spaces collapse as the word split would.
fn write_padded_skeleton(text: &str, out: &mut Vec<u8>) {
    out.clear();
    out.push(b' ');
    if text.is_ascii() {
        let table = ascii_skeletons();
        for b in text.bytes() {
            let i = usize::from(b);
            if b == b' ' {
                if out.last() != Some(&b' ') {
                    out.push(b' ');
                }
            } else if table.same[i] {
                out.push(b);
            } else {
                out.extend_from_slice(table.skeleton[i].as_bytes());
            }
        }
        if out.last() != Some(&b' ') {
            out.push(b' ');
        }
        return;
    }
    let mut utf8 = [0; 4];
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        for c in unicode_security::confusable_detection::skeleton(word) {
            out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
        }
        out.push(b' ');
    }
}

/// The skeleton of each ASCII character, and whether it is the character itself.
struct AsciiSkeletons {
    skeleton: [String; 128],
    same: [bool; 128],
}

fn ascii_skeletons() -> &'static AsciiSkeletons {
    static TABLE: OnceLock<AsciiSkeletons> = OnceLock::new();
    TABLE.get_or_init(|| {
        let skeleton: [String; 128] = std::array::from_fn(|b| {
            let c = char::from(u8::try_from(b).unwrap_or(b'?'));
            unicode_security::confusable_detection::skeleton(&c.to_string()).collect()
        });
        let same = std::array::from_fn(|b| skeleton[b].as_bytes() == [b as u8]);
        AsciiSkeletons { skeleton, same }
    })
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
        // A BOM before a comment, CRLF and CR line ends.
        let list = Blocklist::parse("\u{feff}# comment\r\nbomb\rnew york\r").unwrap();
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

    #[test]
    fn look_alike_letters_are_blocked() {
        let list = Blocklist::parse("bad word\nkill\n").unwrap();
        // Cyrillic а (U+0430), Greek ο (U+03BF), Cyrillic о (U+043E), a digit for l.
        for q in [
            "b\u{430}d word",
            "bad w\u{3bf}rd",
            "b\u{430}d w\u{43e}rd",
            "ki1l",
            "a b\u{430}d word b",
        ] {
            assert!(list.blocks(&normalize::key(q)), "{q:?} must be blocked");
        }
        for q in ["bad words", "badword", "b\u{430}dword", "killer"] {
            assert!(!list.blocks(&normalize::key(q)), "{q:?} must not be blocked");
        }
        // Keys keep their letters: only matching looks at skeletons.
        assert_eq!(normalize::key("b\u{430}d"), "b\u{430}d");
    }

    #[test]
    fn ascii_skeleton_table_equals_the_skeleton_of_each_pair() {
        use unicode_security::confusable_detection::skeleton;
        for a in 0u8..128 {
            for b in 0u8..128 {
                let word: String = [char::from(a), char::from(b)].iter().collect();
                if word.contains(' ') {
                    continue;
                }
                let expected = format!(" {} ", skeleton(&word).collect::<String>());
                assert_eq!(padded_skeleton(&word), expected, "{word:?}");
            }
        }
    }

    proptest! {
        /// The rule as the issue states it: an entry blocks every completion whose key, or
        /// whose skeleton, contains it (its skeleton) as whole words.
        #[test]
        fn blocks_every_completion_containing_an_entry_or_its_look_alike(
            entry in "[abmrnoо01lI]{1,3}( [aboо]{1,2})?",
            before in "[abmrnoо ]{0,6}",
            after in "[abmrnoо ]{0,6}",
            swap in any::<bool>(),
        ) {
            let list = Blocklist::parse(&entry).unwrap();
            let Some(e) = list.entries().first().cloned() else { return Ok(()) };
            // Whole words: the entry (or a look-alike spelling of it) between spaces.
            let look_alike: String = if swap { e.replace('o', "о").replace('m', "rn") } else { e.clone() };
            let key = normalize::key(&format!("{before} {look_alike} {after}"));
            prop_assert!(list.blocks(&key), "{:?} must block {:?}", e, key);
            let brute = format!(" {} ", normalize::words(&key)).contains(&format!(" {e} "))
                || padded_skeleton(&key).contains(&padded_skeleton(&e));
            prop_assert!(brute);
        }

        /// Why one skeleton search is enough: whole words of a key that equal an entry have
        /// the entry's skeleton, look-alike letters, stray spaces and all.
        #[test]
        fn the_literal_rule_is_inside_the_skeleton_rule(
            entry in "[am0Iо1%|`\"]{1,3}( [lrnо]{1,2})?",
            key in "[am0Iо1%|`\"lrn ]{0,14}",
        ) {
            let list = Blocklist::parse(&entry).unwrap();
            let Some(e) = list.entries().first().cloned() else { return Ok(()) };
            for key in [normalize::key(&key), normalize::key(&format!("{key} {entry}"))] {
                if format!(" {} ", normalize::words(&key)).contains(&format!(" {e} ")) {
                    prop_assert!(list.blocks(&key), "{:?} must block {:?}", e, key);
                }
            }
        }

        #[test]
        fn matches_the_padded_substring_rule(
            entries in proptest::collection::vec("[ab]{1,3}( [ab]{1,2})?", 1..4),
            key in "[ab ]{0,12}",
        ) {
            let key = normalize::key(&key);
            let list = Blocklist::parse(&entries.join("\n")).unwrap();
            let words = normalize::words(&key);
            let expected = list.entries().iter().any(|e| {
                format!(" {words} ").contains(&format!(" {e} "))
                    || padded_skeleton(&words).contains(&padded_skeleton(e))
            });
            prop_assert_eq!(list.blocks(&key), expected);
        }
    }
}
