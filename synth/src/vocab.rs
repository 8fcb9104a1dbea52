//! The pseudo-word vocabulary: a deterministic, injective map from word rank to word, and
//! Zipf draws of ranks.
//!
//! The syllable grammar (single-letter vowel nucleus, codas restricted to `n r l m`, no onset
//! cluster starting with a coda letter) makes every word parse uniquely, so distinct ranks
//! give distinct words. Each length class is scattered by an affine permutation, so that
//! neighbouring ranks do not give look-alike words.

use rand::RngExt;
use rand::seq::{IndexedRandom, SliceRandom};

use crate::rng::{Rng, Stream, stream};
use crate::zipf::{ZipfRank, harmonic};

/// Number of word ranks in the vocabulary.
pub(crate) const VOCAB_SIZE: usize = 1 << 26;
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
pub(crate) const COMMON_NUMBERS: [&str; 40] = [
    "2006", "2005", "10", "2007", "100", "911", "2000", "24", "50", "360", "101", "2004", "1",
    "500", "20", "365", "1000", "12", "2003", "30", "7", "3", "5", "25", "2", "4", "40", "18",
    "2008", "1999", "15", "6", "8", "200", "11", "300", "9", "13", "80", "90",
];

/// Real words with diacritics for the most frequent diacritic ranks.
pub(crate) const DIACRITIC_WORDS: [&str; 30] = [
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
pub(crate) const ACCENTS: [(char, &[char]); 5] = [
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

/// A multiplier in `[1, m)` coprime to `m` (1 if `m <= 2`): with it, `i -> (i * mul + add) % m`
/// is a permutation of `0..m`.
pub(crate) fn coprime_multiplier(rng: &mut Rng, m: u64) -> u64 {
    if m <= 2 {
        return 1;
    }
    loop {
        let c = rng.random_range(m / 3..m);
        if c > 0 && gcd(c, m) == 1 {
            return c;
        }
    }
}

/// The deterministic map from word rank to word text, plus the word sampler.
#[derive(Debug, Clone)]
pub(crate) struct Vocabulary {
    seed: u64,
    first: Vec<String>,
    rest: Vec<String>,
    classes: [SyllableClass; 4],
    sampler: ZipfRank,
    ln_harmonic: f64,
}

impl Vocabulary {
    /// The vocabulary of `seed`: which syllables exist and how ranks map to words.
    pub(crate) fn new(seed: u64) -> Self {
        let mut rng = stream(seed, Stream::Vocabulary, 0, 0);
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
            list.shuffle(&mut rng);
        }
        // First syllable may start with a vowel; later ones always have an onset.
        // The mix of 2- and 3-letter syllables sets the mean word length.
        let mut first: Vec<String> = vc.iter().take(10).cloned().collect();
        first.extend(cv.iter().take(30).cloned());
        first.extend(ccv.iter().take(40).cloned());
        first.extend(cvc.iter().take(40).cloned());
        first.shuffle(&mut rng);
        let mut rest: Vec<String> = cv.iter().rev().take(32).cloned().collect();
        rest.extend(ccv.iter().rev().take(48).cloned());
        rest.extend(cvc.iter().rev().take(70).cloned());
        rest.shuffle(&mut rng);

        let a = first.len() as u64;
        let b = rest.len() as u64;
        let mut classes = [SyllableClass { start: 0, size: 0, mul: 1, add: 0 }; 4];
        let mut start = 0u64;
        let mut size = a;
        for class in &mut classes {
            let mul = coprime_multiplier(&mut rng, size);
            let add = rng.random_range(0..size);
            *class = SyllableClass { start, size, mul, add };
            start += size;
            size *= b;
        }
        debug_assert!(start >= VOCAB_SIZE as u64);
        Vocabulary {
            seed,
            first,
            rest,
            classes,
            sampler: ZipfRank::new(VOCAB_SIZE, WORD_EXPONENT)
                .expect("the vocabulary's Zipf law has constant, valid parameters"),
            ln_harmonic: harmonic(VOCAB_SIZE, WORD_EXPONENT).ln(),
        }
    }

    /// Draws a word rank.
    pub(crate) fn sample(&self, rng: &mut Rng) -> u64 {
        rng.sample(self.sampler) as u64
    }

    /// Natural log of the probability of word rank `r`.
    pub(crate) fn log_p(&self, r: u64) -> f64 {
        -WORD_EXPONENT * ((r + 1) as f64).ln() - self.ln_harmonic
    }

    /// Appends the word with rank `r` to `buf`.
    pub(crate) fn push_word(&self, r: u64, buf: &mut String) {
        if r % DIGIT_PERIOD == DIGIT_OFFSET {
            let idx = r / DIGIT_PERIOD;
            match COMMON_NUMBERS.get(idx as usize) {
                Some(s) => buf.push_str(s),
                // 5–7 digits, injective for idx < 9_990_000.
                None => push_u64(buf, 10_000 + (idx * 7_919) % 9_990_000),
            }
        } else if r % DIACRITIC_PERIOD == DIACRITIC_OFFSET {
            match DIACRITIC_WORDS.get((r / DIACRITIC_PERIOD) as usize) {
                Some(s) => buf.push_str(s),
                None => self.push_accented(r, buf),
            }
        } else {
            self.push_pseudo(r, buf);
        }
    }

    /// Appends the pseudo-word of rank `r` with one vowel accented. Which vowel and which
    /// accent come from the rank's own stream, so the word is a function of the rank alone.
    fn push_accented(&self, r: u64, buf: &mut String) {
        let start = buf.len();
        self.push_pseudo(r, buf);
        let is_vowel = |b: &u8| b"aeiou".contains(b);
        let count = buf.as_bytes()[start..].iter().filter(|b| is_vowel(b)).count();
        if count == 0 {
            return;
        }
        let mut rng = stream(self.seed, Stream::Accent, r, 0);
        let nth = rng.random_range(0..count);
        let Some((pos, &base)) =
            buf.as_bytes()[start..].iter().enumerate().filter(|(_, b)| is_vowel(b)).nth(nth)
        else {
            return;
        };
        let base = char::from(base);
        let variants = ACCENTS.iter().find(|(b, _)| *b == base).map_or(&[][..], |(_, v)| *v);
        let Some(accented) = variants.choose(&mut rng) else {
            return;
        };
        let at = start + pos;
        buf.replace_range(at..at + 1, accented.encode_utf8(&mut [0u8; 4]));
        if DIACRITIC_WORDS.contains(&&buf[start..]) {
            // Keep the map injective: fall back to the plain pseudo-word.
            buf.truncate(start);
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

/// Appends the decimal digits of `n` (no allocation: this runs per generated word).
pub(crate) fn push_u64(buf: &mut String, mut n: u64) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng;
    use std::collections::{HashMap, HashSet};

    #[test]
    fn vocabulary_is_injective_and_well_formed() {
        let v = Vocabulary::new(9);
        let mut seen = HashSet::new();
        let mut buf = String::new();
        let mut rng = rng(1);
        let ranks =
            (0..200_000u64).chain((0..100_000).map(|_| rng.random_range(0..VOCAB_SIZE as u64)));
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
    fn words_are_a_function_of_seed_and_rank() {
        let word = |v: &Vocabulary, r: u64| {
            let mut s = String::new();
            v.push_word(r, &mut s);
            s
        };
        let (a, b) = (Vocabulary::new(3), Vocabulary::new(3));
        // Rank 29 + 211 * 40 is an accented pseudo-word, the other two plain ones.
        for r in [0, 12, 29 + 211 * 40] {
            assert_eq!(word(&a, r), word(&b, r));
        }
        assert!(!word(&a, 29 + 211 * 40).is_ascii());
        let head = |v: &Vocabulary| (0..20).map(|r| word(v, r)).collect::<Vec<_>>();
        assert_ne!(head(&a), head(&Vocabulary::new(4)));
    }
}
