//! Deterministic generator of **SYNTHETIC** search-query data.
//!
//! Everything this module produces is SYNTHETIC: the words are invented
//! pseudo-words built from syllables, the queries are random word n-grams and
//! the "users" are numbers. No real search log, user or query is contained in
//! or derived from this code. It exists because real query logs cannot be
//! shipped (the AOL 2006 release showed that query logs identify people),
//! yet benchmarks, tests and the demo need data whose *shape* is realistic:
//! the performance of a typeahead index depends on prefix sharing, on the
//! skew of popularity and on the length of the strings, and the ingestion
//! path needs dirty input to exercise normalisation and rejection.
//!
//! # The model
//!
//! The target is the statistical shape of the AOL 2006 log:
//!
//! * **Vocabulary.** Word rank `r` (0 = most frequent) is mapped
//!   deterministically and injectively to a word: a pronounceable pseudo-word
//!   of 1–4 syllables (2–12 characters, frequent words are short, as in
//!   natural language), or, for about 2.4 % of the ranks, a digit token such
//!   as `2006` or `911`, or, for about 0.5 % of the ranks, a word with
//!   diacritics (`café`, `münchen`, `são`, or a pseudo-word with one accented
//!   vowel) so that Unicode normalisation is exercised. The syllable grammar
//!   (single-letter vowel nucleus, codas restricted to `n r l m`, no onset
//!   cluster starting with a coda letter) makes every word parse uniquely, so
//!   distinct ranks give distinct words. Words are drawn from a Zipf law
//!   (exponent 1.0) over 2^26 ranks, so a handful of words dominate and the
//!   number of distinct words keeps growing with the amount of data, as
//!   Heaps' law predicts for real text.
//! * **Queries.** A query has 1–8 words with the AOL shares
//!   (1: 20 %, 2: 26 %, 3: 23 %, 4: 14 %, 5: 8 %, 6: 4 %, 7: 2 %, 8: 3 %), which
//!   gives a mean length of about 22 characters. About 30 % of the multi-word
//!   queries extend a prefix of an earlier, typically common, query
//!   ("foo" → "foo bar baz"), so queries share prefixes the way refinements do
//!   in real logs; the other words are drawn independently, so popular first
//!   words are shared as well. Duplicates are rejected (via hash fingerprints: a
//!   collision only rejects a new query, it can never admit a duplicate)
//!   and generation continues until the requested number of distinct queries
//!   exists. Each word count has a quota (its share of the requested count),
//!   so the word-count shares hold exactly for the *distinct* queries.
//! * **Popularity.** The distinct queries are returned ordered by a synthetic
//!   popularity: the log-probability of the query under the generating model
//!   plus bounded noise (real popularity is not purely compositional). Index 0
//!   is the most popular query; short queries of frequent words come first,
//!   as in real logs. Consumers give rank `r` the weight of a Zipf law
//!   ([`zipf_weight`], [`ZipfSampler`]); the query texts do not depend on the
//!   exponent, so the skew can be varied on identical texts.
//! * **Raw logs** ([`write_log`]) draw events from the Zipf law over the
//!   distinct queries, with a diurnal traffic curve, a few trending queries
//!   that rise and fade over a couple of days, users who repeat their
//!   favourite queries, surface variants of the same query (capitalisation,
//!   doubled spaces, a dropped diacritic) and a small share of malformed
//!   lines (no tab, bad timestamp, invalid UTF-8, an e-mail address or a
//!   10-digit number as the query).
//!
//! Everything is deterministic for a given configuration (own PRNG, own
//! hash, no iteration over hash containers); the only floating-point
//! functions used are `ln`, `exp`, `powf` and friends from `std`, so output is
//! byte-identical across runs on the same platform. Generation is
//! O(output): per query about one probe of a 32-bit fingerprint table and a
//! few PRNG draws; 10 M distinct queries take a few seconds on one core.

use std::io::{self, Write};

use crate::logline::push_timestamp;

// ---------------------------------------------------------------------------
// PRNG
// ---------------------------------------------------------------------------

/// A small, fast, deterministic PRNG (xoshiro256** seeded through SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The MurmurHash3 64-bit finaliser: a bijective avalanche mix.
fn fmix64(mut z: u64) -> u64 {
    z ^= z >> 33;
    z = z.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    z ^= z >> 33;
    z = z.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    z ^ (z >> 33)
}

/// Derives an independent seed for a sub-stream from a seed and some labels.
fn derive_seed(seed: u64, parts: &[u64]) -> u64 {
    let mut h = fmix64(seed ^ 0x5EED_0F5E_ED00_5EED);
    for &p in parts {
        h = fmix64(h.wrapping_add(p).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (h >> 29));
    }
    h
}

impl Rng {
    /// Creates a generator; every seed (including 0) gives a good stream.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let mut s = [0u64; 4];
        for x in &mut s {
            *x = splitmix64(&mut sm);
        }
        if s == [0; 4] {
            s[0] = 1;
        }
        Rng { s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A uniform float in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `[0, n)` without modulo bias (Lemire's method).
    ///
    /// # Panics
    /// If `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below called with n == 0");
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        let mut lo = m as u64;
        if lo < n {
            let threshold = n.wrapping_neg() % n;
            while lo < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
                lo = m as u64;
            }
        }
        (m >> 64) as u64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }
}

// ---------------------------------------------------------------------------
// Zipf law
// ---------------------------------------------------------------------------

/// `log1p(x) / x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 { x.ln_1p() / x } else { 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x)) }
}

/// `expm1(x) / x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// Generalised harmonic number `H(n, s) = sum_{k=1..n} k^-s`: exact for the
/// first terms, Euler–Maclaurin for the tail (relative error < 1e-10).
fn harmonic(n: usize, s: f64) -> f64 {
    const EXACT: usize = 32;
    if n <= 4 * EXACT {
        return (1..=n).map(|k| (k as f64).powf(-s)).sum();
    }
    let head: f64 = (1..EXACT).map(|k| (k as f64).powf(-s)).sum();
    let a = EXACT as f64;
    let b = n as f64;
    let l = (b / a).ln();
    let t = 1.0 - s;
    let integral = a.powf(t) * l * helper2(t * l);
    let f = |x: f64| x.powf(-s);
    let d1 = |x: f64| -s * x.powf(-s - 1.0);
    let d3 = |x: f64| -s * (s + 1.0) * (s + 2.0) * x.powf(-s - 3.0);
    head + integral + (f(a) + f(b)) / 2.0 + (d1(b) - d1(a)) / 12.0 - (d3(b) - d3(a)) / 720.0
}

thread_local! {
    static HARMONIC_CACHE: std::cell::Cell<(usize, u64, f64)> =
        const { std::cell::Cell::new((0, 0, 0.0)) };
}

/// `H(n, s)`, memoising the last value per thread (benchmarks call
/// [`zipf_weight`] for every rank with the same `n` and exponent).
fn harmonic_cached(n: usize, s: f64) -> f64 {
    HARMONIC_CACHE.with(|c| {
        let (cn, cs, h) = c.get();
        if cn == n && cs == s.to_bits() && n != 0 {
            return h;
        }
        let h = harmonic(n, s);
        c.set((n, s.to_bits(), h));
        h
    })
}

/// Probability `p(rank)` of the item with popularity rank `rank` (0-based)
/// under the Zipf law with the given exponent over `n` items:
/// `(rank + 1)^-exponent / H(n, exponent)`.
///
/// The expected count of that item when `total` events are drawn is
/// `total as f64 * zipf_weight(rank, n, exponent)`. Returns 0 for
/// `rank >= n`. O(1) amortised (the normaliser is cached per thread).
pub fn zipf_weight(rank: usize, n: usize, exponent: f64) -> f64 {
    if rank >= n {
        return 0.0;
    }
    ((rank + 1) as f64).powf(-exponent) / harmonic_cached(n, exponent)
}

/// Draws popularity ranks `0..n` from the Zipf law `p(r) ∝ (r + 1)^-exponent`
/// with the rejection-inversion method of Hörmann & Derflinger (1996):
/// O(1) per draw, no tables, deterministic for a given [`Rng`] state.
#[derive(Debug, Clone)]
pub struct ZipfSampler {
    n: usize,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl ZipfSampler {
    /// # Panics
    /// If `n == 0` or `exponent` is negative or not finite.
    pub fn new(n: usize, exponent: f64) -> Self {
        assert!(n > 0, "ZipfSampler needs at least one item");
        assert!(
            exponent.is_finite() && exponent >= 0.0,
            "Zipf exponent must be finite and >= 0, got {exponent}"
        );
        let h_integral_x1 = Self::h_integral(1.5, exponent) - 1.0;
        let h_integral_n = Self::h_integral(n as f64 + 0.5, exponent);
        let s = 2.0
            - Self::h_integral_inverse(
                Self::h_integral(2.5, exponent) - Self::h(2.0, exponent),
                exponent,
            );
        ZipfSampler { n, exponent, h_integral_x1, h_integral_n, s }
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Always false (a sampler has at least one item).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Draws a rank in `0..n`.
    pub fn sample(&self, rng: &mut Rng) -> usize {
        loop {
            let u = self.h_integral_n + rng.next_f64() * (self.h_integral_x1 - self.h_integral_n);
            let x = Self::h_integral_inverse(u, self.exponent);
            let mut k = (x + 0.5) as usize; // saturating cast; x >= 0.5 in theory
            if k < 1 {
                k = 1;
            } else if k > self.n {
                k = self.n;
            }
            let kf = k as f64;
            if kf - x <= self.s
                || u >= Self::h_integral(kf + 0.5, self.exponent) - Self::h(kf, self.exponent)
            {
                return k - 1;
            }
        }
    }

    fn h(x: f64, exponent: f64) -> f64 {
        (-exponent * x.ln()).exp()
    }

    fn h_integral(x: f64, exponent: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - exponent) * log_x) * log_x
    }

    fn h_integral_inverse(x: f64, exponent: f64) -> f64 {
        let mut t = x * (1.0 - exponent);
        if t < -1.0 {
            t = -1.0;
        }
        (helper1(t) * x).exp()
    }
}

// ---------------------------------------------------------------------------
// Hashing for deduplication
// ---------------------------------------------------------------------------

/// A fixed (version-independent) 64-bit string hash.
fn hash_bytes(bytes: &[u8]) -> u64 {
    const K1: u64 = 0x87C3_7B91_1142_53D5;
    const K2: u64 = 0x4CF5_AD43_2745_937F;
    let mut h = (bytes.len() as u64).wrapping_mul(K2) ^ 0x2545_F491_4F6C_DD1D;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let v = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let v = v.wrapping_mul(K1).rotate_left(31).wrapping_mul(K2);
        h = (h ^ v).rotate_left(27).wrapping_mul(5).wrapping_add(0x52DC_E729);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        let v = u64::from_le_bytes(last).wrapping_mul(K1).rotate_left(31).wrapping_mul(K2);
        h ^= v;
    }
    fmix64(h)
}

/// A fixed-capacity set of 64-bit hashes for deduplication, stored as
/// 32-bit fingerprints in a linear-probing table (4 bytes per slot, load
/// factor <= 0.7, so about 6 bytes per query).
///
/// The slot comes from the high hash bits and the fingerprint from the low
/// ones. Equal strings always collide, so a duplicate is never admitted; two
/// different strings share slot chain and fingerprint with probability about
/// 2^-32 per insert, which merely rejects one new candidate.
#[derive(Debug, Clone)]
struct FingerprintSet {
    slots: Vec<u32>,
    mask: usize,
    len: usize,
    capacity: usize,
}

impl FingerprintSet {
    fn with_capacity(capacity: usize) -> Self {
        let size = (capacity.saturating_mul(10) / 7 + 1).next_power_of_two().max(16);
        FingerprintSet { slots: vec![0; size], mask: size - 1, len: 0, capacity }
    }

    fn home_slot(&self, hash: u64) -> usize {
        ((hash >> 32) as usize).wrapping_mul(0x9E37_79B9) & self.mask
    }

    /// Reads the home slot of `hash` (to bring it into the cache early).
    fn peek(&self, hash: u64) -> u32 {
        self.slots[self.home_slot(hash)]
    }

    /// Inserts the hash; false if it (or a colliding fingerprint) is present.
    ///
    /// # Panics
    /// If more than `capacity` hashes are inserted.
    fn insert(&mut self, hash: u64) -> bool {
        let fingerprint = (hash as u32).max(1);
        let mut i = self.home_slot(hash);
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                assert!(self.len < self.capacity, "FingerprintSet over capacity");
                self.slots[i] = fingerprint;
                self.len += 1;
                return true;
            }
            if slot == fingerprint {
                return false;
            }
            i = (i + 1) & self.mask;
        }
    }
}

// ---------------------------------------------------------------------------
// Vocabulary
// ---------------------------------------------------------------------------

/// Number of word ranks in the vocabulary.
const VOCAB_SIZE: usize = 1 << 26;
/// Zipf exponent of word frequencies.
const WORD_EXPONENT: f64 = 1.0;
/// Every `DIGIT_PERIOD`-th rank (offset `DIGIT_OFFSET`) is a digit token.
const DIGIT_PERIOD: u64 = 41;
const DIGIT_OFFSET: u64 = 17;
/// Every `DIACRITIC_PERIOD`-th rank (offset `DIACRITIC_OFFSET`) carries diacritics.
const DIACRITIC_PERIOD: u64 = 211;
const DIACRITIC_OFFSET: u64 = 29;

const ONSETS: [&str; 36] = [
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br",
    "cr", "dr", "fr", "gr", "pr", "tr", "ch", "sh", "th", "cl", "fl", "gl", "pl", "sl", "st", "sp",
    "sk",
];
const VOWELS: [&str; 5] = ["a", "e", "i", "o", "u"];
/// Codas: no onset cluster starts with one of these letters, so syllable
/// boundaries (and therefore words) parse uniquely.
const CODAS: [&str; 4] = ["n", "r", "l", "m"];

/// Common number tokens (the most frequent digit ranks); all below 10 000.
const COMMON_NUMBERS: [&str; 40] = [
    "2006", "2005", "10", "2007", "100", "911", "2000", "24", "50", "360", "101", "2004", "1",
    "500", "20", "365", "1000", "12", "2003", "30", "7", "3", "5", "25", "2", "4", "40", "18",
    "2008", "1999", "15", "6", "8", "200", "11", "300", "9", "13", "80", "90",
];

/// Real words with diacritics for the most frequent diacritic ranks.
const DIACRITIC_WORDS: [&str; 30] = [
    "café",
    "münchen",
    "são",
    "zürich",
    "crème",
    "brûlée",
    "piñata",
    "jalapeño",
    "résumé",
    "naïve",
    "españa",
    "köln",
    "françois",
    "señor",
    "mañana",
    "über",
    "düsseldorf",
    "montréal",
    "québec",
    "garçon",
    "açaí",
    "pokémon",
    "beyoncé",
    "fiancée",
    "göteborg",
    "malmö",
    "kraków",
    "éclair",
    "déjà",
    "façade",
];

/// Accented forms per plain vowel; every accented char has exactly one base.
const ACCENTS: [(char, &[char]); 5] = [
    ('a', &['á', 'à', 'ã', 'â', 'ä']),
    ('e', &['é', 'è', 'ê', 'ë']),
    ('i', &['í', 'ï', 'î']),
    ('o', &['ó', 'ö', 'ô', 'õ']),
    ('u', &['ü', 'ú', 'û']),
];

/// One length class of pseudo-words (all words with the same number of
/// syllables) and the affine permutation that scatters ranks over the class.
#[derive(Debug, Clone, Copy)]
struct SyllableClass {
    start: u64,
    size: u64,
    mul: u64,
    add: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A multiplier in `[1, m)` coprime to `m` (1 if `m <= 2`).
fn coprime_multiplier(rng: &mut Rng, m: u64) -> u64 {
    if m <= 2 {
        return 1;
    }
    loop {
        let c = m / 3 + rng.below(m - m / 3);
        if c > 0 && gcd(c, m) == 1 {
            return c;
        }
    }
}

fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// The deterministic map from word rank to word text, plus the word sampler.
#[derive(Debug, Clone)]
struct Vocabulary {
    first: Vec<String>,
    rest: Vec<String>,
    classes: [SyllableClass; 4],
    sampler: ZipfSampler,
    ln_harmonic: f64,
}

impl Vocabulary {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(derive_seed(seed, &[0x0007_0CAB]));
        let mut vc = Vec::new();
        let mut cv = Vec::new();
        let mut ccv = Vec::new();
        let mut cvc = Vec::new();
        for v in VOWELS {
            for c in CODAS {
                vc.push(format!("{v}{c}"));
            }
        }
        for o in ONSETS {
            for v in VOWELS {
                if o.len() == 1 {
                    cv.push(format!("{o}{v}"));
                    for c in CODAS {
                        cvc.push(format!("{o}{v}{c}"));
                    }
                } else {
                    ccv.push(format!("{o}{v}"));
                }
            }
        }
        for list in [&mut vc, &mut cv, &mut ccv, &mut cvc] {
            shuffle(list, &mut rng);
        }
        // First syllable may start with a vowel; later ones always have an onset.
        // The mix of 2- and 3-letter syllables sets the mean word length.
        let mut first: Vec<String> = vc.iter().take(10).cloned().collect();
        first.extend(cv.iter().take(30).cloned());
        first.extend(ccv.iter().take(40).cloned());
        first.extend(cvc.iter().take(40).cloned());
        shuffle(&mut first, &mut rng);
        let mut rest: Vec<String> = cv.iter().rev().take(32).cloned().collect();
        rest.extend(ccv.iter().rev().take(48).cloned());
        rest.extend(cvc.iter().rev().take(70).cloned());
        shuffle(&mut rest, &mut rng);

        let a = first.len() as u64;
        let b = rest.len() as u64;
        let mut classes = [SyllableClass { start: 0, size: 0, mul: 1, add: 0 }; 4];
        let mut start = 0u64;
        let mut size = a;
        for class in &mut classes {
            let mul = coprime_multiplier(&mut rng, size);
            let add = rng.below(size);
            *class = SyllableClass { start, size, mul, add };
            start += size;
            size *= b;
        }
        debug_assert!(start >= VOCAB_SIZE as u64);
        Vocabulary {
            first,
            rest,
            classes,
            sampler: ZipfSampler::new(VOCAB_SIZE, WORD_EXPONENT),
            ln_harmonic: harmonic(VOCAB_SIZE, WORD_EXPONENT).ln(),
        }
    }

    fn sample(&self, rng: &mut Rng) -> u64 {
        self.sampler.sample(rng) as u64
    }

    /// Natural log of the probability of word rank `r`.
    fn log_p(&self, r: u64) -> f64 {
        -WORD_EXPONENT * ((r + 1) as f64).ln() - self.ln_harmonic
    }

    /// Appends the word with rank `r` to `buf`.
    fn push_word(&self, r: u64, buf: &mut String) {
        if r % DIGIT_PERIOD == DIGIT_OFFSET {
            let idx = r / DIGIT_PERIOD;
            match COMMON_NUMBERS.get(idx as usize) {
                Some(s) => buf.push_str(s),
                // 5–8 digits, injective for idx < 9_990_000.
                None => push_u64(buf, 10_000 + (idx * 7_919) % 9_990_000),
            }
        } else if r % DIACRITIC_PERIOD == DIACRITIC_OFFSET {
            let idx = r / DIACRITIC_PERIOD;
            if let Some(s) = DIACRITIC_WORDS.get(idx as usize) {
                buf.push_str(s);
                return;
            }
            let start = buf.len();
            self.push_pseudo(r, buf);
            let h = fmix64(r ^ 0xACCE_17ED);
            let is_vowel = |b: &u8| b"aeiou".contains(b);
            let count = buf.as_bytes()[start..].iter().filter(|b| is_vowel(b)).count();
            if count == 0 {
                return;
            }
            let nth = (h % count as u64) as usize;
            let Some((pos, &base)) =
                buf.as_bytes()[start..].iter().enumerate().filter(|(_, b)| is_vowel(b)).nth(nth)
            else {
                return;
            };
            let base = char::from(base);
            let variants = ACCENTS.iter().find(|(b, _)| *b == base).map_or(&[][..], |(_, v)| *v);
            if variants.is_empty() {
                return;
            }
            let accented = variants[((h >> 32) % variants.len() as u64) as usize];
            let at = start + pos;
            buf.replace_range(at..at + 1, accented.encode_utf8(&mut [0u8; 4]));
            if DIACRITIC_WORDS.contains(&&buf[start..]) {
                // Keep the map injective: fall back to the plain pseudo-word.
                buf.truncate(start);
                self.push_pseudo(r, buf);
            }
        } else {
            self.push_pseudo(r, buf);
        }
    }

    /// Appends the pseudo-word for rank `r` (an injective syllable encoding).
    fn push_pseudo(&self, r: u64, buf: &mut String) {
        let mut ci = 0;
        while ci < 3 && r >= self.classes[ci + 1].start {
            ci += 1;
        }
        let class = self.classes[ci];
        let i = r - class.start;
        // i, mul < size <= 2^29, so the product fits in u64.
        let mut x = (i * class.mul + class.add) % class.size;
        let a = self.first.len() as u64;
        let b = self.rest.len() as u64;
        buf.push_str(&self.first[(x % a) as usize]);
        x /= a;
        for _ in 0..ci {
            buf.push_str(&self.rest[(x % b) as usize]);
            x /= b;
        }
    }
}

fn push_u64(buf: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        buf.push(char::from(d));
    }
}

// ---------------------------------------------------------------------------
// Distinct queries
// ---------------------------------------------------------------------------

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
    /// apply to the ranks ([`zipf_weight`], [`ZipfSampler`]). It does not
    /// change the query texts.
    pub zipf_exponent: f64,
}

impl SynthConfig {
    /// A config with the AOL-like popularity exponent 1.0.
    pub fn new(seed: u64, distinct_queries: usize) -> Self {
        SynthConfig { seed, distinct_queries, zipf_exponent: 1.0 }
    }
}

/// Draws a word count (1..=8) with probability proportional to `weights`.
fn draw_word_count(rng: &mut Rng, weights: &[f64; 8], total: f64) -> usize {
    let u = rng.next_f64() * total;
    let mut acc = 0.0;
    let mut last = 1;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            acc += w;
            last = i + 1;
            if u < acc {
                return i + 1;
            }
        }
    }
    last
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
    let mut rng = Rng::new(derive_seed(cfg.seed, &[0x0DE5_1CE5]));
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
        let mut open = [0.0f64; 8];
        for (i, w) in open.iter_mut().enumerate() {
            if quotas_relaxed || filled[i] < quotas[i] {
                *w = WORD_COUNT_SHARES[i];
            }
        }
        let open_total: f64 = open.iter().sum();
        let parents = texts.len();
        batch.clear();
        batch_text.clear();
        // Plan the batch first (word count, extended parent) and touch the
        // parents, so that their cache misses overlap instead of serialising.
        plan.clear();
        let mut touched = 0usize;
        for _ in 0..BATCH {
            let k = draw_word_count(&mut rng, &open, open_total);
            let mut parent = None;
            if k >= 2 && parents > 0 && rng.chance(EXTEND_SHARE) {
                // Parent index j has density ~ 1/(j + c) over the acceptance
                // order (early = common); the offset c keeps the very first
                // queries from becoming the prefix of a large share of all.
                let c = PARENT_OFFSET;
                let span = ((parents as f64 + c) / c).ln();
                let x = c * (span * rng.next_f64()).exp() - c;
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
            // Irwin–Hall noise (sum of 4 uniforms, unit variance, bounded):
            // a heavy-tailed noise would let rare queries overtake the head.
            let sum4 = rng.next_f64() + rng.next_f64() + rng.next_f64() + rng.next_f64();
            let noise = (sum4 - 2.0) * 3f64.sqrt() * POPULARITY_NOISE;
            let end = batch_text.len();
            batch.push(Candidate {
                words: k as u8,
                start,
                end,
                hash: hash_bytes(&batch_text.as_bytes()[start..end]),
                word_score: score as f32,
                key: (ln_shares[k - 1] + score + noise) as f32,
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

// ---------------------------------------------------------------------------
// Raw logs
// ---------------------------------------------------------------------------

/// Configuration of [`write_log`].
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Seed: the same config always yields the same log.
    pub seed: u64,
    /// Number of distinct queries events are drawn from (at least 1 is used).
    pub distinct_queries: usize,
    /// Start of hour 0 (Unix seconds, UTC).
    pub start_unix: i64,
    /// Length of the log in hours.
    pub hours: u32,
    /// Mean number of lines per hour (the diurnal curve varies it).
    pub events_per_hour: u64,
    /// Number of distinct users (at least 1 is used).
    pub users: u64,
    /// Share of malformed lines.
    pub malformed_share: f64,
}

impl LogConfig {
    /// Defaults: 50 000 distinct queries, starting 2026-01-05 00:00 UTC,
    /// 72 hours, 2 000 events/hour, 5 000 users, 0.5 % malformed lines.
    pub fn new(seed: u64) -> Self {
        LogConfig {
            seed,
            distinct_queries: 50_000,
            start_unix: 1_767_571_200, // 2026-01-05 00:00:00 UTC
            hours: 72,
            events_per_hour: 2_000,
            users: 5_000,
            malformed_share: 0.005,
        }
    }
}

/// Relative traffic by hour of day (UTC), evening peak, night trough.
const DIURNAL: [f64; 24] = [
    0.75, 0.55, 0.40, 0.30, 0.25, 0.25, 0.30, 0.45, 0.65, 0.85, 1.00, 1.10, 1.15, 1.20, 1.20, 1.20,
    1.20, 1.25, 1.30, 1.40, 1.45, 1.45, 1.30, 1.00,
];
/// Popularity exponent of queries in the log.
const LOG_QUERY_EXPONENT: f64 = 1.0;
/// Popularity exponent of users (some users are much more active).
const LOG_USER_EXPONENT: f64 = 0.8;
/// Share of events in which a user repeats one of their favourite queries.
const REPEAT_SHARE: f64 = 0.12;
/// Favourite queries per user.
const FAVORITES: u64 = 3;
/// Share of events that are written as a surface variant of the query.
const VARIANT_SHARE: f64 = 0.08;

const EMAIL_NAMES: [&str; 8] = ["john", "mary", "smith", "jones", "mike", "anna", "lee", "kim"];
const EMAIL_DOMAINS: [&str; 5] =
    ["gmail.com", "yahoo.com", "aol.com", "hotmail.com", "example.org"];

#[derive(Debug, Clone)]
struct Trend {
    rank: usize,
    peak_hour: f64,
    rise: f64,
    fall: f64,
    peak_share: f64,
}

impl Trend {
    fn share_at(&self, hour: u64) -> f64 {
        let t = hour as f64 + 0.5 - self.peak_hour;
        let sigma = if t < 0.0 { self.rise } else { self.fall };
        self.peak_share * (-0.5 * (t / sigma) * (t / sigma)).exp()
    }
}

#[derive(Debug)]
struct LogModel<'a> {
    cfg: &'a LogConfig,
    queries: Vec<String>,
    query_zipf: ZipfSampler,
    user_zipf: ZipfSampler,
    users: u64,
    user_mul: u64,
    user_add: u64,
    trends: Vec<Trend>,
}

impl<'a> LogModel<'a> {
    fn new(cfg: &'a LogConfig) -> Self {
        let queries = distinct_queries(&SynthConfig::new(cfg.seed, cfg.distinct_queries.max(1)));
        let n = queries.len();
        let users = cfg.users.max(1);
        let mut rng = Rng::new(derive_seed(cfg.seed, &[0x7E4D]));
        let user_mul = coprime_multiplier(&mut rng, users);
        let user_add = rng.below(users);
        let trend_count = 1 + u64::from(cfg.hours) / 24;
        let trends = (0..trend_count)
            .map(|i| {
                let mut r = Rng::new(derive_seed(cfg.seed, &[0x7E4D, i]));
                let tail = n / 20;
                Trend {
                    rank: tail + r.below((n - tail) as u64) as usize,
                    peak_hour: r.next_f64() * f64::from(cfg.hours.max(1)),
                    rise: 6.0 + 8.0 * r.next_f64(),
                    fall: 18.0 + 18.0 * r.next_f64(),
                    peak_share: 0.01 + 0.02 * r.next_f64(),
                }
            })
            .collect();
        LogModel {
            cfg,
            query_zipf: ZipfSampler::new(n, LOG_QUERY_EXPONENT),
            user_zipf: ZipfSampler::new(
                usize::try_from(users).unwrap_or(usize::MAX),
                LOG_USER_EXPONENT,
            ),
            queries,
            users,
            user_mul,
            user_add,
            trends,
        }
    }

    fn sample_user(&self, rng: &mut Rng) -> u64 {
        let r = self.user_zipf.sample(rng) as u64;
        ((u128::from(r) * u128::from(self.user_mul) + u128::from(self.user_add))
            % u128::from(self.users)) as u64
    }

    fn favorite(&self, user: u64, j: u64) -> usize {
        let mut r = Rng::new(derive_seed(self.cfg.seed, &[0xFA70, user, j]));
        self.query_zipf.sample(&mut r)
    }

    /// Appends the lines of hour `hour`; returns (lines, malformed lines).
    fn write_hour(&self, hour: u64, buf: &mut Vec<u8>) -> (u64, u64) {
        let cfg = self.cfg;
        let mut rng = Rng::new(derive_seed(cfg.seed, &[0x4047, hour]));
        let hour_start = cfg.start_unix + 3600 * hour as i64;
        let hour_of_day = (hour_start.rem_euclid(86_400) / 3600) as usize;
        let mean = DIURNAL.iter().sum::<f64>() / DIURNAL.len() as f64;
        let jitter = 0.94 + 0.12 * rng.next_f64();
        let events =
            (cfg.events_per_hour as f64 * DIURNAL[hour_of_day] / mean * jitter).round() as u64;
        let trend_shares: Vec<f64> = self.trends.iter().map(|t| t.share_at(hour)).collect();
        let trend_total: f64 = trend_shares.iter().sum();

        let mut query = String::with_capacity(128);
        let mut malformed = 0u64;
        for _ in 0..events {
            let ts = hour_start + rng.below(3600) as i64;
            if rng.chance(cfg.malformed_share) {
                self.write_malformed(&mut rng, ts, buf);
                malformed += 1;
                continue;
            }
            let u = rng.next_f64();
            let user;
            let rank;
            if u < trend_total {
                let mut acc = 0.0;
                let mut pick = self.trends.len() - 1;
                for (i, s) in trend_shares.iter().enumerate() {
                    acc += s;
                    if u < acc {
                        pick = i;
                        break;
                    }
                }
                rank = self.trends[pick].rank;
                user = self.sample_user(&mut rng);
            } else if u < trend_total + REPEAT_SHARE {
                user = self.sample_user(&mut rng);
                rank = self.favorite(user, rng.below(FAVORITES));
            } else {
                rank = self.query_zipf.sample(&mut rng);
                user = self.sample_user(&mut rng);
            }
            query.clear();
            query.push_str(&self.queries[rank]);
            if rng.chance(VARIANT_SHARE) {
                surface_variant(&mut query, &mut rng);
            }
            push_timestamp(buf, ts);
            buf.push(b'\t');
            buf.extend_from_slice(query.as_bytes());
            buf.push(b'\t');
            push_user(buf, user);
            buf.push(b'\n');
        }
        (events, malformed)
    }

    fn write_malformed(&self, rng: &mut Rng, ts: i64, buf: &mut Vec<u8>) {
        let query = &self.queries[self.query_zipf.sample(rng)];
        let user = self.sample_user(rng);
        match rng.below(5) {
            0 => {
                // No tab at all.
                push_timestamp(buf, ts);
                buf.push(b' ');
                buf.extend_from_slice(query.as_bytes());
                buf.push(b' ');
                push_user(buf, user);
            }
            1 => {
                // Bad timestamp.
                let mut good = Vec::with_capacity(19);
                push_timestamp(&mut good, ts);
                match rng.below(6) {
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
                let mut cut = rng.below(bytes.len() as u64 + 1) as usize;
                while !query.is_char_boundary(cut) {
                    cut -= 1;
                }
                buf.extend_from_slice(&bytes[..cut]);
                let bad: &[u8] = match rng.below(3) {
                    0 => b"\xFF",
                    1 => b"\xC3",
                    _ => b"caf\xE9",
                };
                buf.extend_from_slice(bad);
                buf.extend_from_slice(&bytes[cut..]);
                buf.push(b'\t');
                push_user(buf, user);
            }
            3 => {
                // An e-mail address as the query.
                push_timestamp(buf, ts);
                buf.push(b'\t');
                let a = EMAIL_NAMES[rng.below(EMAIL_NAMES.len() as u64) as usize];
                let b = EMAIL_NAMES[rng.below(EMAIL_NAMES.len() as u64) as usize];
                let d = EMAIL_DOMAINS[rng.below(EMAIL_DOMAINS.len() as u64) as usize];
                let mut s = format!("{a}.{b}");
                if rng.chance(0.5) {
                    push_u64(&mut s, rng.below(100));
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
                buf.push(b'2' + rng.below(8) as u8);
                for _ in 0..9 {
                    buf.push(b'0' + rng.below(10) as u8);
                }
                buf.push(b'\t');
                push_user(buf, user);
            }
        }
        buf.push(b'\n');
    }
}

/// Rewrites `query` as a surface variant: capitalisation, doubled spaces or
/// a dropped diacritic.
fn surface_variant(query: &mut String, rng: &mut Rng) {
    let kind = rng.below(3);
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
    match rng.below(3) {
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

fn push_user(buf: &mut Vec<u8>, user: u64) {
    let mut s = String::with_capacity(12);
    s.push('u');
    push_u64(&mut s, user);
    buf.extend_from_slice(s.as_bytes());
}

fn write_log_counted<W: Write>(
    cfg: &LogConfig,
    first_hour_offset: u32,
    count: u32,
    out: &mut W,
) -> io::Result<(u64, u64)> {
    let first = u64::from(first_hour_offset);
    let end = (first + u64::from(count)).min(u64::from(cfg.hours));
    if first >= end {
        return Ok((0, 0));
    }
    let model = LogModel::new(cfg);
    let mut buf = Vec::with_capacity(64 * cfg.events_per_hour.min(1 << 20) as usize);
    let mut lines = 0;
    let mut malformed = 0;
    for hour in first..end {
        buf.clear();
        let (l, m) = model.write_hour(hour, &mut buf);
        lines += l;
        malformed += m;
        out.write_all(&buf)?;
    }
    Ok((lines, malformed))
}

/// Writes the raw log lines (`timestamp<TAB>query<TAB>user\n`) for hours
/// `[first_hour_offset, first_hour_offset + count)` of the config, clipped to
/// `cfg.hours`. Each hour has its own PRNG stream seeded from
/// `(seed, hour)`, so generating hour by hour gives byte-identical output to
/// one big call. Events within an hour are not sorted by time. Returns the
/// number of lines written (including malformed ones).
///
/// Every call regenerates the distinct queries (`cfg.distinct_queries`), so
/// calls cost at least [`distinct_queries`] for that size.
pub fn write_log<W: Write>(
    cfg: &LogConfig,
    first_hour_offset: u32,
    count: u32,
    out: &mut W,
) -> io::Result<u64> {
    write_log_counted(cfg, first_hour_offset, count, out).map(|(lines, _)| lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logline::{format_timestamp, hour_of, parse_timestamp};
    use std::collections::{HashMap, HashSet};

    fn queries(seed: u64, n: usize) -> Vec<String> {
        distinct_queries(&SynthConfig::new(seed, n))
    }

    #[test]
    fn rng_is_deterministic_and_below_is_in_range() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut r = Rng::new(7);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
            counts[r.below(10) as usize] += 1;
            assert!(r.below(3) < 3);
            assert_eq!(r.below(1), 0);
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
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
    fn quotas_and_fingerprints() {
        for n in [0usize, 1, 7, 10, 999, 10_000, 1_234_567] {
            let q = word_count_quotas(n);
            assert_eq!(q.iter().sum::<usize>(), n);
            for (i, &share) in WORD_COUNT_SHARES.iter().enumerate() {
                assert!((q[i] as f64 - share * n as f64).abs() <= 1.0);
            }
        }
        let mut set = FingerprintSet::with_capacity(1_000);
        let mut rng = Rng::new(5);
        let hashes: Vec<u64> = (0..1_000).map(|_| rng.next_u64()).collect();
        assert!(hashes.iter().all(|&h| set.insert(h)));
        assert!(hashes.iter().all(|&h| !set.insert(h)));
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
    fn vocabulary_is_injective_and_well_formed() {
        let v = Vocabulary::new(9);
        let mut seen = HashSet::new();
        let mut buf = String::new();
        let mut rng = Rng::new(1);
        let ranks = (0..200_000u64).chain((0..100_000).map(|_| rng.below(VOCAB_SIZE as u64)));
        let mut digits = 0;
        let mut accented = 0;
        for r in ranks {
            buf.clear();
            v.push_word(r, &mut buf);
            let len = buf.chars().count();
            if buf.bytes().all(|b| b.is_ascii_digit()) {
                digits += 1;
                assert!((1..=8).contains(&len), "{buf}");
            } else {
                assert!((2..=12).contains(&len), "{buf} (rank {r})");
                assert!(buf.chars().all(char::is_alphabetic), "{buf}");
                if !buf.is_ascii() {
                    accented += 1;
                }
            }
            // Re-inserting a rank from the random tail is fine; texts must match ranks.
            seen.insert((buf.clone(), r));
        }
        let mut by_text: HashMap<&str, u64> = HashMap::new();
        for (t, r) in &seen {
            if let Some(prev) = by_text.insert(t, *r) {
                assert_eq!(prev, *r, "two ranks give {t}");
            }
        }
        assert!(digits > 5_000 && accented > 1_000, "{digits} {accented}");
        let uniq: HashSet<&str> = COMMON_NUMBERS.iter().copied().collect();
        assert_eq!(uniq.len(), COMMON_NUMBERS.len());
        assert!(DIACRITIC_WORDS.iter().all(|w| !w.is_ascii()));
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

    #[test]
    fn zipf_sampler_follows_the_law() {
        let n = 1_000;
        let z = ZipfSampler::new(n, 1.0);
        let mut rng = Rng::new(11);
        let draws = 400_000;
        let mut counts = vec![0u32; n];
        for _ in 0..draws {
            counts[z.sample(&mut rng)] += 1;
        }
        let p0 = f64::from(counts[0]) / f64::from(draws);
        let expected = zipf_weight(0, n, 1.0);
        assert!((p0 / expected - 1.0).abs() < 0.05, "{p0} vs {expected}");
        let ratio = f64::from(counts[0]) / f64::from(counts[100].max(1));
        assert!((60.0..160.0).contains(&ratio), "rank0/rank100 = {ratio}");
        let half = f64::from(counts[1]) / f64::from(counts[0]);
        assert!((half - 0.5).abs() < 0.05, "{half}");
        assert!(counts[..10].iter().sum::<u32>() > counts[500..].iter().sum::<u32>());

        // Other exponents and edge cases.
        let uniform = ZipfSampler::new(10, 0.0);
        let mut c = [0u32; 10];
        for _ in 0..50_000 {
            c[uniform.sample(&mut rng)] += 1;
        }
        assert!(c.iter().all(|&x| (4_000..6_000).contains(&x)), "{c:?}");
        let steep = ZipfSampler::new(1_000_000, 2.0);
        let top = (0..10_000).filter(|_| steep.sample(&mut rng) == 0).count();
        assert!((5_600..6_600).contains(&top), "{top}"); // 1/zeta(2) = 0.608
        let one = ZipfSampler::new(1, 1.0);
        assert_eq!(one.sample(&mut rng), 0);
        assert_eq!(one.len(), 1);
        let big = ZipfSampler::new(VOCAB_SIZE, 1.0);
        assert!((0..10_000).all(|_| big.sample(&mut rng) < VOCAB_SIZE));
    }

    #[test]
    fn zipf_weight_is_normalised() {
        for (n, s) in [(1usize, 1.0), (100, 1.0), (5_000, 1.0), (5_000, 0.7), (200_000, 1.2)] {
            let exact: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
            assert!((harmonic(n, s) / exact - 1.0).abs() < 1e-9, "H({n},{s})");
            let total: f64 = (0..n).map(|r| zipf_weight(r, n, s)).sum();
            assert!((total - 1.0).abs() < 1e-9, "{total}");
        }
        assert_eq!(zipf_weight(10, 10, 1.0), 0.0);
        assert!(zipf_weight(0, 100, 1.0) > 10.0 * zipf_weight(20, 100, 1.0));
    }

    #[test]
    fn timestamps_format_correctly() {
        let start = LogConfig::new(0).start_unix;
        assert_eq!(format_timestamp(start), "2026-01-05 00:00:00");
        assert_eq!(parse_timestamp("2026-01-05 00:00:00"), Some(start));
        assert_eq!(hour_of(start).map(|h| h % 24), Some(0), "the default log starts at midnight");
        assert_eq!(format_timestamp(951_868_799), "2000-02-29 23:59:59");
        assert_eq!(format_timestamp(0), "1970-01-01 00:00:00");
        for days in [-1000i64, 0, 59, 10_957, 20_458, 40_000] {
            let ts = days * 86_400 + 45_296;
            assert_eq!(parse_timestamp(&format_timestamp(ts)), Some(ts), "day {days}");
        }
    }

    /// The timestamps of the first lines of some hours: pins `write_log`'s output (across
    /// a leap day too), which must not change when the timestamp code moves.
    #[test]
    fn known_lines_keep_their_timestamps() {
        let first_timestamps = |cfg: &LogConfig, hour: u32| -> Vec<String> {
            let (bytes, _) = log_bytes(cfg, hour, 1);
            let text = String::from_utf8_lossy(&bytes).into_owned();
            text.lines().take(3).map(|l| l.chars().take(19).collect()).collect()
        };
        let cfg = small_log_config(12);
        assert_eq!(
            first_timestamps(&cfg, 0),
            ["2026-01-05 00:03:52", "2026-01-05 00:01:52", "2026-01-05 00:18:32"]
        );
        // Starts 2000-02-28 00:00:00; hours 24..48 are the leap day.
        let cfg = LogConfig { start_unix: 951_696_000, hours: 80, ..small_log_config(4) };
        assert_eq!(
            first_timestamps(&cfg, 24),
            ["2000-02-29 00:57:41", "2000-02-29 00:34:05", "2000-02-29 00:52:18"]
        );
        assert_eq!(
            first_timestamps(&cfg, 47),
            ["2000-02-29 23:32:18", "2000-02-29 23:29:57", "2000-02-29 23:16:13"]
        );
        assert_eq!(
            first_timestamps(&cfg, 48),
            ["2000-03-01 00:00:06", "2000-03-01 00:39:01", "2000-03-01 00:50:48"]
        );
    }

    /// Classifies a line: Ok((ts, query, user)) if well-formed.
    fn parse_line(line: &[u8]) -> Option<(i64, String, String)> {
        let line = std::str::from_utf8(line).ok()?;
        let parts: Vec<&str> = line.split('\t').collect();
        if parts.len() != 3 {
            return None;
        }
        // Only the exact form `write_log` writes: the ingestion parser also reads Unix
        // seconds and RFC 3339, which the generator's bad timestamps deliberately use.
        let ts = parts[0];
        if ts.len() != 19 || ts.as_bytes()[10] != b' ' {
            return None;
        }
        let ts = parse_timestamp(ts)?;
        let q = parts[1];
        if q.contains('@') || (q.len() == 10 && q.bytes().all(|b| b.is_ascii_digit())) {
            return None;
        }
        Some((ts, q.to_owned(), parts[2].to_owned()))
    }

    fn small_log_config(seed: u64) -> LogConfig {
        LogConfig {
            distinct_queries: 3_000,
            hours: 30,
            events_per_hour: 400,
            users: 300,
            ..LogConfig::new(seed)
        }
    }

    fn log_bytes(cfg: &LogConfig, first: u32, count: u32) -> (Vec<u8>, u64) {
        let mut out = Vec::new();
        let lines = write_log(cfg, first, count, &mut out).expect("write to Vec");
        (out, lines)
    }

    #[test]
    fn write_log_is_deterministic_and_splits_equal() {
        let cfg = small_log_config(12);
        let (whole, lines) = log_bytes(&cfg, 0, 10);
        assert_eq!(whole, log_bytes(&cfg, 0, 10).0);
        assert_eq!(lines, whole.iter().filter(|&&b| b == b'\n').count() as u64);
        let (a, la) = log_bytes(&cfg, 0, 5);
        let (b, lb) = log_bytes(&cfg, 5, 5);
        assert_eq!(la + lb, lines);
        assert_eq!([a, b].concat(), whole);
        // Hour by hour.
        let mut by_hour = Vec::new();
        for h in 0..10 {
            by_hour.extend(log_bytes(&cfg, h, 1).0);
        }
        assert_eq!(by_hour, whole);
        // Clipped to the configured span.
        assert_eq!(log_bytes(&cfg, 30, 5).1, 0);
        assert_eq!(log_bytes(&cfg, 28, 5).0, log_bytes(&cfg, 28, 2).0);
        assert_ne!(whole, log_bytes(&small_log_config(13), 0, 10).0);
    }

    #[test]
    fn log_lines_are_well_formed_or_deliberately_malformed() {
        let cfg = LogConfig { malformed_share: 0.02, ..small_log_config(14) };
        let (first, count) = (3u32, 24u32);
        let mut out = Vec::new();
        let (lines, malformed) = write_log_counted(&cfg, first, count, &mut out).expect("vec");
        let lo = cfg.start_unix + 3600 * i64::from(first);
        let hi = lo + 3600 * i64::from(count);
        let mut bad = 0u64;
        let mut users = HashSet::new();
        let mut per_query: HashMap<String, usize> = HashMap::new();
        let mut variants = 0;
        let body = out.strip_suffix(b"\n").unwrap_or(&out);
        for line in body.split(|&b| b == b'\n') {
            match parse_line(line) {
                None => bad += 1,
                Some((ts, q, user)) => {
                    assert_eq!(line.iter().filter(|&&b| b == b'\t').count(), 2);
                    assert!((lo..hi).contains(&ts), "{ts} not in {lo}..{hi}");
                    assert!(!q.trim().is_empty());
                    assert!(user.starts_with('u') && user[1..].parse::<u64>().is_ok());
                    users.insert(user);
                    if q != q.to_lowercase() || q.contains("  ") || q.ends_with(' ') {
                        variants += 1;
                    }
                    *per_query.entry(q).or_default() += 1;
                }
            }
        }
        assert_eq!(lines, body.split(|&b| b == b'\n').count() as u64);
        assert_eq!(bad, malformed, "classifier disagrees with generator");
        let share = malformed as f64 / lines as f64;
        assert!((0.014..0.026).contains(&share), "malformed share {share}");
        assert!(users.len() > 100);
        assert!(variants > lines / 50, "{variants} variants");
        let max = per_query.values().copied().max().unwrap_or(0);
        assert!(max > 100, "head query only {max} events");

        // Default share, default config size.
        let cfg = LogConfig::new(15);
        let mut out = Vec::new();
        let (lines, malformed) = write_log_counted(&cfg, 0, 24, &mut out).expect("vec");
        let share = malformed as f64 / lines as f64;
        assert!((0.0035..0.0065).contains(&share), "malformed share {share}");
    }

    #[test]
    fn traffic_is_diurnal() {
        let cfg = small_log_config(16);
        let night = log_bytes(&cfg, 4, 1).1; // 04:00 UTC
        let evening = log_bytes(&cfg, 20, 1).1; // 20:00 UTC
        assert!(evening > 3 * night, "evening {evening} vs night {night}");
    }

    #[test]
    fn trends_rise_and_fade() {
        let cfg =
            LogConfig { distinct_queries: 3_000, events_per_hour: 1_000, ..LogConfig::new(17) };
        let model = LogModel::new(&cfg);
        let n = model.queries.len();
        for t in &model.trends {
            let q = &model.queries[t.rank];
            let peak = (t.peak_hour as u32).min(cfg.hours - 1);
            let first = peak.saturating_sub(3);
            let (bytes, lines) = log_bytes(&cfg, first, 7);
            let needle = format!("\t{q}\t");
            let seen = bytes
                .split(|&b| b == b'\n')
                .filter(|l| String::from_utf8_lossy(l).contains(&needle))
                .count() as f64;
            let hours = u64::from(first)..u64::from(first + 7).min(u64::from(cfg.hours));
            let per_hour = lines as f64 / hours.clone().count() as f64;
            let trend: f64 = hours.map(|h| t.share_at(h) * per_hour).sum();
            let baseline = lines as f64 * zipf_weight(t.rank, n, 1.0);
            assert!(seen >= 0.5 * trend, "trend {q:?}: {seen} vs expected {trend}");
            assert!(seen > 3.0 * baseline, "trend {q:?}: {seen} vs baseline {baseline}");
            // Far from the peak the trend has faded.
            assert!(t.share_at(u64::from(peak) + 150) < 1e-3 * t.peak_share);
        }
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
