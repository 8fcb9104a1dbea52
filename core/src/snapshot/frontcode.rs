//! Front-coded key buckets: the string store of a snapshot.
//!
//! Keys are stored in lexicographic order in buckets of [`BUCKET_SIZE`]. The first key of a
//! bucket is stored whole; each following key stores only the length of the prefix it shares
//! with its predecessor and the remaining suffix. Sorted queries share long prefixes ("new york
//! hotels", "new york times"), so this roughly halves the bytes of the raw strings, and decoding
//! one key touches one bucket (at most `BUCKET_SIZE` small copies) — cheap enough for the ten keys
//! an answer needs.
//!
//! Each entry also carries one flag bit (in the lowest bit of its first varint): whether the key
//! has a display text different from itself. The lookup learns it while decoding the key it
//! needs anyway, and searches the display table only for the few keys that have one.

use super::varint;

/// Keys per bucket: a trade between compression (larger) and decode time per key (smaller).
pub(crate) const BUCKET_SIZE: usize = 16;

/// Encodes one bucket of sorted keys, each with its flag bit.
pub(crate) fn encode_bucket(keys: &[(&[u8], bool)], out: &mut Vec<u8>) {
    let mut prev: &[u8] = &[];
    for (j, &(key, flag)) in keys.iter().enumerate() {
        let lcp = if j == 0 { 0 } else { common_prefix_len(prev, key) };
        let head = if j == 0 { key.len() } else { lcp };
        varint::put(out, (head as u64) << 1 | u64::from(flag));
        if j > 0 {
            varint::put(out, (key.len() - lcp) as u64);
        }
        out.extend_from_slice(&key[lcp..]);
        prev = key;
    }
}

/// Length of the longest common prefix of two byte strings.
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Decodes the keys of one bucket in order into `buf`, calling `visit(index, key, flag)` for
/// each; stops early when `visit` returns `false`. Returns `None` if the bytes are malformed.
#[inline]
pub(crate) fn decode_bucket(
    bucket: &[u8],
    count: usize,
    buf: &mut Vec<u8>,
    mut visit: impl FnMut(usize, &[u8], bool) -> bool,
) -> Option<()> {
    buf.clear();
    let mut pos = 0;
    for j in 0..count {
        let head = varint::get(bucket, &mut pos)?;
        let flag = head & 1 == 1;
        let head = usize::try_from(head >> 1).ok()?;
        let len = if j == 0 {
            head
        } else {
            if head > buf.len() {
                return None;
            }
            buf.truncate(head);
            usize::try_from(varint::get(bucket, &mut pos)?).ok()?
        };
        buf.extend_from_slice(bucket.get(pos..pos.checked_add(len)?)?);
        pos += len;
        if !visit(j, buf, flag) {
            return Some(());
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips(mut keys in proptest::collection::vec("[a-c]{0,6}", 1..BUCKET_SIZE)) {
            keys.sort();
            keys.dedup();
            let refs: Vec<(&[u8], bool)> = keys.iter().map(|k| (k.as_bytes(), k.len() % 2 == 0)).collect();
            let mut data = Vec::new();
            encode_bucket(&refs, &mut data);
            let mut decoded = Vec::new();
            let mut buf = Vec::new();
            decode_bucket(&data, refs.len(), &mut buf, |_, k, flag| {
                decoded.push((String::from_utf8(k.to_vec()).unwrap(), flag));
                true
            }).unwrap();
            let expected: Vec<(String, bool)> = keys.iter().map(|k| (k.clone(), k.len() % 2 == 0)).collect();
            prop_assert_eq!(decoded, expected);
        }

        #[test]
        fn never_panics_on_garbage(data in proptest::collection::vec(any::<u8>(), 0..64), count in 0usize..20) {
            let mut buf = Vec::new();
            let _ = decode_bucket(&data, count, &mut buf, |_, _, _| true);
        }
    }
}
