//! The compacted trie over the sorted keys, built bottom-up, with the top-k of every node.
//!
//! This is the seed design's "each parent merges the top suggestions of its children", done in one
//! pass over the keys in lexicographic order: a stack holds the open nodes of the current path;
//! when the next key shares only `l` bytes with the previous one, every open node deeper than `l`
//! is complete, hands its top-k list up to its parent, and is closed. Completions are numbered by
//! rank (score desc, key asc), so a top-k list is simply the k smallest ranks and merging two
//! lists is a merge of sorted integers.
//!
//! Only nodes whose subtree holds more than `small` completions keep their list in the snapshot;
//! a smaller subtree is cheaper to enumerate directly from the key store at query time, which keeps
//! lookups bounded while storing lists for a small fraction of the nodes.

use super::frontcode::common_prefix_len;

/// A node that keeps its top-k list in the snapshot.
#[derive(Debug)]
pub(crate) struct ListNode {
    /// The node's path: the bytes every key below it starts with.
    pub(crate) path: Vec<u8>,
    /// Key positions of the node's top-k completions, best first.
    pub(crate) top: Vec<u32>,
}

/// What the bottom-up pass produced.
#[derive(Debug)]
pub(crate) struct Trie {
    /// Nodes with stored lists, sorted by path.
    pub(crate) lists: Vec<ListNode>,
    /// Number of nodes of the whole compacted trie (root, branch points and key ends).
    pub(crate) nodes: u64,
}

struct Open {
    depth: usize,
    lo: u32,
    top: Vec<u32>,
}

struct Pass<'a> {
    keys: &'a [&'a [u8]],
    rank: &'a [u32],
    k: usize,
    small: usize,
    stack: Vec<Open>,
    lists: Vec<ListNode>,
    nodes: u64,
    pool: Vec<Vec<u32>>,
    scratch: Vec<u32>,
}

/// Builds the trie over `keys` (sorted, distinct) where `rank[i]` is the rank of key `i`.
pub(crate) fn build(keys: &[&[u8]], rank: &[u32], k: usize, small: usize) -> Trie {
    let mut pass = Pass {
        keys,
        rank,
        k,
        small,
        stack: vec![Open { depth: 0, lo: 0, top: Vec::new() }],
        lists: Vec::new(),
        nodes: 0,
        pool: Vec::new(),
        scratch: Vec::with_capacity(2 * k),
    };
    for (i, key) in keys.iter().enumerate() {
        let shared = if i == 0 { 0 } else { common_prefix_len(keys[i - 1], key) };
        pass.close_deeper_than(shared, i);
        let top = pass.stack.last_mut().expect("the root is never closed here");
        if key.len() == top.depth {
            // Only the empty key can end at an open node (the root); any other key is longer.
            top.top.insert(0, i as u32);
            top.top.truncate(k);
        } else {
            let mut list = pass.pool.pop().unwrap_or_default();
            list.push(i as u32);
            pass.stack.push(Open { depth: key.len(), lo: i as u32, top: list });
        }
    }
    pass.close_deeper_than(0, keys.len());
    if let Some(root) = pass.stack.pop() {
        pass.finish(&root, keys.len());
    }
    pass.lists.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    Trie { lists: pass.lists, nodes: pass.nodes }
}

impl Pass<'_> {
    /// Closes every open node deeper than `depth`; `end` is the first key after them.
    fn close_deeper_than(&mut self, depth: usize, end: usize) {
        let mut closed: Option<Open> = None;
        while self.stack.last().is_some_and(|n| n.depth > depth) {
            let mut node = self.stack.pop().expect("checked above");
            if let Some(child) = closed.take() {
                self.merge_into(&mut node.top, child);
            }
            self.finish(&node, end);
            closed = Some(node);
        }
        let Some(child) = closed else { return };
        let parent = self.stack.last().expect("the root has depth 0");
        if parent.depth < depth {
            // The next key branches off inside the edge above `child`: a new branch node appears.
            self.stack.push(Open { depth, lo: child.lo, top: child.top });
        } else {
            let mut top = std::mem::take(&mut self.stack.last_mut().expect("checked").top);
            self.merge_into(&mut top, child);
            self.stack.last_mut().expect("checked").top = top;
        }
    }

    /// Merges `child`'s list into `into`, keeping the k best (smallest ranks).
    fn merge_into(&mut self, into: &mut Vec<u32>, child: Open) {
        let rank = self.rank;
        self.scratch.clear();
        let (mut a, mut b) = (into.iter().peekable(), child.top.iter().peekable());
        while self.scratch.len() < self.k {
            let next = match (a.peek(), b.peek()) {
                (Some(&&x), Some(&&y)) if rank[x as usize] <= rank[y as usize] => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            self.scratch.extend(next.copied());
        }
        into.clear();
        into.extend_from_slice(&self.scratch);
        let mut spare = child.top;
        spare.clear();
        self.pool.push(spare);
    }

    /// Counts a closed node and keeps its list if its subtree is large.
    fn finish(&mut self, node: &Open, end: usize) {
        self.nodes += 1;
        if end - node.lo as usize > self.small {
            let path = self.keys[node.lo as usize][..node.depth].to_vec();
            self.lists.push(ListNode { path, top: node.top.clone() });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every stored list is the brute-force top-k of the keys below its path, and every
        /// prefix with more than `small` completions has a node whose subtree is exactly them.
        #[test]
        fn lists_match_brute_force(
            keys in proptest::collection::btree_set("[a-c]{0,6}", 1..60),
            seed in any::<u64>(),
            small in 0usize..6,
        ) {
            let keys: Vec<String> = keys.into_iter().collect();
            let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            // A pseudo-random permutation of ranks.
            let mut order: Vec<u32> = (0..keys.len() as u32).collect();
            order.sort_by_key(|&i| (u64::from(i) ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut rank = vec![0u32; keys.len()];
            for (r, &i) in order.iter().enumerate() { rank[i as usize] = r as u32; }
            let k = 3;
            let trie = build(&refs, &rank, k, small.max(k));
            for node in &trie.lists {
                let mut below: Vec<u32> = (0..keys.len() as u32)
                    .filter(|&i| refs[i as usize].starts_with(&node.path)).collect();
                below.sort_by_key(|&i| rank[i as usize]);
                below.truncate(k);
                prop_assert_eq!(&node.top, &below);
            }
            let paths: Vec<&[u8]> = trie.lists.iter().map(|n| n.path.as_slice()).collect();
            prop_assert!(paths.windows(2).all(|w| w[0] < w[1]));
            for key in &keys {
                for end in 0..=key.len() {
                    let p = &key.as_bytes()[..end];
                    let count = refs.iter().filter(|k| k.starts_with(p)).count();
                    let locus = paths.iter().find(|path| path.starts_with(p));
                    if count > small.max(k) {
                        let locus = locus.expect("a large prefix has a stored node");
                        let under = refs.iter().filter(|k| k.starts_with(locus)).count();
                        prop_assert_eq!(under, count);
                    }
                }
            }
        }
    }
}
