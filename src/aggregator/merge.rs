//! Merging the top-k lists of partitions into the top-k of all of them.
//!
//! Each partition answers the exact top-k of its own key range, so the top-k of the union is
//! within the union of those lists: sorting them by the one ranking order ([`crate::rank`]) and
//! taking k gives exactly what a single snapshot of all the data answers.

use crate::api::Suggestion;
use crate::rank;

/// The best `k` of several partitions' answers. Suggestions must carry their keys.
pub fn top_k(lists: Vec<Vec<Suggestion>>, k: usize) -> Vec<Suggestion> {
    let mut all: Vec<Suggestion> = lists.into_iter().flatten().collect();
    all.sort_by(|a, b| {
        let (ka, kb) = (a.key.as_deref().unwrap_or(&a.text), b.key.as_deref().unwrap_or(&b.text));
        rank::cmp(a.score, ka.as_bytes(), b.score, kb.as_bytes())
    });
    all.truncate(k);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(key: &str, score: f64) -> Suggestion {
        Suggestion { text: key.to_uppercase(), score, key: Some(key.to_owned()) }
    }

    #[test]
    fn ties_break_by_key_not_text() {
        let merged = top_k(vec![vec![s("b", 1.0)], vec![s("a", 1.0), s("c", 2.0)]], 2);
        assert_eq!(merged, [s("c", 2.0), s("a", 1.0)]);
    }

    proptest! {
        /// Splitting any data into ranges, answering per range and merging equals answering
        /// over all of it.
        #[test]
        fn merge_of_partition_top_ks_equals_global_top_k(
            data in proptest::collection::btree_map("[a-d]{1,4}", 0u8..5, 0..60),
            cuts in proptest::collection::btree_set("[a-d]{1,2}", 0..4),
            k in 1usize..12,
        ) {
            let all: Vec<Suggestion> = data.iter().map(|(key, sc)| s(key, f64::from(*sc))).collect();
            let mut bounds: Vec<&str> = vec![""];
            bounds.extend(cuts.iter().map(String::as_str));
            let lists: Vec<Vec<Suggestion>> = bounds
                .iter()
                .enumerate()
                .map(|(i, start)| {
                    let end = bounds.get(i + 1);
                    let part: Vec<Suggestion> = all
                        .iter()
                        .filter(|x| x.key.as_deref().unwrap() >= *start && end.is_none_or(|e| x.key.as_deref().unwrap() < *e))
                        .cloned()
                        .collect();
                    top_k(vec![part], k)
                })
                .collect();
            prop_assert_eq!(top_k(lists, k), top_k(vec![all], k));
        }
    }
}
