//! LEB128 variable-length integers, used inside front-coded key buckets.

/// Appends `v` as LEB128.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a LEB128 value at `*pos`, advancing it. `None` on truncation or overflow.
#[inline]
pub(crate) fn get(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips(v in any::<u64>()) {
            let mut buf = Vec::new();
            super::put(&mut buf, v);
            let mut pos = 0;
            prop_assert_eq!(super::get(&buf, &mut pos), Some(v));
            prop_assert_eq!(pos, buf.len());
        }
    }
}
