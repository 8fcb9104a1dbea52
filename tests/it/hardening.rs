//! Hostile and careless clients against a real `typeahead serve`: slowloris and idle
//! connections, connection floods, oversized requests; blocked terms typed in other forms; and
//! what the default logs may say (never the queries people type).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use typeahead::normalize;
use typeahead::snapshot::{self, BuildInfo, Entry};

use crate::http::Server;
use crate::support::{bin, format_ts, write};

/// Queries in several typed forms, some of them blocked below.
const QUERIES: &[(&str, f64)] = &[
    ("New York Times", 90.0),
    ("new\u{b4} york city", 80.0), // key "new  york city": folding leaves two spaces
    ("ＢＯＭＢ threat", 70.0),
    ("Bómb maker", 60.0),
    ("newyork pizza", 50.0),
    ("bombay hotels", 40.0),
    ("news today", 30.0),
];

fn served(dir: &Path) -> PathBuf {
    let mut entries: Vec<Entry> = QUERIES
        .iter()
        .map(|(q, score)| Entry { key: normalize::key(q), display: None, score: *score })
        .collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    let info = BuildInfo {
        build_time_unix: 1_700_000_000,
        watermark_hour: Some(1),
        ..BuildInfo::default()
    };
    let path = dir.join("served.snap");
    snapshot::write_file(&path, &entries, &info).unwrap();
    path
}

/// Sends raw bytes, reads until the server closes; returns the status code (0 if none) and
/// the whole response.
fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may answer (and close) before it has read everything we send.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text)
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    raw(addr, format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes())
}

/// How long until the server closes a connection on which `feed` keeps (or stops) writing.
fn time_to_close(addr: SocketAddr, feed: impl FnOnce(TcpStream) + Send + 'static) -> Duration {
    let s = TcpStream::connect(addr).unwrap();
    let mut reader = s.try_clone().unwrap();
    reader.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let started = Instant::now();
    std::thread::spawn(move || feed(s));
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => return started.elapsed(),
            Ok(_) => {}
        }
    }
}

fn metric(addr: SocketAddr, name: &str) -> f64 {
    let (_, text) = get(addr, "/metrics");
    let line = text.lines().find(|l| l.starts_with(&format!("{name} "))).expect(name);
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn slow_and_idle_clients_are_cut_off_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&served(dir.path()), &["--header-timeout-ms", "400"]);
    let addr = server.addr;

    // Connects and never sends a byte.
    let idle = std::thread::spawn(move || time_to_close(addr, hold_open));
    // Slowloris: a request head trickled one header every 100 ms, never finished.
    let slow = std::thread::spawn(move || {
        time_to_close(addr, |mut s| {
            let _ = s.write_all(b"GET /v1/suggest?q=n HTTP/1.1\r\nHost: t\r\n");
            for i in 0..200 {
                std::thread::sleep(Duration::from_millis(100));
                if s.write_all(format!("X-{i}: y\r\n").as_bytes()).is_err() {
                    return;
                }
            }
        })
    });
    // Meanwhile everyone else is answered.
    for _ in 0..20 {
        assert_eq!(get(addr, "/v1/suggest?q=ne").0, 200);
        std::thread::sleep(Duration::from_millis(20));
    }
    let (idle, slow) = (idle.join().unwrap(), slow.join().unwrap());
    assert!(idle < Duration::from_secs(5), "idle connection held for {idle:?}");
    assert!(slow < Duration::from_secs(5), "slowloris connection held for {slow:?}");

    // A kept-alive connection that goes quiet after its request is closed as well.
    let kept = time_to_close(addr, |mut s| {
        let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
        std::thread::sleep(Duration::from_secs(20));
    });
    assert!(kept < Duration::from_secs(5), "idle kept-alive connection held for {kept:?}");
    let timed_out = metric(addr, "typeahead_connections_timed_out_total");
    assert!(timed_out >= 3.0);

    // Pipelined requests whose answers are never read: once the socket buffers are full the
    // server's writes wait, and a connection whose writes make no progress is closed too
    // (the metric's own request is the one connection left open).
    let mut unread = TcpStream::connect(addr).unwrap();
    let request = b"GET /app.js HTTP/1.1\r\nHost: t\r\n\r\n".repeat(2000);
    let _ = unread.write_all(&request);
    let started = Instant::now();
    while metric(addr, "typeahead_open_connections") < 2.0 {
        assert!(started.elapsed() < Duration::from_secs(2), "the unread connection never opened");
        std::thread::sleep(Duration::from_millis(20));
    }
    while metric(addr, "typeahead_open_connections") > 1.0 {
        assert!(started.elapsed() < Duration::from_secs(10), "an unread connection was held");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Counted with the other slow clients (it was not: hyper saw an I/O error).
    assert_eq!(metric(addr, "typeahead_connections_timed_out_total"), timed_out + 1.0);
    drop(unread);
}

/// At its concurrency limit a server sheds answers with 503 and Retry-After, but never its
/// health probes: a shed liveness probe gets a busy process restarted, a shed readiness probe
/// hides its blocklist version from the aggregator. Nor the page: a shed script left a box
/// that never suggested and never said why (the notice is the script's).
#[test]
fn overload_sheds_answers_but_never_the_health_probes_or_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--max-concurrency", "1", "--inject-delay-ms", "1500"];
    let server = Server::start(&served(dir.path()), &extra);
    let addr = server.addr;
    let deadline = Instant::now() + Duration::from_secs(10);
    // Holds the one slot for 1.5 s (the injected delay), trying again while this test's own
    // polls hold it.
    let held = std::thread::spawn(move || {
        loop {
            let status = get(addr, "/v1/suggest?q=ne").0;
            if status != 503 || Instant::now() > deadline {
                break status;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    // `/metrics` answers at once, so a 503 means a delayed answer holds the slot.
    while get(addr, "/metrics").0 != 503 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let shed = get(addr, "/v1/suggest?q=new");
    assert_eq!(shed.0, 503, "{}", shed.1);
    assert!(shed.1.to_ascii_lowercase().contains("retry-after"), "{}", shed.1);
    assert_eq!(get(addr, "/healthz").0, 200, "liveness shed while the slot was held");
    let (status, body) = get(addr, "/readyz");
    assert_eq!(status, 200, "readiness shed while the slot was held: {body}");
    assert!(body.contains("blocklist_version"), "{body}");
    for path in
        ["/", "/app.js", "/history.js", "/privacy.js", "/style.css", "/favicon.svg", "/search?q=x"]
    {
        assert_eq!(get(addr, path).0, 200, "{path} shed while the slot was held");
    }
    assert_eq!(held.join().unwrap(), 200);
}

#[test]
fn a_slow_answer_is_cut_at_the_request_timeout_and_frees_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let extra =
        ["--max-concurrency", "1", "--inject-delay-ms", "5000", "--request-timeout-ms", "300"];
    let server = Server::start(&served(dir.path()), &extra);
    for _ in 0..2 {
        // Twice: were the first one's place kept after its timeout, the second would be shed
        // ("overloaded") instead of timing out in turn.
        let started = Instant::now();
        let (status, body) = get(server.addr, "/v1/suggest?q=ne");
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("\"timeout\""), "{body}");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "answered after {:?}",
            started.elapsed()
        );
    }
    assert_eq!(get(server.addr, "/healthz").0, 200);
}

/// Keeps a connection open without sending anything.
fn hold_open(s: TcpStream) {
    std::thread::sleep(Duration::from_secs(20));
    drop(s);
}

#[test]
fn connection_floods_are_capped_and_recover() {
    let dir = tempfile::tempdir().unwrap();
    // A header timeout long enough that a stalled test thread cannot mistake it for the cap.
    let args = ["--max-connections", "4", "--header-timeout-ms", "3000"];
    let server = Server::start(&served(dir.path()), &args);
    let hold: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    // The fifth is accepted by the kernel and closed by the server at once, unanswered.
    let refused = time_to_close(server.addr, hold_open);
    assert!(refused < Duration::from_secs(2), "over-limit connection held for {refused:?}");
    // The four, still open on our side, time out on the server's; it takes new clients again.
    std::thread::sleep(Duration::from_millis(3500));
    assert_eq!(get(server.addr, "/v1/suggest?q=ne").0, 200);
    assert!(metric(server.addr, "typeahead_connections_timed_out_total") >= 4.0);
    assert!(metric(server.addr, "typeahead_connections_refused_total") >= 1.0);
    drop(hold);
}

/// With few file descriptors (`ulimit -n 128`, soft and hard), a flood of idle connections
/// to the public port leaves the admin port and reloads theirs: the connection limit shrinks
/// to fit. It used to stay at 4,096, so the flood took every descriptor, `accept` failed on
/// both listeners, and an operator's reload waited in the backlog.
#[test]
fn a_connection_flood_leaves_descriptors_for_the_admin_port() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    crate::support::write_secret(&token, "correct-horse-battery-staple\n");
    let args = ["--admin-token-file", token.to_str().unwrap(), "--header-timeout-ms", "8000"];
    let server = Server::start_with_open_files(&served(dir.path()), &args, 128);
    let held: Vec<TcpStream> =
        (0..200).filter_map(|_| TcpStream::connect(server.addr).ok()).collect();
    assert_eq!(held.len(), 200);
    std::thread::sleep(Duration::from_millis(300));
    let admin = server.admin.unwrap();
    let started = Instant::now();
    let (status, text) = raw(
        admin,
        b"POST /admin/reload HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer correct-horse-battery-staple\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200, "{text}");
    assert!(started.elapsed() < Duration::from_secs(2), "admin waited {:?}", started.elapsed());
    // Over the limit, a connection is closed at once, not left in the backlog.
    let refused = time_to_close(server.addr, hold_open);
    assert!(refused < Duration::from_secs(2), "over-limit connection held for {refused:?}");
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(get(server.addr, "/v1/suggest?q=ne").0, 200);
    assert!(metric(server.addr, "typeahead_connections_refused_total") >= 100.0);
}

#[test]
fn oversized_requests_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    crate::support::write_secret(&token, "correct-horse-battery-staple\n");
    let server =
        Server::start(&served(dir.path()), &["--admin-token-file", token.to_str().unwrap()]);
    let addr = server.addr;

    // A URI over 8 KiB: 414 with the JSON error body.
    let (status, body) = get(addr, &format!("/v1/suggest?q={}", "a".repeat(9000)));
    assert_eq!(status, 414);
    assert!(body.contains("\"uri_too_long\""), "{body}");
    // A head over 16 KiB (long URI, one huge header, or too many headers): 431 from hyper,
    // with the JSON error body like every other error.
    let (status, body) = get(addr, &format!("/v1/suggest?q={}", "a".repeat(20_000)));
    assert_eq!(status, 431);
    assert!(body.contains("\"headers_too_large\""), "{body}");
    assert!(body.contains("x-content-type-options: nosniff"), "{body}");
    let huge = format!("GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n", "b".repeat(20_000));
    assert_eq!(raw(addr, huge.as_bytes()).0, 431);
    let many: String = (0..100).map(|i| format!("X-{i}: y\r\n")).collect();
    assert_eq!(
        raw(addr, format!("GET /healthz HTTP/1.1\r\nHost: t\r\n{many}\r\n").as_bytes()).0,
        431
    );
    // A request hyper cannot parse: its own 400, with the JSON error body too.
    for request in
        [&b"GARBAGE\x01 / HTTP/1.1\r\n\r\n"[..], b"GET / HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n"]
    {
        let (status, body) = raw(addr, request);
        assert_eq!(status, 400, "{body}");
        let json = body.split("\r\n\r\n").nth(1).unwrap_or_default();
        let json: serde_json::Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(json["error"]["code"], "malformed_request");
        assert!(body.contains("content-type: application/json"), "{body}");
    }
    // A declared body on a public route: 413 before anything is read.
    let (status, body) =
        raw(addr, b"GET /v1/suggest?q=ne HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000\r\n\r\n");
    assert_eq!(status, 413);
    assert!(body.contains("\"payload_too_large\""), "{body}");
    // The same while the client keeps uploading the body, on a public route and as an admin
    // upload over 4 MiB (`serve::admin_routes_...` checks this with a pooled HTTP client).
    let admin = server.admin.unwrap();
    let uploads = [
        (addr, "GET /v1/suggest?q=ne", ""),
        (admin, "PUT /admin/blocklist", "Authorization: Bearer correct-horse-battery-staple\r\n"),
    ];
    for (to, start, auth) in uploads {
        let len = 5 << 20;
        let mut request =
            format!("{start} HTTP/1.1\r\nHost: t\r\n{auth}Content-Length: {len}\r\n\r\n")
                .into_bytes();
        request.extend(std::iter::repeat_n(b'x', len));
        for attempt in 0..5 {
            let (status, body) = raw(to, &request);
            assert_eq!(status, 413, "{start}, attempt {attempt}: {body:?}");
            assert!(body.contains("\"payload_too_large\""), "{body}");
        }
    }
    // The largest pick index there is: a page (a debug build used to panic adding one to it),
    // and `version=` on OpenSearch is held to what the server holds, as on `/v1/suggest`.
    let (status, body) =
        get(addr, &format!("/search?q=x&suggestionPrefix=a&suggestionIndex={}", usize::MAX));
    assert_eq!(status, 200, "{body}");
    // A pick counts only with the prefix typed, from a page of this site (an image on another
    // site, or a link without a prefix, says nothing of what people picked).
    let picks = |addr| get(addr, "/metrics").1.matches("picks_total{index=\"3\"} 1").count();
    assert_eq!(picks(addr), 0);
    let pick = |site: &str, prefix: &str| {
        let path = format!("/search?q=x{prefix}&suggestionIndex=3");
        let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n{site}Connection: close\r\n\r\n");
        assert_eq!(raw(addr, request.as_bytes()).0, 200);
    };
    pick("Sec-Fetch-Site: same-origin\r\n", "");
    pick("Sec-Fetch-Site: cross-site\r\n", "&suggestionPrefix=x");
    assert_eq!(picks(addr), 0);
    pick("Sec-Fetch-Site: same-origin\r\n", "&suggestionPrefix=x");
    assert_eq!(picks(addr), 1);
    // What a results page echoes is held to what a search box sends.
    let (_, page) = get(addr, &format!("/search?q={}", "w".repeat(5000)));
    assert!(page.contains(&"w".repeat(1024)) && !page.contains(&"w".repeat(1025)));
    // The first of a repeated parameter counts, as in the API.
    let (_, page) = get(addr, "/search?q=first&q=second");
    assert!(page.contains("<title>first - typeahead</title>"), "{page}");
    assert_eq!(get(addr, "/v1/opensearch?q=ne&version=nope").0, 409);
    // Without --public-url the description's URLs come from Host: never kept by a cache.
    let (status, description) = raw(
        addr,
        b"GET /opensearch.xml HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    assert!(description.contains("http://evil.example/"), "{description}");
    assert!(description.contains("cache-control: no-store"), "{description}");
    assert!(description.contains("vary: host"), "{description}");
    // A Host that is more than `host[:port]` would be copied into every URL: refused.
    for host in ["evil.example:1/x?\"<>", "user@evil.example", "evil.example/path"] {
        let request =
            format!("GET /opensearch.xml HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let (status, body) = raw(addr, request.as_bytes());
        assert!(status == 400 && body.contains("invalid_host"), "{host}: {status} {body}");
    }
    let (status, description) =
        raw(addr, b"GET /opensearch.xml HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n");
    assert_eq!(status, 200);
    assert!(description.contains("http://[::1]:8080/v1/opensearch"), "{description}");
    // No page can be framed by another site (its history buttons overlaid), load another
    // origin's script, or be read as another content type.
    for path in ["/", "/search?q=x", "/app.js", "/opensearch.xml"] {
        let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let (status, response) = raw(addr, request.as_bytes());
        assert_eq!(status, 200, "{path}");
        assert!(response.contains("frame-ancestors 'none'"), "{path}: {response}");
        assert!(response.contains("script-src 'self';"), "{path}: {response}");
        assert!(response.contains("x-content-type-options: nosniff"), "{path}: {response}");
    }
    let (_, results) =
        raw(addr, b"GET /search?q=x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(results.contains("cache-control: no-store"), "the query is on it: {results}");
    // The server is unharmed.
    assert_eq!(get(addr, "/v1/suggest?q=new").0, 200);
}

/// The admin body deadline covers the whole body: trickling a byte every 100 ms (which a timer
/// restarted by each chunk would never stop) is cut at the deadline and changes nothing.
#[test]
fn a_trickled_admin_body_is_cut_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    crate::support::write_secret(&token, "correct-horse-battery-staple\n");
    let args = ["--admin-token-file", token.to_str().unwrap(), "--admin-body-timeout-ms", "600"];
    let server = Server::start(&served(dir.path()), &args);
    let admin = server.admin.unwrap();
    let body = "new york\n".repeat(4);
    let mut s = TcpStream::connect(admin).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "PUT /admin/blocklist HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer correct-horse-battery-staple\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let started = Instant::now();
    let mut writer = s.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        for byte in body.bytes() {
            std::thread::sleep(Duration::from_millis(100));
            if writer.write_all(&[byte]).is_err() {
                return;
            }
        }
    });
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(text.contains("\"unreadable_body\""), "{text}");
    assert!(took < Duration::from_secs(3), "the trickled body was read for {took:?}");
    trickle.join().unwrap();
    let (status, listed) = raw(
        admin,
        b"GET /admin/blocklist HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer correct-horse-battery-staple\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    assert!(listed.contains("\"entries\":[]"), "the cut upload changed nothing: {listed}");
}

/// Every form of a blocked term is hidden; look-alikes that are other words are not.
#[test]
fn blocked_terms_cannot_be_bypassed_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let blocklist = write(dir.path(), "blocked.txt", "New York\nbomb\n");
    let server = Server::start(&served(dir.path()), &["--blocklist", blocklist.to_str().unwrap()]);
    let texts = |q: &str| -> Vec<String> {
        let (status, body) = get(server.addr, &format!("/v1/suggest?q={q}"));
        assert_eq!(status, 200, "{body}");
        let json: serde_json::Value =
            serde_json::from_str(body.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        json["suggestions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["text"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = texts("");
    assert_eq!(all.len(), 3, "{all:?}");
    for text in &all {
        assert!(
            ["newyork pizza", "bombay hotels", "news today"].contains(&text.as_str()),
            "{text:?} leaked"
        );
    }
    // Typed in capitals, full width, with diacritics or extra spaces: nothing blocked comes
    // back, and the look-alikes that are other words still do.
    for (typed, expected) in [
        // One typo (the space) from "newyork pizza", which blocks nothing.
        ("NEW+YORK", &["newyork pizza"][..]),
        ("%EF%BD%8E%EF%BD%85%EF%BD%97", &["newyork pizza", "news today"][..]),
        ("new++york", &["newyork pizza"]),
        ("B%C3%B3mb", &["bombay hotels"]),
        ("BO", &["bombay hotels"]),
        ("new%C2%B4+york", &["newyork pizza"]),
    ] {
        let answer = texts(typed);
        for text in &answer {
            let key = normalize::key(text);
            assert!(
                !key.contains("new york")
                    && !key.contains("new  york")
                    && !key.starts_with("bomb "),
                "{typed}: {text:?} leaked"
            );
        }
        assert_eq!(answer, expected, "{typed}");
    }
}

/// At the default level, logs say what happened (audit lines for admin changes) and never
/// what people typed.
#[test]
fn default_logs_never_carry_query_text() {
    const SECRET: &str = "zqxsecret";
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    crate::support::write_secret(&token, "correct-horse-battery-staple\n");
    let blocklist = write(dir.path(), "blocked.txt", "");
    let stderr_path = dir.path().join("serve.log");
    let args =
        ["--admin-token-file", token.to_str().unwrap(), "--blocklist", blocklist.to_str().unwrap()];
    let log_file = std::fs::File::create(&stderr_path).unwrap();
    let server = Server::start_logging(&served(dir.path()), &args, log_file);
    let (public, admin) = (server.addr, server.admin.unwrap());

    for path in [
        format!("/v1/suggest?q={SECRET}+one"),
        format!("/v1/opensearch?q={SECRET}"),
        format!("/v1/suggest?q={SECRET}&k=oops"),
        format!("/v1/suggest?q={}{SECRET}", "a".repeat(2000)),
        format!("/search?q={SECRET}&pick=1"),
        format!("/nowhere/{SECRET}"),
    ] {
        let _ = get(public, &path);
    }
    let put = "PUT /admin/blocklist HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer correct-horse-battery-staple\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbomb\n";
    assert_eq!(raw(admin, put.as_bytes()).0, 200);
    let bad = "POST /admin/reload HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer wrong\r\nConnection: close\r\n\r\n";
    let started = std::time::Instant::now();
    for _ in 0..50 {
        assert_eq!(raw(admin, bad.as_bytes()).0, 401);
    }
    let seconds = started.elapsed().as_secs() as usize;
    let (_, metrics) = get(public, "/metrics");
    assert!(!metrics.contains(SECRET), "metrics carry query text");
    assert!(metrics.contains("typeahead_admin_rejected_total 50\n"), "{metrics}");
    assert!(server.terminate().success());

    let log = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(!log.contains(SECRET), "query text in the default log:\n{log}");
    assert!(log.contains("blocklist applied") && log.contains("audit"), "no audit line:\n{log}");
    // Audited, and a burst of them is not a burst of lines (one a second at most).
    let lines = log.matches("bad token").count();
    assert!((1..=seconds + 2).contains(&lines), "{lines} audit lines for 50 rejections:\n{log}");

    // The builder's summary names bad lines by file:line and never prints their query text.
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let ts = format_ts(1_700_000_000);
    let text = format!(
        "{ts}\t{SECRET} good\n{ts}\n{SECRET} no tab\nnot-a-time\t{SECRET} bad time\n{ts}\t{}{SECRET}\n{ts}\t{SECRET}@mail.example.com\n",
        "x".repeat(300)
    );
    write(&logs, "q.log", &text);
    let out = bin()
        .env_remove("RUST_LOG")
        .args(["build", "--input", logs.to_str().unwrap(), "--state"])
        .arg(dir.path().join("state"))
        .arg("--out")
        .arg(dir.path().join("out.snap"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(printed.contains("q.log:"), "no file:line examples:\n{printed}");
    assert!(!printed.contains(SECRET), "query text in the build output:\n{printed}");
}
