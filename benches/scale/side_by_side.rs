//! Our half of issue 16's side-by-side with another top-k completion index (jermp/autocomplete
//! in the issue): both sides read the same files, time the same lookups one by one, and write
//! what they answered, so `scripts/side_by_side.py` can put the timings next to each other and
//! check that the answers are identical.
//!
//! `--side-by-side DIR --snapshot S [--round N]` writes, unless they are there already:
//! - `DIR/entries.tsv`: every completion as `key<TAB>score`, best first (line `i` is rank `i`:
//!   the document id an index that orders by id should give it);
//! - `DIR/queries.txt` and `DIR/classes.txt`: [`WARM_UP`] lines, then [`PER_CLASS`] prefixes of
//!   each class (a key drawn uniformly, or with `--weighted` in proportion to its score as the
//!   issue's "count-weighted" rows are, cut to 1, 2, 4 or 8 characters, or whole), shuffled,
//!   one per line, with each line's class. None ends with a space: an index of word sequences
//!   reads "new " as "new", where the prefix contract does not. `DIR/sampling.txt` says how the
//!   keys were drawn, and a round asking for the other way is refused: one DIR per way.
//!
//! It then looks every line up with `suggest(q, 10)`, timing each call alone (the first
//! [`WARM_UP`] lines once untimed before), into `DIR/ours.N.times` (nanoseconds) and
//! `DIR/ours.N.answers` (the keys, best first, tab-separated). Run the other side between
//! rounds, pinned to the same core, so that neither has the machine's quiet minutes alone.

use std::io::{BufRead, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use typeahead::snapshot::Snapshot;
use typeahead::synth::rand::distr::{Distribution, weighted::WeightedIndex};
use typeahead::synth::{self, rand::RngExt};

/// Lines looked up once before the timed pass (and timed again in it: the comparison leaves
/// them out).
pub const WARM_UP: usize = 2_000;
/// Prefixes per length class.
pub const PER_CLASS: usize = 20_000;

/// How the keys cut into prefixes are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// Every completion alike: the long tail, where lists are short, dominates.
    Uniform,
    /// In proportion to the completion's score, as typed prefixes are: popular keys, whose
    /// short prefixes have the longest lists, dominate.
    ByScore,
}

impl Sampling {
    fn name(self) -> &'static str {
        match self {
            Sampling::Uniform => "uniform",
            Sampling::ByScore => "by score",
        }
    }
}

pub fn run(
    snapshot: &Snapshot,
    dir: &Path,
    round: usize,
    sampling: Sampling,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    check_sampling(dir, sampling)?;
    // Later rounds find both files and skip ranking every completion again.
    let (has_entries, has_queries) =
        (dir.join("entries.tsv").exists(), dir.join("queries.txt").exists());
    if !has_entries || !has_queries {
        let mut entries: Vec<(String, f64)> =
            snapshot.entries().map(|e| (e.key, e.score)).collect();
        entries.sort_by(|a, b| typeahead::rank::cmp(a.1, a.0.as_bytes(), b.1, b.0.as_bytes()));
        if !has_entries {
            let mut out = BufWriter::new(std::fs::File::create(dir.join("entries.tsv"))?);
            for (key, score) in &entries {
                writeln!(out, "{key}\t{score}")?;
            }
            out.flush()?;
        }
        if !has_queries {
            write_queries(dir, &entries, sampling)?;
        }
    }
    let file = std::fs::File::open(dir.join("queries.txt"))?;
    let queries: Vec<String> = std::io::BufReader::new(file).lines().collect::<Result<_, _>>()?;
    for q in queries.iter().take(WARM_UP) {
        std::hint::black_box(snapshot.suggest(q, 10));
    }
    // Answers are written out as text and dropped as they come: kept as they are, a million
    // strings would grow the heap inside the timed calls, and the page faults of its growth
    // would be timed as lookups.
    let mut times = Vec::with_capacity(queries.len());
    let mut answers = String::new();
    for q in &queries {
        let t = Instant::now();
        let answer = std::hint::black_box(snapshot.suggest(q, 10));
        times.push(t.elapsed().as_nanos());
        let keys: Vec<&str> = answer.iter().map(|s| s.key.as_str()).collect();
        answers.push_str(&keys.join("\t"));
        answers.push('\n');
    }
    let mut out = BufWriter::new(std::fs::File::create(dir.join(format!("ours.{round}.times")))?);
    for ns in times {
        writeln!(out, "{ns}")?;
    }
    out.flush()?;
    std::fs::write(dir.join(format!("ours.{round}.answers")), answers)?;
    println!("side by side, round {round}: {} lookups timed into {}", queries.len(), dir.display());
    Ok(())
}

/// Records how DIR's queries are drawn, or refuses a round that asks for the other way (its
/// figures would be filed under the wrong heading). A query file put there by other means has
/// no record: it is timed as found, and says so.
fn check_sampling(dir: &Path, sampling: Sampling) -> std::io::Result<()> {
    let path = dir.join("sampling.txt");
    match std::fs::read_to_string(&path) {
        Ok(found) if found.trim() == sampling.name() => Ok(()),
        Ok(found) => Err(std::io::Error::other(format!(
            "{} holds queries drawn {}, not {}: use another directory",
            dir.display(),
            found.trim(),
            sampling.name()
        ))),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        Err(_) if dir.join("queries.txt").exists() => {
            eprintln!(
                "{}: no sampling.txt, so its queries.txt was not drawn here; timed as found",
                dir.display()
            );
            Ok(())
        }
        Err(_) => std::fs::write(path, format!("{}\n", sampling.name())),
    }
}

fn write_queries(dir: &Path, entries: &[(String, f64)], sampling: Sampling) -> std::io::Result<()> {
    let mut rng = synth::rng(16);
    let by_score = match sampling {
        Sampling::Uniform => None,
        Sampling::ByScore => Some(
            WeightedIndex::new(entries.iter().map(|e| e.1))
                .map_err(|e| std::io::Error::other(format!("cannot draw by score: {e}")))?,
        ),
    };
    let draw = |rng: &mut synth::Rng| match &by_score {
        Some(weights) => weights.sample(rng),
        None => rng.random_range(0..entries.len()),
    };
    let mut rows: Vec<(&str, String)> = Vec::new();
    for (class, chars) in [("1", Some(1)), ("2", Some(2)), ("4", Some(4)), ("8", Some(8))]
        .into_iter()
        .chain([("whole", None)])
    {
        let mut n = 0;
        while n < PER_CLASS && !entries.is_empty() {
            let key = &entries[draw(&mut rng)].0;
            let q = super::cut(key, chars);
            if !q.ends_with(' ') {
                rows.push((class, q));
                n += 1;
            }
        }
    }
    synth::rand::seq::SliceRandom::shuffle(rows.as_mut_slice(), &mut rng);
    let warm: Vec<(&str, String)> = (0..WARM_UP.min(rows.len()))
        .map(|_| rows[rng.random_range(0..rows.len())].clone())
        .collect();
    let mut queries = BufWriter::new(std::fs::File::create(dir.join("queries.txt"))?);
    let mut classes = BufWriter::new(std::fs::File::create(dir.join("classes.txt"))?);
    for (class, q) in warm.iter().chain(&rows) {
        writeln!(queries, "{q}")?;
        writeln!(classes, "{class}")?;
    }
    queries.flush()?;
    classes.flush()
}

/// The smoke run's check (`cargo test --benches`), both ways of drawing: one line of answers
/// and of times per query, the answers those of `suggest`; drawn by score, whole queries rank
/// higher than drawn uniformly; a round asking for the other way than its directory's fails.
pub fn smoke(snapshot: &Snapshot) {
    let uniform = tempfile::tempdir().unwrap();
    run(snapshot, uniform.path(), 1, Sampling::Uniform).unwrap();
    let refused = run(snapshot, uniform.path(), 2, Sampling::ByScore).unwrap_err().to_string();
    assert!(refused.contains("drawn uniform, not by score"), "{refused}");
    let weighted = tempfile::tempdir().unwrap();
    run(snapshot, weighted.path(), 1, Sampling::ByScore).unwrap();
    for dir in [uniform.path(), weighted.path()] {
        answers_are_suggests(snapshot, dir);
    }
    let (uniform, by_score) = (mean_whole_rank(uniform.path()), mean_whole_rank(weighted.path()));
    assert!(by_score < uniform / 2.0, "mean rank {by_score} by score, {uniform} uniform");
}

fn answers_are_suggests(snapshot: &Snapshot, dir: &Path) {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let (queries, answers, times) =
        (read("queries.txt"), read("ours.1.answers"), read("ours.1.times"));
    assert_eq!(queries.lines().count(), WARM_UP + 5 * PER_CLASS);
    assert_eq!(read("classes.txt").lines().count(), queries.lines().count());
    assert_eq!(times.lines().count(), queries.lines().count());
    assert_eq!(answers.lines().count(), queries.lines().count());
    for (q, answer) in queries.lines().zip(answers.lines()).step_by(97) {
        assert!(!q.ends_with(' '));
        let keys: Vec<String> = snapshot.suggest(q, 10).into_iter().map(|s| s.key).collect();
        assert_eq!(answer, keys.join("\t"), "{q:?}");
    }
}

/// The mean rank (line of entries.tsv) of the whole queries drawn into `dir`.
fn mean_whole_rank(dir: &Path) -> f64 {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let entries = read("entries.tsv");
    let rank: std::collections::HashMap<&str, usize> =
        entries.lines().enumerate().map(|(i, l)| (l.split('\t').next().unwrap(), i)).collect();
    let (queries, classes) = (read("queries.txt"), read("classes.txt"));
    let whole: Vec<usize> = queries
        .lines()
        .zip(classes.lines())
        .filter(|(_, c)| *c == "whole")
        .map(|(q, _)| rank[q])
        .collect();
    whole.iter().sum::<usize>() as f64 / whole.len() as f64
}
