//! `kill -9` at any moment of a build leaves the previous state and snapshot valid, and a re-run
//! finishes with the result of an uninterrupted build. A disk that refuses bytes, or an output
//! that cannot be written, fails the build with a clear message and changes nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use typeahead::builder::state;
use typeahead::manifest::Manifest;
use typeahead::snapshot::Snapshot;
use typeahead::synth::{rand::RngExt, rng};

use crate::support::{
    BASE_HOUR, assert_same_entries, bin, entries, log_text, run_ok, same_entries, write,
};

fn build_args<'a>(input: &'a str, state: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "build",
        "--input",
        input,
        "--state",
        state,
        "--out",
        out,
        "--min-score",
        "0",
        "--half-life",
        "12",
        "--force",
    ]
}

fn parted<'a>(input: &'a str, state: &'a str, out: &'a str) -> Vec<&'a str> {
    let mut args = build_args(input, state, out);
    args.extend(["--partitions", "3"]);
    args
}

/// How many kills (`CRASH_KILLS`, else `default`; .ci/run asks for more) and their random
/// delays, spread over a build that takes `full` and a little past it. The seed (`CRASH_SEED`,
/// else the clock) is printed so a failure can be replayed.
fn kill_plan(what: &str, default: u32, full: Duration) -> (u32, impl FnMut() -> Duration) {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let kills = env("CRASH_KILLS").map_or(default, |k| k as u32);
    let seed = env("CRASH_SEED").unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        now.as_nanos() as u64
    });
    eprintln!("crash ({what}): {kills} kills over a {full:?} build, CRASH_SEED={seed}");
    let mut rng = rng(seed);
    (kills, move || full.mul_f64(f64::from(rng.random_range(0..1100u16)) / 1000.0))
}

/// Reads a whole state file, failing on any corruption.
fn read_state(dir: &Path) -> Vec<(String, f64)> {
    let mut r = state::Reader::open(&dir.join(state::STATE_FILE)).expect("state opens");
    let mut keys = Vec::new();
    while let Some((k, rec)) = r.next_record().expect("state record") {
        keys.push((k, rec.surfaces.iter().map(|s| s.score.score).sum()));
    }
    keys
}

#[test]
fn sigkill_mid_build_never_damages_published_files() {
    let _turn = crate::support::HEAVY.blocking_lock();
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    write(dir.path(), "a.tsv", &log_text(11, BASE_HOUR, 5, 2_000));
    write(dir.path(), "b.tsv", &log_text(12, BASE_HOUR + 5, 5, 200_000));

    // The reference: both batches, uninterrupted.
    run_ok(&build_args(&d("a.tsv"), &d("ref-state"), &d("ref.snap")));
    run_ok(&build_args(&d("b.tsv"), &d("ref-state"), &d("ref.snap")));
    let reference = entries(&dir.path().join("ref.snap"));

    // The previous generation: batch a only.
    run_ok(&build_args(&d("a.tsv"), &d("state"), &d("out.snap")));
    let previous = entries(&dir.path().join("out.snap"));
    let previous_state = read_state(&dir.path().join("state"));

    // Time one uninterrupted run of batch b to spread the kills over it.
    let scratch_state = dir.path().join("scratch-state");
    std::fs::create_dir_all(&scratch_state).unwrap();
    std::fs::copy(
        dir.path().join("state").join(state::STATE_FILE),
        scratch_state.join(state::STATE_FILE),
    )
    .unwrap();
    let t = Instant::now();
    run_ok(&build_args(&d("b.tsv"), &d("scratch-state"), &d("scratch.snap")));
    let full = t.elapsed();

    let (kills, mut delays) = kill_plan("single file", 10, full);
    for _ in 0..kills {
        let delay = delays();
        let mut child =
            bin().args(build_args(&d("b.tsv"), &d("state"), &d("out.snap"))).spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let now = entries(&dir.path().join("out.snap"));
        let now_state = read_state(&dir.path().join("state"));
        if now_state == previous_state {
            // Killed before the state was committed: the snapshot is the old or the new one.
            assert!(same_entries(&now, &previous, 0.0) || same_entries(&now, &reference, 1e-9));
        } else {
            // The state is committed only after the snapshot: both are new.
            assert_same_entries(&now, &reference, 1e-9);
        }
        // Re-running the same input finishes the job (or finds it done) with the same result.
        run_ok(&build_args(&d("b.tsv"), &d("state"), &d("out.snap")));
        assert_same_entries(&entries(&dir.path().join("out.snap")), &reference, 1e-9);
        // Back to the previous generation for the next round.
        restore(dir.path(), &d, &previous_state);
    }
}

/// Every entry of the published partitioned build in `dir`, read through its manifest; fails
/// unless the manifest and every partition file load and agree (file id = manifest checksum).
pub(crate) fn published_entries(dir: &Path) -> Vec<(String, String, f64)> {
    let manifest = Manifest::read(&dir.join("manifest.json")).expect("manifest loads");
    let mut all = Vec::new();
    for p in &manifest.partitions {
        let path = dir.join(&p.file);
        let id = Snapshot::open(&path).expect("partition loads").id().to_owned();
        assert_eq!(id, p.checksum, "manifest and {} disagree", p.file);
        all.extend(entries(&path));
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// Partitioned builds publish several files and a manifest: a kill between any two leaves
/// every live file loadable, and the re-run publishes a consistent generation equal to an
/// uninterrupted build.
#[test]
fn sigkill_mid_partitioned_build_leaves_loadable_files_and_recovers() {
    let _turn = crate::support::HEAVY.blocking_lock();
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    write(dir.path(), "a.tsv", &log_text(61, BASE_HOUR, 4, 2_000));
    write(dir.path(), "b.tsv", &log_text(62, BASE_HOUR + 4, 4, 100_000));
    run_ok(&parted(&d("a.tsv"), &d("ref-state"), &d("ref")));
    run_ok(&parted(&d("b.tsv"), &d("ref-state"), &d("ref")));
    let reference = published_entries(&dir.path().join("ref"));
    // Kills land anywhere in the second build, publishing included: time that build alone.
    run_ok(&parted(&d("a.tsv"), &d("scratch-state"), &d("scratch")));
    let t = Instant::now();
    run_ok(&parted(&d("b.tsv"), &d("scratch-state"), &d("scratch")));
    let full = t.elapsed();

    let (kills, mut delays) = kill_plan("partitioned", 6, full);
    for _ in 0..kills {
        let _ = std::fs::remove_dir_all(dir.path().join("state"));
        let _ = std::fs::remove_dir_all(dir.path().join("out"));
        run_ok(&parted(&d("a.tsv"), &d("state"), &d("out")));
        let mut child = bin().args(parted(&d("b.tsv"), &d("state"), &d("out"))).spawn().unwrap();
        std::thread::sleep(delays());
        let _ = child.kill();
        let _ = child.wait();
        // Whatever moment it died at, the manifest names a consistent generation (its files
        // load and match it), and every live file loads.
        published_entries(&dir.path().join("out"));
        for entry in std::fs::read_dir(dir.path().join("out")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "snap") {
                Snapshot::open(&path).expect("live partition loads");
            }
        }
        run_ok(&parted(&d("b.tsv"), &d("state"), &d("out")));
        assert_same_entries(&published_entries(&dir.path().join("out")), &reference, 1e-9);
    }
}

/// Rebuilds the batch-a generation in `state` and `out.snap`.
fn restore(dir: &Path, d: &dyn Fn(&str) -> String, previous_state: &[(String, f64)]) {
    std::fs::remove_dir_all(dir.join("state")).unwrap();
    run_ok(&build_args(&d("a.tsv"), &d("state"), &d("out.snap")));
    assert_eq!(read_state(&dir.join("state")), previous_state);
}

/// Everything in a directory tree with its bytes, to prove a failed build changed nothing.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(tree(&path));
        } else {
            out.push((path.to_string_lossy().into_owned(), std::fs::read(&path).unwrap()));
        }
    }
    out.sort();
    out
}

/// A disk that refuses further bytes: the file-size limit (`RLIMIT_FSIZE`, with `SIGXFSZ`
/// ignored so writes fail with an error instead of killing the process) stands in for a full
/// disk, without needing root to mount a small file system. `.ci/run` repeats this on a real
/// full tmpfs.
#[test]
fn a_full_disk_fails_the_build_and_keeps_the_previous_generation() {
    use std::os::unix::process::CommandExt;

    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    write(dir.path(), "a.tsv", &log_text(31, BASE_HOUR, 3, 2_000));
    write(dir.path(), "b.tsv", &log_text(32, BASE_HOUR + 3, 3, 60_000));
    std::fs::create_dir(dir.path().join("out")).unwrap();
    let out = d("out/live.snap");
    run_ok(&build_args(&d("a.tsv"), &d("state"), &out));
    let before = (tree(&dir.path().join("state")), tree(&dir.path().join("out")));
    // The largest file the b build writes, measured on a scratch copy, sets the limits: a
    // disk that fills at the start, early, midway and one byte short of the end.
    run_ok(&build_args(&d("a.tsv"), &d("scratch-state"), &d("scratch.snap")));
    run_ok(&build_args(&d("b.tsv"), &d("scratch-state"), &d("scratch.snap")));
    let largest = tree(&dir.path().join("scratch-state"))
        .iter()
        .map(|(_, bytes)| bytes.len() as u64)
        .chain([std::fs::metadata(d("scratch.snap")).unwrap().len()])
        .max()
        .unwrap();

    for limit in [0, largest / 16, largest / 2, largest - 1] {
        let mut cmd = bin();
        cmd.args(build_args(&d("b.tsv"), &d("state"), &out));
        crate::support::limit_resource(&mut cmd, libc::RLIMIT_FSIZE, limit);
        #[allow(unsafe_code)]
        // SAFETY: between fork and exec only an async-signal-safe call (signal).
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
        let result = cmd.output().unwrap();
        assert!(!result.status.success(), "a build with {limit} writable bytes succeeded");
        let stderr = String::from_utf8_lossy(&result.stderr);
        let dir_text = dir.path().display().to_string();
        assert!(
            stderr.contains(&format!("cannot write {dir_text}"))
                && stderr.contains("File too large"),
            "unclear error at {limit} bytes (no path or no cause): {stderr}"
        );
        let after = (tree(&dir.path().join("state")), tree(&dir.path().join("out")));
        assert!(after == before, "a failed build at {limit} bytes changed the state or output");
    }
    // With room again, the same input builds.
    run_ok(&build_args(&d("b.tsv"), &d("state"), &out));
    assert_ne!(tree(&dir.path().join("out")), before.1);
}

/// A directory with two logs, `a.tsv` and `b.tsv` (the two hours after it: a build of them
/// that committed its state before failing would change it), and `a.tsv` built into `state`
/// and `live.snap`.
fn built_once(seed: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.tsv", &log_text(seed, BASE_HOUR, 2, 1_000));
    write(dir.path(), "b.tsv", &log_text(seed + 1, BASE_HOUR + 2, 2, 1_000));
    let d = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    run_ok(&build_args(&d("a.tsv"), &d("state"), &d("live.snap")));
    dir
}

#[test]
fn an_unwritable_output_fails_clearly_and_changes_nothing() {
    let dir = built_once(41);
    let d = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    // The output's directory is a regular file: nothing can be created under it.
    write(dir.path(), "blocker", "not a directory");
    let before = tree(dir.path());
    let (input, state, out) = (d("b.tsv"), d("state"), d("blocker/live.snap"));
    let result = bin().args(build_args(&input, &state, &out)).output().unwrap();
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("blocker"), "the error does not name the path: {stderr}");
    assert_eq!(tree(dir.path()), before);
}

/// One build or rollback publishes to an output at a time: a build that finds the output
/// locked (here by this test, as another build would) fails clearly, changes nothing, and
/// succeeds once the lock is released.
#[test]
fn a_build_refuses_an_output_another_is_publishing_to() {
    let dir = built_once(43);
    let d = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let out = dir.path().join("live.snap");
    let held = typeahead::builder::publish::lock(&out, false).unwrap();
    let before = tree(dir.path());
    let result =
        bin().args(build_args(&d("b.tsv"), &d("state"), &d("live.snap"))).output().unwrap();
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("another build or rollback is publishing to"), "{stderr}");
    assert_eq!(tree(dir.path()), before, "a refused build changes nothing");
    drop(held);
    run_ok(&build_args(&d("b.tsv"), &d("state"), &d("live.snap")));
}
