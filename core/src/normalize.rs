//! Query normalization: the contract shared by the builder (counting) and the servers (matching).
//!
//! Two forms exist because users and matching want different things:
//!
//! - [`surface`] is what users see: Unicode NFKC, then lowercase, then every
//!   `Default_Ignorable_Code_Point` removed except U+200C and U+200D (the joiners carry meaning
//!   in Persian, Indic scripts and emoji), then recomposed (NFC), so an invisible character
//!   between a letter and its mark leaves no trace — then whitespace collapsed. Every character that is
//!   Unicode `White_Space` or a control character (`Cc`) counts as whitespace; runs become one
//!   ASCII space and the ends are trimmed.
//! - [`key`] is what matching and counting use: the same with the joiners removed too, then
//!   diacritics folded (NFD, drop U+0300..=U+036F, NFC), so "Café" and "cafe" are the same
//!   query, and "new\u{200b}york", "new\u{ad}york" and "newyork" are one key. Invisible
//!   characters must not make different keys: they would split counts and slip past the
//!   blocklist ("ba\u{200d}d word" is "bad word").
//!
//! A typed prefix ([`prefix`]) is normalized like a key, except that a trailing whitespace run
//! becomes exactly one trailing space: "new " must match "new york" and not "newton".
//!
//! The order of the steps is the contract's, applied literally: diacritics are folded *after*
//! whitespace is collapsed. A combining mark right after whitespace (NFKC turns U+00B4 into a
//! space and U+0301) therefore folds away and can leave a space at the end of a key; such keys
//! are kept exactly as the contract defines them, so every tool that implements it agrees.
//!
//! Pure-ASCII input takes a fast path that gives identical results (ASCII is NFKC-stable and has
//! no combining marks); log ingestion is dominated by ASCII queries.

use std::borrow::Cow;

use unicode_normalization::UnicodeNormalization;

/// Longest key, in bytes, that the builder accepts; longer queries are rejected as noise.
pub const MAX_KEY_BYTES: usize = 256;

/// Version of the normalization (and privacy) rules keys are made under. A builder state made
/// under an older version is re-normalized when it is loaded.
///
/// 1: NFKC, lowercase, whitespace, diacritics. 2: default-ignorable code points removed. 3:
/// surface forms recomposed (NFC) once those are removed, so one way of writing a query is
/// one surface form whatever invisible characters it was typed with. 4: the builder's keys
/// drop the joiners (U+200C, U+200D) as [`key`] always did (its counting kept them, so a
/// number split by joiners slipped past the privacy rules), and the privacy rules widened
/// (dashes of every kind and spaced separators in numbers, combining marks, bracketed or
/// `@`-spelled addresses, `*password` names). 5: the privacy rules read look-alikes plain
/// (symbols that stand for digits, every dash, the ideographic full stop, format characters):
/// a state from before holds what they now withhold. 6: the privacy rules widened again
/// (addresses with `at` and a real dot, credentials by shape or by name outside a URL,
/// look-alike separators in numbers, numbers announced by a word). 7: the privacy rules read
/// percent escapes and character references decoded, whitespace runs left by folded marks as
/// one space, any non-letter between digits as a separator, more dot look-alikes, and base64
/// keys split by `+ / _ -`. 8: a spaced address's top-level domain may be in any script
/// (`иван @ почта.рф`). 9: every modifier letter, the dot `ꞏ`, the clicks `ǁ` `ǂ` `ǃ`, the Hangul `ㅣ` and
/// the CJK `一` `丨` separate the digits of a number, as `ー` `ㅡ` `ǀ` did.
pub const RULES_VERSION: u32 = 9;

/// Longest surface form a query may have (bytes). Its key is at most [`MAX_KEY_BYTES`], but
/// marks and joiners that folding removes are kept in the surface form, which is what people
/// are shown: a query made mostly of them is rejected rather than stored and displayed.
pub const MAX_SURFACE_BYTES: usize = 4 * MAX_KEY_BYTES;

/// Unicode `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt, Unicode 15/16; the set is
/// stable: new assignments come from the reserved ranges listed here). A unit test checks it
/// against the `regex` crate's Unicode tables.
const DEFAULT_IGNORABLE: [(char, char); 17] = [
    ('\u{00AD}', '\u{00AD}'),
    ('\u{034F}', '\u{034F}'),
    ('\u{061C}', '\u{061C}'),
    ('\u{115F}', '\u{1160}'),
    ('\u{17B4}', '\u{17B5}'),
    ('\u{180B}', '\u{180F}'),
    ('\u{200B}', '\u{200F}'),
    ('\u{202A}', '\u{202E}'),
    ('\u{2060}', '\u{206F}'),
    ('\u{3164}', '\u{3164}'),
    ('\u{FE00}', '\u{FE0F}'),
    ('\u{FEFF}', '\u{FEFF}'),
    ('\u{FFA0}', '\u{FFA0}'),
    ('\u{FFF0}', '\u{FFF8}'),
    ('\u{1BCA0}', '\u{1BCA3}'),
    ('\u{1D173}', '\u{1D17A}'),
    ('\u{E0000}', '\u{E0FFF}'),
];

/// Whether `c` is a `Default_Ignorable_Code_Point`: invisible, removed by normalization.
pub fn is_default_ignorable(c: char) -> bool {
    // Every default-ignorable is at or above U+00AD: ASCII and Latin-1 letters skip the search.
    c >= '\u{AD}'
        && DEFAULT_IGNORABLE
            .binary_search_by(|&(lo, hi)| {
                if hi < c {
                    std::cmp::Ordering::Less
                } else if lo > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
}

/// The zero-width non-joiner and joiner: default-ignorable, but kept in the surface form.
fn is_joiner(c: char) -> bool {
    c == '\u{200C}' || c == '\u{200D}'
}

/// Whether `c` separates words: Unicode `White_Space` or a control character.
fn is_space(c: char) -> bool {
    c.is_whitespace() || c.is_control()
}

/// Appends `chars` to `out`, collapsing whitespace runs to one space and trimming both ends.
/// Returns whether the input ended with whitespace (after at least one visible character).
fn collapse_into(chars: impl Iterator<Item = char>, out: &mut String) -> bool {
    let mut pending_space = false;
    for c in chars {
        if is_space(c) {
            pending_space = !out.is_empty();
        } else {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            out.push(c);
        }
    }
    pending_space
}

/// NFKC + lowercase + default-ignorables removed (joiners too unless `keep_joiners`) +
/// whitespace collapse into `out` (cleared first); reports a trailing whitespace run.
fn normalize_into(q: &str, keep_joiners: bool, out: &mut String) -> bool {
    out.clear();
    if q.is_ascii() {
        collapse_into(q.bytes().map(|b| char::from(b.to_ascii_lowercase())), out)
    } else {
        let lowered = q.nfkc().collect::<String>().to_lowercase();
        let visible = |&c: &char| (keep_joiners && is_joiner(c)) || !is_default_ignorable(c);
        // Recomposed (NFC) last: a removed invisible character may have stood between a letter
        // and its combining mark, which NFKC could then not compose, and lowercasing can leave
        // marks out of canonical order. Either way "co\u{200b}\u{301}" and "có" are one
        // surface, and no rule sees a difference the reader cannot.
        let kept: String = lowered.chars().filter(visible).collect();
        collapse_into(kept.nfc(), out)
    }
}

fn surface_with_trailing(q: &str) -> (String, bool) {
    let mut out = String::with_capacity(q.len());
    let trailing = normalize_into(q, true, &mut out);
    (out, trailing)
}

/// [`surface`] into a reusable buffer: the allocation-free form for hot loops.
pub fn surface_into(q: &str, out: &mut String) {
    normalize_into(q, true, out);
}

/// The form users see: NFKC, lowercase, whitespace collapsed and trimmed.
pub fn surface(q: &str) -> String {
    surface_with_trailing(q).0
}

/// Folds diacritics of an already-normalized surface form: NFD, drop U+0300..=U+036F, NFC.
pub fn fold(surface: &str) -> String {
    fold_cow(surface).into_owned()
}

/// [`fold`] without copying when nothing changes (ASCII, the common case in logs).
pub fn fold_cow(surface: &str) -> Cow<'_, str> {
    if surface.is_ascii() {
        return Cow::Borrowed(surface);
    }
    Cow::Owned(surface.nfd().filter(|c| !('\u{0300}'..='\u{036F}').contains(c)).nfc().collect())
}

/// The key of a [`surface`] form: joiners removed (whitespace they separated collapses as if
/// they had never been there), then diacritics folded. Borrowed when nothing changes.
pub fn key_of_surface(surface: &str) -> Cow<'_, str> {
    if surface.is_ascii() {
        return Cow::Borrowed(surface);
    }
    if !surface.chars().any(is_joiner) {
        return fold_cow(surface);
    }
    let mut joined = String::with_capacity(surface.len());
    // A joiner at an end leaves whitespace there, which the collapse trims like any other.
    collapse_into(surface.chars().filter(|&c| !is_joiner(c)), &mut joined);
    Cow::Owned(fold(&joined))
}

/// The form matching and counting use: [`surface`] without joiners, diacritics folded.
pub fn key(q: &str) -> String {
    let mut s = String::with_capacity(q.len());
    normalize_into(q, false, &mut s);
    fold(&s)
}

/// Normalizes a typed prefix: like [`key`], but a trailing whitespace run after visible text
/// becomes exactly one trailing space. An empty or all-whitespace prefix gives `""`.
pub fn prefix(q: &str) -> String {
    let mut s = String::with_capacity(q.len() + 1);
    if normalize_into(q, false, &mut s) {
        s.push(' ');
    }
    fold(&s)
}

/// A key with its words separated by exactly one space and none at either end.
///
/// Folding runs after whitespace collapse (the contract's order), so a combining mark right
/// after whitespace folds away and leaves a stray space: "new\u{b4} york" has the key
/// `"new  york"`. Word-wise matching (the blocklist) compares this form, so such a space can
/// neither hide a blocked phrase nor make an entry miss. Borrowed when nothing changes.
pub fn words(key: &str) -> Cow<'_, str> {
    if !key.starts_with(' ') && !key.ends_with(' ') && !key.contains("  ") {
        return Cow::Borrowed(key);
    }
    Cow::Owned(crate::matching::words(key).collect::<Vec<_>>().join(" "))
}

/// Whether a key may be counted and served: not empty, at most [`MAX_KEY_BYTES`].
pub fn is_valid_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_BYTES
}

/// The exclusive upper bound of the keys that start with `prefix`: every such key lies in
/// `[prefix, prefix_end(prefix))` in byte order, since no UTF-8 key contains the byte 0xFF.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = Vec::with_capacity(prefix.len() + 1);
    end.extend_from_slice(prefix);
    end.push(0xFF);
    end
}

/// Whether a query of this surface form and key is counted at all: a valid key
/// ([`is_valid_key`]) and a surface of at most [`MAX_SURFACE_BYTES`]. The builder, `eval` and
/// the history all ask this, so a query one of them drops none of the others counts.
pub fn is_kept(surface: &str, key: &str) -> bool {
    is_valid_key(key) && surface.len() <= MAX_SURFACE_BYTES
}

/// Both forms of a logged query at once (normalizing once). `None` when the query is not
/// counted ([`is_kept`]).
pub fn surface_and_key(q: &str) -> Option<(String, String)> {
    let s = surface(q);
    let k = key_of_surface(&s).into_owned();
    if is_kept(&s, &k) { Some((s, k)) } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn surface_examples() {
        assert_eq!(surface("  Hello   World \t"), "hello world");
        assert_eq!(surface("Caf\u{e9}"), "caf\u{e9}");
        assert_eq!(surface("ｆｕｌｌ\u{3000}width"), "full width");
        assert_eq!(surface("a\u{0}b\u{7f}c\u{85}d"), "a b c d");
        assert_eq!(surface("\u{2003}\u{a0}"), "");
        assert_eq!(surface("ÀB"), "àb");
        assert_eq!(surface("ﬁne"), "fine"); // NFKC expands the ligature
    }

    #[test]
    fn key_folds_diacritics() {
        assert_eq!(key("Café"), "cafe");
        assert_eq!(key("CAFE\u{301}"), "cafe");
        assert_eq!(key("München  Straße"), "munchen straße");
        assert_eq!(key("São Paulo"), "sao paulo");
        assert_eq!(key("北京"), "北京");
    }

    #[test]
    fn prefix_keeps_one_trailing_space() {
        assert_eq!(prefix("New "), "new ");
        assert_eq!(prefix("new \t\n"), "new ");
        assert_eq!(prefix("  new"), "new");
        assert_eq!(prefix("   "), "");
        assert_eq!(prefix(""), "");
        assert_eq!(prefix("Caf\u{e9} "), "cafe ");
        assert_eq!(prefix("new\u{3000}"), "new ");
    }

    #[test]
    fn rejects_empty_and_long_keys() {
        assert_eq!(surface_and_key(" \t "), None);
        assert_eq!(surface_and_key(&"a".repeat(257)), None);
        assert!(surface_and_key(&"a".repeat(256)).is_some());
        assert_eq!(surface_and_key("Café"), Some(("café".into(), "cafe".into())));
        // A surface made mostly of marks folding removes is not counted, whatever its key.
        let marks = format!("c{}", "\u{301}".repeat(MAX_SURFACE_BYTES));
        assert_eq!(surface_and_key(&marks), None);
    }

    /// Found by fuzzing (fuzz/regressions/normalize): lowercasing after NFKC can put combining
    /// marks out of canonical order (U+0130 lowercases to "i" + U+0307, which then precedes
    /// U+0319 of a lower combining class). The closing NFC puts them back in order, so a
    /// surface is its own surface, with or without an invisible character in between.
    #[test]
    fn surface_is_canonical_after_lowercasing() {
        let q = "e\u{130}\u{319}";
        let once = surface(q);
        assert_eq!(once, "ei\u{319}\u{307}");
        assert_eq!(surface(&once), once);
        assert_eq!(surface("e\u{200b}\u{130}\u{319}"), once);
    }

    #[test]
    fn default_ignorables_make_no_new_keys() {
        for q in [
            "new\u{200b}york",
            "new\u{ad}york",
            "new\u{2060}york",
            "\u{feff}newyork",
            "new\u{200d}york",
        ] {
            assert_eq!(key(q), "newyork", "{q:?}");
        }
        assert_eq!(key("ba\u{200d}d word"), "bad word");
        assert_eq!(key("new \u{200b} york"), "new york");
        assert_eq!(key("new\u{200c} york"), "new york");
        assert_eq!(key("\u{1f469}\u{200d}\u{1f4bb}"), "\u{1f469}\u{1f4bb}");
        // The joiners stay in what users see; every other invisible character goes.
        assert_eq!(surface("\u{1f469}\u{200d}\u{1f4bb}"), "\u{1f469}\u{200d}\u{1f4bb}");
        assert_eq!(surface("mi\u{200c}khaham"), "mi\u{200c}khaham");
        assert_eq!(surface("a\u{ad}b\u{fe0f}\u{e0041}"), "ab");
        assert_eq!(surface("\u{3164}"), "");
        assert_eq!(prefix("new\u{200b} "), "new ");
        assert_eq!(prefix("new \u{200b}"), "new ");
        assert_eq!(surface_and_key("a \u{200d} b"), Some(("a \u{200d} b".into(), "a b".into())));
        assert_eq!(surface_and_key("\u{200b}\u{200d}"), None);
        // An invisible character between a letter and its mark leaves no trace in the surface.
        assert_eq!(surface("gmail.co\u{200b}\u{301}m"), "gmail.c\u{f3}m");
        assert_eq!(surface("co\u{ad}\u{301}"), surface("c\u{f3}"));
    }

    /// The hand-written table is the Unicode property, checked against an independent copy
    /// (the `regex` crate's Unicode tables) over every scalar value.
    #[test]
    fn default_ignorable_table_matches_unicode() {
        let property = regex::Regex::new(r"^\p{Default_Ignorable_Code_Point}$").unwrap();
        let mut buf = [0u8; 4];
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert_eq!(
                is_default_ignorable(c),
                property.is_match(c.encode_utf8(&mut buf)),
                "{c:?}"
            );
        }
    }

    #[test]
    fn words_collapses_stray_spaces_only() {
        assert_eq!(words("new york"), "new york");
        assert!(matches!(words("new york"), Cow::Borrowed(_)));
        assert_eq!(words(" new  york "), "new york");
        assert_eq!(key("new\u{b4} york"), "new  york");
        assert_eq!(words(&key("new\u{b4} york")), "new york");
        assert_eq!(words(" "), "");
    }

    proptest! {
        #[test]
        fn ascii_fast_path_matches_general_path(s in "[ -~\t\n\r\u{b}\u{c}\u{1}\u{1f}]{0,40}") {
            let general = {
                let lowered = s.nfkc().collect::<String>().to_lowercase();
                let mut out = String::new();
                collapse_into(lowered.chars(), &mut out);
                out
            };
            prop_assert_eq!(surface(&s), general);
        }

        /// A surface form is its own surface (the closing NFC keeps lowercased marks in
        /// canonical order: `surface_is_canonical_after_lowercasing`) and is whitespace-clean,
        /// and a key that is its own surface is its own key.
        #[test]
        fn normalization_is_idempotent(s in "\\PC{0,30}") {
            let sf = surface(&s);
            prop_assert_eq!(surface(&sf), sf.clone());
            prop_assert!(!sf.starts_with(' ') && !sf.ends_with(' ') && !sf.contains("  "));
            let k = key(&s);
            prop_assert_eq!(key_of_surface(&sf), k.clone());
            prop_assert!(!k.chars().any(is_default_ignorable), "{:?} has an invisible character", k);
            // Folding runs after whitespace collapsing (the contract's order), so a combining
            // mark right after a space can leave a space at an end; otherwise keys are stable.
            if surface(&k) == k {
                prop_assert_eq!(key(&k), k.clone());
            }
        }

        /// Invisible characters sprinkled anywhere into a query change neither its key nor
        /// (joiners aside) its surface.
        #[test]
        fn default_ignorables_never_change_a_key(
            s in "[a-zé\u{301} ]{0,12}",
            at in proptest::collection::vec((0usize..13, prop::sample::select(vec![
                '\u{ad}', '\u{200b}', '\u{200c}', '\u{200d}', '\u{2060}', '\u{feff}',
                '\u{fe0f}', '\u{e0020}', '\u{180e}', '\u{3164}', '\u{034f}',
            ])), 0..4),
        ) {
            let mut chars: Vec<char> = s.chars().collect();
            for (i, c) in at {
                chars.insert(i.min(chars.len()), c);
            }
            let sprinkled: String = chars.into_iter().collect();
            prop_assert_eq!(key(&sprinkled), key(&s));
            prop_assert_eq!(prefix(&sprinkled), prefix(&s));
            let sf = surface(&sprinkled);
            prop_assert_eq!(key_of_surface(&sf), key(&s));
            if !sprinkled.contains(['\u{200c}', '\u{200d}']) {
                prop_assert_eq!(sf, surface(&s), "{:?}", sprinkled);
            }
        }

        #[test]
        fn a_key_matches_its_own_prefixes(s in "[a-zA-Zéè ]{1,20}") {
            let k = key(&s);
            // Typing the query word by word, with a trailing space, still matches it.
            for (i, c) in k.char_indices() {
                if c == ' ' {
                    prop_assert!(k.starts_with(&prefix(&k[..=i])));
                }
            }
        }
    }
}
