//! A conjunctive top-k baseline for the words tier, to measure the shipped one against: the
//! textbook way, with nothing the snapshot has to care about — every word's ranks as a plain
//! sorted `Vec<u32>` in memory (no compression, no block table), lists intersected by
//! galloping, the partial last word checked on the key (or, typed alone, its words' lists
//! merged by a heap). Same contract as `Snapshot::words_answer`: the best `k` completions that
//! hold the typed words and do not start with what was typed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use typeahead::matching::{self, Typed};

pub struct Baseline {
    /// Keys by rank (0 = best).
    keys: Vec<String>,
    /// Distinct words in byte order, and the ranks of the keys holding each, ascending.
    words: Vec<String>,
    lists: Vec<Vec<u32>>,
    /// Word -> index in `words`: a hash lookup, as a baseline in memory would do.
    ids: HashMap<String, usize>,
}

impl Baseline {
    /// Indexes (key, score) pairs.
    pub fn new(mut entries: Vec<(String, f64)>) -> Baseline {
        entries.sort_by(|a, b| typeahead::rank::cmp(a.1, a.0.as_bytes(), b.1, b.0.as_bytes()));
        let mut map: HashMap<String, Vec<u32>> = HashMap::new();
        for (rank, (key, _)) in entries.iter().enumerate() {
            for word in matching::words(key) {
                let list = map.entry(word.to_owned()).or_default();
                if list.last() != Some(&(rank as u32)) {
                    list.push(rank as u32);
                }
            }
        }
        let mut pairs: Vec<(String, Vec<u32>)> = map.into_iter().collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let ids = pairs.iter().enumerate().map(|(i, (w, _))| (w.clone(), i)).collect();
        let (words, lists) = pairs.into_iter().unzip();
        Baseline { keys: entries.into_iter().map(|e| e.0).collect(), words, lists, ids }
    }

    /// The best `k` completions holding the typed words of `prefix` and not starting with it.
    pub fn answer(&self, prefix: &str, k: usize) -> Vec<&str> {
        let typed = Typed::of(prefix);
        let mut lists: Vec<&[u32]> = Vec::with_capacity(typed.complete.len());
        for word in &typed.complete {
            match self.ids.get(*word) {
                Some(&id) => lists.push(&self.lists[id]),
                None => return Vec::new(),
            }
        }
        let accept = |rank: u32| {
            let key = self.keys[rank as usize].as_str();
            (!key.starts_with(prefix) && typed.matches(key)).then_some(key)
        };
        if lists.is_empty() {
            let Some(partial) = typed.partial else { return Vec::new() };
            let lo = self.words.partition_point(|w| w.as_str() < partial);
            let n = self.words[lo..].partition_point(|w| w.starts_with(partial));
            return self.merged(lo..lo + n).filter_map(accept).take(k).collect();
        }
        lists.sort_by_key(|l| l.len());
        let (driver, others) = lists.split_first().expect("not empty");
        let mut at = vec![0usize; others.len()];
        let mut out = Vec::new();
        'candidates: for &rank in driver.iter() {
            for (list, at) in others.iter().zip(at.iter_mut()) {
                *at = gallop(list, *at, rank);
                if list.get(*at) != Some(&rank) {
                    continue 'candidates;
                }
            }
            if let Some(key) = accept(rank) {
                out.push(key);
                if out.len() == k {
                    break;
                }
            }
        }
        out
    }

    /// The union of the lists of words `ids`, ascending, each rank once.
    fn merged(&self, ids: std::ops::Range<usize>) -> impl Iterator<Item = u32> + '_ {
        let mut heap: BinaryHeap<Reverse<(u32, usize, usize)>> =
            ids.map(|id| Reverse((self.lists[id][0], id, 0))).collect();
        let mut last = None;
        std::iter::from_fn(move || {
            while let Some(Reverse((rank, id, i))) = heap.pop() {
                if let Some(&next) = self.lists[id].get(i + 1) {
                    heap.push(Reverse((next, id, i + 1)));
                }
                if last != Some(rank) {
                    last = Some(rank);
                    return Some(rank);
                }
            }
            None
        })
    }
}

/// The first index at or after `from` whose value is >= `target` (exponential, then binary).
fn gallop(list: &[u32], from: usize, target: u32) -> usize {
    let mut step = 1;
    let mut hi = from;
    while hi < list.len() && list[hi] < target {
        hi = from + step;
        step *= 2;
    }
    let lo = from + step / 4;
    let hi = hi.min(list.len());
    lo.min(hi) + list[lo.min(hi)..hi].partition_point(|&r| r < target)
}
