//! Walks over the raw nodes of an ordinal-valued FST (value = position of the key in key order).
//!
//! The `fst` crate's streams answer "first key >= x" but allocate a stack per seek; these walks
//! answer the two questions a lookup asks with no allocation, in one root-to-leaf pass:
//!
//! - [`lower_bound`]: how many keys are smaller than `x` (= the position of the first key >= x);
//! - [`first_with_prefix`]: the position of the smallest key that starts with `x`, if any.
//!
//! Both rely on the values being positions: the smallest key below a node then carries the
//! smallest value, reached by always taking the first transition ([`leftmost_value`]).
//! [`verify`] checks exactly that property (and bounds every walk) when a snapshot is loaded,
//! so a crafted file cannot make a lookup loop or index out of bounds later.

use fst::raw::{CompiledAddr, Fst, Node};

/// Value of the smallest key at or below `node`, whose path so far carries `acc`.
fn leftmost_value<'f, D: AsRef<[u8]>>(fst: &'f Fst<D>, mut node: Node<'f>, mut acc: u64) -> u64 {
    loop {
        if node.is_final() || node.is_empty() {
            return acc.wrapping_add(node.final_output().value());
        }
        let t = node.transition(0);
        acc = acc.wrapping_add(t.out.value());
        node = fst.node(t.addr);
    }
}

/// Number of keys strictly smaller than `key`.
pub(crate) fn lower_bound<D: AsRef<[u8]>>(fst: &Fst<D>, key: &[u8]) -> u64 {
    if fst.is_empty() {
        return 0;
    }
    let mut node = fst.root();
    let mut acc = 0u64;
    // The smallest key after the subtree we are in: where to answer when we fall off its right end.
    let mut after: Option<(CompiledAddr, u64)> = None;
    for &b in key {
        match node.find_input(b) {
            Some(i) => {
                if i + 1 < node.len() {
                    let s = node.transition(i + 1);
                    after = Some((s.addr, acc.wrapping_add(s.out.value())));
                }
                let t = node.transition(i);
                acc = acc.wrapping_add(t.out.value());
                node = fst.node(t.addr);
            }
            None => {
                if let Some(t) = node.transitions().find(|t| t.inp > b) {
                    return leftmost_value(fst, fst.node(t.addr), acc.wrapping_add(t.out.value()));
                }
                return match after {
                    Some((addr, v)) => leftmost_value(fst, fst.node(addr), v),
                    None => fst.len() as u64,
                };
            }
        }
    }
    leftmost_value(fst, node, acc)
}

/// Value of the smallest key that starts with `prefix`, or `None` when no key does.
pub(crate) fn first_with_prefix<D: AsRef<[u8]>>(fst: &Fst<D>, prefix: &[u8]) -> Option<u64> {
    if fst.is_empty() {
        return None;
    }
    let mut node = fst.root();
    let mut acc = 0u64;
    for &b in prefix {
        let t = node.transition(node.find_input(b)?);
        acc = acc.wrapping_add(t.out.value());
        node = fst.node(t.addr);
    }
    Some(leftmost_value(fst, node, acc))
}

/// Checks that the FST holds exactly `expected` keys of at most `max_len` bytes whose values are
/// their positions 0, 1, 2, ... in key order, visiting every reachable node. Panics inside the
/// `fst` crate on crafted bytes are caught and reported as corruption.
pub(crate) fn verify<D: AsRef<[u8]>>(
    fst: &Fst<D>,
    expected: u64,
    max_len: usize,
) -> Result<(), String> {
    let walk = std::panic::AssertUnwindSafe(|| verify_walk(fst, expected, max_len));
    std::panic::catch_unwind(walk).unwrap_or_else(|_| Err("fst structure is malformed".into()))
}

fn verify_walk<D: AsRef<[u8]>>(fst: &Fst<D>, expected: u64, max_len: usize) -> Result<(), String> {
    if fst.len() as u64 != expected {
        return Err(format!("fst holds {} keys, expected {expected}", fst.len()));
    }
    let root = fst.root();
    if expected == 0 {
        // Streams read the root even when the FST is empty, so a crafted root address must be
        // caught here too (found by the mutated-snapshot property test).
        return if root.is_empty() && !root.is_final() {
            Ok(())
        } else {
            Err("empty fst has a non-empty root".into())
        };
    }
    // Depth-first in key order; each stack entry is (node, next transition, value so far). The
    // node is kept, not its address, so its header is parsed once rather than once per
    // transition.
    let mut stack: Vec<(Node<'_>, usize, u64)> = vec![(root, 0, 0)];
    let mut next_value = 0u64;
    let mut budget = expected.saturating_mul(max_len as u64 + 1).saturating_add(1024);
    while let Some(top) = stack.last_mut() {
        budget = budget.checked_sub(1).ok_or("fst walk exceeds its budget")?;
        let (node, i, acc) = *top;
        if i == 0 && node.is_final() {
            if acc.wrapping_add(node.final_output().value()) != next_value {
                return Err(format!("fst value out of order at key {next_value}"));
            }
            next_value += 1;
        }
        if i < node.len() {
            top.1 += 1;
            if stack.len() > max_len {
                return Err("fst key longer than allowed".into());
            }
            let t = node.transition(i);
            stack.push((fst.node(t.addr), 0, acc.wrapping_add(t.out.value())));
        } else {
            if i == 0 && !node.is_final() {
                return Err("fst has a dead-end node".into());
            }
            stack.pop();
        }
    }
    if next_value != expected {
        return Err(format!("fst yields {next_value} keys, expected {expected}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ordinal_fst(keys: &[String]) -> Fst<Vec<u8>> {
        Fst::from_iter_map(keys.iter().enumerate().map(|(i, k)| (k.as_bytes(), i as u64))).unwrap()
    }

    proptest! {
        #[test]
        fn walks_agree_with_a_scan(
            keys in proptest::collection::btree_set("[a-c]{0,5}", 0..40),
            probe in "[a-d]{0,6}",
        ) {
            let keys: Vec<String> = keys.into_iter().collect();
            let fst = ordinal_fst(&keys);
            verify(&fst, keys.len() as u64, 16).unwrap();
            let lb = keys.iter().filter(|k| k.as_str() < probe.as_str()).count() as u64;
            prop_assert_eq!(lower_bound(&fst, probe.as_bytes()), lb);
            let first = keys.iter().position(|k| k.starts_with(probe.as_str())).map(|p| p as u64);
            prop_assert_eq!(first_with_prefix(&fst, probe.as_bytes()), first);
        }
    }

    #[test]
    fn verify_rejects_non_ordinal_values() {
        let fst = Fst::from_iter_map([("a", 0u64), ("b", 5)]).unwrap();
        assert!(verify(&fst, 2, 8).is_err());
        let ok = Fst::from_iter_map([("a", 0u64), ("b", 1)]).unwrap();
        assert!(verify(&ok, 2, 8).is_ok());
        assert!(verify(&ok, 3, 8).is_err());
    }

    #[test]
    fn an_empty_fst_that_passes_verify_streams_without_panic() {
        use fst::Streamer;
        let empty = Fst::from_iter_map(std::iter::empty::<(&[u8], u64)>()).unwrap();
        assert!(verify(&empty, 0, 8).is_ok());
        // Layout ends with: key count (u64), root address (u64), checksum (u32).
        let root_at = empty.as_bytes().len() - 12;
        let mut rejected = 0;
        for (offset, garbage) in (0..2).flat_map(|o| (1..=255u8).map(move |g| (o, g))) {
            let mut bytes = empty.as_bytes().to_vec();
            bytes[root_at + offset] = garbage;
            let Ok(crafted) = Fst::new(bytes) else { continue };
            if verify(&crafted, 0, 8).is_err() {
                rejected += 1;
                continue;
            }
            let mut stream = crafted.stream();
            assert!(stream.next().is_none(), "root address byte {offset} = {garbage}");
        }
        assert!(rejected > 0, "no crafted root was rejected: the check is not exercised");
    }
}
