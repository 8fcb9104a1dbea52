//! Query normalization: the contract shared by the builder (counting) and the servers (matching).
//!
//! Two forms exist because users and matching want different things:
//!
//! - [`surface`] is what users see: Unicode NFKC, then lowercase, then whitespace collapsed.
//!   Every character that is Unicode `White_Space` or a control character (`Cc`) counts as
//!   whitespace; runs become one ASCII space and the ends are trimmed.
//! - [`key`] is what matching and counting use: the surface form with diacritics folded (NFD,
//!   drop U+0300..=U+036F, NFC), so "Café" and "cafe" are the same query.
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

/// NFKC + lowercase + whitespace collapse into `out` (cleared first); reports a trailing
/// whitespace run.
fn surface_with_trailing_into(q: &str, out: &mut String) -> bool {
    out.clear();
    if q.is_ascii() {
        collapse_into(q.bytes().map(|b| char::from(b.to_ascii_lowercase())), out)
    } else {
        let lowered = q.nfkc().collect::<String>().to_lowercase();
        collapse_into(lowered.chars(), out)
    }
}

fn surface_with_trailing(q: &str) -> (String, bool) {
    let mut out = String::with_capacity(q.len());
    let trailing = surface_with_trailing_into(q, &mut out);
    (out, trailing)
}

/// [`surface`] into a reusable buffer: the allocation-free form for hot loops.
pub fn surface_into(q: &str, out: &mut String) {
    surface_with_trailing_into(q, out);
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

/// The form matching and counting use: [`surface`] with diacritics folded.
pub fn key(q: &str) -> String {
    fold(&surface(q))
}

/// Normalizes a typed prefix: like [`key`], but a trailing whitespace run after visible text
/// becomes exactly one trailing space. An empty or all-whitespace prefix gives `""`.
pub fn prefix(q: &str) -> String {
    let (mut s, trailing) = surface_with_trailing(q);
    if trailing {
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
    Cow::Owned(key.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" "))
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

/// Both forms of a logged query at once (the builder needs both and this avoids normalizing
/// twice). `None` when the key is empty or longer than [`MAX_KEY_BYTES`].
pub fn surface_and_key(q: &str) -> Option<(String, String)> {
    let s = surface(q);
    let k = fold(&s);
    if is_valid_key(&k) { Some((s, k)) } else { None }
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
    }

    /// Found by fuzzing (fuzz/regressions/normalize): lowercasing after NFKC, the contract's
    /// order, can put combining marks out of canonical order (U+0130 lowercases to "i" +
    /// U+0307, which then precedes U+0319 of a lower combining class), so a second `surface`
    /// reorders them. One more pass and the form is stable.
    #[test]
    fn surface_settles_after_a_second_pass() {
        let q = "e\u{130}\u{319}";
        let once = surface(q);
        assert_eq!(once, "ei\u{307}\u{319}");
        let twice = surface(&once);
        assert_eq!(twice, "ei\u{319}\u{307}");
        assert_eq!(surface(&twice), twice);
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

        #[test]
        fn normalization_is_idempotent(s in "\\PC{0,30}") {
            let sf = surface(&s);
            prop_assert_eq!(surface(&sf), sf.clone());
            prop_assert!(!sf.starts_with(' ') && !sf.ends_with(' ') && !sf.contains("  "));
            let k = key(&s);
            // Folding runs after whitespace collapsing (the contract's order), so a combining
            // mark right after a space can leave a space at an end; otherwise keys are stable.
            if surface(&k) == k {
                prop_assert_eq!(key(&k), k.clone());
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
