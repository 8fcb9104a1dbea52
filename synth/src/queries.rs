//! Distinct query texts, ordered by a synthetic popularity.

use rand::RngExt;
use rand::distr::weighted::WeightedIndex;
use rand_distr::Triangular;

use crate::dedup::{FingerprintSet, hash_bytes};
use crate::rng::{Stream, stream};
use crate::vocab::Vocabulary;

/// Share of distinct queries by word count (1..=8 words), after AOL 2006.
const WORD_COUNT_SHARES: [f64; 8] = [0.20, 0.26, 0.23, 0.14, 0.08, 0.04, 0.02, 0.03];
/// Probability that a multi-word query extends a prefix of an earlier query.
const EXTEND_SHARE: f64 = 0.30;
/// Offset of the 1/(j + c) law that picks the query a new query extends.
const PARENT_OFFSET: f64 = 64.0;
/// Candidates generated per batch.
const BATCH: usize = 64;
/// After this many batches without a new query the word-count quotas are
/// lifted (guarantees termination).
const MAX_FRUITLESS_BATCHES: u32 = 1_000;
/// Standard deviation of the noise added to the log-probability popularity score.
const POPULARITY_NOISE: f64 = 1.0;

/// Configuration of [`distinct_queries`].
#[derive(Debug, Clone)]
pub struct SynthConfig {
    /// Seed: the same config always yields the same queries.
    pub seed: u64,
    /// Number of distinct queries to generate.
    pub distinct_queries: usize,
    /// Exponent of the Zipf law of query popularity that consumers should
    /// apply to the ranks ([`crate::zipf_weight`], [`crate::ZipfRank`]). It does not
    /// change the query texts.
    pub zipf_exponent: f64,
}

impl SynthConfig {
    /// A config with the AOL-like popularity exponent 1.0.
    pub fn new(seed: u64, distinct_queries: usize) -> Self {
        SynthConfig { seed, distinct_queries, zipf_exponent: 1.0 }
    }
}

/// The first `m` space-separated words of `text` (all of it if it has fewer).
fn first_words(text: &str, m: usize) -> &str {
    match text.match_indices(' ').nth(m.saturating_sub(1)) {
        Some((i, _)) if m > 0 => &text[..i],
        _ if m == 0 => "",
        _ => text,
    }
}

/// Maps an `f32` to a `u32` whose unsigned order is the float's total order.
fn f32_order_key(x: f32) -> u32 {
    let bits = x.to_bits();
    if bits & 0x8000_0000 != 0 { !bits } else { bits | 0x8000_0000 }
}

/// Exact number of queries per word count: `WORD_COUNT_SHARES` scaled to
/// `n` by the largest-remainder method (sums to `n`).
fn word_count_quotas(n: usize) -> [usize; 8] {
    let mut quotas = [0usize; 8];
    let mut remainders = [(0.0f64, 0usize); 8];
    for (i, &share) in WORD_COUNT_SHARES.iter().enumerate() {
        let exact = share * n as f64;
        quotas[i] = exact.floor() as usize;
        remainders[i] = (exact - exact.floor(), i);
    }
    let assigned: usize = quotas.iter().sum();
    remainders.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in remainders.iter().cycle().take(n.saturating_sub(assigned)) {
        quotas[i] += 1;
    }
    quotas
}

/// A generated candidate query whose text is `batch_text[start..end]`.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    words: u8,
    start: usize,
    end: usize,
    hash: u64,
    word_score: f32,
    key: f32,
}

/// The distinct query texts, index 0 = most popular, deterministic for a
/// config. All texts are lower-case, words separated by single spaces.
///
/// # Panics
/// If more than `u32::MAX` queries are requested.
pub fn distinct_queries(cfg: &SynthConfig) -> Vec<String> {
    let n = cfg.distinct_queries;
    assert!(u32::try_from(n).is_ok(), "too many queries requested: {n}");
    if n == 0 {
        return Vec::new();
    }
    let vocab = Vocabulary::new(cfg.seed);
    let mut rng = stream(cfg.seed, Stream::Queries, 0, 0);
    // Bounded (a heavy tail would let rare queries overtake the head), unit variance scaled
    // by POPULARITY_NOISE: the symmetric triangular law on [-√6, √6] has variance 1.
    let spread = 6f64.sqrt() * POPULARITY_NOISE;
    let noise =
        Triangular::new(-spread, spread, 0.0).expect("the noise law has constant, valid bounds");
    let ln_shares: Vec<f64> = WORD_COUNT_SHARES.iter().map(|p| p.ln()).collect();
    let quotas = word_count_quotas(n);
    let mut filled = [0usize; 8];
    // Set if a word-count quota cannot be met (only conceivable for
    // single-word queries far beyond 10^8 queries): then counts are free.
    let mut quotas_relaxed = false;
    let mut fruitless_batches = 0u32;

    let mut seen = FingerprintSet::with_capacity(n);
    let mut texts: Vec<String> = Vec::with_capacity(n);
    // Per accepted query: summed word log-probabilities, word count, sort key.
    let mut word_scores: Vec<f32> = Vec::with_capacity(n);
    let mut word_counts: Vec<u8> = Vec::with_capacity(n);
    let mut keys: Vec<u64> = Vec::with_capacity(n);

    // Candidates are generated in batches that do not depend on each other,
    // then hashed into the set in order: the independent set probes overlap
    // in memory, which matters once the set outgrows the caches.
    let mut batch: Vec<Candidate> = Vec::with_capacity(BATCH);
    let mut plan: Vec<(usize, Option<usize>)> = Vec::with_capacity(BATCH);
    let mut batch_text = String::with_capacity(BATCH * 64);
    while texts.len() < n {
        let open = std::array::from_fn::<f64, 8, _>(|i| {
            if quotas_relaxed || filled[i] < quotas[i] { WORD_COUNT_SHARES[i] } else { 0.0 }
        });
        // Some quota is open while fewer than n queries exist (the quotas sum to n).
        let Ok(word_count) = WeightedIndex::new(open) else {
            quotas_relaxed = true;
            continue;
        };
        let parents = texts.len();
        batch.clear();
        batch_text.clear();
        // Plan the batch first (word count, extended parent) and touch the
        // parents, so that their cache misses overlap instead of serialising.
        plan.clear();
        let mut touched = 0usize;
        for _ in 0..BATCH {
            let k = rng.sample(&word_count) + 1;
            let mut parent = None;
            if k >= 2 && parents > 0 && rng.random_bool(EXTEND_SHARE) {
                // Parent index j has density ~ 1/(j + c) over the acceptance
                // order (early = common); the offset c keeps the very first
                // queries from becoming the prefix of a large share of all.
                // rand_distr has no such (log-uniform) law: invert its CDF.
                let c = PARENT_OFFSET;
                let span = ((parents as f64 + c) / c).ln();
                let x = c * rng.random_range(0.0..span).exp() - c;
                let j = (x as usize).min(parents - 1);
                touched =
                    touched.wrapping_add(usize::from(word_counts[j])).wrapping_add(texts[j].len());
                parent = Some(j);
            }
            plan.push((k, parent));
        }
        std::hint::black_box(touched);
        for &(k, parent) in &plan {
            let start = batch_text.len();
            let mut words = 0usize;
            let mut score = 0.0f64;
            if let Some(j) = parent {
                let parent_words = usize::from(word_counts[j]);
                let m = parent_words.min(k - 1);
                batch_text.push_str(first_words(&texts[j], m));
                words = m;
                score = f64::from(word_scores[j]) * m as f64 / parent_words as f64;
            }
            while words < k {
                if words > 0 {
                    batch_text.push(' ');
                }
                let r = vocab.sample(&mut rng);
                vocab.push_word(r, &mut batch_text);
                score += vocab.log_p(r);
                words += 1;
            }
            let end = batch_text.len();
            batch.push(Candidate {
                words: k as u8,
                start,
                end,
                hash: hash_bytes(&batch_text.as_bytes()[start..end]),
                word_score: score as f32,
                key: (ln_shares[k - 1] + score + rng.sample(noise)) as f32,
            });
        }
        // Touch the set slots of the whole batch before inserting in order.
        let touched = batch.iter().fold(0u32, |acc, c| acc.wrapping_add(seen.peek(c.hash)));
        std::hint::black_box(touched);
        let before = texts.len();
        for c in &batch {
            if texts.len() == n {
                break;
            }
            let i = usize::from(c.words) - 1;
            if !quotas_relaxed && filled[i] >= quotas[i] {
                continue;
            }
            if seen.insert(c.hash) {
                filled[i] += 1;
                // Descending key, ties broken by acceptance order.
                let packed = (u64::from(!f32_order_key(c.key)) << 32) | texts.len() as u64;
                keys.push(packed);
                word_scores.push(c.word_score);
                word_counts.push(c.words);
                texts.push(batch_text[c.start..c.end].to_owned());
            }
        }
        if texts.len() == before {
            fruitless_batches += 1;
            if fruitless_batches >= MAX_FRUITLESS_BATCHES {
                quotas_relaxed = true;
            }
        } else {
            fruitless_batches = 0;
        }
    }
    drop(seen);
    drop(word_scores);
    drop(word_counts);

    keys.sort_unstable();
    keys.into_iter().map(|p| std::mem::take(&mut texts[(p & 0xFFFF_FFFF) as usize])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    fn queries(seed: u64, n: usize) -> Vec<String> {
        distinct_queries(&SynthConfig::new(seed, n))
    }

    #[test]
    fn distinct_queries_are_deterministic() {
        let a = queries(1, 5_000);
        let b = queries(1, 5_000);
        assert_eq!(a, b);
        let c = queries(2, 5_000);
        assert_ne!(a, c);
        let mut cfg = SynthConfig::new(1, 5_000);
        cfg.zipf_exponent = 1.3;
        assert_eq!(distinct_queries(&cfg), a, "texts must not depend on the exponent");
        assert!(queries(1, 0).is_empty());
        assert_eq!(queries(1, 1).len(), 1);
    }

    #[test]
    fn distinct_and_count_10k() {
        let q = queries(3, 10_000);
        assert_eq!(q.len(), 10_000);
        let set: HashSet<&str> = q.iter().map(String::as_str).collect();
        assert_eq!(set.len(), 10_000);
        for s in &q {
            assert!(!s.is_empty());
            assert!(!s.starts_with(' ') && !s.ends_with(' ') && !s.contains("  "), "{s:?}");
            assert!(!s.contains('\t') && !s.contains('\n'));
            assert_eq!(s.to_lowercase(), *s);
        }
    }

    #[test]
    fn mean_length_is_realistic() {
        for seed in [4, 5] {
            let q = queries(seed, 10_000);
            let mean = q.iter().map(|s| s.chars().count()).sum::<usize>() as f64 / q.len() as f64;
            assert!((17.0..27.0).contains(&mean), "mean length {mean}");
        }
    }

    #[test]
    fn word_count_distribution_is_roughly_aol() {
        let q = queries(6, 10_000);
        let mut counts = [0usize; 9];
        for s in &q {
            let w = s.split(' ').count();
            assert!((1..=8).contains(&w), "{s:?}");
            counts[w] += 1;
        }
        for (i, &share) in WORD_COUNT_SHARES.iter().enumerate() {
            let got = counts[i + 1] as f64 / q.len() as f64;
            assert!((got - share).abs() < 0.05, "{} words: {got} vs {share}", i + 1);
        }
    }

    #[test]
    fn quotas_sum_to_the_count() {
        for n in [0usize, 1, 7, 10, 999, 10_000, 1_234_567] {
            let q = word_count_quotas(n);
            assert_eq!(q.iter().sum::<usize>(), n);
            for (i, &share) in WORD_COUNT_SHARES.iter().enumerate() {
                assert!((q[i] as f64 - share * n as f64).abs() <= 1.0);
            }
        }
    }

    #[test]
    fn popular_queries_are_short_and_prefixes_are_shared() {
        let q = queries(8, 20_000);
        let words = |s: &String| s.split(' ').count() as f64;
        let head: f64 = q[..200].iter().map(words).sum::<f64>() / 200.0;
        let all: f64 = q.iter().map(words).sum::<f64>() / q.len() as f64;
        assert!(head < all, "head {head} vs all {all}");
        let mut first: HashMap<&str, usize> = HashMap::new();
        for s in &q {
            *first.entry(s.split(' ').next().unwrap_or("")).or_default() += 1;
        }
        let max = first.values().copied().max().unwrap_or(0);
        assert!(max > q.len() / 100, "most common first word only {max}");
        // Multi-word queries whose first two words start another query too.
        let mut two: HashMap<&str, usize> = HashMap::new();
        for s in q.iter().filter(|s| s.split(' ').count() >= 3) {
            *two.entry(first_words(s, 2)).or_default() += 1;
        }
        let shared = two.values().filter(|&&c| c >= 2).count();
        assert!(shared > 50, "only {shared} shared two-word prefixes");
    }

    #[test]
    fn queries_contain_digits_and_diacritics() {
        let q = queries(10, 10_000);
        let digits = q
            .iter()
            .filter(|s| s.split(' ').any(|w| w.bytes().all(|b| b.is_ascii_digit())))
            .count();
        let accented = q.iter().filter(|s| !s.is_ascii()).count();
        assert!(digits > 100, "{digits}");
        assert!(accented > 20, "{accented}");
    }

    /// Times generation (prints only; no timing assertions).
    #[test]
    fn generation_timing() {
        let n = if cfg!(debug_assertions) { 100_000 } else { 1_000_000 };
        let start = std::time::Instant::now();
        let q = queries(2026, n);
        let elapsed = start.elapsed();
        let mean = q.iter().map(|s| s.chars().count()).sum::<usize>() as f64 / q.len() as f64;
        println!(
            "synth: {n} distinct queries in {elapsed:.2?}, mean length {mean:.2} chars; top: {:?}",
            &q[..10]
        );
        assert_eq!(q.len(), n);
    }
}
