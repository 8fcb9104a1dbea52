//! The hourly pipeline: catch-up over complete hours, generations and rollback, the regression
//! gate, and a running cluster following successive builds.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use typeahead::manifest::Manifest;
use typeahead::snapshot::Snapshot;

use crate::http::{Client, Process};
use crate::support::{BASE_HOUR, bin, hour_line, log_text, run_ok, write};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn catch_up_processes_complete_hours_only_once() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    for h in 0..4 {
        write(
            &logs,
            &format!("h{h}.tsv"),
            &hour_line(BASE_HOUR + h, &format!("query of hour {h}")),
        );
    }
    let (state, out) = (dir.path().join("state"), dir.path().join("s.snap"));
    // A catch-up build of every hour before `h`; the gate is off (each run adds new hours).
    let build_until = |h: u32| {
        let until = typeahead::builder::logline::format_hour(BASE_HOUR + h);
        let args =
            ["build", "--input", s(&logs), "--state", s(&state), "--out", s(&out), "--force"];
        let o = run_ok(&[&args[..], &["--until", &until]].concat());
        String::from_utf8(o.stdout).unwrap()
    };
    let text = build_until(3);
    assert!(text.contains("incomplete hours   1 lines"), "{text}");
    assert_eq!(Snapshot::open(&out).unwrap().meta().watermark_hour, Some(BASE_HOUR + 2));
    let text = build_until(4);
    assert!(text.contains("late lines         3"), "hours 0-2 are not counted twice\n{text}");
    let snap = Snapshot::open(&out).unwrap();
    assert_eq!(snap.meta().watermark_hour, Some(BASE_HOUR + 3));
    assert_eq!(snap.len(), 4);
}

/// `--complete-hours` counts every hour before the one in progress when the build starts,
/// and leaves that one for the next build (a line of it now is an incomplete hour's).
#[test]
fn complete_hours_leave_out_the_hour_in_progress() {
    use typeahead::builder::logline::current_hour;
    // Not in an hour's last seconds: the hour the build sees must be the one written here.
    let into_hour =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
            % 3600;
    if into_hour > 3590 {
        std::thread::sleep(Duration::from_secs(3601 - into_hour));
    }
    let dir = tempfile::tempdir().unwrap();
    let now = current_hour();
    let log = [hour_line(now - 2, "an hour done"), hour_line(now, "the hour in progress")].concat();
    let log = write(dir.path(), "log.tsv", &log);
    let out = dir.path().join("s.snap");
    let o = run_ok(&["build", "--input", s(&log), "--out", s(&out), "--complete-hours"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("incomplete hours   1 lines"), "{text}");
    let snap = Snapshot::open(&out).unwrap();
    assert_eq!(snap.meta().watermark_hour, Some(now - 2));
    let keys: Vec<String> = snap.entries().map(|e| e.key).collect();
    assert_eq!(keys, ["an hour done"]);
}

#[test]
fn the_gate_refuses_a_surprise_and_force_publishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.tsv", &log_text(31, BASE_HOUR, 4, 3000));
    let b = write(
        dir.path(),
        "b.tsv",
        &(0..300)
            .map(|i| hour_line(BASE_HOUR + 5, &format!("zz{i} replaced everything")))
            .collect::<String>(),
    );
    let out = dir.path().join("s.snap");
    run_ok(&["build", "--input", s(&a), "--out", s(&out)]);
    // The same data again passes the gate.
    run_ok(&["build", "--input", s(&a), "--out", s(&out)]);
    let live = std::fs::read(&out).unwrap();
    let o = bin().args(["build", "--input", s(&b), "--out", s(&out)]).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("regression gate refused") && err.contains("churn"), "{err}");
    assert!(std::fs::read(&out).unwrap() == live, "nothing published");
    run_ok(&["build", "--input", s(&b), "--out", s(&out), "--force"]);
    assert!(Snapshot::open(&out).unwrap().suggest("zz", 1)[0].key.starts_with("zz"));
}

/// After an empty generation (every key held back by `--min-users`) the gate has nothing to
/// compare: the first build with servable keys publishes. It used to count every hot prefix
/// the live generation had nothing for as changed, refuse that build as 100% churn, and so
/// every later one.
#[test]
fn the_first_servable_build_after_an_empty_generation_passes_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let (state, out) = (dir.path().join("state"), dir.path().join("s.snap"));
    let ts = |h: u32| crate::support::format_ts(i64::from(BASE_HOUR + h) * 3600 + 60);
    let words: Vec<String> = ('a'..='z').map(|c| format!("{c}{c} query")).collect();
    let hour = |h: u32, user: &str| -> String {
        words.iter().map(|w| format!("{}\t{w}\t{user}\n", ts(h))).collect()
    };
    let first = write(dir.path(), "h0.tsv", &hour(0, "u1"));
    let second = write(dir.path(), "h1.tsv", &hour(1, "u2"));
    for (log, served) in [(&first, 0), (&second, words.len())] {
        let args = ["build", "--input", s(log), "--state", s(&state), "--out", s(&out)];
        run_ok(&[&args[..], &["--min-users", "2"]].concat());
        assert_eq!(Snapshot::open(&out).unwrap().len(), served);
    }
}

/// `rounds` forced builds of 2 partitions into `DIR/parts`, each from its own log (seeds from
/// `seed`): the output and the generations, oldest first.
fn partitioned_generations(
    dir: &Path,
    rounds: u32,
    seed: u64,
) -> (std::path::PathBuf, Vec<String>) {
    let out = dir.join("parts");
    let mut generations = Vec::new();
    for round in 0..rounds {
        let log = write(
            dir,
            &format!("l{round}.tsv"),
            &log_text(seed + u64::from(round), BASE_HOUR, 3, 2000),
        );
        run_ok(&["build", "--input", s(&log), "--out", s(&out), "--partitions", "2", "--force"]);
        generations.push(Manifest::read(&out.join("manifest.json")).unwrap().generation);
    }
    (out, generations)
}

#[test]
fn rollback_republishes_earlier_generations() {
    let dir = tempfile::tempdir().unwrap();
    let (out, generations) = partitioned_generations(dir.path(), 3, 40);
    let o = run_ok(&["rollback", "--out", s(&out)]);
    assert!(String::from_utf8(o.stdout).unwrap().contains(&generations[1]));
    let live = Manifest::read(&out.join("manifest.json")).unwrap();
    assert_eq!(live.generation, generations[1]);
    for p in &live.partitions {
        assert_eq!(
            Snapshot::open(&out.join(&p.file)).unwrap().id(),
            p.checksum,
            "files follow the manifest"
        );
    }
    run_ok(&["rollback", "--out", s(&out), "--to", &generations[0]]);
    assert_eq!(Manifest::read(&out.join("manifest.json")).unwrap().generation, generations[0]);
    let o = bin().args(["rollback", "--out", s(&out), "--to", "nope"]).output().unwrap();
    assert!(!o.status.success());
}

/// An hourly build with no new line makes the live generation's content again, but with a
/// new build time. Published, it was a new generation: every server reloaded (and the
/// aggregator's cache, keyed by version, emptied) for nothing, and each such hour pushed an
/// older generation out of `--keep-generations`, until `rollback` had only copies of the live
/// data to go back to.
#[test]
fn a_build_with_nothing_new_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (state, out) = (dir.path().join("state"), dir.path().join("parts"));
    let hour = |h: u32| {
        write(dir.path(), &format!("h{h}.tsv"), &log_text(60 + u64::from(h), BASE_HOUR + h, 1, 400))
    };
    let (h0, h1, h2) = (hour(0), hour(1), hour(2));
    let build = |log: &Path, keep: &str| {
        let args = ["build", "--input", s(log), "--state", s(&state), "--out", s(&out)];
        let more = ["--partitions", "2", "--max-churn", "1", "--keep-generations", keep];
        String::from_utf8(run_ok(&[&args[..], &more].concat()).stdout).unwrap()
    };
    let live = || Manifest::read(&out.join("manifest.json")).unwrap();
    let history = || typeahead::builder::publish::generations(&out.join("generations")).len();
    build(&h0, "3");
    let first = live().generation;
    build(&h1, "3");
    let second = live();
    // A later second, so that a new build time would make a new generation.
    std::thread::sleep(Duration::from_millis(1100));
    let text = build(&h1, "3");
    assert!(text.contains(&format!("{} (unchanged", second.generation)), "{text}");
    assert_eq!(live(), second, "the live manifest is untouched");
    assert_eq!(history(), 2, "no generation was added");
    let o = run_ok(&["rollback", "--out", s(&out)]);
    assert!(String::from_utf8(o.stdout).unwrap().contains(&first));
    assert_eq!(live().generation, first);

    // A rollback killed between the stable names and the manifest left part-000.snap at
    // another generation: a build that publishes nothing mends it, and prunes to a smaller
    // --keep-generations as a publication would.
    build(&h2, "3");
    let third = live();
    assert_eq!(history(), 3);
    let stable = out.join("part-000.snap");
    std::fs::remove_file(&stable).unwrap();
    std::fs::write(&stable, b"another generation's partition").unwrap();
    let text = build(&h2, "1");
    assert!(text.contains(&format!("{} (unchanged", third.generation)), "{text}");
    let named = std::fs::read(out.join(&third.partitions[0].file)).unwrap();
    assert!(std::fs::read(&stable).unwrap() == named, "part-000.snap mended");
    assert_eq!(history(), 1);
}

/// A publication killed between the stable names and the manifest leaves `part-NNN.snap` at
/// another generation (other key ranges). Every build mends them first: one the gate refuses
/// too (it used to leave them, and servers started on the stable names served the wrong
/// ranges). And a rollback to a damaged kept generation is refused, where it published it.
#[test]
fn stable_names_are_mended_by_every_build_and_damage_is_not_rolled_back_to() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("parts");
    let a = write(dir.path(), "a.tsv", &log_text(71, BASE_HOUR, 3, 2000));
    let b = write(
        dir.path(),
        "b.tsv",
        &(0..300).map(|i| hour_line(BASE_HOUR + 4, &format!("zz{i} all new"))).collect::<String>(),
    );
    let build = |log: &Path| {
        bin()
            .args(["build", "--input", s(log), "--out", s(&out), "--partitions", "2"])
            .output()
            .unwrap()
    };
    assert!(build(&a).status.success());
    let first = Manifest::read(&out.join("manifest.json")).unwrap();
    run_ok(&["build", "--input", s(&b), "--out", s(&out), "--partitions", "2", "--force"]);
    let live = Manifest::read(&out.join("manifest.json")).unwrap();
    let stable = out.join("part-000.snap");
    std::fs::remove_file(&stable).unwrap();
    let older = out.join("generations").join(kept_dir(&out, &first.generation));
    std::fs::hard_link(older.join(&first.partitions[0].file), &stable).unwrap();
    let refused = build(&a);
    assert_eq!(refused.status.code(), Some(3), "{}", String::from_utf8_lossy(&refused.stderr));
    let named = std::fs::read(out.join(&live.partitions[0].file)).unwrap();
    assert!(std::fs::read(&stable).unwrap() == named, "part-000.snap mended by a refused build");

    // The first generation's kept partition, damaged (a copy of its own: the live files are
    // links to the second's).
    let kept = older.join(&first.partitions[1].file);
    let bytes = std::fs::read(&kept).unwrap();
    std::fs::remove_file(&kept).unwrap();
    std::fs::write(&kept, &bytes[..bytes.len() / 2]).unwrap();
    let o = bin().args(["rollback", "--out", s(&out), "--to", &first.generation]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("damaged"), "{err}");
    assert_eq!(Manifest::read(&out.join("manifest.json")).unwrap(), live, "nothing published");
    let o = bin().args(["rollback", "--out", s(&out)]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("(damaged)"), "{err}");
}

/// Two keys searched in the same hours, as often, have the same score to the bit, so the
/// ranking's tie-break (key bytewise) orders them: whatever the order of the lines, and however
/// many workers count them. Their scores were summed as lines came, an ulp apart, and "b"
/// ranked before "a" with one worker and in line order as well.
#[test]
fn equal_searches_tie_exactly_whatever_the_line_order_and_threads() {
    let dir = tempfile::tempdir().unwrap();
    let hours = [0, 28, 60];
    let line = |key: &str, h: u32| hour_line(BASE_HOUR + h, key);
    let forward: String = hours.iter().flat_map(|&h| [line("a", h), line("b", h)]).collect();
    let mixed: String = hours
        .iter()
        .map(|&h| line("a", h))
        .chain(hours.iter().rev().map(|&h| line("b", h)))
        .collect();
    let mut scores = Vec::new();
    for (name, text) in [("forward", &forward), ("mixed", &mixed)] {
        let log = write(dir.path(), &format!("{name}.tsv"), text);
        for threads in ["1", "2", "3"] {
            let out = dir.path().join(format!("{name}-{threads}.snap"));
            let args = ["build", "--input", s(&log), "--out", s(&out), "--half-life", "24"];
            run_ok(&[&args[..], &["--threads", threads, "--min-score", "0"]].concat());
            let top = Snapshot::open(&out).unwrap().suggest("", 2);
            let keys: Vec<&str> = top.iter().map(|t| t.key.as_str()).collect();
            assert_eq!(keys, ["a", "b"], "{name}, {threads} threads");
            assert_eq!(top[0].score.to_bits(), top[1].score.to_bits(), "{name}, {threads} threads");
            scores.push(top[0].score.to_bits());
        }
    }
    assert!(scores.windows(2).all(|w| w[0] == w[1]), "the same score in every build");
}

/// `--min-score 0` keeps everything (issue 2): a key whose score underflowed to 0, 1,452
/// half-lives after its only search, is served with the score 0. It was dropped.
#[test]
fn min_score_0_keeps_a_key_whose_score_underflowed() {
    let dir = tempfile::tempdir().unwrap();
    let log = [hour_line(BASE_HOUR, "old"), hour_line(BASE_HOUR + 1452, "new")].concat();
    let log = write(dir.path(), "log.tsv", &log);
    let out = dir.path().join("s.snap");
    let args = ["build", "--input", s(&log), "--out", s(&out), "--half-life", "1"];
    run_ok(&[&args[..], &["--min-score", "0"]].concat());
    let all = Snapshot::open(&out).unwrap().suggest("", 10);
    let got: Vec<(&str, f64)> = all.iter().map(|s| (s.key.as_str(), s.score)).collect();
    assert_eq!(got, [("new", 1.0), ("old", 0.0)]);
}

/// A rollback to a generation built under older rules than the live one's is refused, exit 3
/// as a refusal of the gate, and published with `--force`.
#[test]
fn a_local_rollback_to_older_rules_exits_3_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let (out, generations) = partitioned_generations(dir.path(), 2, 60);
    let kept = out.join("generations").join(kept_dir(&out, &generations[0])).join("manifest.json");
    let mut older = Manifest::read(&kept).unwrap();
    older.rules = Some(typeahead::normalize::RULES_VERSION - 1);
    std::fs::write(&kept, older.to_json().unwrap()).unwrap();
    let refused = bin().args(["rollback", "--out", s(&out)]).output().unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(3), "{err}");
    assert!(err.contains("--force"), "{err}");
    assert_eq!(Manifest::read(&out.join("manifest.json")).unwrap().generation, generations[1]);
    run_ok(&["rollback", "--out", s(&out), "--force"]);
    assert_eq!(Manifest::read(&out.join("manifest.json")).unwrap().generation, generations[0]);
}

/// The directory name under `OUT/generations` of kept generation `id`.
fn kept_dir(out: &Path, id: &str) -> String {
    typeahead::builder::publish::generations(&out.join("generations"))
        .into_iter()
        .map(|(name, _)| name)
        .find(|name| typeahead::builder::publish::id_of(name) == id)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_cluster_follows_three_hourly_builds() {
    let _turn = crate::support::HEAVY.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (logs, state, out) =
        (dir.path().join("logs"), dir.path().join("state"), dir.path().join("serve"));
    std::fs::create_dir_all(&logs).unwrap();
    write(&logs, "h00.tsv", &log_text(50, BASE_HOUR, 1, 3000));
    let build = |until: u32| {
        let until = typeahead::builder::logline::format_hour(BASE_HOUR + until);
        run_ok(&[
            "build",
            "--input",
            s(&logs),
            "--state",
            s(&state),
            "--out",
            s(&out),
            "--partitions",
            "2",
            "--until",
            &until,
            "--max-churn",
            "1",
        ]);
    };
    build(1);
    let cluster = Process::start(
        &[
            "cluster",
            "--snapshot-dir",
            s(&out),
            "--replicas",
            "2",
            "--listen",
            "127.0.0.1:0",
            "--deadline-ms",
            "2000",
            "--try-timeout-ms",
            "1000",
        ],
        "aggregator listening on ",
    );
    // Load throughout: every answer complete and successful.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (c, base, stop) = (Client::new(), cluster.url("/v1/suggest?q="), Arc::clone(&stop));
        tokio::spawn(async move {
            let (mut n, mut failures) = (0u64, Vec::new());
            let prefixes = ["", "n", "ne", "new ", "ca", "z", "zz", "a"];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let q = prefixes[n as usize % prefixes.len()];
                match c
                    .request(
                        "GET",
                        &format!(
                            "{base}{}",
                            form_urlencoded::byte_serialize(q.as_bytes()).collect::<String>()
                        ),
                        &[],
                        b"",
                    )
                    .await
                {
                    Ok(r) if r.status == 200 && r.json()["partial"] == false => {}
                    Ok(r) => failures.push(format!(
                        "{q:?}: {} {}",
                        r.status,
                        String::from_utf8_lossy(&r.body)
                    )),
                    Err(e) => failures.push(e),
                }
                n += 1;
            }
            (n, failures)
        })
    };
    let c = Client::new();
    for hour in 1..=3u32 {
        // A new hour arrives with a new hot query, and the hourly build publishes it.
        let hot = format!("zz trending in hour {hour}");
        write(
            &logs,
            &format!("h{hour:02}.tsv"),
            &(0..200).map(|_| hour_line(BASE_HOUR + hour, &hot)).collect::<String>(),
        );
        build(hour + 1);
        let started = Instant::now();
        loop {
            let j = c.get(&cluster.url("/v1/suggest?q=zz")).await.json();
            if j["suggestions"][0]["text"] == hot.as_str() {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "hour {hour} not served: {j}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (n, failures) = load.await.unwrap();
    assert!(
        failures.is_empty(),
        "{} of {n} failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
    assert!(n > 100, "{n} requests");
}

/// A taken port is reported before anything is generated, with the way out; an hour's length
/// that is not a number of seconds a demo can use is refused by the argument parser.
#[test]
fn the_demo_refuses_a_taken_port_and_unusable_hours_at_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let started = Instant::now();
    let (refused, stderr) = crate::support::refused_to_start(&["demo", "--listen", &addr]);
    assert!(refused, "{stderr}");
    assert!(stderr.contains("cannot listen on") && stderr.contains("127.0.0.1:0"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    for bad in ["inf", "nan", "0", "1e20"] {
        let (refused, stderr) = crate::support::refused_to_start(&["demo", "--hour-seconds", bad]);
        assert!(refused && stderr.contains("hour-seconds"), "{bad}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_serves_the_page_and_publishes_new_hours() {
    let _turn = crate::support::HEAVY.lock().await;
    let mut demo = Process::start(
        &["demo", "--listen", "127.0.0.1:0", "--hour-seconds", "1", "--hours", "2"],
        "aggregator listening on ",
    );
    let c = Client::new();
    let page = c.get(&demo.url("/")).await;
    assert_eq!(page.status, 200);
    assert!(String::from_utf8_lossy(&page.body).contains("role=\"combobox\""));
    let j = c.get(&demo.url("/v1/suggest?q=s")).await.json();
    assert!(!j["suggestions"].as_array().unwrap().is_empty(), "{j}");
    // Real words: what a newcomer types first finds what they would expect.
    for typed in ["new", "the", "weather", "how%20to", "pizza"] {
        let a = c.get(&demo.url(&format!("/v1/suggest?q={typed}&match=prefix"))).await.json();
        let texts = a["suggestions"].as_array().unwrap();
        assert!(texts.len() >= 3, "{typed}: {a}");
        let want = typed.replace("%20", " ");
        assert!(texts.iter().all(|s| s["text"].as_str().unwrap().starts_with(&want)), "{a}");
    }
    let first = j["version"].as_str().unwrap().to_owned();
    // Two new hours are built and published, then the demo stops by itself; polled every
    // 100 ms, at least one of them is seen.
    let started = Instant::now();
    let mut versions = vec![first];
    loop {
        if let Ok(Some(status)) = demo.child.try_wait() {
            assert!(status.success(), "{status:?}");
            break;
        }
        if let Ok(r) = c.request("GET", &demo.url("/v1/suggest?q=s"), &[], b"").await {
            let v = r.json()["version"].as_str().unwrap_or_default().to_owned();
            if !versions.contains(&v) {
                versions.push(v);
            }
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the demo did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(versions.len() >= 2, "the aggregator never switched generation: {versions:?}");
}
