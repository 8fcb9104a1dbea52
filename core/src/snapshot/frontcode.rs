//! Front-coded key buckets: the string store of a snapshot.
//!
//! Keys are stored in lexicographic order in buckets of [`BUCKET_SIZE`]. The first key of a
//! bucket is stored whole; each following key stores only the length of the prefix it shares
//! with its predecessor and the remaining suffix. Sorted queries share long prefixes ("new york
//! hotels", "new york times"), so this roughly halves the bytes of the raw strings, and decoding
//! one key touches one bucket (at most `BUCKET_SIZE` small copies) — cheap enough for the ten keys
//! an answer needs.

use super::varint;

/// Keys per bucket: a trade between compression (larger) and decode time per key (smaller).
pub(crate) const BUCKET_SIZE: usize = 16;

/// Encodes one bucket of sorted keys.
pub(crate) fn encode_bucket(keys: &[&[u8]], out: &mut Vec<u8>) {
    let mut prev: &[u8] = &[];
    for (j, key) in keys.iter().enumerate() {
        if j == 0 {
            varint::put(out, key.len() as u64);
            out.extend_from_slice(key);
        } else {
            let lcp = common_prefix_len(prev, key);
            varint::put(out, lcp as u64);
            varint::put(out, (key.len() - lcp) as u64);
            out.extend_from_slice(&key[lcp..]);
        }
        prev = key;
    }
}

/// Length of the longest common prefix of two byte strings.
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Decodes the keys of one bucket in order into `buf`, calling `visit(index, key)` for each;
/// stops early when `visit` returns `false`. Returns `None` if the bytes are malformed.
#[inline]
pub(crate) fn decode_bucket(
    bucket: &[u8],
    count: usize,
    buf: &mut Vec<u8>,
    mut visit: impl FnMut(usize, &[u8]) -> bool,
) -> Option<()> {
    buf.clear();
    let mut pos = 0;
    for j in 0..count {
        if j == 0 {
            let len = usize::try_from(varint::get(bucket, &mut pos)?).ok()?;
            buf.extend_from_slice(bucket.get(pos..pos.checked_add(len)?)?);
            pos += len;
        } else {
            let lcp = usize::try_from(varint::get(bucket, &mut pos)?).ok()?;
            let len = usize::try_from(varint::get(bucket, &mut pos)?).ok()?;
            if lcp > buf.len() {
                return None;
            }
            buf.truncate(lcp);
            buf.extend_from_slice(bucket.get(pos..pos.checked_add(len)?)?);
            pos += len;
        }
        if !visit(j, buf) {
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
            let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            let mut data = Vec::new();
            encode_bucket(&refs, &mut data);
            let mut decoded = Vec::new();
            let mut buf = Vec::new();
            decode_bucket(&data, refs.len(), &mut buf, |_, k| {
                decoded.push(String::from_utf8(k.to_vec()).unwrap());
                true
            }).unwrap();
            prop_assert_eq!(decoded, keys);
        }

        #[test]
        fn never_panics_on_garbage(data in proptest::collection::vec(any::<u8>(), 0..64), count in 0usize..20) {
            let mut buf = Vec::new();
            let _ = decode_bucket(&data, count, &mut buf, |_, _| true);
        }
    }
}
