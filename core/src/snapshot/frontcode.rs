//! Front-coded key buckets: the string store of a snapshot.
//!
//! Keys are stored in lexicographic order in buckets of [`BUCKET_SIZE`]. The first key of a
//! bucket is stored whole; each following key stores only the length of the prefix it shares
//! with its predecessor and the remaining suffix. Sorted queries share long prefixes ("new york
//! hotels", "new york times"), so this roughly halves the bytes of the raw strings, and decoding
//! one key touches one bucket (at most `BUCKET_SIZE` small copies) — cheap enough for the ten keys
//! an answer needs.
//!
//! What is stored of each key (the whole first key, the others' suffixes) is compressed with a
//! static symbol table ([`Symbols`]; FSST, Boncz, Neumann and Leis, VLDB 2020): up to 255
//! symbols of 1-8 bytes, each written as one code byte, and code 255 followed by a literal
//! byte for anything else. Query text is repetitive (letters, common syllables, spaces before
//! common words), so this halves the suffixes again — 12.8 to 6.3 bytes per key at 10M
//! synthetic queries — and decoding a code is one eight-byte copy. A snapshot whose table would
//! not make the keys smaller has an empty table and stores them as they are.
//!
//! Each entry also carries one flag bit (in the lowest bit of its first varint): whether the key
//! has a display text different from itself. The lookup learns it while decoding the key it
//! needs anyway, and searches the display table only for the few keys that have one.

use super::varint;

/// Keys per bucket: a trade between compression (larger) and decode time per key (smaller).
///
/// A lookup decodes a bucket from its head up to the key it wants, so halving the bucket
/// halves that work. At 10M completions, 8 against 16 made 1-, 2- and 4-character lookups
/// 17%, 25% and 20% faster (1.40 / 1.72 / 2.65 us against 1.68 / 2.29 / 3.33), left the
/// later tiers and opening as they were, and cost 0.45 bytes per completion (27.82 against
/// 27.37, within issue 13's 28): a head stored whole every 8 keys instead of 16, and twice the
/// bucket offsets. The reader takes the size from the file, so files of either size load.
pub(crate) const BUCKET_SIZE: usize = 8;

/// A buffer to decode buckets into ([`decode_bucket_with`]). A decode grows its buffer to
/// eight bytes per code of a key, so one that starts at a few dozen bytes is reallocated and
/// copied on nearly every lookup; this much room holds the keys of typical queries from the
/// start. Keep one across the decodes of a lookup.
pub(crate) fn decode_buffer() -> Vec<u8> {
    Vec::with_capacity(512)
}

/// The code that says "a literal byte follows".
const ESCAPE: u8 = 255;

/// The key store's symbol table: code `c` stands for `bytes[c][..lens[c]]`.
#[derive(Clone)]
pub(crate) struct Symbols {
    bytes: Box<[[u8; 8]; 256]>,
    /// 0 for a code that is not in the table (and always for [`ESCAPE`]).
    lens: [u8; 256],
    count: usize,
}

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbols").field("count", &self.count).finish_non_exhaustive()
    }
}

impl Symbols {
    /// The empty table: stored text is the text itself.
    pub(crate) fn none() -> Symbols {
        Symbols { bytes: Box::new([[0; 8]; 256]), lens: [0; 256], count: 0 }
    }

    /// A table trained on `sample` (what will be stored of some keys).
    pub(crate) fn train(sample: &[&[u8]]) -> Symbols {
        let trained = fsst::Compressor::train(&sample.to_vec());
        let mut symbols = Symbols::none();
        let pairs = trained.symbol_table().iter().zip(trained.symbol_lengths());
        for (symbol, &len) in pairs.take(usize::from(ESCAPE)) {
            if (1..=8).contains(&len) {
                symbols.bytes[symbols.count] = symbol.to_u64().to_le_bytes();
                symbols.lens[symbols.count] = len;
                symbols.count += 1;
            }
        }
        symbols
    }

    /// The section bytes: per code, its length (1-8) and its eight bytes, zero-padded.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.count * 9);
        for c in 0..self.count {
            out.push(self.lens[c]);
            out.extend_from_slice(&self.bytes[c]);
        }
        out
    }

    /// The table of a section; `None` unless it is exactly what [`Symbols::to_bytes`] writes.
    pub(crate) fn parse(section: &[u8]) -> Option<Symbols> {
        if !section.len().is_multiple_of(9) || section.len() / 9 > usize::from(ESCAPE) {
            return None;
        }
        let mut symbols = Symbols::none();
        for entry in section.chunks_exact(9) {
            let (len, bytes) = (entry[0], <[u8; 8]>::try_from(&entry[1..]).ok()?);
            if !(1..=8).contains(&len) || bytes[usize::from(len)..].iter().any(|&b| b != 0) {
                return None;
            }
            symbols.bytes[symbols.count] = bytes;
            symbols.lens[symbols.count] = len;
            symbols.count += 1;
        }
        Some(symbols)
    }

    /// Writes the text of `codes` into `out` from byte `at` on and returns where it ends;
    /// `None` for a code not in the table or an escape without its byte. `out` is a scratch
    /// buffer whose length only grows: the bytes past the returned end are left over, so a
    /// buffer reused key after key is zeroed once, not once per key.
    #[inline]
    fn decode(&self, codes: &[u8], out: &mut Vec<u8>, at: usize) -> Option<usize> {
        // Room for the longest text the codes can stand for: each code then costs one fixed
        // eight-byte copy (whatever the symbol's length) and no capacity check.
        let room = at.checked_add(codes.len().checked_mul(8)?)?.max(at + 8);
        if out.len() < room {
            out.resize(room, 0);
        }
        if self.count == 0 {
            out.get_mut(at..at + codes.len())?.copy_from_slice(codes);
            return Some(at + codes.len());
        }
        let mut end = at;
        let mut i = 0;
        while let Some(&c) = codes.get(i) {
            let len = usize::from(self.lens[usize::from(c)]);
            if len > 0 {
                out.get_mut(end..end + 8)?.copy_from_slice(&self.bytes[usize::from(c)]);
                end += len;
                i += 1;
            } else if c == ESCAPE {
                *out.get_mut(end)? = *codes.get(i + 1)?;
                end += 1;
                i += 2;
            } else {
                return None;
            }
        }
        Some(end)
    }
}

/// Compresses with a [`Symbols`] table: greedily the longest symbol at each byte, else an
/// escaped literal. The candidates at a byte are the few symbols that start with it, longest
/// first.
pub(crate) struct Encoder<'s> {
    symbols: &'s Symbols,
    by_first: Vec<Vec<u8>>,
}

impl<'s> Encoder<'s> {
    pub(crate) fn new(symbols: &'s Symbols) -> Encoder<'s> {
        let mut by_first = vec![Vec::new(); 256];
        for c in 0..symbols.count {
            by_first[usize::from(symbols.bytes[c][0])].push(c as u8);
        }
        for codes in &mut by_first {
            codes.sort_by_key(|&c| (std::cmp::Reverse(symbols.lens[usize::from(c)]), c));
        }
        Encoder { symbols, by_first }
    }

    /// Appends the codes of `text` to `out`.
    pub(crate) fn encode(&self, text: &[u8], out: &mut Vec<u8>) {
        let s = self.symbols;
        if s.count == 0 {
            out.extend_from_slice(text);
            return;
        }
        let mut at = 0;
        while let Some(&first) = text.get(at) {
            let rest = &text[at..];
            let symbol = |&&c: &&u8| {
                let c = usize::from(c);
                rest.starts_with(&s.bytes[c][..usize::from(s.lens[c])])
            };
            match self.by_first[usize::from(first)].iter().find(symbol) {
                Some(&c) => {
                    out.push(c);
                    at += usize::from(s.lens[usize::from(c)]);
                }
                None => {
                    out.extend_from_slice(&[ESCAPE, first]);
                    at += 1;
                }
            }
        }
    }
}

/// What is stored of each key of one bucket: all of the first, the others' suffix past the
/// prefix shared with the key before.
pub(crate) fn stored_parts<'k>(keys: &[(&'k [u8], bool)]) -> impl Iterator<Item = &'k [u8]> {
    keys.iter().enumerate().map(move |(j, &(key, _))| {
        let lcp = if j == 0 { 0 } else { common_prefix_len(keys[j - 1].0, key) };
        &key[lcp..]
    })
}

/// Encodes one bucket of sorted keys, each with its flag bit. `scratch` holds a key's codes.
pub(crate) fn encode_bucket(
    keys: &[(&[u8], bool)],
    encoder: &Encoder<'_>,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) {
    for (j, (&(key, flag), stored)) in keys.iter().zip(stored_parts(keys)).enumerate() {
        let lcp = key.len() - stored.len();
        scratch.clear();
        encoder.encode(stored, scratch);
        // The first key has no shared prefix: its first varint is the length of its codes.
        let head = if j == 0 { scratch.len() } else { lcp };
        varint::put(out, (head as u64) << 1 | u64::from(flag));
        if j > 0 {
            varint::put(out, scratch.len() as u64);
        }
        out.extend_from_slice(scratch);
    }
}

/// Length of the longest common prefix of two byte strings.
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Whether `key` sorts strictly after `prev`, given that their first `shared` bytes are equal
/// (as [`decode_bucket_with`] tells): mostly decided by the one byte after them.
pub(crate) fn follows(prev: &[u8], key: &[u8], shared: usize) -> bool {
    match (prev.get(shared), key.get(shared)) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(p), Some(k)) if p != k => k > p,
        _ => key[shared..] > prev[shared..],
    }
}

/// Whether `key` is UTF-8, given that `prev` is and that their first `shared` bytes are equal:
/// only what follows the last character boundary of `prev` at or before `shared` is checked.
pub(crate) fn utf8_after(prev: &[u8], key: &[u8], shared: usize) -> bool {
    let mut start = shared;
    while start > 0 && prev.get(start).is_some_and(|&b| b & 0xC0 == 0x80) {
        start -= 1;
    }
    let tail = key.get(start..).unwrap_or_default();
    tail.is_ascii() || std::str::from_utf8(tail).is_ok()
}

/// What [`decode_bucket_with`] shows of a key: first how many bytes it shares with the key
/// before it, then (unless skipped) the key itself and its flag.
pub(crate) enum Part<'k> {
    Shared(usize),
    Key(&'k [u8], bool),
}

/// What to do next: decode on (or go on to the next key), leave this key's own bytes undecoded,
/// or stop.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Decode,
    Skip,
    Stop,
}

/// [`decode_bucket`] for a reader that can often tell from a key's shared-prefix length alone
/// that it has no use for the rest (a key before the one wanted, a key inside a subtree being
/// skipped): `visit(index, Part::Shared(n))` comes first for each key, and `Flow::Skip` leaves
/// the key's own codes undecoded (no `Part::Key` follows). `buf` is scratch space. A skipped key is decoded after all only if the next key shares more
/// of it. Its codes are checked only then: a snapshot's keys were all decoded once, when it
/// was opened.
#[inline]
pub(crate) fn decode_bucket_with(
    bucket: &[u8],
    count: usize,
    symbols: &Symbols,
    buf: &mut Vec<u8>,
    mut visit: impl FnMut(usize, Part<'_>) -> Flow,
) -> Option<()> {
    // `buf[..len]` is the key so far; `buf` itself only grows (see [`Symbols::decode`]).
    let mut len = 0;
    let mut pos = 0;
    // The codes of the key before, when it was skipped.
    let mut skipped: Option<std::ops::Range<usize>> = None;
    for j in 0..count {
        let head = varint::get(bucket, &mut pos)?;
        let flag = head & 1 == 1;
        let head = usize::try_from(head >> 1).ok()?;
        let (shared, codes_len) = if j == 0 {
            (0, head)
        } else {
            if head > len
                && let Some(codes) = skipped.take()
            {
                len = symbols.decode(bucket.get(codes)?, buf, len)?;
            }
            if head > len {
                return None;
            }
            (head, usize::try_from(varint::get(bucket, &mut pos)?).ok()?)
        };
        len = shared;
        let codes = pos..pos.checked_add(codes_len)?;
        bucket.get(codes.clone())?;
        pos = codes.end;
        skipped = None;
        match visit(j, Part::Shared(shared)) {
            Flow::Stop => return Some(()),
            Flow::Skip => skipped = Some(codes),
            Flow::Decode => {
                len = symbols.decode(bucket.get(codes)?, buf, len)?;
                if visit(j, Part::Key(buf.get(..len)?, flag)) == Flow::Stop {
                    return Some(());
                }
            }
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Decodes the keys of one bucket in order into `buf`, calling `visit(index, key, flag)` for
    /// each; stops early when `visit` returns `false`. Returns `None` if the bytes are malformed.
    fn decode_bucket(
        bucket: &[u8],
        count: usize,
        symbols: &Symbols,
        buf: &mut Vec<u8>,
        mut visit: impl FnMut(usize, &[u8], bool) -> bool,
    ) -> Option<()> {
        decode_bucket_with(bucket, count, symbols, buf, |j, part| match part {
            Part::Shared(_) => Flow::Decode,
            Part::Key(key, flag) if visit(j, key, flag) => Flow::Decode,
            Part::Key(..) => Flow::Stop,
        })
    }

    proptest! {
        #[test]
        fn round_trips(mut keys in proptest::collection::vec("[a-c é北\u{ff}]{0,12}", 1..BUCKET_SIZE), trained: bool) {
            keys.sort();
            keys.dedup();
            let refs: Vec<(&[u8], bool)> = keys.iter().map(|k| (k.as_bytes(), k.len() % 2 == 0)).collect();
            let sample: Vec<&[u8]> = if trained { stored_parts(&refs).collect() } else { Vec::new() };
            let symbols = if trained { Symbols::train(&sample) } else { Symbols::none() };
            let symbols = Symbols::parse(&symbols.to_bytes()).unwrap();
            let mut data = Vec::new();
            encode_bucket(&refs, &Encoder::new(&symbols), &mut data, &mut Vec::new());
            let expected: Vec<(String, bool)> = keys.iter().map(|k| (k.clone(), k.len() % 2 == 0)).collect();
            // The second time round, the scratch buffer holds the first round's bytes.
            let mut buf = Vec::new();
            for _ in 0..2 {
                let mut decoded = Vec::new();
                decode_bucket(&data, refs.len(), &symbols, &mut buf, |_, k, flag| {
                    decoded.push((String::from_utf8(k.to_vec()).unwrap(), flag));
                    true
                }).unwrap();
                prop_assert_eq!(&decoded, &expected);
            }
        }

        /// Keys left undecoded are decoded when a later key needs their bytes: every key
        /// shown is whole, and each is told how much it shares with the key before.
        #[test]
        fn skipped_keys_leave_the_others_whole(
            mut keys in proptest::collection::vec("[a-c é北]{0,10}", 1..BUCKET_SIZE),
            skips in proptest::collection::vec(any::<bool>(), BUCKET_SIZE),
        ) {
            keys.sort();
            keys.dedup();
            let refs: Vec<(&[u8], bool)> = keys.iter().map(|k| (k.as_bytes(), false)).collect();
            let sample: Vec<&[u8]> = stored_parts(&refs).collect();
            let symbols = Symbols::train(&sample);
            let mut data = Vec::new();
            encode_bucket(&refs, &Encoder::new(&symbols), &mut data, &mut Vec::new());
            let (mut shown, mut buf) = (Vec::new(), Vec::new());
            decode_bucket_with(&data, refs.len(), &symbols, &mut buf, |j, part| match part {
                Part::Shared(n) => {
                    let before = if j == 0 { &[][..] } else { refs[j - 1].0 };
                    assert_eq!(n, if j == 0 { 0 } else { common_prefix_len(before, refs[j].0) });
                    if skips[j] { Flow::Skip } else { Flow::Decode }
                }
                Part::Key(key, _) => {
                    shown.push((j, key.to_vec()));
                    Flow::Decode
                }
            }).unwrap();
            let expected: Vec<(usize, Vec<u8>)> = (0..refs.len())
                .filter(|&j| !skips[j])
                .map(|j| (j, refs[j].0.to_vec()))
                .collect();
            prop_assert_eq!(shown, expected);
        }

        /// A key checked from the bytes it shares with the key before: the same verdicts as
        /// comparing and validating it whole, whatever the shared length up to their common
        /// prefix, and whether the shared part ends inside a character or not.
        #[test]
        fn keys_are_checked_from_their_shared_prefix(
            prev in "[ab é北]{0,6}",
            cut in 0usize..20,
            tail in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(0xC3), Just(0xA9), Just(0xE5), Just(0x8C), Just(0x97), any::<u8>()], 0..5),
            shared in 0usize..20,
        ) {
            let prev = prev.as_bytes();
            let mut key = prev[..cut.min(prev.len())].to_vec();
            key.extend_from_slice(&tail);
            let shared = shared.min(common_prefix_len(prev, &key));
            prop_assert_eq!(follows(prev, &key, shared), key.as_slice() > prev);
            prop_assert_eq!(utf8_after(prev, &key, shared), std::str::from_utf8(&key).is_ok());
        }

        #[test]
        fn never_panics_on_garbage(data in proptest::collection::vec(any::<u8>(), 0..64), count in 0usize..20, table in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut buf = Vec::new();
            let trained = Symbols::train(&[b"new york".as_slice(), b"news", b"weather"]);
            for symbols in [Symbols::none(), trained] {
                let _ = decode_bucket(&data, count, &symbols, &mut buf, |_, _, _| true);
            }
            if let Some(symbols) = Symbols::parse(&table) {
                prop_assert_eq!(symbols.to_bytes(), table);
                let _ = decode_bucket(&data, count, &symbols, &mut buf, |_, _, _| true);
            }
        }

        #[test]
        fn codes_round_trip_and_bad_codes_are_refused(
            sample in proptest::collection::vec("[a-e ]{1,12}", 1..30),
            text in "[a-z é]{0,20}",
            garbage in 0usize..300,
            kept in 0usize..40,
        ) {
            let sample_bytes: Vec<&[u8]> = sample.iter().map(|s| s.as_bytes()).collect();
            let symbols = Symbols::train(&sample_bytes);
            let mut codes = Vec::new();
            Encoder::new(&symbols).encode(text.as_bytes(), &mut codes);
            // Decoded after a kept prefix, into a buffer whose bytes past it are left over
            // from a longer text: those must not show through.
            let mut out = vec![b'#'; garbage];
            let end = symbols.decode(&codes, &mut out, kept.min(garbage));
            prop_assert_eq!(end, Some(kept.min(garbage) + text.len()));
            prop_assert_eq!(&out[kept.min(garbage)..kept.min(garbage) + text.len()], text.as_bytes());
            prop_assert!(out[..kept.min(garbage)].iter().all(|&b| b == b'#'));
            // An escape at the end, and a code past the table, are malformed (an empty table
            // stores text as it is).
            prop_assert_eq!(symbols.decode(&[ESCAPE], &mut out, 0).is_none(), symbols.count > 0);
            if (1..usize::from(ESCAPE)).contains(&symbols.count) {
                prop_assert!(symbols.decode(&[symbols.count as u8], &mut out, 0).is_none());
            }
        }
    }
}
