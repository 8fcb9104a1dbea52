//! `typeahead build --out s3://...`: hourly builds publish generations to a real S3-compatible
//! store (SeaweedFS, see [`crate::remote`]) with the state there too, a server follows them,
//! `rollback` and pruning work on the bucket, two builders cannot both publish, and a builder
//! killed at any moment leaves the live generation whole.

use std::path::Path;
use std::time::{Duration, Instant};

use typeahead::manifest::Manifest;

use crate::crash::published_entries;
use crate::http::Client;
use crate::remote::{BUCKET, Weed};
use crate::support::{BASE_HOUR, assert_same_entries, bin, hour_line, log_text, run_ok, write};

/// `build` into the bucket prefix `prefix` (state under `<prefix>-state`), 2 partitions.
fn build_args(log: &Path, prefix: &str) -> Vec<String> {
    build_args_n(log, prefix, 2)
}

/// [`build_args`] with `partitions` partitions.
pub(crate) fn build_args_n(log: &Path, prefix: &str, partitions: usize) -> Vec<String> {
    let mut args: Vec<String> = ["build", "--input"].map(String::from).to_vec();
    args.push(log.to_string_lossy().into_owned());
    args.extend([
        "--out".into(),
        format!("s3://{BUCKET}/{prefix}"),
        "--state".into(),
        format!("s3://{BUCKET}/{prefix}-state"),
        "--partitions".into(),
        partitions.to_string(),
        "--keep-generations".into(),
        "2".into(),
        "--min-score".into(),
        "0".into(),
        // The gate runs (against the live generation, downloaded) but lets these logs through.
        "--max-churn".into(),
        "1".into(),
    ]);
    args
}

/// Runs a build with the store's environment; returns its summary.
pub(crate) fn build_ok(weed: &Weed, args: &[String]) -> String {
    let out = bin().args(args).envs(weed.env()).output().expect("spawn typeahead");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "typeahead {args:?} failed: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `typeahead args` with the store's environment; returns its output.
fn run_env(weed: &Weed, args: &[&str]) -> String {
    let out = bin().args(args).envs(weed.env()).output().expect("spawn typeahead");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "typeahead {args:?} failed: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// The live manifest of `prefix`, read over the store's S3 API.
pub(crate) async fn live(weed: &Weed, prefix: &str) -> Manifest {
    let bytes = weed.get(&format!("{prefix}/manifest.json")).await.expect("a live manifest");
    Manifest::parse(&bytes).unwrap()
}

/// Builds two generations of two hours each from logs of `seed` and `seed + 1` under
/// `prefix`; returns the live manifest after each.
async fn two_generations(weed: &Weed, seed: u64, prefix: &str) -> (Manifest, Manifest) {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.tsv", &log_text(seed, BASE_HOUR, 2, 500));
    let b = write(dir.path(), "b.tsv", &log_text(seed + 1, BASE_HOUR + 2, 2, 500));
    build_ok(weed, &build_args(&a, prefix));
    let first = live(weed, prefix).await;
    build_ok(weed, &build_args(&b, prefix));
    (first, live(weed, prefix).await)
}

/// Downloads the live generation of `prefix` (its manifest and every file it names, at the
/// same relative paths) into `dir`, and returns its entries (each file checked against it).
pub(crate) async fn live_entries(
    weed: &Weed,
    prefix: &str,
    dir: &Path,
) -> Vec<(String, String, f64)> {
    let _ = std::fs::remove_dir_all(dir);
    let manifest = weed.get(&format!("{prefix}/manifest.json")).await.expect("a live manifest");
    for p in &Manifest::parse(&manifest).unwrap().partitions {
        let bytes = weed.get(&format!("{prefix}/{}", p.file)).await;
        let bytes = bytes.unwrap_or_else(|| panic!("the live manifest names {}: missing", p.file));
        let path = dir.join(&p.file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    std::fs::write(dir.join("manifest.json"), manifest).unwrap();
    published_entries(dir)
}

/// The reference: the same builds, one after another, on local files.
fn local_reference(dir: &Path, logs: &[&Path]) -> Vec<(String, String, f64)> {
    let (state, out) = (dir.join("ref-state"), dir.join("ref"));
    for log in logs {
        run_ok(&[
            "build",
            "--input",
            log.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--partitions",
            "2",
            "--min-score",
            "0",
            "--force",
        ]);
    }
    published_entries(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hourly_builds_publish_to_a_bucket_roll_back_and_never_race() {
    let _turn = crate::support::HEAVY.lock().await;
    let Some(weed) = Weed::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<_> = (0..4u32)
        .map(|h| {
            write(
                dir.path(),
                &format!("h{h}.tsv"),
                &log_text(70 + u64::from(h), BASE_HOUR + 2 * h, 2, 3_000),
            )
        })
        .collect();

    // Hour 0, then a server following the bucket.
    build_ok(&weed, &build_args(&logs[0], "hourly"));
    let first = live(&weed, "hourly").await;
    assert!(first.partitions[0].file.starts_with("generations/"), "{first:?}");
    let server = weed.follower("hourly", 1, &dir.path().join("cache"));
    let c = Client::new();
    let version = async |c: &Client| {
        c.get(&server.url("/readyz")).await.json()["version"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(version(&c).await, first.partitions[1].checksum);

    // Hours 1 and 2: the state in the bucket carries the EMA, so the bucket's generation equals
    // the same builds on local files.
    let summary = build_ok(&weed, &build_args(&logs[1], "hourly"));
    assert!(summary.contains("regression gate    passed"), "{summary}");
    build_ok(&weed, &build_args(&logs[2], "hourly"));
    assert!(weed.get("hourly-state/state.bin").await.is_some(), "the state is in the bucket");
    let reference = local_reference(dir.path(), &[&logs[0], &logs[1], &logs[2]]);
    assert_same_entries(
        &live_entries(&weed, "hourly", &dir.path().join("got")).await,
        &reference,
        1e-9,
    );
    let third = live(&weed, "hourly").await;
    // The same hour again, a second later: nothing new, so nothing is published, and the
    // state, read and written back the same, is not uploaded again.
    let state_written = weed.last_modified("hourly-state/state.bin").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again = build_ok(&weed, &build_args(&logs[2], "hourly"));
    assert!(again.contains(&format!("{} (unchanged", third.generation)), "{again}");
    assert_eq!(live(&weed, "hourly").await, third);
    assert_eq!(weed.last_modified("hourly-state/state.bin").await, state_written);
    let started = Instant::now();
    while version(&c).await != third.partitions[1].checksum {
        assert!(started.elapsed() < Duration::from_secs(10), "the server never switched");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // query, inspect and build --blocklist read from the bucket too.
    let part = format!("s3://{BUCKET}/hourly/{}", third.partitions[0].file);
    let inspect = run_env(&weed, &["inspect", &part]);
    assert!(inspect.contains(&format!("snapshot {}", third.partitions[0].checksum)), "{inspect}");
    let rules = format!("privacy rules      {}", typeahead::normalize::RULES_VERSION);
    assert!(inspect.contains(&rules), "{inspect}");
    let top = run_env(&weed, &["query", "--snapshot", &part, "--json", ""]);
    let top: serde_json::Value = serde_json::from_str(top.lines().next().unwrap()).unwrap();
    let blocked = top["suggestions"][0]["text"].as_str().unwrap().to_owned();
    weed.upload("lists/blocked.txt", format!("{blocked}\n").as_bytes()).await;
    let mut args = build_args(&logs[2], "hourly");
    args.extend(["--blocklist".into(), format!("s3://{BUCKET}/lists/blocked.txt")]);
    build_ok(&weed, &args);
    let mut answers = String::new();
    for p in live(&weed, "hourly").await.partitions {
        let url = format!("s3://{BUCKET}/hourly/{}", p.file);
        answers += &run_env(&weed, &["query", "--snapshot", &url, "--json", ""]);
    }
    assert!(!answers.contains(&format!("\"{blocked}\"")), "{blocked:?} blocked: {answers}");
    let third = live(&weed, "hourly").await;
    weed.upload("eval/later.tsv", &std::fs::read(&logs[3]).unwrap()).await;
    let args = ["eval", "--snapshot", &part, "--log", &format!("s3://{BUCKET}/eval/"), "--json"];
    let report: serde_json::Value = serde_json::from_str(&run_env(&weed, &args)).unwrap();
    assert!(report["events"].as_u64().unwrap_or(0) > 0, "eval read the logs: {report}");

    // --keep-generations 2: the first generation's files are gone from the bucket (SeaweedFS
    // may list its emptied directory for a while: a bucket has no directories, only names).
    let mut kept = Vec::new();
    for dir in weed.list_dirs("hourly/generations/").await {
        if weed.get(&format!("hourly/generations/{dir}/manifest.json")).await.is_some() {
            kept.push(dir);
        }
    }
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(weed.get(&format!("hourly/{}", first.partitions[0].file)).await.is_none());

    // Rollback: the generation before the live one, and the server follows.
    let out = bin()
        .args(["rollback", "--out", &format!("s3://{BUCKET}/hourly")])
        .envs(weed.env())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let back = live(&weed, "hourly").await;
    assert_ne!(back.generation, third.generation);
    assert!(kept[0].ends_with(&back.generation), "{kept:?} {}", back.generation);
    let started = Instant::now();
    while version(&c).await != back.partitions[1].checksum {
        assert!(started.elapsed() < Duration::from_secs(10), "the server never rolled back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Two builders: the slow one read the live manifest before the fast one published, so its
    // conditional put fails and it publishes nothing.
    let dirs_before = weed.list_dirs("hourly/generations/").await;
    let mut slow_args = build_args(&logs[3], "hourly");
    slow_args.extend(["--inject-publish-delay-ms".into(), "3000".into()]);
    let slow = bin()
        .args(&slow_args)
        .envs(weed.env())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    build_ok(&weed, &build_args(&logs[3], "hourly"));
    let winner = live(&weed, "hourly").await;
    let lost = slow.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&lost.stderr);
    assert!(!lost.status.success() && stderr.contains("changed while this build ran"), "{stderr}");
    assert_eq!(live(&weed, "hourly").await, winner, "the loser published nothing");
    // Nor does its generation count as complete (a rollback's default target, a kept one).
    let mut complete = Vec::new();
    for dir in weed.list_dirs("hourly/generations/").await {
        let manifest = format!("hourly/generations/{dir}/manifest.json");
        if !dirs_before.contains(&dir) && weed.get(&manifest).await.is_some() {
            complete.push(dir);
        }
    }
    assert_eq!(complete.len(), 1, "only the winner's generation is complete: {complete:?}");
    let m = String::from_utf8(c.get(&server.url("/metrics")).await.body).unwrap();
    assert!(!m.contains("test-secret"), "no credentials in metrics");
}

/// Prefixes and log names with characters `object_store` escapes (`~ [ ] %`) name the objects
/// they say: once joined, `team~x` was `team%7Ex` (and `team%257Ex` joined twice), so a build
/// published where no server looked, and logs under an input prefix were skipped unread. And
/// an incomplete upload is aged by when its files were written, not by the time in its name
/// (its builder's clock): one named as if from 1970 but written now is not pruned. And a new
/// generation is named after the newest in the bucket, however far ahead that one's clock was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_names_are_the_objects_they_say_and_fresh_uploads_are_kept() {
    let Some(weed) = Weed::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    // URL-encoded here: the keys are `h[1].tsv` and `13%3A00.tsv`.
    for (hour, key) in
        ["logs~1/h%5B1%5D.tsv", "logs~1/13%253A00.tsv", "logs~1/plain.tsv"].into_iter().enumerate()
    {
        let line = hour_line(BASE_HOUR + hour as u32, &format!("query{hour}"));
        weed.upload(key, line.as_bytes()).await;
    }
    let planted = "team~x/p/generations/1-deadbeef/part-000-deadbeef.snap";
    weed.upload(planted, b"still going up").await;
    // Another builder's upload, named by a clock far ahead of this one's.
    let ahead = "team~x/p/generations/500000000000000-cafe/part-000-cafe.snap";
    weed.upload(ahead, b"still going up").await;
    // Not fetched: a hidden object (as a hidden file in a directory is not read).
    weed.upload("logs~1/.h3.tsv", hour_line(BASE_HOUR + 3, "hidden").as_bytes()).await;
    let input = format!("s3://{BUCKET}/logs~1/");
    let mut args = build_args(Path::new(&input), "team~x/p");
    // Each object is read once, however many times it is named: the prefix again (without
    // its slash, and by Hadoop's name of the scheme), and one of its objects.
    let again = ["s3://{B}/logs~1", "s3a://{B}/logs~1/", "s3://{B}/logs~1/plain.tsv"];
    for again in again.map(|url| url.replace("{B}", BUCKET)) {
        args.splice(3..3, ["--input".to_owned(), again]);
    }
    let summary = build_ok(&weed, &args);
    assert!(summary.contains("input files        3 "), "{summary}");
    assert!(summary.contains("hours processed    3"), "{summary}");
    let entries = live_entries(&weed, "team~x/p", &dir.path().join("live")).await;
    let mut keys: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["query0", "query1", "query2"]);
    assert!(weed.get(planted).await.is_some(), "an upload written just now was pruned");
    // Named after the newest generation in the bucket, not by this builder's clock alone.
    let published = &live(&weed, "team~x/p").await.partitions[0].file;
    assert!(published.starts_with("generations/500000000000001-"), "{published}");
}

/// A rollback whose target lost its files while it ran (a prune racing it deletes them one by
/// one; here one is gone already) puts the live manifest back: a manifest naming files that
/// are gone would stop every follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_to_a_generation_being_pruned_changes_nothing() {
    let _turn = crate::support::HEAVY.lock().await;
    let Some(weed) = Weed::start().await else { return };
    let (first, second) = two_generations(&weed, 91, "pruned").await;
    weed.delete(&format!("pruned/{}", first.partitions[1].file)).await;
    let out = bin()
        .args(["rollback", "--out", &format!("s3://{BUCKET}/pruned")])
        .envs(weed.env())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("pruned while the rollback ran"), "{stderr}");
    assert_eq!(live(&weed, "pruned").await, second);
}

/// A build the regression gate refuses exits 3 when it publishes to a bucket too (the
/// CronJob's podFailurePolicy fails the Job on 3 without retrying), and publishes nothing. Its
/// error used to reach the exit code wrapped, which made it 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_refusal_publishing_to_a_bucket_exits_3() {
    let _turn = crate::support::HEAVY.lock().await;
    let Some(weed) = Weed::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.tsv", &log_text(95, BASE_HOUR, 4, 3000));
    let surprise: String =
        (0..300).map(|i| hour_line(BASE_HOUR + 5, &format!("zz{i} replaced everything"))).collect();
    let b = write(dir.path(), "b.tsv", &surprise);
    // No state (so the second log replaces the first), and the default churn limit, not the
    // lenient one the other bucket tests build with.
    let gated = |log: &Path| {
        let args = build_args(log, "gated");
        let state = args.iter().position(|a| a == "--state").unwrap();
        let churn = args.iter().position(|a| a == "--max-churn").unwrap();
        let dropped = [state, state + 1, churn, churn + 1];
        let kept = args.into_iter().enumerate().filter(|(i, _)| !dropped.contains(i));
        kept.map(|(_, a)| a).collect::<Vec<_>>()
    };
    build_ok(&weed, &gated(&a));
    let before = live(&weed, "gated").await;
    let o = bin().args(gated(&b)).envs(weed.env()).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("regression gate refused"), "{err}");
    assert_eq!(live(&weed, "gated").await.generation, before.generation, "nothing published");
}

/// A malformed live manifest (a bad hand edit, another tool) stops neither the next build nor
/// a rollback that names its target: each replaces it, conditionally on the object it read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_live_manifest_is_replaced_by_a_build_or_a_rollback() {
    let _turn = crate::support::HEAVY.lock().await;
    let Some(weed) = Weed::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.tsv", &log_text(93, BASE_HOUR, 2, 500));
    let b = write(dir.path(), "b.tsv", &log_text(94, BASE_HOUR + 2, 2, 500));
    build_ok(&weed, &build_args(&a, "damaged"));
    let first = live(&weed, "damaged").await;
    weed.upload("damaged/manifest.json", b"{ not a manifest").await;
    build_ok(&weed, &build_args(&b, "damaged"));
    assert_ne!(live(&weed, "damaged").await.generation, first.generation);
    weed.upload("damaged/manifest.json", b"{ not a manifest").await;
    let rollback = |to: &[&str]| {
        let out = format!("s3://{BUCKET}/damaged");
        bin().args(["rollback", "--out", &out]).args(to).envs(weed.env()).output().unwrap()
    };
    assert!(!rollback(&[]).status.success(), "no generation before a malformed one");
    let back = rollback(&["--to", &first.generation]);
    assert!(back.status.success(), "{}", String::from_utf8_lossy(&back.stderr));
    assert_eq!(live(&weed, "damaged").await.generation, first.generation);
}

/// A generation built under older privacy rules than the live one's goes live again only with
/// `--force`: it may hold what the newer rules withhold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_to_older_rules_needs_force() {
    let _turn = crate::support::HEAVY.lock().await;
    let Some(weed) = Weed::start().await else { return };
    let (first, second) = two_generations(&weed, 95, "rules").await;
    assert_eq!(second.rules, Some(typeahead::normalize::RULES_VERSION), "recorded by the build");
    // The first generation as a build under the rules before today's wrote it.
    let dirs = weed.list_dirs("rules/generations/").await;
    let name = dirs.iter().find(|d| d.ends_with(&first.generation)).expect("kept");
    let own = format!("rules/generations/{name}/manifest.json");
    let mut older = Manifest::parse(&weed.get(&own).await.unwrap()).unwrap();
    older.rules = Some(typeahead::normalize::RULES_VERSION - 1);
    weed.upload(&own, &older.to_json().unwrap()).await;
    let rollback = |force: &[&str]| {
        let out = format!("s3://{BUCKET}/rules");
        bin().args(["rollback", "--out", &out]).args(force).envs(weed.env()).output().unwrap()
    };
    let refused = rollback(&[]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--force"), "{err}");
    assert_eq!(refused.status.code(), Some(3), "a refusal, as the gate's: {err}");
    assert_eq!(live(&weed, "rules").await.generation, second.generation, "nothing published");
    let forced = rollback(&["--force"]);
    assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stderr));
    assert_eq!(live(&weed, "rules").await.generation, first.generation);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builder_killed_mid_publication_leaves_the_bucket_whole() {
    let _turn = crate::support::HEAVY.lock().await;
    let Some(weed) = Weed::start().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.tsv", &log_text(81, BASE_HOUR, 4, 2_000));
    let b = write(dir.path(), "b.tsv", &log_text(82, BASE_HOUR + 4, 4, 60_000));
    let reference = local_reference(dir.path(), &[&a, &b]);
    build_ok(&weed, &build_args(&a, "timing"));
    let t = Instant::now();
    build_ok(&weed, &build_args(&b, "timing"));
    let full = t.elapsed();

    for kill in 1..=5u32 {
        let prefix = format!("kill{kill}");
        build_ok(&weed, &build_args(&a, &prefix));
        let before = live(&weed, &prefix).await;
        let mut child = bin().args(build_args(&b, &prefix)).envs(weed.env()).spawn().unwrap();
        // Spread over the build and its upload, past its end.
        tokio::time::sleep(full.mul_f64(f64::from(kill) / 5.0)).await;
        let _ = child.kill();
        let _ = child.wait();
        // Whatever moment it died at, the live manifest names a whole generation: the old one
        // or the new one, every file there and matching it.
        let now = live(&weed, &prefix).await;
        live_entries(&weed, &prefix, &dir.path().join(&prefix)).await;
        if now != before {
            assert_same_entries(&published_entries(&dir.path().join(&prefix)), &reference, 1e-9);
        }
        // The re-run gives what an uninterrupted run gives.
        build_ok(&weed, &build_args(&b, &prefix));
        let got = live_entries(&weed, &prefix, &dir.path().join(&prefix)).await;
        assert_same_entries(&got, &reference, 1e-9);
    }
}
