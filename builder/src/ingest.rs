//! Reading raw logs in parallel into per-key records.
//!
//! One thread reads and decompresses each input in chunks of whole lines; worker threads (one per
//! core) parse, normalize, filter and count their chunks into private hash maps. Each worker then
//! sorts its keys, and the sorted runs are merged in key order, equal keys folded in worker order
//! (builds are reproducible). Memory therefore grows with the number of distinct keys in the new
//! input (times the forms and hours each was searched in), not with its size, and nothing is shared
//! on the hot path. Merging sorted runs rather than hash maps keeps the end linear: at 10M distinct
//! keys, inserting one worker's map into another's (and sorting the result afterwards, on one core)
//! took longer than counting.
//!
//! Bad lines never stop a build: every skipped line is counted by reason, with a few examples
//! (file:line) for the summary. Examples of privacy rejections never show the query text. A
//! file that cannot be read to its end does stop it ([`crate::input::InputError`]): it may be
//! one still being written, and counting part of it would move the watermark past the rest.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use typeahead_core::{bytesort, normalize};

use crate::ema::Decay;
use crate::input::{self, Chunk, ChunkReader, InputError};
use crate::logline::{self, Hour};
use crate::privacy::{Privacy, Reason};
use crate::record::KeyRecord;

/// New counts by key.
pub type Tally = FxHashMap<String, KeyRecord>;

/// How many examples of each kind of skipped line the summary shows.
const EXAMPLES_PER_REASON: usize = 3;

/// Bytes per chunk handed to a worker: large enough to amortize channel traffic.
const CHUNK_BYTES: usize = 1 << 20;

/// What to read and how.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// Lines for this hour or earlier are late and skipped (the state's watermark).
    pub watermark: Option<Hour>,
    /// Lines of this hour or later are not complete yet: skipped (counted), for a later build.
    pub cutoff: Option<Hour>,
    /// The decay law used to combine counts from different hours.
    pub decay: Decay,
    /// `Some(hour)`: the inputs are pre-aggregated `query<TAB>count` lines for that hour.
    pub counts_hour: Option<Hour>,
    /// Worker threads.
    pub threads: usize,
}

/// A skipped line, for the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// Input file.
    pub file: PathBuf,
    /// 1-based line number.
    pub line: u64,
    /// The field that was wrong, when it cannot hold query text (a timestamp). Query text
    /// never reaches the summary: it is printed and often kept in CI or cron logs.
    pub excerpt: Option<String>,
}

/// Counters of one ingestion.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineStats {
    /// Lines read.
    pub lines: u64,
    /// Bytes read (decompressed).
    pub bytes: u64,
    /// Lines counted into the tally.
    pub counted: u64,
    /// Lines for hours at or before the watermark.
    pub late: u64,
    /// Lines for hours not complete yet (at or after the cutoff), left for a later build.
    pub incomplete: u64,
    /// Malformed or rejected lines by reason name.
    pub bad: BTreeMap<&'static str, u64>,
    /// Lines withheld by the privacy rules, by reason name.
    pub privacy: BTreeMap<&'static str, u64>,
    /// A few examples per reason.
    pub examples: BTreeMap<&'static str, Vec<Example>>,
    /// Distinct hours of the lines that were not late (the new watermark is the last).
    pub hours: std::collections::BTreeSet<Hour>,
}

/// What the summary may show of a line's timestamp field: a date-shaped field as it is, a
/// number only as its count of digits (seconds against milliseconds is what there is to see,
/// and a long number may be a card or phone number in a file with its columns swapped or
/// without `--hour`), anything else nothing: it may be query text.
fn timestamp_excerpt(line: &[u8]) -> Option<String> {
    let field = line.split(|&b| b == b'\t').next().unwrap_or(line);
    if field.len() > 40 {
        return None;
    }
    let digits = |b: &[u8]| !b.is_empty() && b.iter().all(u8::is_ascii_digit);
    let date_shaped = field.len() >= 10
        && digits(&field[..4])
        && field[4] == b'-'
        && digits(&field[5..7])
        && field[7] == b'-'
        && digits(&field[8..10])
        && time_shaped(&field[10..]);
    if date_shaped {
        return Some(String::from_utf8_lossy(field).into_owned());
    }
    let whole = field.split(|&b| b == b'.').next().unwrap_or(field);
    let fraction = field.get(whole.len() + 1..).unwrap_or_default();
    let number = digits(whole) && (whole.len() == field.len() || digits(fraction));
    number.then(|| format!("a number of {} digits", whole.len()))
}

/// Whether what follows a date is nothing or a time of day as ISO 8601 / RFC 3339 and SQL write
/// it: `( |T)hh:mm[:ss[.fraction]][Z|(+|-)hh[[:]mm]]`. Anything looser would let a card number
/// after a date ("2024-01-01 4111 1111 1111 1111") through as "date-shaped".
fn time_shaped(rest: &[u8]) -> bool {
    let Some((&sep, rest)) = rest.split_first() else { return true };
    let two = |b: &[u8]| b.len() >= 2 && b[..2].iter().all(u8::is_ascii_digit);
    if !b" Tt".contains(&sep) || !two(rest) || rest.get(2) != Some(&b':') || !two(&rest[3..]) {
        return false;
    }
    let mut rest = &rest[5..];
    if rest.first() == Some(&b':') && two(&rest[1..]) {
        rest = &rest[3..];
        if rest.first() == Some(&b'.') {
            let n = rest[1..].iter().take_while(|b| b.is_ascii_digit()).count();
            if !(1..=9).contains(&n) {
                return false;
            }
            rest = &rest[1 + n..];
        }
    }
    match rest {
        [] | [b'Z' | b'z'] => true,
        [b'+' | b'-', offset @ ..] => {
            matches!(offset.len(), 2 | 4 | 5)
                && two(offset)
                && match &offset[2..] {
                    [] => true,
                    [b':', m @ ..] | m => m.len() == 2 && two(m),
                }
        }
        _ => false,
    }
}

impl LineStats {
    fn skip(&mut self, reason: &'static str, file: &Path, line: u64, excerpt: Option<String>) {
        *self.bad.entry(reason).or_default() += 1;
        self.example(reason, file, line, excerpt);
    }

    fn withhold(&mut self, reason: Reason, file: &Path, line: u64) {
        *self.privacy.entry(reason.as_str()).or_default() += 1;
        self.example(reason.as_str(), file, line, None);
    }

    fn example(&mut self, reason: &'static str, file: &Path, line: u64, excerpt: Option<String>) {
        let list = self.examples.entry(reason).or_default();
        if list.len() < EXAMPLES_PER_REASON {
            list.push(Example { file: file.to_path_buf(), line, excerpt });
        }
    }

    fn merge(&mut self, other: LineStats) {
        self.lines += other.lines;
        self.bytes += other.bytes;
        self.counted += other.counted;
        self.late += other.late;
        self.incomplete += other.incomplete;
        for (k, v) in other.bad {
            *self.bad.entry(k).or_default() += v;
        }
        for (k, v) in other.privacy {
            *self.privacy.entry(k).or_default() += v;
        }
        for (k, list) in other.examples {
            let mine = self.examples.entry(k).or_default();
            mine.extend(list);
            mine.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
            mine.truncate(EXAMPLES_PER_REASON);
        }
        self.hours.extend(other.hours);
    }

    /// Total malformed or rejected lines.
    pub fn bad_total(&self) -> u64 {
        self.bad.values().sum()
    }

    /// Total lines withheld for privacy.
    pub fn privacy_total(&self) -> u64 {
        self.privacy.values().sum()
    }
}

/// A chunk of one file, tagged with the file it came from.
struct Work {
    file: Arc<PathBuf>,
    chunk: Chunk,
}

/// Reads every file and counts its lines: one record per key, in key order.
///
/// Each worker counts exactly per key, form and hour ([`KeyRecord::count`]); the workers'
/// records of one key are combined (exact sums again) and then settled, each form's hours
/// folded in ascending order ([`KeyRecord::settle`]). So a score depends on the searches of
/// each form and hour only: not on the order of the lines, nor on how many workers counted them.
pub fn ingest(files: &[PathBuf], opts: &IngestOptions) -> Result<(Sorted, LineStats), InputError> {
    let threads = opts.threads.max(1);
    let privacy = Privacy::new();
    std::thread::scope(|scope| {
        let (senders, workers): (Vec<_>, Vec<_>) = (0..threads)
            .map(|_| {
                let (tx, rx) = sync_channel::<Work>(2);
                let privacy = &privacy;
                (tx, scope.spawn(move || Worker::new(opts, privacy).run(&rx)))
            })
            .unzip();
        let mut next = 0usize;
        let read = read_all(files, |work| {
            let sent = senders[next % threads].send(work).is_ok();
            next += 1;
            sent
        });
        drop(senders);
        let mut runs = Vec::with_capacity(threads);
        let mut stats = LineStats::default();
        for worker in workers {
            let (run, s) = worker.join().expect("ingest worker panicked");
            runs.push(run);
            stats.merge(s);
        }
        read.map(|()| {
            let mut records = merge_runs(runs, opts.decay);
            for (key, record) in &mut records {
                record.settle(key, opts.decay);
            }
            (records, stats)
        })
    })
}

/// Feeds every chunk of every file to `send`, logging progress every few seconds.
fn read_all(files: &[PathBuf], mut send: impl FnMut(Work) -> bool) -> Result<(), InputError> {
    let started = Instant::now();
    let mut last_report = started;
    let mut bytes = 0u64;
    for path in files {
        let file = Arc::new(path.clone());
        let mut reader = ChunkReader::new(input::open(path)?, CHUNK_BYTES);
        while let Some(chunk) =
            reader.next_chunk().map_err(|source| InputError::Io { path: path.clone(), source })?
        {
            bytes += chunk.data.len() as u64;
            if !send(Work { file: Arc::clone(&file), chunk }) {
                return Ok(());
            }
            if last_report.elapsed() > Duration::from_secs(2) {
                last_report = Instant::now();
                let mb = bytes as f64 / 1e6;
                let rate = mb / started.elapsed().as_secs_f64();
                tracing::info!(file = %path.display(), mb = format!("{mb:.0}"), mb_per_s = format!("{rate:.0}"), "reading logs");
            }
        }
    }
    Ok(())
}

/// Records by key, sorted by key, keys distinct.
pub type Sorted = Vec<(String, KeyRecord)>;

/// The tally's records sorted by key ([`typeahead_core::bytesort`]: sorted in place).
fn sorted(tally: Tally) -> Sorted {
    let mut records: Sorted = tally.into_iter().collect();
    let order = bytesort::order(records.len(), |i| records[i].0.as_bytes());
    bytesort::permute(&mut records, order);
    records
}

/// Merges the workers' sorted runs into one, folding the records of a key in worker order:
/// the first worker's record takes the others' counts, as merging their maps in order did.
fn merge_runs(mut runs: Vec<Sorted>, decay: Decay) -> Sorted {
    if runs.len() <= 1 {
        return runs.pop().unwrap_or_default();
    }
    // Room for every record: exact when the workers saw different keys (a counts file), and
    // trimmed below when they shared many (a raw log's popular queries).
    let mut out: Sorted = Vec::with_capacity(runs.iter().map(Vec::len).sum());
    let mut runs: Vec<std::vec::IntoIter<(String, KeyRecord)>> =
        runs.into_iter().map(Vec::into_iter).collect();
    // The next record of every run; the heap pops the smallest key, and of equal keys the
    // earliest worker's first.
    let mut heads: BinaryHeap<Reverse<Head>> = BinaryHeap::with_capacity(runs.len());
    for (worker, run) in runs.iter_mut().enumerate() {
        if let Some((key, record)) = run.next() {
            heads.push(Reverse(Head { key, worker, record }));
        }
    }
    // The smallest head is replaced by its run's next record in place (one sift down, where
    // a pop and a push took two): at 10M keys this loop was 8% of the build's CPU time.
    while let Some(mut top) = heads.peek_mut() {
        let worker = top.0.worker;
        let Head { key, record, .. } = match runs[worker].next() {
            Some((key, record)) => std::mem::replace(&mut top.0, Head { key, worker, record }),
            None => PeekMut::pop(top).0,
        };
        match out.last_mut() {
            Some((last, mine)) if *last == key => mine.merge_counts(&key, &record, decay),
            _ => out.push((key, record)),
        }
    }
    if out.capacity() > out.len() + out.len() / 4 {
        out.shrink_to_fit();
    }
    out
}

/// The next record of one worker's run, ordered by (key, worker).
struct Head {
    key: String,
    worker: usize,
    record: KeyRecord,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        (&self.key, self.worker) == (&other.key, other.worker)
    }
}

impl Eq for Head {}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.key, self.worker).cmp(&(&other.key, other.worker))
    }
}

/// One worker's private counts.
struct Worker<'a> {
    opts: &'a IngestOptions,
    privacy: &'a Privacy,
    tally: Tally,
    stats: LineStats,
    surface: String,
    /// The build's current (wall-clock) hour: lines stamped after it lie in the future.
    latest_plausible: Hour,
}

impl<'a> Worker<'a> {
    fn new(opts: &'a IngestOptions, privacy: &'a Privacy) -> Self {
        let latest_plausible = logline::current_hour();
        Worker {
            opts,
            privacy,
            tally: Tally::default(),
            stats: LineStats::default(),
            surface: String::new(),
            latest_plausible,
        }
    }

    /// Counts every chunk sent, then sorts what it counted (on this worker's core).
    fn run(mut self, rx: &Receiver<Work>) -> (Sorted, LineStats) {
        for work in rx {
            self.stats.bytes += work.chunk.data.len() as u64;
            for (line_no, line) in input::lines(&work.chunk) {
                self.line(&work.file, line_no, line);
            }
        }
        (sorted(self.tally), self.stats)
    }

    fn line(&mut self, file: &Path, line_no: u64, line: &[u8]) {
        self.stats.lines += 1;
        if line.len() > input::MAX_LINE_BYTES {
            return self.stats.skip("line_too_long", file, line_no, None);
        }
        let parsed = match self.opts.counts_hour {
            Some(hour) => logline::parse_count_line(line)
                .map(|c| (hour, c.query, c.count, None, c.distinct_users)),
            None => logline::parse_log_line(line).map(|l| (l.hour, l.query, 1, l.user, None)),
        };
        let (hour, query, count, user, reported) = match parsed {
            Ok(p) => p,
            Err(e) => {
                let bad_time = matches!(e, logline::LineError::BadTimestamp);
                let excerpt = if bad_time { timestamp_excerpt(line) } else { None };
                return self.stats.skip(e.as_str(), file, line_no, excerpt);
            }
        };
        if hour > self.latest_plausible {
            // A line stamped after the build's current hour (milliseconds taken for seconds, a
            // skewed clock) must never move the watermark: one such line would make the next
            // build drop every real line as late. So the watermark never passes the wall-clock
            // hour; the line is counted and skipped. In --hour mode the hour is the flag's, and
            // the first field is the query: no excerpt.
            let excerpt = self.opts.counts_hour.is_none().then(|| timestamp_excerpt(line));
            return self.stats.skip("future_timestamp", file, line_no, excerpt.flatten());
        }
        if self.opts.watermark.is_some_and(|w| hour <= w) {
            self.stats.late += 1;
            return;
        }
        if self.opts.cutoff.is_some_and(|c| hour >= c) {
            self.stats.incomplete += 1;
            return;
        }
        // The hour counts as processed even if this line is withheld below.
        self.stats.hours.insert(hour);
        if count == 0 {
            // Nothing to count, but the line is accounted for: the summary's reasons add up
            // to the lines read.
            return self.stats.skip("zero_count", file, line_no, None);
        }
        normalize::surface_into(query, &mut self.surface);
        let key = normalize::key_of_surface(&self.surface);
        if !normalize::is_kept(&self.surface, &key) {
            return self.stats.skip("rejected_query", file, line_no, None);
        }
        if let Some(reason) = self.privacy.check(&self.surface, &key) {
            return self.stats.withhold(reason, file, line_no);
        }
        let record = match self.tally.get_mut(key.as_ref()) {
            Some(r) => r,
            None => self.tally.entry(key.clone().into_owned()).or_default(),
        };
        record.count(&key, &self.surface, count as f64, hour, self.opts.decay);
        if let Some(user) = user {
            record.users.add_user(user);
        }
        if let Some(n) = reported {
            record.users.add_reported(n);
        }
        self.stats.counted += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Merging sorted runs gives what folding the workers' maps in worker order gave.
        #[test]
        fn merged_runs_fold_in_worker_order(
            workers in proptest::collection::vec(
                proptest::collection::btree_map("[abc]{1,3}", (1u32..50, any::<bool>()), 0..20),
                1..4,
            ),
        ) {
            let decay = Decay::new(24.0).unwrap();
            let hour: Hour = 1000;
            let record = |key: &str, count: u32, cased: bool| {
                let mut r = KeyRecord::default();
                let surface = if cased { key.to_uppercase() } else { key.to_owned() };
                r.add(key, &surface, f64::from(count), hour, decay);
                r
            };
            let runs: Vec<Sorted> = workers
                .iter()
                .map(|w| w.iter().map(|(k, &(c, cased))| (k.clone(), record(k, c, cased))).collect())
                .collect();
            let mut expected: BTreeMap<String, KeyRecord> = BTreeMap::new();
            for run in &runs {
                for (key, r) in run {
                    match expected.get_mut(key) {
                        Some(mine) => mine.merge_counts(key, r, decay),
                        None => {
                            expected.insert(key.clone(), r.clone());
                        }
                    }
                }
            }
            let expected: Sorted = expected.into_iter().collect();
            prop_assert_eq!(merge_runs(runs, decay), expected);
        }
    }

    #[test]
    fn only_timestamp_shaped_fields_are_shown() {
        let shown = |line: &[u8]| timestamp_excerpt(line);
        assert_eq!(shown(b"2006-13-01 00:00:00\tquery").as_deref(), Some("2006-13-01 00:00:00"));
        assert_eq!(
            shown(b"2006-03-01T00:00:00+01:00\tq").as_deref(),
            Some("2006-03-01T00:00:00+01:00")
        );
        // Numbers only by their length: milliseconds for seconds is what there is to see.
        assert_eq!(shown(b"17000000000000\tquery").as_deref(), Some("a number of 14 digits"));
        assert_eq!(shown(b"1700000000.25\tquery").as_deref(), Some("a number of 10 digits"));
        // Columns swapped, or a count line read as a log: the first field is a query.
        assert_eq!(shown(b"private query\t2006-03-01 00:00:00"), None);
        assert_eq!(shown(b"john@example.com\t12"), None);
        assert_eq!(shown(b"4111 1111 1111 1111\t12"), None);
        assert_eq!(shown(b"4111-1111-1111-1111\t12"), None);
        assert_eq!(shown(b"555-123-4567\t3"), None);
        assert_eq!(shown(b"5551234567\tq").as_deref(), Some("a number of 10 digits"));
        // A date, then not a time of day: a number written after it is not shown.
        assert_eq!(shown(b"2024-01-01 4111 1111 1111 1111\tq"), None);
        assert_eq!(shown(b"2024-01-01 12:00:00 4111111111\tq"), None);
        assert_eq!(shown(b"2024-01-01 12:00 5551234567\tq"), None);
        for ok in [
            "2024-01-01",
            "2024-01-01 12:00",
            "2024-01-01t12:00:00.123456789z",
            "2024-01-01T12:00:00-0530",
            "2024-01-01 12:00:00+05",
        ] {
            assert_eq!(shown(format!("{ok}\tq").as_bytes()).as_deref(), Some(ok));
        }
    }
}
