//! `kill -9` at any moment of a build leaves the previous state and snapshot valid, and a re-run
//! finishes with the result of an uninterrupted build.

use std::path::Path;
use std::time::Instant;

use typeahead::builder::state;

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

    for i in 0..8u32 {
        let delay = full.mul_f64(f64::from(i) / 8.0 + 0.03);
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

/// Rebuilds the batch-a generation in `state` and `out.snap`.
fn restore(dir: &Path, d: &dyn Fn(&str) -> String, previous_state: &[(String, f64)]) {
    std::fs::remove_dir_all(dir.join("state")).unwrap();
    run_ok(&build_args(&d("a.tsv"), &d("state"), &d("out.snap")));
    assert_eq!(read_state(&dir.join("state")), previous_state);
}
