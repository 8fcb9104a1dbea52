//! `typeahead serve` as a real process on 127.0.0.1: the API contract, hot swap under load,
//! corrupt snapshots, live blocklist updates, admin authentication, shutdown.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use typeahead::blocklist::Blocklist;
use typeahead::matching::{self, Match, Typed};
use typeahead::snapshot::{self, BuildInfo, Entry, Snapshot};
use typeahead::{normalize, rank};

use crate::http::{Client, Reply, Server};
use typeahead::synth::{rand::RngExt, rng};

const WORDS: &[&str] = &[
    "new", "york", "news", "newton", "cap", "captain", "capital", "café", "weather", "web", "bomb",
    "bombay", "a", "ab",
];

/// Deterministic entries with shared prefixes; `seed` changes the scores (and a few keys).
fn dataset(seed: u64) -> Vec<Entry> {
    let mut rng = rng(seed);
    let mut map: HashMap<String, f64> = HashMap::new();
    for _ in 0..2500 {
        let words = rng.random_range(1..=3);
        let q: Vec<&str> = (0..words).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect();
        let key = normalize::key(&q.join(" "));
        map.insert(key, f64::from(rng.random_range(1..=1000u16)) / 4.0);
    }
    let mut entries: Vec<Entry> =
        map.into_iter().map(|(key, score)| Entry { key, display: None, score }).collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    entries
}

fn write_snapshot(path: &Path, entries: &[Entry]) {
    let info = BuildInfo {
        build_time_unix: 1_700_000_000,
        watermark_hour: Some(1),
        ..BuildInfo::default()
    };
    snapshot::write_file(path, entries, &info).unwrap();
}

/// Brute force: the top `k` (text, score) of a typed prefix, skipping blocked keys.
/// The answer by definition ([`typeahead::matching`]): every unblocked key's tier, ordered by
/// tier, distance and rank, cut at `k`.
fn oracle(entries: &[Entry], typed: &str, k: usize, blocked: &Blocklist) -> Vec<(String, f64)> {
    let p = normalize::prefix(typed);
    let words = Typed::of(&p);
    let tier = |key: &str| {
        if key.starts_with(&p) {
            Some((Match::Prefix, 0))
        } else if words.matches(key) {
            Some((Match::Words, 0))
        } else {
            matching::fuzzy_distance(&p, key).map(|d| (Match::Fuzzy, d))
        }
    };
    let mut hits: Vec<(Match, u8, &Entry)> = entries
        .iter()
        .filter(|e| !blocked.blocks(&e.key))
        .filter_map(|e| tier(&e.key).map(|(t, d)| (t, d, e)))
        .collect();
    hits.sort_by(|a, b| {
        (a.0, a.1)
            .cmp(&(b.0, b.1))
            .then_with(|| rank::cmp(a.2.score, a.2.key.as_bytes(), b.2.score, b.2.key.as_bytes()))
    });
    hits.into_iter().take(k).map(|(_, _, e)| (e.key.clone(), e.score)).collect()
}

fn answer(json: &serde_json::Value) -> Vec<(String, f64)> {
    json["suggestions"]
        .as_array()
        .expect("suggestions array")
        .iter()
        .map(|s| (s["text"].as_str().unwrap().to_owned(), s["score"].as_f64().unwrap()))
        .collect()
}

fn encode(q: &str) -> String {
    form_urlencoded::byte_serialize(q.as_bytes()).collect()
}

/// Prefixes worth asking: every prefix of some keys, plus odd input.
fn prefixes(entries: &[Entry]) -> Vec<String> {
    let mut out: Vec<String> =
        vec!["".into(), " ".into(), "NEW ".into(), "Caf".into(), "zzz".into(), "b".into()];
    for e in entries.iter().step_by(97) {
        for (i, _) in e.key.char_indices().skip(1) {
            out.push(e.key[..i].to_owned());
        }
    }
    out
}

/// Atomically replaces `path` with `bytes` (as the builder does).
fn replace(path: &Path, bytes: &[u8]) {
    typeahead::atomic::write(path, bytes).unwrap();
}

struct Setup {
    _dir: tempfile::TempDir,
    path: PathBuf,
    token: PathBuf,
    blocklist: PathBuf,
    a: Vec<Entry>,
    b: Vec<Entry>,
    a_bytes: Vec<u8>,
    b_bytes: Vec<u8>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dataset(1), dataset(2));
    let path = dir.path().join("served.snap");
    write_snapshot(&dir.path().join("a.snap"), &a);
    write_snapshot(&dir.path().join("b.snap"), &b);
    let a_bytes = std::fs::read(dir.path().join("a.snap")).unwrap();
    let b_bytes = std::fs::read(dir.path().join("b.snap")).unwrap();
    std::fs::write(&path, &a_bytes).unwrap();
    let token = dir.path().join("token");
    crate::support::write_secret(&token, "correct-horse-battery-staple\n");
    let blocklist = dir.path().join("blocklist.txt");
    std::fs::write(&blocklist, "# nothing blocked yet\n").unwrap();
    Setup { path, token, blocklist, a, b, a_bytes, b_bytes, _dir: dir }
}

const TOKEN: &str = "Bearer correct-horse-battery-staple";

impl Setup {
    /// A server with the admin API and the watched blocklist file.
    fn admin_server(&self) -> Server {
        let (token, blocklist) = (self.token.to_str().unwrap(), self.blocklist.to_str().unwrap());
        Server::start(&self.path, &["--admin-token-file", token, "--blocklist", blocklist])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_contract() {
    let s = setup();
    let server = Server::start(&s.path, &[]);
    let c = Client::new();
    let id = Snapshot::open(&s.path).unwrap().id().to_owned();

    let r = c.get(&server.url("/v1/suggest?q=New+Y&k=3")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), "application/json");
    assert_eq!(r.header("x-typeahead-version"), id);
    assert!(r.header("cache-control").contains("max-age"));
    assert_eq!(r.header("access-control-allow-origin"), "*");
    assert_eq!(r.header("x-content-type-options"), "nosniff");
    assert!(!r.header("vary").contains("origin"), "one answer for every origin");
    // A page on another origin may ask for suggestions (preflight included), but not read
    // what the operator's tools read.
    let origin =
        [("origin", "https://elsewhere.example"), ("access-control-request-method", "GET")];
    let preflight =
        c.request("OPTIONS", &server.url("/v1/suggest?q=a"), &origin, b"").await.unwrap();
    assert_eq!(preflight.status, 200);
    assert_eq!(preflight.header("access-control-allow-origin"), "*");
    for path in ["/metrics", "/readyz", "/healthz"] {
        let r = c.request("GET", &server.url(path), &origin[..1], b"").await.unwrap();
        assert_eq!(r.header("access-control-allow-origin"), "", "{path}");
        assert_eq!(r.header("x-content-type-options"), "nosniff", "{path}");
    }
    let j = r.json();
    assert_eq!(j["query"], "new y");
    assert_eq!(j["version"], id.as_str());
    assert_eq!(j["partial"], false);
    assert_eq!(answer(&j), oracle(&s.a, "New Y", 3, &Blocklist::empty()));

    // Empty q: the global top-10; k is capped at the snapshot's maximum.
    let j = c.get(&server.url("/v1/suggest?q=&k=50")).await.json();
    assert_eq!(answer(&j), oracle(&s.a, "", 10, &Blocklist::empty()));

    // ETag revalidation.
    let r = c.get(&server.url("/v1/suggest?q=cap")).await;
    let tag = r.header("etag").to_owned();
    let r = c
        .request("GET", &server.url("/v1/suggest?q=cap"), &[("if-none-match", &tag)], b"")
        .await
        .unwrap();
    assert_eq!(r.status, 304);

    // Bad input: 400 with a JSON error, never a 500.
    let long = "a".repeat(1025);
    for (path, code) in [
        ("/v1/suggest".to_owned(), "missing_query"),
        ("/v1/suggest?k=2".to_owned(), "missing_query"),
        ("/v1/suggest?q=a&k=0".to_owned(), "invalid_k"),
        ("/v1/suggest?q=a&k=ten".to_owned(), "invalid_k"),
        (format!("/v1/suggest?q={long}"), "query_too_long"),
        ("/v1/opensearch".to_owned(), "missing_query"),
    ] {
        let r = c.get(&server.url(&path)).await;
        assert_eq!(r.status, 400, "{path}");
        assert_eq!(r.json()["error"]["code"], code, "{path}");
        assert!(r.json()["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let r = c.get(&server.url("/v1/suggest?q=%FF%FE")).await;
    assert_eq!(r.status, 200, "undecodable bytes are replaced, not rejected");
    let r = c.get(&server.url("/nope")).await;
    assert_eq!((r.status, r.json()["error"]["code"].as_str()), (404, Some("not_found")));
    let r = c.request("POST", &server.url("/v1/suggest?q=a"), &[], b"").await.unwrap();
    assert_eq!(r.status, 405);

    // OpenSearch: element 0 echoes q exactly; zero hits is ["q", []].
    for q in ["Café ✓", "  NEW  ", "%", "+", "a&b", "zzzz", "\"quoted\""] {
        let r = c.get(&server.url(&format!("/v1/opensearch?q={}", encode(q)))).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), "application/x-suggestions+json; charset=utf-8");
        let j = r.json();
        assert_eq!(j[0], q, "echo of {q:?}");
        let items: Vec<String> =
            j[1].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
        let expected: Vec<String> =
            oracle(&s.a, q, 10, &Blocklist::empty()).into_iter().map(|x| x.0).collect();
        assert_eq!(items, expected, "{q:?}");
    }

    assert_eq!(c.get(&server.url("/healthz")).await.status, 200);
    let j = c.get(&server.url("/readyz")).await.json();
    assert_eq!((j["ready"].as_bool(), j["keys"].as_u64()), (Some(true), Some(s.a.len() as u64)));
    let m = String::from_utf8(c.get(&server.url("/metrics")).await.body).unwrap();
    for needle in [
        "typeahead_requests_total{route=\"suggest\",status=\"200\"}",
        "typeahead_requests_total{route=\"suggest\",status=\"400\"}",
        "typeahead_request_duration_seconds_bucket{le=\"+Inf\",route=\"opensearch\",status=\"2xx\"}",
        "typeahead_snapshot_info{version=",
        "typeahead_snapshot_age_seconds",
        "typeahead_in_flight_requests",
        "typeahead_blocklist_hidden_items 0",
    ] {
        assert!(m.contains(needle), "metrics lack {needle}\n{m}");
    }
    assert!(!m.contains("new y"), "metrics carry no query text");
    // No admin routes without a token file, and never on the public listener.
    assert_eq!(
        c.request("POST", &server.url("/admin/reload"), &[("authorization", TOKEN)], b"")
            .await
            .unwrap()
            .status,
        404
    );
    assert!(server.admin.is_none());
}

/// Runs `tasks` clients for `duration`, each checking every answer with `check`; returns
/// (requests, failures).
async fn load<F>(
    server: &Server,
    tasks: usize,
    duration: Duration,
    queries: Arc<Vec<String>>,
    check: F,
) -> (u64, u64)
where
    F: Fn(&str, Instant, &serde_json::Value) -> Result<(), String> + Send + Sync + 'static,
{
    let check = Arc::new(check);
    let (sent, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let deadline = Instant::now() + duration;
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (c, base, queries, check) =
            (Client::new(), server.url("/v1/suggest?q="), Arc::clone(&queries), Arc::clone(&check));
        let (sent, failed) = (Arc::clone(&sent), Arc::clone(&failed));
        handles.push(tokio::spawn(async move {
            let mut i = t * 7919;
            while Instant::now() < deadline {
                i = (i + 1) % queries.len();
                let q = &queries[i];
                let started = Instant::now();
                sent.fetch_add(1, Ordering::Relaxed);
                let result = match c.request("GET", &format!("{base}{}", encode(q)), &[], b"").await
                {
                    Ok(r) if r.status == 200 => check(q, started, &r.json()),
                    Ok(r) => {
                        Err(format!("status {}: {}", r.status, String::from_utf8_lossy(&r.body)))
                    }
                    Err(e) => Err(e),
                };
                if let Err(e) = result
                    && failed.fetch_add(1, Ordering::Relaxed) < 3
                {
                    eprintln!("failure for {q:?}: {e}");
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    (sent.load(Ordering::Relaxed), failed.load(Ordering::Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_swap_under_load_never_fails_or_mixes_snapshots() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = setup();
    let server = Server::start(&s.path, &["--admin-token-file", s.token.to_str().unwrap()]);
    let id_a = Snapshot::from_bytes(s.a_bytes.clone()).unwrap().id().to_owned();
    let id_b = Snapshot::from_bytes(s.b_bytes.clone()).unwrap().id().to_owned();
    let queries = Arc::new(prefixes(&s.a));
    let none = Blocklist::empty();
    let expected: HashMap<(String, String), Vec<(String, f64)>> = queries
        .iter()
        .flat_map(|q| {
            [
                ((id_a.clone(), q.clone()), oracle(&s.a, q, 10, &none)),
                ((id_b.clone(), q.clone()), oracle(&s.b, q, 10, &none)),
            ]
        })
        .collect();
    let swapper = {
        let (path, a, b, c, admin) = (
            s.path.clone(),
            s.a_bytes.clone(),
            s.b_bytes.clone(),
            Client::new(),
            server.admin_url("/admin/reload"),
        );
        tokio::spawn(async move {
            let mut swaps = 0;
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(120)).await;
                replace(&path, if swaps % 2 == 0 { &b } else { &a });
                if swaps % 3 == 0 {
                    let r =
                        c.request("POST", &admin, &[("authorization", TOKEN)], b"").await.unwrap();
                    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
                }
                swaps += 1;
            }
            swaps
        })
    };
    // Answers from B prove the server swapped while loaded: a reload that never publishes
    // would pass every other check here.
    let from_b = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&from_b);
    let (sent, failed) = load(&server, 4, Duration::from_secs(3), queries, move |q, _, j| {
        let version = j["version"].as_str().unwrap_or_default().to_owned();
        if version == id_b {
            counted.fetch_add(1, Ordering::Relaxed);
        }
        match expected.get(&(version.clone(), q.to_owned())) {
            Some(e) if *e == answer(j) => Ok(()),
            Some(_) => Err(format!("answer is not snapshot {version}'s")),
            None => Err(format!("unknown version {version}")),
        }
    })
    .await;
    let swaps = swapper.await.unwrap();
    let from_b = from_b.load(Ordering::Relaxed);
    eprintln!("hot swap: {sent} requests, {failed} failed, {swaps} swaps, {from_b} from B");
    assert!(sent > 500 && swaps >= 10);
    assert_eq!(failed, 0);
    assert!(from_b > 0 && from_b < sent, "{from_b} of {sent} answers from B");
    let published =
        Client::new().metric(&server.url("/metrics"), "typeahead_snapshot_swaps_total").await;
    assert!(published >= 2.0, "{published} swaps published");

    // Old snapshots are freed once their last reader is done: no growth across swaps. The
    // server holds the current and the previous one.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = String::from_utf8(Client::new().get(&server.url("/metrics")).await.body).unwrap();
    assert!(m.contains("typeahead_snapshot_swaps_failed_total 0"), "{m}");
    let held: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("typeahead_snapshot_memory_bytes "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no snapshot memory gauge in {m}"));
    // A snapshot holds its file and what opening made from it (`Snapshot::memory_bytes`).
    let memory = |bytes: &[u8]| Snapshot::from_bytes(bytes.to_vec()).unwrap().memory_bytes();
    let (a, b) = (memory(&s.a_bytes) as u64, memory(&s.b_bytes) as u64);
    assert!(
        held <= a + b,
        "{held} bytes of snapshots held after {swaps} swaps (two are {})",
        a + b
    );
    assert!(held >= a.min(b), "{held} bytes held: less than one snapshot ({a} or {b})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_snapshot_is_rejected_while_the_old_one_serves() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = setup();
    let server = Server::start(&s.path, &["--admin-token-file", s.token.to_str().unwrap()]);
    let queries = Arc::new(prefixes(&s.a));
    let a = Arc::new(s.a.clone());
    let none = Blocklist::empty();
    let loader = {
        let (path, bytes, c, admin) =
            (s.path.clone(), s.a_bytes.clone(), Client::new(), server.admin_url("/admin/reload"));
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let mut corrupt = bytes.clone();
            let mid = corrupt.len() / 2;
            corrupt[mid] ^= 0x55;
            replace(&path, &corrupt);
            tokio::time::sleep(Duration::from_millis(300)).await;
            let r = c.request("POST", &admin, &[("authorization", TOKEN)], b"").await.unwrap();
            replace(&path, b"not a snapshot at all");
            tokio::time::sleep(Duration::from_millis(300)).await;
            r
        })
    };
    let (sent, failed) = load(&server, 3, Duration::from_millis(1500), queries, move |q, _, j| {
        if answer(j) == oracle(&a, q, 10, &none) { Ok(()) } else { Err("answer changed".into()) }
    })
    .await;
    let reload = loader.await.unwrap();
    assert_eq!(reload.status, 422);
    assert_eq!(reload.json()["error"]["code"], "snapshot_rejected");
    assert!(reload.json()["error"]["message"].as_str().unwrap().contains("checksum"));
    assert_eq!(failed, 0, "{sent} requests");
    let m = String::from_utf8(Client::new().get(&server.url("/metrics")).await.body).unwrap();
    let failed_swaps =
        m.lines().find_map(|l| l.strip_prefix("typeahead_snapshot_swaps_failed_total ")).unwrap();
    assert!(failed_swaps.parse::<f64>().unwrap() >= 3.0, "{m}");
    assert_eq!(Client::new().get(&server.url("/readyz")).await.status, 200);
}

/// A snapshot file rejected while fresh is read again. Written in place and read half done,
/// the rest may land without changing the file's identity (inode, size, time: a coarse file
/// clock), and no later poll would read it whole. Here the rest lands keeping the identity on
/// purpose; without the retry the server stays on the old snapshot for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_rejected_snapshot_is_read_again() {
    let s = setup();
    let server = Server::start(&s.path, &[]);
    let c = Client::new();
    let served = || async { c.get(&server.url("/readyz")).await.json()["version"].clone() };
    let first = served().await;
    let failed_swaps = || async {
        let m = String::from_utf8(c.get(&server.url("/metrics")).await.body).unwrap();
        let line = m.lines().find_map(|l| l.strip_prefix("typeahead_snapshot_swaps_failed_total "));
        line.unwrap().parse::<f64>().unwrap()
    };
    let mut half_done = s.b_bytes.clone();
    let mid = half_done.len() / 2;
    half_done[mid..].fill(0);
    replace(&s.path, &half_done);
    let deadline = Instant::now() + Duration::from_secs(10);
    while failed_swaps().await < 1.0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(failed_swaps().await >= 1.0, "the half-written file was never read");
    overwrite_keeping_identity(&s.path, &s.b_bytes);
    let deadline = Instant::now() + Duration::from_secs(10);
    while served().await == first && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let b = Snapshot::open(&s.path).unwrap();
    assert_eq!(served().await, b.id(), "the whole file, read again");
    // A file that is gone is a change once, not a retry after retry.
    let before = failed_swaps().await;
    std::fs::remove_file(&s.path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while failed_swaps().await == before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(failed_swaps().await, before + 1.0, "read once");
    assert_eq!(served().await, b.id());
}

/// Overwrites `path` in place with `bytes` of its length and puts its modification time back:
/// the same identity (inode, size, time) with other contents.
fn overwrite_keeping_identity(path: &Path, bytes: &[u8]) {
    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
    file.set_modified(modified).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocklist_updates_apply_within_a_second_under_load() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = setup();
    let server = s.admin_server();
    let c = Client::new();
    let queries = Arc::new(prefixes(&s.a));
    let a = Arc::new(s.a.clone());
    let first = Blocklist::parse("NEW York\n").unwrap();
    let second = Blocklist::parse("new york\nCAFÉ\n").unwrap();
    let phase = Arc::new(std::sync::Mutex::new((
        Instant::now() + Duration::from_secs(3600),
        Instant::now() + Duration::from_secs(3600),
    )));
    let checker = {
        let (a, phase, first, second) =
            (Arc::clone(&a), Arc::clone(&phase), first.clone(), second.clone());
        move |q: &str, started: Instant, j: &serde_json::Value| {
            let (t1, t2) = *phase.lock().unwrap();
            let got = answer(j);
            let options: Vec<Vec<(String, f64)>> = if started >= t2 {
                vec![oracle(&a, q, 10, &second)]
            } else if started >= t1 {
                vec![oracle(&a, q, 10, &first), oracle(&a, q, 10, &second)]
            } else {
                vec![oracle(&a, q, 10, &Blocklist::empty()), oracle(&a, q, 10, &first)]
            };
            if options.contains(&got) { Ok(()) } else { Err(format!("unexpected answer {got:?}")) }
        }
    };
    let driver = {
        let (c, phase, admin, file) = (
            c.clone(),
            Arc::clone(&phase),
            server.admin_url("/admin/blocklist"),
            s.blocklist.clone(),
        );
        let probe = server.url("/v1/suggest?q=new+y");
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            // 1. Through the admin API: in force when the PUT returns.
            let r = c
                .request("PUT", &admin, &[("authorization", TOKEN)], b"# from the API\nNEW York\n")
                .await
                .unwrap();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            phase.lock().unwrap().0 = Instant::now();
            assert!(
                std::fs::read_to_string(&file).unwrap().contains("NEW York"),
                "the file follows the API"
            );
            tokio::time::sleep(Duration::from_millis(400)).await;
            // 2. Through the file: in force within a second.
            replace(&file, "new york\nCAFÉ\n".as_bytes());
            let written = Instant::now();
            loop {
                let j = c.get(&probe).await.json();
                let hidden = !answer(&j).iter().any(|(t, _)| t.contains("new york"));
                let r = c.get(&probe.replace("new+y", "caf")).await.json();
                if hidden && answer(&r).is_empty() {
                    break;
                }
                assert!(
                    written.elapsed() < Duration::from_secs(1),
                    "file update not applied within 1 s"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let applied = written.elapsed();
            // Later requests must all see the second list (allow one second for the contract).
            phase.lock().unwrap().1 =
                written + Duration::from_secs(1).min(applied + Duration::from_millis(50));
            applied
        })
    };
    let (sent, failed) = load(&server, 3, Duration::from_millis(2500), queries, checker).await;
    let applied = driver.await.unwrap();
    eprintln!("blocklist: {sent} requests, {failed} failed, file update visible after {applied:?}");
    assert_eq!(failed, 0);
    let r = c
        .request("GET", &server.admin_url("/admin/blocklist"), &[("authorization", TOKEN)], b"")
        .await
        .unwrap();
    assert_eq!(r.header("cache-control"), "no-store", "the entries are for the operator alone");
    let j = r.json();
    assert_eq!(j["entries"], serde_json::json!(["cafe", "new york"]));
    assert!(j["hidden"].as_u64().unwrap() > 0);
    assert_eq!(j["source"], s.blocklist.display().to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_require_the_token_and_change_nothing_without_it() {
    let s = setup();
    let server = s.admin_server();
    let c = Client::new();
    let url = server.admin_url("/admin/blocklist");
    for auth in [
        None,
        Some("Bearer wrong-token-wrong-token"),
        Some("correct-horse-battery-staple"),
        Some("Bearer correct-horse-battery-stapl"),
    ] {
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", *a)).collect();
        let r = c.request("PUT", &url, &headers, b"new\n").await.unwrap();
        assert_eq!(r.status, 401, "{auth:?}");
        assert_eq!(r.json()["error"]["code"], "unauthorized");
        let r = c.request("POST", &server.admin_url("/admin/reload"), &headers, b"").await.unwrap();
        assert_eq!(r.status, 401);
    }
    let r = c.request("GET", &url, &[("authorization", TOKEN)], b"").await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["entries"], serde_json::json!([]), "rejected requests changed nothing");
    assert!(std::fs::read_to_string(&s.blocklist).unwrap().starts_with("# nothing"));
    let r = c.request("PUT", &url, &[("authorization", TOKEN)], &[0xff, 0xfe]).await.unwrap();
    assert_eq!((r.status, r.json()["error"]["code"].as_str()), (400, Some("invalid_blocklist")));
    // Admin bodies are size-limited. The 413 is sent before the body is read, while the client
    // is still uploading; without the server's lingering close the client would often see a
    // connection reset instead (about one try in three here), so try several times.
    let big = vec![b'a'; 5 << 20];
    for attempt in 0..5 {
        let r = Client::new().request("PUT", &url, &[("authorization", TOKEN)], &big).await;
        assert_eq!(r.map(|r| r.status), Ok(413), "attempt {attempt}");
    }
    let r = c.request("PUT", &url, &[("authorization", TOKEN)], b"new\n").await.unwrap();
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_down_cleanly() {
    let s = setup();
    let server = Server::start(&s.path, &[]);
    assert_eq!(Client::new().get(&server.url("/healthz")).await.status, 200);
    let status = tokio::task::spawn_blocking(move || server.terminate()).await.unwrap();
    assert!(status.success(), "{status:?}");
}

/// A server answers without transparent huge pages but for its snapshot's buffer
/// (`src/huge_pages.rs`): faulting one in stalled requests for tens of milliseconds. What it
/// logs having done is what the kernel says of it: `THP_enabled` stays 1 where the kernel keeps
/// the pages asked for (Linux 6.18+), and is 0 where it cannot.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_keep_transparent_huge_pages_only_for_their_snapshots() {
    if !Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        eprintln!("this kernel has no transparent huge pages: nothing to check");
        return;
    }
    let s = setup();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let server = Server::start_logging(&s.path, &[], std::fs::File::create(&log).unwrap());
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let logged = std::fs::read_to_string(&log).unwrap();
    let enabled = if logged.contains("policy=AdvisedOnly") {
        "THP_enabled:\t1"
    } else if logged.contains("policy=Off") {
        "THP_enabled:\t0"
    } else {
        panic!("no huge pages policy logged:\n{logged}")
    };
    assert!(status.lines().any(|l| l == enabled), "{enabled} expected:\n{status}");
}

/// Every header of an answer but `Date`, in order, to compare two answers by.
fn headers_but_date(r: &Reply) -> Vec<(String, String)> {
    let mut headers: Vec<_> = (r.headers.iter())
        .filter(|(name, _)| *name != "date")
        .map(|(name, value)| (name.to_string(), String::from_utf8_lossy(value.as_bytes()).into()))
        .collect();
    headers.sort();
    headers
}

/// The answer cache sends what a lookup would have, and nothing it holds outlives the snapshot
/// or the blocklist it was made under. (`/v1/suggest` answers are sent before routing,
/// `http::Hot`: the same answer, headers and counts as through the routes.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_answers_equal_looked_up_ones_and_follow_swaps_and_blocklists() {
    let s = setup();
    let server = s.admin_server();
    let uncached = Server::start(&s.path, &["--cache-entries", "0"]);
    let c = Client::new();
    let paths = ["/v1/suggest?q=new+y&k=4", "/v1/suggest?q=cap&keys=1", "/v1/opensearch?q=New+Y"];
    for path in paths {
        let first = c.get(&server.url(path)).await;
        let again = c.get(&server.url(path)).await;
        let fresh = c.get(&uncached.url(path)).await;
        for (name, r) in [("again", &again), ("uncached", &fresh)] {
            assert_eq!(r.body, first.body, "{path} {name}");
            assert_eq!(headers_but_date(r), headers_but_date(&first), "{path} {name}");
        }
        assert!(!first.header("etag").is_empty(), "{path}");
        let tag = first.header("etag").to_owned();
        let r = c.request("GET", &server.url(path), &[("if-none-match", &tag)], b"").await.unwrap();
        assert_eq!((r.status, r.header("etag")), (304, tag.as_str()), "{path}");
    }
    assert!(c.metric(&server.url("/metrics"), "typeahead_answer_cache_hits_total").await >= 6.0);
    let counted = "typeahead_requests_total{route=\"suggest\",status=\"200\"}";
    assert_eq!(c.metric(&server.url("/metrics"), counted).await, 4.0, "hits are counted too");
    assert_eq!(c.metric(&uncached.url("/metrics"), "typeahead_answer_cache_hits_total").await, 0.0);

    let probe = server.url("/v1/suggest?q=new+y");
    let first = c.get(&probe).await;
    let before = first.json();
    assert_eq!(answer(&before), oracle(&s.a, "new y", 10, &Blocklist::empty()));
    replace(&s.blocklist, b"new york\n");
    let blocked = Blocklist::parse("new york\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(1);
    while answer(&c.get(&probe).await.json()) != oracle(&s.a, "new y", 10, &blocked) {
        assert!(Instant::now() < deadline, "a cached answer outlived the blocklist change");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Nor does its tag: a browser holding the answer from before gets the new one.
    let old_tag = first.header("etag").to_owned();
    let r = c.request("GET", &probe, &[("if-none-match", &old_tag)], b"").await.unwrap();
    assert_eq!(r.status, 200, "the answer from before the blocklist change revalidated");
    assert_ne!(r.header("etag"), old_tag);
    replace(&s.path, &s.b_bytes);
    let deadline = Instant::now() + Duration::from_secs(2);
    while answer(&c.get(&probe).await.json()) != oracle(&s.b, "new y", 10, &blocked) {
        assert!(Instant::now() < deadline, "a cached answer outlived the snapshot");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Injected delays (`--inject-delay-ms`) hold for cached answers too: they exist to show what
/// faces a slow server, and an answer sent before routing must not skip them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_delays_hold_for_cached_answers() {
    let s = setup();
    let server = Server::start(&s.path, &["--inject-delay-ms", "300"]);
    let c = Client::new();
    let url = server.url("/v1/suggest?q=new+y");
    for _ in 0..2 {
        let started = Instant::now();
        assert_eq!(c.get(&url).await.status, 200);
        assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    }
    assert_eq!(c.metric(&server.url("/metrics"), "typeahead_answer_cache_hits_total").await, 1.0);
}

#[test]
fn serve_refuses_a_corrupt_snapshot_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.snap");
    std::fs::write(&path, b"garbage").unwrap();
    let out = crate::support::bin()
        .args(["serve", "--snapshot", path.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a typeahead snapshot"));
}

/// The version an aggregator's probes name (`/readyz?version=V`: the generation it answers
/// from) stays loaded through two reloads that no request named, as when another partition
/// cannot load the newer generations and the aggregator stays on the old one. It used to be
/// dropped at the second reload, and every answer touching this partition was partial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generation_an_aggregator_names_outlives_two_reloads() {
    let s = setup();
    let server = s.admin_server();
    let c = Client::new();
    let a = Snapshot::from_bytes(s.a_bytes.clone()).unwrap().id().to_owned();
    let third = s.path.with_file_name("c.snap");
    write_snapshot(&third, &dataset(3));
    for next in [s.b_bytes.clone(), std::fs::read(&third).unwrap()] {
        // As an aggregator's probes would, every 250 ms (a pin counts for 10 s).
        assert_eq!(c.get(&server.url(&format!("/readyz?version={a}"))).await.status, 200);
        replace(&s.path, &next);
        let admin = server.admin_url("/admin/reload");
        let r = c.request("POST", &admin, &[("authorization", TOKEN)], b"").await.unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let ready = c.get(&server.url("/readyz")).await.json();
    assert_eq!(ready["version"], Snapshot::open(&third).unwrap().id());
    assert_eq!(ready["previous_version"], a.as_str(), "{ready}");
    // What an aggregator caps `k` by while it still answers from the kept snapshot.
    assert_eq!(ready["previous_max_k"], 10, "{ready}");
    let pinned = c.get(&server.url(&format!("/v1/suggest?q=a&version={a}"))).await;
    assert_eq!(pinned.status, 200);
    // A client naming the current version in a request does not pin it: had it, the next
    // reload would drop the generation the aggregator answers from.
    let current = ready["version"].as_str().unwrap();
    let named = c.get(&server.url(&format!("/v1/suggest?q=a&version={current}"))).await;
    assert_eq!(named.status, 200);
    assert_eq!(c.get(&server.url(&format!("/readyz?version={a}"))).await.status, 200);
    replace(&s.path, &s.b_bytes);
    let admin = server.admin_url("/admin/reload");
    let r = c.request("POST", &admin, &[("authorization", TOKEN)], b"").await.unwrap();
    assert_eq!(r.status, 200);
    let ready = c.get(&server.url("/readyz")).await.json();
    assert_eq!(ready["previous_version"], a.as_str(), "{ready}");
}
