//! Helpers shared by the integration tests.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use typeahead::snapshot::Snapshot;
// The project's one generator (rand's ChaCha8), not the synthetic-data model under test.
use typeahead::synth::{rand::RngExt, rng};

/// The built `typeahead` binary.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_typeahead"))
}

/// Starts the binary with `args` and waits up to 10 s for it to exit: whether it failed, and
/// its stderr (a process still running then is killed and reported as started).
pub fn refused_to_start(args: &[&str]) -> (bool, String) {
    let mut child = bin()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            return (false, "still running after 10 s: it started".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (!out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Runs the binary and returns its output, asserting on the exit status.
pub fn run_ok(args: &[&str]) -> Output {
    let out = bin().args(args).output().expect("spawn typeahead");
    assert!(
        out.status.success(),
        "typeahead {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

const WORDS: &[&str] = &[
    "new", "york", "news", "newton", "café", "cafe", "Café", "münchen", "weather", "we", "web",
    "cap", "captain", "capital", "北京", "天气", "a", "ab", "apple", "apples", "ÉCOLE", "ecole",
];

/// A log of `lines` lines spread over hours `first_hour..first_hour + hours` (unix hours), with
/// shared prefixes, diacritic and case variants, multiple timestamp formats and a few bad lines.
pub fn log_text(seed: u64, first_hour: u32, hours: u32, lines: usize) -> String {
    let mut rng = rng(seed);
    let mut out = String::new();
    for _ in 0..lines {
        let hour = i64::from(first_hour + rng.random_range(0..hours));
        let secs = hour * 3600 + rng.random_range(0..3600i64);
        let words = rng.random_range(1..=3);
        let mut q = String::new();
        for w in 0..words {
            // Skew towards the first words so some queries are much more popular.
            let i =
                rng.random_range(0..WORDS.len()) * rng.random_range(0..WORDS.len()) / WORDS.len();
            if w > 0 {
                q.push_str(if rng.random_range(0..5) == 0 { "  " } else { " " });
            }
            q.push_str(WORDS[i]);
        }
        match rng.random_range(0..40) {
            0 => out.push_str("malformed line without tab\n"),
            1 => {
                let _ = writeln!(out, "not-a-time\t{q}");
            }
            2 | 3 => {
                let _ = writeln!(out, "{secs}\t{q}\tuser{}", rng.random_range(0..7));
            }
            _ => {
                let _ = writeln!(out, "{}\t{q}", format_ts(secs));
            }
        }
    }
    out
}

/// A log line for `query` in `hour` (hours since the epoch), a minute past it.
pub fn hour_line(hour: u32, query: &str) -> String {
    format!("{}\t{query}\n", format_ts(i64::from(hour) * 3600 + 60))
}

/// `YYYY-MM-DD HH:MM:SS` for unix seconds (civil-from-days).
pub fn format_ts(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write test file");
    path
}

/// Every (key, display, score) of a snapshot file, in key order.
pub fn entries(path: &Path) -> Vec<(String, String, f64)> {
    let s = Snapshot::open(path).expect("snapshot loads");
    s.entries().map(|e| (e.text().to_owned(), e)).map(|(t, e)| (e.key, t, e.score)).collect()
}

/// Whether two entry lists are equal, scores to `rel` relative error.
pub fn same_entries(a: &[(String, String, f64)], b: &[(String, String, f64)], rel: f64) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (&x.0, &x.1) == (&y.0, &y.1) && (x.2 - y.2).abs() <= rel * x.2.abs().max(y.2.abs())
        })
}

/// Asserts two entry lists are equal, scores to `rel` relative error.
#[track_caller]
pub fn assert_same_entries(a: &[(String, String, f64)], b: &[(String, String, f64)], rel: f64) {
    if !same_entries(a, b, rel) {
        let diff =
            a.iter().zip(b).find(|(x, y)| !same_entries(&[(*x).clone()], &[(*y).clone()], rel));
        panic!("entries differ: {} vs {} keys, first difference {diff:?}", a.len(), b.len());
    }
}

/// An hour around 2026-01-05, in hours since the epoch.
pub const BASE_HOUR: u32 = 490_992;

/// Tests that start many processes or drive load take turns: on a 2-core machine, running them
/// together would turn their timing assertions into tests of the scheduler.
pub static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Writes a secret (an admin token file) readable by its owner only, as `serve` requires.
pub fn write_secret(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Makes the process `command` starts run with `resource` (an `RLIMIT_*`) at `limit`, soft
/// and hard: a full disk (`RLIMIT_FSIZE`) or few file descriptors (`RLIMIT_NOFILE`) without
/// root.
pub fn limit_resource(command: &mut Command, resource: libc::__rlimit_resource_t, limit: u64) {
    use std::os::unix::process::CommandExt;
    #[allow(unsafe_code)]
    // SAFETY: between fork and exec only an async-signal-safe call (setrlimit).
    unsafe {
        command.pre_exec(move || {
            let rl = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(resource, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
