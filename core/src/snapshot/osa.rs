//! Rows of the optimal-string-alignment table along a path, for the fuzzy walk.
//!
//! Row `j` holds, for every `i`, the distance between the typed `p[..i]` and the path's first `j`
//! characters, capped at `limit + 1` (nothing beyond the limit matters). The walk needs three
//! things of a row: its minimum (to prune), its last cell (the distance of the whole of `p`), and
//! which next characters can keep a row alive (to skip siblings).
//!
//! Two layouts compute the same rows. [`Bits`] is the bit-parallel automaton of Wu and Manber
//! with Hyyrö's transposition term: for each distance `d <= limit`, one machine word whose bit
//! `i` says "`p[..i]` is within `d`" — a row is a handful of shifts and masks, whatever the typed
//! length. It needs `p` shorter than 64 characters, which every real typed text is. [`Band`] is
//! the plain table restricted to the diagonal band where a cell can be within the limit; it
//! takes any length. A property test checks both against the textbook table.

/// The row operations the fuzzy walk needs. Row 0 is the empty path.
pub(super) trait Rows {
    /// Keeps rows `0..=j`.
    fn truncate(&mut self, j: usize);
    /// Appends row `j` for the path `chars` (which ends with `c`, its `j`-th character) and
    /// returns its minimum.
    fn push(&mut self, j: usize, c: char, chars: &[char]) -> u8;
    /// The last cell of row `j`: the distance between all of `p` and the path's first `j`
    /// characters.
    fn last(&self, j: usize) -> u8;
    /// The characters that can follow the path's first `j` characters (`chars[..j]`) to a row
    /// with a cell at most `limit`, given that row `j` has no cell below `limit`: each is
    /// passed to `each` (some more than once).
    fn continuations(&self, j: usize, limit: u8, chars: &[char], each: &mut dyn FnMut(char));
}

/// Bit-parallel rows: `rows[j][d]` has bit `i` set when cell `(i, j)` is at most `d`.
#[derive(Debug)]
pub(super) struct Bits<'p> {
    p: &'p [char],
    limit: usize,
    /// Bits `0..=n`.
    full: u64,
    /// `ascii[c]`: bit `i + 1` set where `p[i] == c`.
    ascii: [u64; 128],
    /// The same for the other characters of `p`.
    other: Vec<(char, u64)>,
    rows: Vec<[u64; 3]>,
}

impl<'p> Bits<'p> {
    /// The longest typed text the words hold (bit `n` must fit).
    pub(super) const MAX_TYPED: usize = 63;

    /// The mask of `c`: bit `i + 1` set where `p[i] == c`.
    fn mask(&self, c: char) -> u64 {
        match ascii(c) {
            Some(i) => self.ascii[i],
            None => self.other.iter().find(|(o, _)| *o == c).map_or(0, |&(_, m)| m),
        }
    }

    /// Rows for typed characters `p` up to distance `limit` (at most 2), holding row 0; `None`
    /// when `p` is longer than [`Bits::MAX_TYPED`].
    pub(super) fn with(p: &'p [char], limit: u8) -> Option<Self> {
        let n = p.len();
        if n > Self::MAX_TYPED {
            return None;
        }
        let mut bits = Bits {
            p,
            limit: usize::from(limit.min(2)),
            full: u64::MAX >> (63 - n),
            ascii: [0; 128],
            other: Vec::new(),
            rows: Vec::with_capacity(64),
        };
        for (i, &c) in p.iter().enumerate() {
            let bit = 1u64 << (i + 1);
            match ascii(c) {
                Some(a) => bits.ascii[a] |= bit,
                None => match bits.other.iter_mut().find(|(o, _)| *o == c) {
                    Some((_, m)) => *m |= bit,
                    None => bits.other.push((c, bit)),
                },
            }
        }
        // Row 0: p[..i] against nothing costs i deletions.
        let mut first = [0u64; 3];
        for (d, row) in first.iter_mut().enumerate() {
            *row = (u64::MAX >> (63 - d)) & bits.full;
        }
        bits.rows.push(first);
        Some(bits)
    }
}

/// The index of `c` in [`Bits`]'s table of ASCII masks.
fn ascii(c: char) -> Option<usize> {
    c.is_ascii().then_some(c as usize)
}

impl Rows for Bits<'_> {
    fn truncate(&mut self, j: usize) {
        self.rows.truncate(j + 1);
    }

    fn push(&mut self, j: usize, c: char, chars: &[char]) -> u8 {
        let before = self.rows[j - 1];
        let m = self.mask(c);
        // A swap reads the path's previous character `a` and then `c` for p[i + 1] == a,
        // p[i] == c, from state i two rows up.
        let swap = (j >= 2).then(|| (self.rows[j - 2], (m << 1) & self.mask(chars[j - 2])));
        let mut row = [0u64; 3];
        row[0] = (before[0] << 1) & m & self.full;
        for d in 1..=self.limit {
            let up = before[d - 1];
            let mut r = ((before[d] << 1) & m) | up | (up << 1) | (row[d - 1] << 1);
            if let Some((two_up, both)) = swap {
                r |= (two_up[d - 1] << 2) & both;
            }
            row[d] = r & self.full;
        }
        self.rows.push(row);
        row[..=self.limit].iter().position(|&r| r != 0).map_or(self.limit as u8 + 1, |d| d as u8)
    }

    fn last(&self, j: usize) -> u8 {
        let n = self.p.len();
        let row = &self.rows[j];
        row[..=self.limit]
            .iter()
            .position(|&r| r >> n & 1 == 1)
            .map_or(self.limit as u8 + 1, |d| d as u8)
    }

    fn continuations(&self, j: usize, limit: u8, chars: &[char], each: &mut dyn FnMut(char)) {
        let n = self.p.len();
        let limit = usize::from(limit);
        let below_n = self.full >> 1;
        // A match from a cell at the limit.
        let mut at = self.rows[j][limit] & below_n;
        while at != 0 {
            each(self.p[at.trailing_zeros() as usize]);
            at &= at - 1;
        }
        // A swap completed from a cell below the limit one row up: p[i + 1] is the path's last
        // character, p[i] comes next.
        if limit >= 1 && j >= 1 {
            let mut at = self.rows[j - 1][limit - 1] & (self.mask(chars[j - 1]) >> 2);
            while at != 0 {
                let i = at.trailing_zeros() as usize;
                if i + 1 < n {
                    each(self.p[i]);
                }
                at &= at - 1;
            }
        }
    }
}

/// Banded rows: only cells within `limit + 1` of the diagonal can be within the limit, so a
/// row stores just that band (`2 * limit + 3` cells) whatever the typed length.
#[derive(Debug)]
pub(super) struct Band<'p> {
    p: &'p [char],
    /// Distances are capped here (one more than the limit).
    cap: u8,
    /// Cells per row: the band `i in j-cap ..= j+cap`.
    width: usize,
    rows: Vec<u8>,
}

impl<'p> Band<'p> {
    /// Rows for typed characters `p` up to distance `limit`, holding row 0.
    pub(super) fn with(p: &'p [char], limit: u8) -> Self {
        let cap = limit + 1;
        let width = 2 * usize::from(cap) + 1;
        let mut band = Band { p, cap, width, rows: vec![cap; width] };
        for i in 0..=usize::from(cap).min(p.len()) {
            let at = band.slot(0, i);
            band.rows[at] = (i as u8).min(cap);
        }
        band
    }

    /// Index of cell (i, j) in `rows`; callers keep `i` within the band of row `j`.
    fn slot(&self, j: usize, i: usize) -> usize {
        j * self.width + i + usize::from(self.cap) - j
    }

    /// Cell (i, j), capped.
    fn cell(&self, j: usize, i: usize) -> u8 {
        let cap = usize::from(self.cap);
        if i + cap < j || i > j + cap { self.cap } else { self.rows[self.slot(j, i)] }
    }
}

impl Rows for Band<'_> {
    fn truncate(&mut self, j: usize) {
        self.rows.truncate((j + 1) * self.width);
    }

    fn push(&mut self, j: usize, c: char, chars: &[char]) -> u8 {
        let cap = usize::from(self.cap);
        self.rows.extend(std::iter::repeat_n(self.cap, self.width));
        let (lo, hi) = (j.saturating_sub(cap), (j + cap).min(self.p.len()));
        let mut row_min = self.cap;
        for i in lo..=hi {
            let mut d = if i == 0 {
                j
            } else {
                let p = self.p[i - 1];
                let sub = usize::from(self.cell(j - 1, i - 1)) + usize::from(p != c);
                let del = usize::from(self.cell(j - 1, i)) + 1;
                let ins = usize::from(self.cell(j, i - 1)) + 1;
                sub.min(del).min(ins)
            };
            if i >= 2 && j >= 2 && self.p[i - 1] == chars[j - 2] && self.p[i - 2] == c {
                d = d.min(usize::from(self.cell(j - 2, i - 2)) + 1);
            }
            let d = d.min(cap) as u8;
            let at = self.slot(j, i);
            self.rows[at] = d;
            row_min = row_min.min(d);
        }
        row_min
    }

    fn last(&self, j: usize) -> u8 {
        self.cell(j, self.p.len())
    }

    fn continuations(&self, j: usize, limit: u8, chars: &[char], each: &mut dyn FnMut(char)) {
        let cap = usize::from(self.cap);
        let (lo, hi) = (j.saturating_sub(cap), (j + cap).min(self.p.len()));
        for i in (lo + 1)..=(hi + 1).min(self.p.len()) {
            if self.cell(j, i - 1) == limit {
                each(self.p[i - 1]);
            }
            let swap = i >= 2
                && j >= 1
                && self.p[i - 1] == chars[j - 1]
                && self.cell(j - 1, i - 2) < limit;
            if swap {
                each(self.p[i - 2]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The textbook table, whole: `t[j][i]` for `p[..i]` against `path[..j]`.
    fn table(p: &[char], path: &[char]) -> Vec<Vec<usize>> {
        let mut t = vec![vec![0usize; p.len() + 1]; path.len() + 1];
        for (i, cell) in t[0].iter_mut().enumerate() {
            *cell = i;
        }
        for j in 1..=path.len() {
            t[j][0] = j;
            for i in 1..=p.len() {
                let mut d = (t[j - 1][i - 1] + usize::from(p[i - 1] != path[j - 1]))
                    .min(t[j - 1][i] + 1)
                    .min(t[j][i - 1] + 1);
                if i >= 2 && j >= 2 && p[i - 1] == path[j - 2] && p[i - 2] == path[j - 1] {
                    d = d.min(t[j - 2][i - 2] + 1);
                }
                t[j][i] = d;
            }
        }
        t
    }

    fn check<R: Rows>(
        rows: &mut R,
        p: &[char],
        path: &[char],
        limit: u8,
    ) -> Result<(), TestCaseError> {
        let t = table(p, path);
        let cap = usize::from(limit) + 1;
        for j in 1..=path.len() {
            let min = rows.push(j, path[j - 1], path);
            prop_assert_eq!(
                usize::from(min),
                t[j].iter().copied().min().unwrap_or(cap).min(cap),
                "min of row {}",
                j
            );
            prop_assert_eq!(usize::from(rows.last(j)), t[j][p.len()].min(cap), "last of row {}", j);
        }
        // What can follow each row at its minimum: every character that gives a next row a
        // cell at most that minimum must be offered.
        for j in 1..path.len() {
            let min = t[j].iter().copied().min().unwrap_or(cap);
            if min == 0 || min > usize::from(limit) {
                continue;
            }
            let mut offered = Vec::new();
            rows.continuations(j, min as u8, path, &mut |c| offered.push(c));
            for &c in p.iter().chain(path) {
                let mut next = path[..j].to_vec();
                next.push(c);
                let reaches = table(p, &next)[j + 1].iter().any(|&d| d <= min);
                prop_assert!(!reaches || offered.contains(&c), "row {} misses {:?}", j, c);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn both_layouts_give_the_textbook_rows(p in "[abé中]{0,9}", path in "[abé中]{1,12}", limit in 0u8..=2) {
            let (p, path): (Vec<char>, Vec<char>) = (p.chars().collect(), path.chars().collect());
            check(&mut Bits::with(&p, limit).unwrap(), &p, &path, limit)?;
            check(&mut Band::with(&p, limit), &p, &path, limit)?;
        }

        #[test]
        fn bits_hold_the_longest_typed_text(p in "[ab]{63}", path in "[ab]{1,70}") {
            let (p, path): (Vec<char>, Vec<char>) = (p.chars().collect(), path.chars().collect());
            check(&mut Bits::with(&p, 2).unwrap(), &p, &path, 2)?;
            prop_assert!(Bits::with(&[p.as_slice(), &['a']].concat(), 2).is_none());
        }
    }
}
