//! The stable fuzz harness: the checks of `fuzz/checks.rs`, driven by a mutation fuzzer that
//! needs no nightly toolchain, so `cargo test` and `.ci/run` exercise them on every change.
//!
//! Each target first replays its seeds, its corpus (`fuzz/corpus/<target>/`, grown by
//! coverage-guided `cargo fuzz` runs) and its past crashes (`fuzz/regressions/<target>/`),
//! then mutates them (bit flips, interesting values, splices, dictionary tokens) until its time
//! is up: `FUZZ_SECONDS` per target (default 2), seeded by `FUZZ_SEED` (default: the clock;
//! printed, so a failure can be replayed). A failing input is saved under
//! `target/tmp/fuzz-failures/<target>/` and named in the panic message; an input that runs longer
//! than `FUZZ_HANG_SECONDS` (default 20) aborts the run as a hang.
//!
//! `cargo test --test fuzz -- --ignored write_seed_corpus` writes the seeds into
//! `fuzz/corpus/` for `cargo fuzz` to start from.

#[path = "../fuzz/checks.rs"]
mod checks;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use typeahead_core::snapshot::{BuildInfo, Entry};
use typeahead_synth::rand::RngExt;
use typeahead_synth::rand::seq::IndexedRandom;
use typeahead_synth::{Rng, rng};

fn fuzz(target: &str) {
    let check = checks::TARGETS.iter().find(|(name, _)| *name == target).expect("known target").1;
    let seconds = env_u64("FUZZ_SECONDS", 2);
    let seed = env_u64("FUZZ_SEED", now_nanos());
    let mut rng = rng(seed);
    let mut inputs = seeds(target);
    let replayed = ["corpus", "regressions"].map(|d| repo_dir(d, target));
    for dir in &replayed {
        inputs.extend(read_dir_files(dir));
    }
    let dictionary = dictionary(target);
    let max_len = if target.starts_with("snapshot") { 1 << 16 } else { 4096 };
    let watchdog = Watchdog::start(target, env_u64("FUZZ_HANG_SECONDS", 20));

    let replay_count = inputs.len();
    for input in &inputs {
        run_one(target, check, input, &watchdog, seed);
    }
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut executions = 0u64;
    let mut input = Vec::new();
    while Instant::now() < deadline {
        input.clear();
        // Mostly mutate a known input; sometimes (or with none to start from) random bytes.
        match inputs.choose(&mut rng) {
            Some(known) if rng.random_range(0..16) != 0 => input.extend_from_slice(known),
            _ => {
                let len = rng.random_range(0..64);
                input.extend((0..len).map(|_| rng.random::<u8>()));
            }
        }
        for _ in 0..rng.random_range(1..=8) {
            mutate(&mut rng, &mut input, &inputs, &dictionary);
        }
        input.truncate(max_len);
        run_one(target, check, &input, &watchdog, seed);
        executions += 1;
    }
    watchdog.stop();
    eprintln!(
        "fuzz {target}: {replay_count} seeds and corpus inputs, then {executions} mutated inputs \
         in {seconds} s (FUZZ_SEED={seed}); no failure"
    );
}

fn run_one(target: &str, check: checks::Check, input: &[u8], watchdog: &Watchdog, seed: u64) {
    watchdog.begin(input);
    let outcome = quietly(|| std::panic::catch_unwind(AssertUnwindSafe(|| check(input))));
    watchdog.end();
    if outcome.is_err() {
        let path = save_failure(target, input);
        panic!(
            "fuzz {target}: input failed (FUZZ_SEED={seed}); saved to {}; as text: {:?}; last \
             panic: {}",
            path.display(),
            String::from_utf8_lossy(&input[..input.len().min(200)]),
            OWN_PANIC.take().or_else(|| UNNAMED_PANIC.lock().ok()?.take()).unwrap_or_default()
        );
    }
}

std::thread_local! {
    /// Whether this thread is inside a check.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The message and place of the last panic this thread's check raised (another target's
    /// check runs beside it and must not overwrite it).
    static OWN_PANIC: std::cell::Cell<Option<String>> = const { std::cell::Cell::new(None) };
}

/// Checks running now, on any test thread.
static CHECKING: AtomicUsize = AtomicUsize::new(0);

/// The message and place of the last panic on an unnamed thread (the reader's verification)
/// while a check ran, for a failure report when the check's own thread raised none.
static UNNAMED_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Runs `f` with the panics it raises kept out of the log: a mutated snapshot makes the `fst`
/// crate panic thousands of times (each caught by the reader, and turned into an error), and
/// the default hook printed a backtrace for every one into the CI log. Silenced are this
/// thread's panics inside `f` and those of unnamed threads (the reader verifies on a scoped
/// thread of its own) while a check runs; a test's own failure (on its named thread, outside
/// `f`) still prints.
fn quietly<T>(f: impl FnOnce() -> T) -> T {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let checking = CHECKING.load(Ordering::SeqCst) > 0;
            if QUIET.get() {
                OWN_PANIC.set(Some(info.to_string()));
            } else if checking && std::thread::current().name().is_none() {
                *UNNAMED_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(info.to_string());
            } else {
                default(info);
            }
        }));
    });
    CHECKING.fetch_add(1, Ordering::SeqCst);
    OWN_PANIC.set(None);
    QUIET.set(true);
    let out = f();
    QUIET.set(false);
    CHECKING.fetch_sub(1, Ordering::SeqCst);
    out
}

fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures").join(target);
    let _ = std::fs::create_dir_all(&dir);
    let path =
        dir.join(format!("{:016x}", typeahead_builder::record::fnv1a(input.iter().copied())));
    let _ = std::fs::write(&path, input);
    path
}

/// Aborts the process when one input runs too long: a hang is a bug, and a hung test would
/// otherwise hold CI until its global timeout.
struct Watchdog {
    epoch: Instant,
    /// Milliseconds since `epoch` when the current input started; 0 between inputs.
    started_ms: Arc<AtomicU64>,
    current: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
}

impl Watchdog {
    fn start(target: &str, limit_secs: u64) -> Watchdog {
        let w = Watchdog {
            epoch: Instant::now(),
            started_ms: Arc::new(AtomicU64::new(0)),
            current: Arc::new(Mutex::new(Vec::new())),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (started, current, stop) = (w.started_ms.clone(), w.current.clone(), w.stop.clone());
        let (target, epoch) = (target.to_owned(), w.epoch);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let since = started.load(Ordering::Relaxed);
                let now = epoch.elapsed().as_millis() as u64;
                if since != 0 && now.saturating_sub(since) > limit_secs * 1000 {
                    let input = current.lock().map(|i| i.clone()).unwrap_or_default();
                    let path = save_failure(&target, &input);
                    eprintln!(
                        "fuzz {target}: an input ran over {limit_secs} s (hang); saved to {}",
                        path.display()
                    );
                    std::process::abort();
                }
            }
        });
        w
    }

    fn begin(&self, input: &[u8]) {
        if let Ok(mut current) = self.current.lock() {
            current.clear();
            current.extend_from_slice(input);
        }
        let now = (self.epoch.elapsed().as_millis() as u64).max(1);
        self.started_ms.store(now, Ordering::Relaxed);
    }

    fn end(&self) {
        self.started_ms.store(0, Ordering::Relaxed);
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A libFuzzer-style mutation: one random edit of the input.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, pool: &[Vec<u8>], dictionary: &[Vec<u8>]) {
    const INTERESTING: [u8; 12] =
        [0, 1, 0x7f, 0x80, 0xff, b'\t', b'\n', b'\r', b' ', b'%', b'#', b'&'];
    let at = |rng: &mut Rng, len: usize| rng.random_range(0..=len);
    match rng.random_range(0..9) {
        0 if !input.is_empty() => {
            let i = at(rng, input.len() - 1);
            input[i] ^= 1 << rng.random_range(0..8);
        }
        1 if !input.is_empty() => {
            let i = at(rng, input.len() - 1);
            input[i] = rng.random();
        }
        2 if !input.is_empty() => {
            let i = at(rng, input.len() - 1);
            input[i] = INTERESTING[rng.random_range(0..INTERESTING.len())];
        }
        3 => {
            let i = at(rng, input.len());
            let bytes: Vec<u8> = (0..rng.random_range(1..=8)).map(|_| rng.random()).collect();
            input.splice(i..i, bytes);
        }
        4 if !input.is_empty() => {
            let i = at(rng, input.len() - 1);
            let end = (i + rng.random_range(1..=16)).min(input.len());
            input.drain(i..end);
        }
        5 if !input.is_empty() => {
            let i = at(rng, input.len() - 1);
            let end = (i + rng.random_range(1..=32)).min(input.len());
            let copy = input[i..end].to_vec();
            let to = at(rng, input.len());
            input.splice(to..to, copy);
        }
        6 if !pool.is_empty() => {
            let other = &pool[rng.random_range(0..pool.len())];
            if !other.is_empty() {
                let i = at(rng, other.len() - 1);
                let end = (i + rng.random_range(1..=64)).min(other.len());
                let to = at(rng, input.len());
                input.splice(to..to, other[i..end].iter().copied());
            }
        }
        7 if !dictionary.is_empty() => {
            let token = &dictionary[rng.random_range(0..dictionary.len())];
            let to = at(rng, input.len());
            input.splice(to..to, token.iter().copied());
        }
        8 if input.len() >= 4 => {
            let values = [0u32, 1, u32::MAX, 0x8000_0000, input.len() as u32, 0xffff];
            let value = values[rng.random_range(0..values.len())].to_le_bytes();
            let i = at(rng, input.len() - 4);
            input[i..i + 4].copy_from_slice(&value);
        }
        _ => input.push(rng.random()),
    }
}

/// Inputs every run starts from, so the harness works on a fresh clone with an empty corpus.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let text = |items: &[&str]| items.iter().map(|s| s.as_bytes().to_vec()).collect();
    match target {
        "snapshot_bytes" | "snapshot_mutated" => [0, 1, 3, 40, 300].map(valid_snapshot).to_vec(),
        "logline" => text(&[
            "2006-03-01 07:17:12\tnew york times\t1234",
            "1141197432\tcafé\tu1",
            "2006-03-01T07:17:12Z\tＮＥＷ  York\t",
            "new york\t12\t3",
            "2006-03-01 07:17:12\t\t",
            "1969-12-31 23:59:59\tx",
        ]),
        "normalize" => text(&[
            "Café",
            "ｃａｆｅ ｂｏｍｂ",
            "e\u{301}",
            "  A \t B  ",
            "ß",
            "İstanbul",
            "東京 タワー",
            "\u{b4}x",
            "a\u{0}b",
        ]),
        "blocklist" => text(&[
            "# comment\nbomb\nNew  York\n",
            "Café Bomb\n\n# x\n",
            "ｂｏｍｂ\r\n",
            "a\nb\nc d\n",
        ]),
        "privacy" => text(&[
            "4111 1111 1111 1111",
            "(555) 123-4567",
            "john doe at gmail dot com",
            "john.doe @ gmail.com",
            "x.com/?access_token=abc",
            "password: hunter2",
            "weather 90210",
            "4111\u{301}1111\u{301}1111",
        ]),
        "manifest" => text(&[
            "{\"format\":1,\"generation\":\"g1\",\"created_unix\":1700000000,\"watermark_hour\":490992,\"partitions\":[{\"index\":0,\"start\":\"\",\"end\":null,\"file\":\"part-000-ab12.snap\",\"bytes\":10,\"checksum\":\"ab12\",\"keys\":3}]}",
            "{\"format\":1,\"generation\":\"g1\",\"created_unix\":1700000000,\"watermark_hour\":490992,\"partitions\":[{\"index\":0,\"start\":\"\",\"end\":\"new\",\"file\":\"part-000-a.snap\",\"bytes\":10,\"checksum\":\"ab12\",\"keys\":3},{\"index\":1,\"start\":\"new\",\"end\":\"new york\",\"file\":\"generations/g1/part-001-b.snap\",\"bytes\":10,\"checksum\":\"ab12\",\"keys\":3},{\"index\":2,\"start\":\"new york\",\"end\":null,\"file\":\"part-002-c.snap\",\"bytes\":10,\"checksum\":\"ab12\",\"keys\":3}]}",
            "{\"format\":1,\"generation\":\"g1\",\"created_unix\":1700000000,\"watermark_hour\":490992,\"partitions\":[{\"index\":0,\"start\":\"\",\"end\":\"caf\\u00e9\",\"file\":\"a.snap\",\"bytes\":10,\"checksum\":\"ab12\",\"keys\":3},{\"index\":1,\"start\":\"café\",\"end\":\"東京\",\"file\":\"b.snap\",\"bytes\":10,\"checksum\":\"ab12\",\"keys\":3},{\"index\":2,\"start\":\"東京\",\"end\":null,\"file\":\"c.snap\",\"bytes\":10,\"checksum\":\"ab12\",\"keys\":3}]}",
            "{\"format\":1,\"generation\":\"g1\",\"created_unix\":1700000000,\"watermark_hour\":490992,\"partitions\":[{\"index\":0,\"start\":\"\",\"end\":\"b\",\"file\":\"a.snap\",\"bytes\":10,\"checksum\":\"ab12\",\"keys\":3},{\"index\":1,\"start\":\"a\",\"end\":null,\"file\":\"b.snap\",\"bytes\":10,\"checksum\":\"ab12\",\"keys\":3}]}",
            "{\"format\":1,\"generation\":\"g1\",\"created_unix\":1700000000,\"watermark_hour\":490992,\"partitions\":[{\"index\":0,\"start\":\"\",\"end\":null,\"file\":\"../x.snap\",\"bytes\":10,\"checksum\":\"ab12\",\"keys\":3}]}",
        ]),
        "query_params" => text(&[
            "q=ne",
            "q=new+y&k=5",
            "q=%E2%82&k=x",
            "q=bo&keys=1&version=abc",
            "k=0",
            "q=&k=11",
            "q=Caf%C3%A9",
            "q=new%20york%20&k=10&q=other",
        ]),
        _ => Vec::new(),
    }
}

/// A valid snapshot of `n` keys, some with displays and non-ASCII text.
fn valid_snapshot(n: usize) -> Vec<u8> {
    let mut rng = rng(n as u64);
    let words = ["new", "york", "news", "cafe", "café", "東京", "a", "ab", "abc", "weather"];
    let mut keys = std::collections::BTreeMap::new();
    while keys.len() < n {
        let parts = rng.random_range(1..=3);
        let q: Vec<&str> = (0..parts).map(|_| words[rng.random_range(0..words.len())]).collect();
        let surface = q.join(" ");
        if let Some((surface, key)) = typeahead_core::normalize::surface_and_key(&surface) {
            let display = (surface != key).then_some(surface);
            keys.insert(key, (display, 1.0 + f64::from(rng.random_range(0..1000u16)) / 7.0));
        }
    }
    let entries: Vec<Entry> =
        keys.into_iter().map(|(key, (display, score))| Entry { key, display, score }).collect();
    let info = BuildInfo {
        build_time_unix: 1_700_000_000,
        watermark_hour: Some(490_992),
        min_score: 1e-6,
        ..BuildInfo::default()
    };
    typeahead_core::snapshot::write(&entries, &info).expect("valid entries").0
}

/// Tokens the mutator inserts: the syntax each parser cares about.
fn dictionary(target: &str) -> Vec<Vec<u8>> {
    let tokens: &[&str] = match target {
        "logline" => &[
            "\t",
            "\r\n",
            "2006-03-01 ",
            "07:17:12",
            "T",
            "Z",
            "+01:00",
            "1141197432",
            "-",
            "é",
            "\u{301}",
        ],
        "privacy" => &[
            "@", " at ", " dot ", "com", "9", "12345", "-", "(", ")", "?", "=", "token", "pin:",
            "\u{200b}", "\u{301}", "\u{ad}",
        ],
        "normalize" | "blocklist" => {
            &[" ", "\t", "#", "\n", "\u{301}", "\u{b4}", "ß", "İ", "ｂ", "\u{200b}", "\u{a0}", "ﬁ"]
        }
        "manifest" => &[
            "\"partitions\":",
            "{\"index\":1,",
            "\"start\":\"",
            "\"end\":null",
            "\"end\":\"",
            "\"file\":\"../",
            "\"format\":2",
            "\\u0000",
            "é",
            ",",
            "]",
            "}",
        ],
        "query_params" => {
            &["q=", "&k=", "&keys=1", "&version=", "%", "%C3%A9", "+", "%00", "%FF", "=", "&"]
        }
        _ => &["TYPEAHED", "\0\0\0\0", "\u{ff}\u{ff}"],
    };
    tokens.iter().map(|t| t.as_bytes().to_vec()).collect()
}

fn repo_dir(kind: &str, target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz").join(kind).join(target)
}

fn read_dir_files(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

#[test]
fn fuzz_snapshot_bytes() {
    fuzz("snapshot_bytes");
}

#[test]
fn fuzz_snapshot_mutated() {
    fuzz("snapshot_mutated");
}

#[test]
fn fuzz_logline() {
    fuzz("logline");
}

#[test]
fn fuzz_normalize() {
    fuzz("normalize");
}

#[test]
fn fuzz_blocklist() {
    fuzz("blocklist");
}

#[test]
fn fuzz_privacy() {
    fuzz("privacy");
}

#[test]
fn fuzz_query_params() {
    fuzz("query_params");
}

#[test]
fn fuzz_manifest() {
    fuzz("manifest");
}

/// Writes every target's seeds into `fuzz/corpus/<target>/` (for `cargo fuzz` to start from).
#[test]
#[ignore = "writes into the source tree; run by hand"]
fn write_seed_corpus() {
    for (target, _) in checks::TARGETS {
        let dir = repo_dir("corpus", target);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for seed in seeds(target) {
            let name =
                format!("seed-{:016x}", typeahead_builder::record::fnv1a(seed.iter().copied()));
            std::fs::write(dir.join(name), seed).expect("write seed");
        }
    }
}
