//! The scale benchmark: the figures in one run.
//!
//! - snapshot bytes per completion and build time at N completions (default 1M;
//!   `--keys 10000000` for the 10M target), with peak memory;
//! - top-10 lookup latency per prefix length, timing every lookup: median, p99, p99.9;
//! - log ingestion throughput in lines/s, on one core and on all;
//! - the same lookups on real AOL prefixes when `../shared/data` is present.
//!
//! Run: `cargo bench --bench scale -- [--keys N] [--lines N]`; `--build-only` stops after the
//! build (keeping the snapshot with `--keep-snapshot S`), and `--keep-counts PATH` keeps its `query<TAB>count` input (to time `typeahead build`
//! on it); `--snapshot S` times lookups on a kept snapshot, `--tiers-only` only the later tiers,
//! `--prefix-only "1 char,4 chars"` only the prefix lookups of the classes named (for A/B rounds
//! of a lookup change: seconds instead of minutes); `--side-by-side DIR [--weighted]` our half
//! of a comparison with another index on the same files ([`side_by_side`]). `--warm` times
//! each lookup right after the same lookup untimed, its data in the CPU caches: set against
//! the cold figures, it splits a lookup's time into waiting for memory and computing.
//! The data is SYNTHETIC unless stated (word n-grams with Zipf popularity, ~22
//! characters, like AOL).

mod common;
#[path = "scale/conjunctive.rs"]
mod conjunctive;
#[path = "scale/side_by_side.rs"]
mod side_by_side;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use typeahead::blocklist::Blocklist;
use typeahead::builder::build::{self, BuildOptions};
use typeahead::matching::{Match, Tiers};
use typeahead::normalize;
use typeahead::snapshot::Snapshot;
use typeahead::synth::rand::RngExt;
use typeahead::synth::rand::distr::{Distribution, weighted::WeightedIndex};
use typeahead::synth::{self, LogConfig, SynthConfig};

fn arg(name: &str, default: usize) -> usize {
    text_arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn text_arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn options(
    inputs: Vec<PathBuf>,
    out: PathBuf,
    threads: usize,
    counts_hour: Option<u32>,
) -> BuildOptions {
    BuildOptions {
        inputs,
        state_dir: None,
        out,
        partitioning: None,
        half_life_hours: 168.0,
        min_score: 0.0,
        min_users: 0,
        blocklist: Blocklist::empty(),
        top_k: 10,
        counts_hour,
        threads,
        until: None,
        keep_generations: 3,
        gate: None,
    }
}

/// `key`'s first `chars` characters (the whole key for `None`): a prefix as typed so far.
fn cut(key: &str, chars: Option<usize>) -> String {
    chars.map_or_else(|| key.to_owned(), |c| key.chars().take(c).collect())
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)] as f64 / 1000.0
}

/// Times every lookup but the warm-up's; prints median / p99 / p99.9 in microseconds. The
/// warm-up (code, allocator, the snapshot's upper levels) takes the first tenth of the
/// prefixes, up to 2,000, and those are not timed: looked up again a moment later they would
/// be warm, and "cold" would be a tenth false.
fn latency(label: &str, snapshot: &Snapshot, prefixes: &[String]) {
    let (warm, cold) = prefixes.split_at((prefixes.len() / 10).min(2000));
    for p in warm {
        std::hint::black_box(snapshot.suggest(p, 10));
    }
    timed(label, cold, "", |p| snapshot.suggest(p, 10));
}

/// Times `lookup` on every prefix alone; prints median / p99 / p99.9 in microseconds, then
/// `note`. With `--warm`, each timed lookup follows the same lookup untimed.
fn timed<T>(label: &str, prefixes: &[String], note: &str, lookup: impl Fn(&str) -> T) {
    let warm = std::env::args().any(|a| a == "--warm");
    let label = if warm { format!("{label} (warm)") } else { label.to_owned() };
    let mut ns: Vec<u64> = prefixes
        .iter()
        .map(|p| {
            if warm {
                std::hint::black_box(lookup(p));
            }
            let t = Instant::now();
            std::hint::black_box(lookup(p));
            t.elapsed().as_nanos() as u64
        })
        .collect();
    if ns.is_empty() {
        return;
    }
    ns.sort_unstable();
    println!(
        "  {label:<26} n={:<7} median {:>6.2} us  p99 {:>6.2} us  p99.9 {:>7.2} us{note}",
        ns.len(),
        percentile(&ns, 0.5),
        percentile(&ns, 0.99),
        percentile(&ns, 0.999)
    );
}

fn snapshot_build(dir: &Path, keys: usize) -> PathBuf {
    // The pre-aggregated path of the CLI: `query<TAB>count` for one hour.
    let t = Instant::now();
    let cfg = SynthConfig::new(42, keys);
    let texts = synth::distinct_queries(&cfg);
    let counts = dir.join("counts.tsv");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&counts).unwrap());
    let total = 10.0 * keys as f64;
    for (rank, text) in texts.iter().enumerate() {
        let c = (synth::zipf_weight(rank, keys, 1.0) * total).round().max(1.0);
        writeln!(out, "{text}\t{c}").unwrap();
    }
    out.flush().unwrap();
    drop(texts);
    // `--keep-counts PATH`: the same input for `typeahead build`, to time builds alone.
    if let Some(to) = std::env::args().skip_while(|a| a != "--keep-counts").nth(1) {
        std::fs::copy(&counts, &to).unwrap();
        println!("kept the counts file at {to}");
    }
    println!("generated {keys} synthetic distinct queries in {:.1} s", t.elapsed().as_secs_f64());
    let snap = dir.join("synthetic.snap");
    let t = Instant::now();
    let summary = build::run(&options(vec![counts], snap.clone(), 2, Some(490_992))).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let m = &summary.snapshot.meta;
    println!("snapshot build (2 threads, counts input): {secs:.1} s for {} completions", m.keys);
    println!(
        "  bytes per completion {:.2} ({} bytes), trie nodes {}, list nodes {}, peak RSS so far {:.0} MiB",
        summary.snapshot.bytes as f64 / m.keys as f64,
        summary.snapshot.bytes,
        m.trie_nodes,
        m.list_nodes,
        peak_rss_mib()
    );
    for (name, bytes) in &summary.snapshot.sections {
        println!("    {name:<18} {:>6.2} B/completion", *bytes as f64 / m.keys as f64);
    }
    snap
}

/// Time to apply a blocklist (the filter computed off the request path) at this scale: a list
/// that hides little, and one that blocks the first words of the five best completions (at 10M
/// synthetic completions a quarter of them, and a hundred thousand stored lists to recompute).
fn blocklist_update(snapshot: &Snapshot) {
    let first_words: Vec<String> = snapshot
        .suggest("", 5)
        .iter()
        .filter_map(|s| s.key.split(' ').next().map(str::to_owned))
        .collect();
    for text in ["slo\npo\nfe pul\nwal\nbomb\n".to_owned(), first_words.join("\n")] {
        let list = typeahead::blocklist::Blocklist::parse(&text).unwrap();
        let t = Instant::now();
        let filter = typeahead::snapshot::Filter::new(snapshot, |k| list.blocks(k));
        println!(
            "blocklist update ({:?}): filter computed in {:.0} ms, {} completions hidden, {} lists replaced",
            list.entries(),
            t.elapsed().as_secs_f64() * 1e3,
            filter.blocked_count(),
            filter.replaced_lists()
        );
    }
}

fn lookups(snap: &Path, samples: usize) {
    let snapshot = Snapshot::open(snap).unwrap();
    blocklist_update(&snapshot);
    let keys: Vec<String> = snapshot.entries().map(|e| e.key).collect();
    if std::env::args().any(|a| a == "--tiers-only") {
        // The later tiers alone (`--snapshot S --tiers-only`): minutes less at 10M.
        tiers(&snapshot, &keys, samples / 4);
        return;
    }
    println!("top-10 lookup latency, uniform random keys (cold), one thread:");
    let only = text_arg("--prefix-only");
    let mut rng = synth::rng(9);
    let mut all = Vec::new();
    for (label, chars) in [
        ("1 char", Some(1)),
        ("2 chars", Some(2)),
        ("4 chars", Some(4)),
        ("8 chars", Some(8)),
        ("whole query", None),
    ] {
        let prefixes: Vec<String> = (0..samples)
            .map(|_| {
                let k = &keys[rng.random_range(0..keys.len())];
                cut(k, chars)
            })
            .collect();
        // Drawn either way, so a class's prefixes do not depend on which others run.
        if only.as_ref().is_some_and(|only| !only.split(',').any(|o| o == label)) {
            continue;
        }
        latency(label, &snapshot, &prefixes);
        all.extend(prefixes);
    }
    if only.as_ref().is_none_or(|only| only.split(',').any(|o| o == "count-weighted")) {
        latency("count-weighted", &snapshot, &count_weighted(&snapshot, &keys, samples));
    }
    if only.is_some() {
        return;
    }
    query_batch(snap, &snapshot, &all);
    tiers(&snapshot, &keys, samples / 4);
}

/// Prefixes as people type them, roughly: keys drawn in proportion to their scores, each cut
/// to 1, 2, 4 or 8 characters or left whole (one of the five at random) — how issue 16's
/// "count-weighted" row sampled. Popular keys share their upper paths, so these run warmer
/// than the uniform classes.
fn count_weighted(snapshot: &Snapshot, keys: &[String], samples: usize) -> Vec<String> {
    let by_score = WeightedIndex::new(snapshot.entries().map(|e| e.score))
        .expect("a synthetic snapshot's scores add up to more than 0");
    let mut rng = synth::rng(11);
    (0..samples)
        .map(|_| {
            let key = &keys[by_score.sample(&mut rng)];
            cut(key, [Some(1), Some(2), Some(4), Some(8), None][rng.random_range(0..5)])
        })
        .collect()
}

/// `typeahead query --match prefix` on a file of prefixes (every length class above, one per
/// line), against the same answers computed in this process. The time per prefix of the batch
/// is the difference between a run over the prefixes eleven times and a run over them once,
/// divided by ten times their number: the snapshot's opening (a second at 10M, and noisy) is
/// in both runs and cancels, where subtracting a separately timed opening left its noise in
/// the result.
fn query_batch(snap: &Path, snapshot: &Snapshot, prefixes: &[String]) {
    let in_process = || {
        let t = Instant::now();
        for p in prefixes {
            std::hint::black_box(snapshot.answer(&normalize::prefix(p), 10, None, Tiers::Prefix));
        }
        t.elapsed().as_secs_f64() / prefixes.len() as f64
    };
    let file = |copies: usize| {
        let input = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(input.path(), (prefixes.join("\n") + "\n").repeat(copies)).unwrap();
        input
    };
    // Eleven copies against one: the ten more take seconds, well above the noise of opening
    // the snapshot (about a second at 10M, varying by a tenth), which a run over two copies
    // against one did not (a round could come out negative).
    const MORE: usize = 10;
    let (once, more, empty) = (file(1), file(1 + MORE), file(0));
    let run = |input: &tempfile::NamedTempFile| {
        let t = Instant::now();
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_typeahead"))
            .args(["query", "--snapshot", snap.to_str().unwrap(), "--match", "prefix"])
            .stdin(std::fs::File::open(input.path()).unwrap())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        t.elapsed().as_secs_f64()
    };
    // Five alternating rounds (the first run also warms the page cache). Each round gives a
    // per-prefix time (its run over eleven copies less its run over one, over ten copies'
    // prefixes) and the in-process time next to it; the figures are the medians of the
    // rounds' own ratios, so no ratio divides one round's noise by another's.
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let here = in_process();
        let (once, more, open) = (run(&once), run(&more), run(&empty));
        rounds.push(((more - once) / (MORE * prefixes.len()) as f64, here, once, open));
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratios: Vec<f64> = rounds.iter().map(|r| r.0 / r.1).collect();
    let (lo, hi) = ratios.iter().fold((f64::MAX, 0f64), |(l, h), &r| (l.min(r), h.max(r)));
    let per = median(rounds.iter().map(|r| r.0).collect());
    let here = median(rounds.iter().map(|r| r.1).collect());
    let once = median(rounds.iter().map(|r| r.2).collect());
    let open = median(rounds.iter().map(|r| r.3).collect());
    println!(
        "`typeahead query` batch of {} prefixes: {:.2} us per prefix (a run over them eleven times less a run over them once), {:.2}x the {:.2} us in process (median of 5 rounds' ratios; {lo:.2}-{hi:.2}); {:.2} us whole (opening {:.0} ms)",
        prefixes.len(),
        per * 1e6,
        median(ratios.clone()),
        here * 1e6,
        once / prefixes.len() as f64 * 1e6,
        open * 1e3
    );
}

/// Full answers that needed a later tier: words typed out of order (the words tier) and one
/// typo in a prefix of 5+ characters (the fuzzy tier), timing each answer whole.
fn tiers(snapshot: &Snapshot, keys: &[String], samples: usize) {
    let mut rng = synth::rng(10);
    let (mut words, mut fuzzy) = (Vec::new(), Vec::new());
    let (mut tries, mut fuzzy_empty) = (0, 0);
    while (words.len() < samples || fuzzy.len() < samples) && tries < samples * 50 {
        tries += 1;
        let key = &keys[rng.random_range(0..keys.len())];
        let parts: Vec<&str> = key.split(' ').collect();
        if parts.len() >= 2 && words.len() < samples {
            let p = normalize::prefix(&parts.iter().rev().copied().collect::<Vec<_>>().join(" "));
            if snapshot.suggest(&p, 10).len() < 10 {
                words.push(p);
            }
        }
        let chars: Vec<char> = key.chars().collect();
        if chars.len() >= 5 && fuzzy.len() < samples {
            let Some(p) = typeahead::eval::typos::typo(&chars, &mut rng) else { continue };
            // The fuzzy tier is consulted when the earlier tiers leave the answer short, found
            // it anything or not (a walk that finds nothing is the one that must prove it).
            let answer = snapshot.answer(&p, 10, None, Tiers::All).suggestions;
            if answer.iter().filter(|s| s.tier != Match::Fuzzy).count() < 10 {
                fuzzy_empty += usize::from(answer.iter().all(|s| s.tier != Match::Fuzzy));
                fuzzy.push(p);
            }
        }
    }
    println!(
        "one-typo texts whose answer consults the fuzzy tier: {}, of which {fuzzy_empty} get nothing from it",
        fuzzy.len()
    );
    words_side_by_side(snapshot, &words);
    println!("full answers (all tiers) that needed a later tier, one thread:");
    for (label, texts) in [("words tier (reordered)", &words), ("fuzzy tier (one typo)", &fuzzy)] {
        // Also the warm-up of the timed pass: answers cut, and the candidates examined.
        let answers: Vec<_> =
            texts.iter().map(|p| snapshot.answer(p, 10, None, Tiers::All)).collect();
        let incomplete = answers.iter().filter(|a| !a.complete()).count();
        let mut examined: Vec<usize> = answers.iter().map(|a| a.examined).collect();
        examined.sort_unstable();
        let median = examined.get(examined.len() / 2).copied().unwrap_or(0);
        let note = format!("  cut by budget {incomplete}, examined median {median}");
        timed(label, texts, &note, |p| snapshot.answer(p, 10, None, Tiers::All));
        by_class(snapshot, texts, &answers);
    }
}

/// The same answers timed again by what they needed: the fuzzy tier's cost is set by whether
/// distance 1 filled the answer, or the walk went on to distance 2 — and whether even that left
/// it short, when nothing cuts the walk short.
fn by_class(snapshot: &Snapshot, texts: &[String], answers: &[typeahead::snapshot::Answer]) {
    let mut classes: [Vec<String>; 4] = Default::default();
    for (p, a) in texts.iter().zip(answers) {
        let fuzzy = a.suggestions.iter().filter(|s| s.tier == Match::Fuzzy);
        let class = if a.suggestions.len() < 10 {
            3
        } else if fuzzy.clone().any(|s| s.typos == 2) {
            2
        } else {
            usize::from(fuzzy.count() > 0)
        };
        classes[class].push(p.clone());
    }
    let names = [
        "    no fuzzy needed",
        "    filled at distance 1",
        "    filled at distance 2",
        "    short after both",
    ];
    for (texts, name) in classes.iter().zip(names) {
        timed(name, texts, "", |p| snapshot.answer(p, 10, None, Tiers::All));
    }
}

/// The words tier alone next to a conjunctive baseline of plain in-memory lists
/// (`conjunctive`), on the same typed texts; their answers must agree. Both are timed on the
/// texts the shipped tier answers within its budget (the baseline has none), so the tails
/// compare like for like; how many stopped at the budget is reported.
fn words_side_by_side(snapshot: &Snapshot, texts: &[String]) {
    let k = snapshot.max_k().min(10);
    let t = Instant::now();
    let entries = snapshot.entries().map(|e| (e.key, e.score)).collect();
    let baseline = conjunctive::Baseline::new(entries);
    let indexed = t.elapsed().as_secs_f64();
    println!("the words tier alone, and a conjunctive baseline (indexed in {indexed:.1} s):");
    let (mut complete, mut disagree) = (Vec::new(), 0);
    for p in texts {
        let shipped = snapshot.words_answer(p, k, None);
        if shipped.complete() {
            let keys: Vec<String> = shipped.suggestions.into_iter().map(|s| s.key).collect();
            disagree += usize::from(keys != baseline.answer(p, k));
            complete.push(p.clone());
        }
    }
    let cut = texts.len() - complete.len();
    timed("words tier (shipped)", &complete, "", |p| snapshot.words_answer(p, k, None));
    let note = format!("  (left out: {cut} the shipped tier cut; answers that differ: {disagree})");
    timed("conjunctive baseline", &complete, &note, |p| baseline.answer(p, k).len());
    assert_eq!(disagree, 0, "the words tier and the conjunctive baseline must agree");
}

fn ingest(dir: &Path, lines: usize) {
    let mut cfg = LogConfig::new(7);
    cfg.distinct_queries = 1_000_000;
    cfg.hours = 48;
    cfg.events_per_hour = (lines / 48) as u64;
    let log = dir.join("log.tsv");
    let t = Instant::now();
    let mut out = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
    let written = synth::write_log(&cfg, 0, cfg.hours, &mut out).unwrap();
    out.flush().unwrap();
    drop(out);
    println!("generated a synthetic log of {written} lines in {:.1} s", t.elapsed().as_secs_f64());
    for threads in [1, 2] {
        let t = Instant::now();
        let s =
            build::run(&options(vec![log.clone()], dir.join("log.snap"), threads, None)).unwrap();
        let secs = t.elapsed().as_secs_f64();
        let ingest = s.ingest_elapsed.as_secs_f64();
        println!(
            "  build from raw log, {threads} worker(s): {secs:.2} s in all, {:.2} M lines/s end to end; reading+counting {ingest:.2} s = {:.2} M lines/s ({:.2} M per worker), {} keys",
            s.lines.lines as f64 / secs / 1e6,
            s.lines.lines as f64 / ingest / 1e6,
            s.lines.lines as f64 / ingest / 1e6 / threads as f64,
            s.snapshot.meta.keys
        );
    }
}

fn real_data(dir: &Path, samples: usize) {
    let log = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/aol1000_log_2006-03-01_2006-05-17.tsv.gz");
    if !log.exists() {
        println!("(../shared/data not present: real-data figures skipped)");
        return;
    }
    let snap = dir.join("aol.snap");
    let t = Instant::now();
    let s = build::run(&options(vec![log], snap.clone(), 2, None)).unwrap();
    println!(
        "AOL 2006 sample (real): {} lines -> {} completions in {:.2} s, {:.2} bytes per completion",
        s.lines.lines,
        s.snapshot.meta.keys,
        t.elapsed().as_secs_f64(),
        s.snapshot.bytes as f64 / s.snapshot.meta.keys as f64
    );
    let snapshot = Snapshot::open(&snap).unwrap();
    let keys: Vec<String> = snapshot.entries().map(|e| e.key).collect();
    let mut rng = synth::rng(5);
    for (label, chars) in
        [("AOL 1 char", Some(1)), ("AOL 4 chars", Some(4)), ("AOL whole query", None)]
    {
        let prefixes: Vec<String> = (0..samples)
            .map(|_| {
                let k = &keys[rng.random_range(0..keys.len())];
                normalize::prefix(&cut(k, chars))
            })
            .collect();
        latency(label, &snapshot, &prefixes);
    }
    tiers(&snapshot, &keys, samples / 4);
}

fn main() {
    // `cargo test --benches` passes no `--bench`, and `cargo bench -- --test` passes
    // `--test`: a smoke run of the tiers' figures on 10K keys only, whose checks can fail.
    if !std::env::args().any(|a| a == "--bench") || std::env::args().any(|a| a == "--test") {
        let entries = common::synthetic_entries(10_000, 1);
        let (snapshot, _) = common::snapshot_of(&entries);
        assert!(!snapshot.suggest("a", 10).is_empty());
        let keys: Vec<String> = snapshot.entries().map(|e| e.key).collect();
        tiers(&snapshot, &keys, 400);
        side_by_side::smoke(&snapshot);
        return;
    }
    let keys = arg("--keys", 1_000_000);
    let lines = arg("--lines", 4_000_000);
    let samples = arg("--samples", 200_000);
    if let Some(snap) = std::env::args().skip_while(|a| a != "--snapshot").nth(1) {
        if let Some(dir) = text_arg("--side-by-side") {
            let snapshot = Snapshot::open(Path::new(&snap)).unwrap();
            let sampling = if std::env::args().any(|a| a == "--weighted") {
                side_by_side::Sampling::ByScore
            } else {
                side_by_side::Sampling::Uniform
            };
            side_by_side::run(&snapshot, Path::new(&dir), arg("--round", 1), sampling).unwrap();
            return;
        }
        // Lookups only, on a snapshot kept by an earlier run (`--keep-snapshot`).
        lookups(Path::new(&snap), samples);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    println!("== typeahead scale benchmark (synthetic data unless marked real) ==");
    let snap = snapshot_build(dir.path(), keys);
    let build_only = std::env::args().any(|a| a == "--build-only");
    if !build_only {
        lookups(&snap, samples);
    }
    let keep = std::env::args().skip_while(|a| a != "--keep-snapshot").nth(1);
    match keep {
        Some(to) => {
            std::fs::rename(&snap, &to).or_else(|_| std::fs::copy(&snap, &to).map(|_| ())).unwrap();
            println!("kept the synthetic snapshot at {to}");
        }
        None => std::fs::remove_file(&snap).unwrap_or_default(),
    }
    if build_only {
        return;
    }
    ingest(dir.path(), lines);
    real_data(dir.path(), samples.min(50_000));
    println!("peak RSS of the whole run: {:.0} MiB", peak_rss_mib());
}
