//! Files changed under a running server the way operators (and attackers) change them: an
//! in-place overwrite or truncation of the served snapshot, a FIFO at its path, a repeated
//! reload, a rebuild that blocked a term, a blocklist that is missing or vanishes, a token file
//! others can read. Each was a defect found on a real release binary; each test fails without
//! its fix.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use typeahead::normalize;
use typeahead::snapshot::{self, BuildInfo, Entry, Snapshot};

use crate::http::{Client, Server};
use crate::support::{write, write_secret};

const TOKEN: &str = "Bearer correct-horse-battery-staple";

fn entries(words: &[(&str, f64)]) -> Vec<Entry> {
    let mut entries: Vec<Entry> = words
        .iter()
        .map(|&(q, score)| Entry { key: normalize::key(q), display: None, score })
        .collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries
}

fn write_snapshot(path: &Path, words: &[(&str, f64)], blocked_at_build: &[&str]) -> String {
    write_snapshot_at(path, words, blocked_at_build, 0)
}

/// As [`write_snapshot`], built at `build_time_unix` (a later build's blocked entries hide
/// in every generation a server holds).
fn write_snapshot_at(
    path: &Path,
    words: &[(&str, f64)],
    blocked_at_build: &[&str],
    build_time_unix: i64,
) -> String {
    let info = BuildInfo {
        watermark_hour: Some(1),
        build_time_unix,
        blocklist: blocked_at_build.iter().map(|s| (*s).to_owned()).collect(),
        ..BuildInfo::default()
    };
    snapshot::write_file(path, &entries(words), &info).unwrap();
    Snapshot::open(path).unwrap().id().to_owned()
}

const A: &[(&str, f64)] = &[("bad term", 9.0), ("bad weather", 5.0), ("banana", 3.0)];
const B: &[(&str, f64)] = &[("bad weather", 6.0), ("banana", 4.0), ("band", 2.0)];

fn texts(json: &serde_json::Value) -> Vec<String> {
    json["suggestions"]
        .as_array()
        .expect("suggestions")
        .iter()
        .map(|s| s["text"].as_str().unwrap().to_owned())
        .collect()
}

fn admin_server(dir: &Path, snap: &Path) -> Server {
    let token = dir.join("token");
    write_secret(&token, TOKEN.trim_start_matches("Bearer "));
    let blocklist = write(dir, "blocklist.txt", "# empty\n");
    Server::start(
        snap,
        &[
            "--admin-token-file",
            token.to_str().unwrap(),
            "--blocklist",
            blocklist.to_str().unwrap(),
        ],
    )
}

/// Runs `typeahead serve --snapshot SNAPSHOT ... EXTRA`, which must refuse to start: whether
/// it failed, and its stderr. A process still running after 10 s (it started after all) is
/// killed and reported as such.
fn refused(snapshot: &Path, extra: &[&str]) -> (bool, String) {
    let snapshot = snapshot.to_str().unwrap();
    let mut args = vec!["serve", "--snapshot", snapshot, "--listen", "127.0.0.1:0"];
    args.extend(["--admin-listen", "127.0.0.1:0"]);
    args.extend(extra);
    crate::support::refused_to_start(&args)
}

async fn admin(
    c: &Client,
    server: &Server,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, String) {
    let r = c
        .request(method, &server.admin_url(path), &[("authorization", TOKEN)], body)
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

/// `truncate`, `cp other.snap live.snap` and `rsync --inplace` write into the served file. A
/// mapped file would kill the server with SIGBUS on the next request; a file read into memory
/// is just a new file to verify: the truncated one is rejected, the overwritten one served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_place_overwrite_never_crashes_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.snap");
    let a = write_snapshot(&live, A, &[]);
    let b_path = dir.path().join("b.snap");
    let b = write_snapshot(&b_path, B, &[]);
    let server = Server::start(&live, &[]);
    let c = Client::new();
    assert_eq!(texts(&c.get(&server.url("/v1/suggest?q=ba")).await.json())[0], "bad term");

    // truncate -s 100 live.snap, in place: the watcher reads it, rejects it, and A serves on.
    std::fs::OpenOptions::new().write(true).open(&live).unwrap().set_len(100).unwrap();
    let metrics = server.url("/metrics");
    let rejected = c.metric_reaching(&metrics, "typeahead_snapshot_swaps_failed_total", 1.0).await;
    assert!(rejected >= 1.0, "the truncated file was never read");
    for _ in 0..20 {
        let r = c.get(&server.url("/v1/suggest?q=ba")).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["version"], a.as_str(), "the truncated file must be rejected");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    // cp b.snap live.snap: same inode, new bytes.
    let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(&live).unwrap();
    f.write_all(&std::fs::read(&b_path).unwrap()).unwrap();
    drop(f);
    let started = Instant::now();
    loop {
        let j = c.get(&server.url("/v1/suggest?q=ba")).await.json();
        if j["version"] == b.as_str() {
            assert_eq!(texts(&j)[0], "bad weather");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the overwritten file was never served"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(server.terminate().code(), Some(0));
}

/// A FIFO at the snapshot path used to hang the loader in `open()` while it held the change
/// lock: reload and blocklist changes never answered and SIGTERM no longer stopped the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_at_the_snapshot_path_blocks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.snap");
    let a = write_snapshot(&live, A, &[]);
    let server = admin_server(dir.path(), &live);
    let c = Client::new();
    std::fs::remove_file(&live).unwrap();
    let status = std::process::Command::new("mkfifo").arg(&live).status().unwrap();
    assert!(status.success());

    let started = Instant::now();
    let (status, body) = admin(&c, &server, "POST", "/admin/reload", b"").await;
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("not a regular file"), "{body}");
    let (status, body) = admin(&c, &server, "PUT", "/admin/blocklist", b"bad\n").await;
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let j = c.get(&server.url("/v1/suggest?q=ba")).await.json();
    assert_eq!(j["version"], a.as_str());
    assert_eq!(texts(&j), ["banana"], "the blocklist change applies while the FIFO sits there");

    // A good snapshot replacing the FIFO is loaded as usual.
    let b = write_snapshot(&dir.path().join("b.snap"), B, &[]);
    std::fs::rename(dir.path().join("b.snap"), &live).unwrap();
    let started = Instant::now();
    while c.get(&server.url("/v1/suggest?q=ba")).await.json()["version"] != b.as_str() {
        assert!(started.elapsed() < Duration::from_secs(10), "the good snapshot was never loaded");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let stopping = Instant::now();
    assert_eq!(server.terminate().code(), Some(0));
    assert!(stopping.elapsed() < Duration::from_secs(5));
}

/// A FIFO given as the aggregator's backends file is refused at start, not waited on for good.
#[test]
fn a_fifo_as_the_backends_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("backends.txt");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let manifest = dir.path().join("manifest.json");
    let (refused, stderr) = crate::support::refused_to_start(&[
        "aggregate",
        "--manifest",
        manifest.to_str().unwrap(),
        "--backends",
        fifo.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(refused, "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
}

/// `touch`, a repeated `/admin/reload`, a re-sync: the same version again must not replace
/// the kept previous generation (a pending rollout needs it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloading_the_same_version_keeps_the_previous_generation() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.snap");
    let a = write_snapshot(&live, A, &[]);
    let server = admin_server(dir.path(), &live);
    let c = Client::new();
    let b = write_snapshot(&dir.path().join("b.snap"), B, &[]);
    std::fs::rename(dir.path().join("b.snap"), &live).unwrap();
    let (status, body) = admin(&c, &server, "POST", "/admin/reload", b"").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&b), "{body}");
    for _ in 0..3 {
        let (status, body) = admin(&c, &server, "POST", "/admin/reload", b"").await;
        assert_eq!(status, 200, "{body}");
        std::fs::File::options()
            .append(true)
            .open(&live)
            .unwrap()
            .set_modified(std::time::SystemTime::now())
            .unwrap();
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    let pinned = c.get(&server.url(&format!("/v1/suggest?q=ba&version={a}"))).await;
    assert_eq!(pinned.status, 200, "the previous generation must still be held");
    assert_eq!(texts(&pinned.json())[0], "bad term");
    let metrics = String::from_utf8(c.get(&server.url("/metrics")).await.body).unwrap();
    let swaps = metrics
        .lines()
        .find_map(|l| l.strip_prefix("typeahead_snapshot_swaps_total "))
        .expect("swap counter");
    assert_eq!(swaps.trim(), "1", "only the real change is a swap");
}

/// A rebuild that blocked a term publishes a generation without it; `version=<previous>`
/// must not bring it back, and neither may the live blocklist's absence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_blocked_by_a_rebuild_stays_out_of_the_previous_generation() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.snap");
    let a = write_snapshot(&live, A, &[]);
    let server = admin_server(dir.path(), &live);
    let c = Client::new();
    let url = |v: &str| server.url(&format!("/v1/suggest?q=bad&version={v}"));
    assert_eq!(texts(&c.get(&url(&a)).await.json()), ["bad term", "bad weather"]);
    // The rebuild's --blocklist held "term": it is recorded in the new snapshot.
    let without = [("bad weather", 6.0), ("banana", 4.0)];
    let b = write_snapshot_at(&dir.path().join("b.snap"), &without, &["term"], 60);
    std::fs::rename(dir.path().join("b.snap"), &live).unwrap();
    let (status, body) = admin(&c, &server, "POST", "/admin/reload", b"").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(texts(&c.get(&url(&b)).await.json()), ["bad weather"]);
    assert_eq!(texts(&c.get(&url(&a)).await.json()), ["bad weather"], "blocked term came back");
    // A live blocklist change keeps the rebuild's entries in force for the previous one.
    let (status, body) = admin(&c, &server, "PUT", "/admin/blocklist", b"banana\n").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(texts(&c.get(&url(&a)).await.json()), ["bad weather"]);
    let ba = c.get(&server.url(&format!("/v1/suggest?q=ba&version={a}"))).await.json();
    assert_eq!(texts(&ba), ["bad weather"]);
    // A rollback to A while B is still held: B's build is the newer one, and its entries stay
    // out of A.
    let rolled = write_snapshot_at(&dir.path().join("a.snap"), A, &[], 0);
    assert_eq!(rolled, a);
    std::fs::rename(dir.path().join("a.snap"), &live).unwrap();
    let (status, body) = admin(&c, &server, "POST", "/admin/reload", b"").await;
    assert_eq!(status, 200, "{body}");
    let now = c.get(&server.url("/v1/suggest?q=bad")).await.json();
    assert_eq!(now["version"], a.as_str());
    assert_eq!(texts(&now), ["bad weather"], "the rollback brought back what B's build blocked");
}

/// `--blocklist MISSING` used to start with nothing blocked. Now it is an error naming the
/// path; at runtime a vanished file keeps the last good list (logged and counted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_blocklist_is_an_error_at_start_and_harmless_later() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.snap");
    write_snapshot(&live, A, &[]);
    let missing = dir.path().join("no-such-blocklist.txt");
    let (failed, stderr) = refused(&live, &["--blocklist", missing.to_str().unwrap()]);
    assert!(failed, "{stderr}");
    assert!(stderr.contains("no-such-blocklist.txt"), "{stderr}");

    let blocklist = write(dir.path(), "blocklist.txt", "term\n");
    let server = Server::start(&live, &["--blocklist", blocklist.to_str().unwrap()]);
    let c = Client::new();
    assert_eq!(texts(&c.get(&server.url("/v1/suggest?q=bad")).await.json()), ["bad weather"]);
    std::fs::remove_file(&blocklist).unwrap();
    let metrics = server.url("/metrics");
    let name = "typeahead_blocklist_updates_failed_total";
    assert_eq!(c.metric_reaching(&metrics, name, 1.0).await, 1.0, "the removal was never seen");
    assert_eq!(texts(&c.get(&server.url("/v1/suggest?q=bad")).await.json()), ["bad weather"]);
    // A missing file is one failure, not one a poll.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(c.metric(&metrics, name).await, 1.0);
}

/// A server of `A` with "term" blocked by its file: the file, the server, and `q=bad`'s URL.
async fn term_blocked(dir: &Path) -> (PathBuf, Server, String) {
    let live = dir.join("live.snap");
    write_snapshot(&live, A, &[]);
    let blocklist = write(dir, "blocklist.txt", "term\n");
    let server = Server::start(&live, &["--blocklist", blocklist.to_str().unwrap()]);
    let url = server.url("/v1/suggest?q=bad");
    assert_eq!(texts(&Client::new().get(&url).await.json()), ["bad weather"]);
    (blocklist, server, url)
}

/// Polls `url` until what it shows satisfies `done` (within 10 s of `since`); that answer.
async fn shown_once(url: &str, since: Instant, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let c = Client::new();
    loop {
        let shown = texts(&c.get(url).await.json());
        if done(&shown) {
            return shown;
        }
        assert!(since.elapsed() < Duration::from_secs(10), "never came: {shown:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A blocklist file written in place is read empty (or cut short) by a poll that lands between
/// its truncation and its write; publishing that would unblock every term it lost. A list that
/// drops entries waits until its file has been left alone for a second (here the writer
/// stalls after truncating: the empty list is what the operator gets, a second late).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocklist_truncated_in_place_unblocks_nothing_until_it_settles() {
    let dir = tempfile::tempdir().unwrap();
    let (blocklist, _server, url) = term_blocked(dir.path()).await;
    std::fs::write(&blocklist, "").unwrap();
    let truncated = Instant::now();
    shown_once(&url, truncated, |shown| shown.contains(&"bad term".to_owned())).await;
    let after = truncated.elapsed();
    assert!(after >= Duration::from_millis(900), "unblocked {after:?} after a truncation");
}

/// A list that drops one entry and adds another: what it adds is blocked at once (with what it
/// drops still blocked), and what it drops comes back only once the file has settled. Both
/// waited for the settling before: a newly blocked term stayed served for 1.5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_swaps_entries_blocks_at_once_and_unblocks_once_settled() {
    let dir = tempfile::tempdir().unwrap();
    let (blocklist, _server, url) = term_blocked(dir.path()).await;
    std::fs::write(&blocklist, "weather\n").unwrap();
    let changed = Instant::now();
    let shown = shown_once(&url, changed, |shown| !shown.contains(&"bad weather".to_owned())).await;
    assert!(shown.is_empty(), "the dropped entry came back with the added one: {shown:?}");
    shown_once(&url, changed, |shown| shown.contains(&"bad term".to_owned())).await;
}

/// A file caught mid-write can end in the start of a line ("bad" of "bad word"): blocked at
/// once, it hid every "bad ..." completion until the line was whole. A last line without its
/// end is applied only once the file has settled (a file may end without one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_line_without_its_end_waits_until_the_file_settles() {
    let dir = tempfile::tempdir().unwrap();
    let (blocklist, _server, url) = term_blocked(dir.path()).await;
    std::fs::write(&blocklist, "term\nbad").unwrap();
    let changed = Instant::now();
    shown_once(&url, changed, |shown| shown.is_empty()).await;
    let after = changed.elapsed();
    assert!(
        after >= Duration::from_millis(900),
        "a fragment was blocked {after:?} after the write"
    );
}

/// A file whose modification time is ahead of this host's clock (copied from a host whose clock
/// runs ahead) was "just written" until this clock caught up: what it dropped stayed blocked
/// for as long. It settles once the server has seen it unchanged for the settle time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_modified_in_the_future_still_settles() {
    let dir = tempfile::tempdir().unwrap();
    let (blocklist, _server, url) = term_blocked(dir.path()).await;
    std::fs::write(&blocklist, "weather\n").unwrap();
    let tomorrow = std::time::SystemTime::now() + Duration::from_secs(86_400);
    std::fs::File::options().write(true).open(&blocklist).unwrap().set_modified(tomorrow).unwrap();
    let changed = Instant::now();
    shown_once(&url, changed, |shown| shown == ["bad term"]).await;
    assert!(changed.elapsed() >= Duration::from_millis(900), "unblocked before it settled");
}

/// A token file others can read is no secret: `serve` refuses to start, like ssh.
#[test]
fn a_token_file_readable_by_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.snap");
    write_snapshot(&live, A, &[]);
    let token = write(dir.path(), "token", "correct-horse-battery-staple\n");
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).unwrap();
        let (failed, stderr) = refused(&live, &["--admin-token-file", token.to_str().unwrap()]);
        assert!(failed, "mode {mode:o} was accepted: {stderr}");
        assert!(stderr.contains("chmod 600"), "{stderr}");
    }
}

/// The `Bearer` scheme is case-insensitive (RFC 9110); 405 carries the JSON error body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_scheme_case_and_json_405() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.snap");
    write_snapshot(&live, A, &[]);
    let server = admin_server(dir.path(), &live);
    let c = Client::new();
    let secret = TOKEN.trim_start_matches("Bearer ");
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let auth = format!("{scheme} {secret}");
        let r = c
            .request("GET", &server.admin_url("/admin/blocklist"), &[("authorization", &auth)], b"")
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{scheme}");
    }
    for (url, method) in [
        (server.url("/v1/suggest?q=a"), "POST"),
        (server.url("/healthz"), "DELETE"),
        (server.admin_url("/admin/reload"), "GET"),
        // The page's routes too: an empty 405 was relabelled "malformed_request".
        (server.url("/"), "POST"),
        (server.url("/app.js"), "PUT"),
        (server.url("/search?q=a"), "DELETE"),
    ] {
        let r = c.request(method, &url, &[("authorization", TOKEN)], b"").await.unwrap();
        assert_eq!(r.status, 405, "{method} {url}");
        assert_eq!(r.json()["error"]["code"], "method_not_allowed", "{method} {url}");
    }
}

/// Invisible characters and look-alike letters used to slip past the blocklist: "ba\u{200d}d
/// word" was served while "bad word" was blocked, and so was "bаd word" with a Cyrillic а.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invisible_and_look_alike_letters_do_not_bypass_the_blocklist() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.snap");
    let queries = [
        ("ba\u{200d}d word", 9.0),    // the same key as "bad word" now
        ("b\u{430}d word", 8.0),      // Cyrillic а: its own key, the same skeleton
        ("bad w\u{3bf}rd list", 7.0), // Greek ο
        ("bad words", 6.0),
        ("badword", 5.0),
    ];
    write_snapshot(&live, &queries, &[]);
    assert_eq!(Snapshot::open(&live).unwrap().len(), 5, "five distinct keys");
    let blocklist = write(dir.path(), "blocklist.txt", "bad word\n");
    let server = Server::start(&live, &["--blocklist", blocklist.to_str().unwrap()]);
    let c = Client::new();
    let all = texts(&c.get(&server.url("/v1/suggest?q=")).await.json());
    assert_eq!(all, ["bad words", "badword"]);
    // Typed with the invisible character, the answer is the same.
    let typed = texts(&c.get(&server.url("/v1/suggest?q=ba%E2%80%8Bd")).await.json());
    assert_eq!(typed, ["bad words", "badword"]);
}
