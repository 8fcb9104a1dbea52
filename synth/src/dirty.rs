//! The dirt of real logs: surface variants of a query and malformed lines, so that
//! normalisation and rejection in the builder see what they exist for.

use rand::RngExt;
use rand::seq::IndexedRandom;
use typeahead_builder::logline::push_timestamp;

use crate::log::push_user;
use crate::rng::Rng;
use crate::vocab::{ACCENTS, push_u64};

const EMAIL_NAMES: [&str; 8] = ["john", "mary", "smith", "jones", "mike", "anna", "lee", "kim"];
const EMAIL_DOMAINS: [&str; 5] =
    ["gmail.com", "yahoo.com", "aol.com", "hotmail.com", "example.org"];

/// Appends one malformed line (with its newline) built around `query` and `user`: no tab, a
/// bad timestamp, invalid UTF-8, or an e-mail address or phone number as the query.
pub(crate) fn write_malformed(rng: &mut Rng, query: &str, user: u64, ts: i64, buf: &mut Vec<u8>) {
    match rng.random_range(0..5) {
        0 => {
            // No tab at all.
            push_timestamp(buf, ts);
            buf.push(b' ');
            buf.extend_from_slice(query.as_bytes());
            buf.push(b' ');
            push_user(buf, user);
        }
        1 => {
            push_bad_timestamp(rng, ts, buf);
            buf.push(b'\t');
            buf.extend_from_slice(query.as_bytes());
            buf.push(b'\t');
            push_user(buf, user);
        }
        2 => {
            // Invalid UTF-8 in the query.
            push_timestamp(buf, ts);
            buf.push(b'\t');
            let bytes = query.as_bytes();
            let mut cut = rng.random_range(0..=bytes.len());
            while !query.is_char_boundary(cut) {
                cut -= 1;
            }
            buf.extend_from_slice(&bytes[..cut]);
            let bad: [&[u8]; 3] = [b"\xFF", b"\xC3", b"caf\xE9"];
            buf.extend_from_slice(bad.choose(rng).copied().unwrap_or_default());
            buf.extend_from_slice(&bytes[cut..]);
            buf.push(b'\t');
            push_user(buf, user);
        }
        3 => {
            // An e-mail address as the query.
            push_timestamp(buf, ts);
            buf.push(b'\t');
            let a = EMAIL_NAMES.choose(rng).copied().unwrap_or_default();
            let b = EMAIL_NAMES.choose(rng).copied().unwrap_or_default();
            let d = EMAIL_DOMAINS.choose(rng).copied().unwrap_or_default();
            let mut s = format!("{a}.{b}");
            if rng.random_bool(0.5) {
                push_u64(&mut s, rng.random_range(0..100));
            }
            buf.extend_from_slice(s.as_bytes());
            buf.push(b'@');
            buf.extend_from_slice(d.as_bytes());
            buf.push(b'\t');
            push_user(buf, user);
        }
        _ => {
            // A 10-digit (phone) number as the query.
            push_timestamp(buf, ts);
            buf.push(b'\t');
            buf.push(rng.random_range(b'2'..=b'9'));
            for _ in 0..9 {
                buf.push(rng.random_range(b'0'..=b'9'));
            }
            buf.push(b'\t');
            push_user(buf, user);
        }
    }
    buf.push(b'\n');
}

/// A timestamp the builder must reject as the line's time (or misread deliberately: Unix
/// seconds and RFC 3339 are forms it accepts from other sources).
fn push_bad_timestamp(rng: &mut Rng, ts: i64, buf: &mut Vec<u8>) {
    let mut good = Vec::with_capacity(19);
    push_timestamp(&mut good, ts);
    match rng.random_range(0..6) {
        0 => {
            good[5..7].copy_from_slice(b"13");
            buf.extend_from_slice(&good);
        }
        1 => {
            good[10] = b'T';
            buf.extend_from_slice(&good);
            buf.push(b'Z');
        }
        2 => buf.extend_from_slice(ts.to_string().as_bytes()),
        3 => {
            good[11..13].copy_from_slice(b"25");
            buf.extend_from_slice(&good);
        }
        4 => {}
        _ => buf.extend_from_slice(b"not-a-date"),
    }
}

/// Rewrites `query` as a surface variant: capitalisation, doubled spaces or
/// a dropped diacritic.
pub(crate) fn surface_variant(query: &mut String, rng: &mut Rng) {
    let kind = rng.random_range(0..3);
    if kind == 2 {
        let found = query.char_indices().find_map(|(i, c)| {
            ACCENTS
                .iter()
                .find(|(_, v)| v.contains(&c))
                .map(|(base, _)| (i, c, *base))
                .or_else(|| strip_other_diacritic(c).map(|b| (i, c, b)))
        });
        if let Some((i, c, base)) = found {
            query.replace_range(i..i + c.len_utf8(), base.encode_utf8(&mut [0u8; 4]));
            return;
        }
    }
    if kind == 1 {
        if let Some(i) = query.find(' ') {
            query.insert(i, ' ');
        } else {
            query.push(' ');
        }
        return;
    }
    let original = std::mem::take(query);
    match rng.random_range(0..3) {
        0 => {
            // Title Case.
            let mut start = true;
            for c in original.chars() {
                if start {
                    query.extend(c.to_uppercase());
                } else {
                    query.push(c);
                }
                start = c == ' ';
            }
        }
        1 => query.push_str(&original.to_uppercase()),
        _ => {
            let mut chars = original.chars();
            if let Some(c) = chars.next() {
                query.extend(c.to_uppercase());
            }
            query.push_str(chars.as_str());
        }
    }
}

/// Base letter of the non-vowel diacritic letters used by the vocabulary.
fn strip_other_diacritic(c: char) -> Option<char> {
    match c {
        'ñ' => Some('n'),
        'ç' => Some('c'),
        'å' => Some('a'),
        'ł' => Some('l'),
        'ź' => Some('z'),
        _ => None,
    }
}
