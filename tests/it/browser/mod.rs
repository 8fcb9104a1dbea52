//! The search page in real headless Chromium (Debian's `chromium` + `chromedriver`), driven
//! over WebDriver against a real `typeahead serve` on 127.0.0.1.
//!
//! Built only with `--features browser-tests` (the browser is a system package; `.ci/run`
//! installs it): `cargo test --features browser-tests --test it browser`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use typeahead::snapshot::{self, BuildInfo, Entry};

use crate::http::{Client, Server};

#[path = "../../../benches/common/procs.rs"]
mod procs;

const KEY_DOWN: &str = "\u{E015}";
const KEY_ENTER: &str = "\u{E007}";
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
const TOKEN: &str = "Bearer browser-test-token-0123456789";

/// A suggestion request the page sent ([`Browser::suggest_timeline`]).
#[derive(Debug)]
struct Sent {
    url: String,
    /// When it was sent (`performance.now()`, ms).
    at: f64,
    /// The status of its answer, when one came.
    status: Option<u64>,
    /// When the answer's head came.
    answered: Option<f64>,
}

/// chromedriver plus one browser session; both end on drop (see the `Drop` impl).
struct Browser {
    /// Held for its `Drop`, which runs after `Browser`'s own (fields drop after the struct).
    _driver: Driver,
    base: String,
    session: String,
    client: Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start() -> Browser {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(Driver)
            .expect("chromedriver (apt-get install chromium chromium-driver)");
        let base = format!("http://127.0.0.1:{port}");
        let client = Client::new();
        let started = Instant::now();
        while client.request("GET", &format!("{base}/status"), &[], b"").await.is_err() {
            assert!(started.elapsed() < Duration::from_secs(20), "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=900,700",
        ];
        let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
            // The network log: every request the browser makes, with its headers.
            "goog:loggingPrefs": {"performance": "ALL"}
        }}});
        // Launching Chromium is the slow part: on a loaded 2-core machine it once took more
        // than the 10 s other requests are given.
        let r = client
            .request_within(
                Duration::from_secs(60),
                "POST",
                &format!("{base}/session"),
                &[("content-type", "application/json")],
                caps.to_string().as_bytes(),
            )
            .await
            .unwrap();
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        let session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_owned();
        Browser { _driver: driver, base, session, client, _profile: profile }
    }

    async fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let body = if method == "GET" { String::new() } else { body.to_string() };
        let r = self
            .client
            .request(method, &url, &[("content-type", "application/json")], body.as_bytes())
            .await
            .unwrap();
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert!(r.status == 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    async fn goto(&self, url: &str) {
        self.call("POST", "/url", json!({"url": url})).await;
    }

    async fn input(&self) -> String {
        let v =
            self.call("POST", "/element", json!({"using": "css selector", "value": "#q"})).await;
        v[ELEMENT].as_str().unwrap().to_owned()
    }

    async fn keys(&self, text: &str) {
        let el = self.input().await;
        self.call("POST", &format!("/element/{el}/value"), json!({"text": text})).await;
    }

    async fn run(&self, script: &str) -> Value {
        self.call("POST", "/execute/sync", json!({"script": script, "args": []})).await
    }

    async fn url(&self) -> String {
        self.call("GET", "/url", Value::Null).await.as_str().unwrap().to_owned()
    }

    /// Waits until the page navigated to the results page.
    async fn wait_for_results(&self) {
        let started = Instant::now();
        while !self.url().await.contains("/search") {
            assert!(started.elapsed() < Duration::from_secs(5), "no navigation");
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }

    /// Presses Enter and waits for the results page, whose address must hold `query` (as
    /// `q=` encodes it).
    async fn enter_searches(&self, query: &str) {
        self.keys(KEY_ENTER).await;
        self.wait_for_results().await;
        let url = self.url().await;
        assert!(url.contains(&format!("q={query}")), "{url}");
    }

    /// Runs a DevTools protocol command (emulation, for instance).
    async fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.call("POST", "/goog/cdp/execute", json!({"cmd": cmd, "params": params})).await
    }

    /// The requests the browser sent since the last call (URL, headers and body of each), as
    /// JSON text, from Chromium's network log.
    async fn requests_sent(&self) -> Vec<String> {
        let log = self.call("POST", "/se/log", json!({"type": "performance"})).await;
        log.as_array()
            .unwrap()
            .iter()
            .filter_map(|entry| {
                let message: Value = serde_json::from_str(entry["message"].as_str()?).ok()?;
                let message = &message["message"];
                let method = message["method"].as_str()?;
                (method == "Network.requestWillBeSent"
                    || method == "Network.requestWillBeSentExtraInfo")
                    .then(|| message["params"].to_string())
            })
            .collect()
    }

    /// The suggestion texts on screen (empty when the list is hidden).
    async fn shown(&self) -> Vec<String> {
        let v = self.run("const l = document.getElementById('suggestions'); return l.hidden ? [] : [...l.children].map(li => li.querySelector('.text').textContent);").await;
        v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect()
    }

    /// Waits until the list shows `want`.
    async fn wait_for(&self, want: &[String]) {
        let started = Instant::now();
        loop {
            let got = self.shown().await;
            if got == want {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "page shows {got:?}, expected {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }

    /// Runs `script` until its value satisfies `done` (5 s at most) and returns the last value:
    /// an answer to an earlier keystroke can show the same texts as the one awaited.
    async fn poll(&self, script: &str, done: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let v = self.run(script).await;
            if done(&v) || started.elapsed() > Duration::from_secs(5) {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }

    /// Records every fetch the page makes, and uncaught errors.
    async fn instrument(&self) {
        self.run(
            "window.__fetches = []; window.__errors = [];
             addEventListener('error', e => window.__errors.push(String(e.message)));
             addEventListener('unhandledrejection', e => window.__errors.push(String(e.reason)));
             addEventListener('securitypolicyviolation', e => window.__errors.push(`CSP: ${e.violatedDirective} ${e.blockedURI}`));
             const real = window.fetch;
             window.fetch = (url, options) => {
               const record = { url: String(url), aborted: false, at: performance.now(), status: null, done: null };
               window.__fetches.push(record);
               if (options && options.signal) options.signal.addEventListener('abort', () => record.aborted = true);
               return real(url, options).then(r => { record.status = r.status; record.done = performance.now(); return r; });
             };",
        )
        .await;
    }

    async fn suggest_fetches(&self) -> Vec<(String, bool)> {
        let v = self.run("return window.__fetches.filter(f => f.url.includes('/v1/suggest')).map(f => [f.url, f.aborted]);").await;
        v.as_array()
            .unwrap()
            .iter()
            .map(|f| (f[0].as_str().unwrap().to_owned(), f[1].as_bool().unwrap()))
            .collect()
    }

    /// Each suggestion request on the page's own clock (ms): when it was sent, and the status
    /// and time of its answer's head when one came.
    async fn suggest_timeline(&self) -> Vec<Sent> {
        let v = self.run("return window.__fetches.filter(f => f.url.includes('/v1/suggest')).map(f => [f.url, f.at, f.status, f.done]);").await;
        v.as_array()
            .unwrap()
            .iter()
            .map(|f| Sent {
                url: f[0].as_str().unwrap().to_owned(),
                at: f[1].as_f64().unwrap(),
                status: f[2].as_u64(),
                answered: f[3].as_f64(),
            })
            .collect()
    }

    async fn errors(&self) -> Vec<String> {
        let v = self.run("return window.__errors;").await;
        v.as_array().unwrap().iter().map(|e| e.to_string()).collect()
    }

    async fn screenshot(&self, path: &Path) {
        let v = self.call("GET", "/screenshot", Value::Null).await;
        let png = base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap()).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

/// Ends the session first, which makes chromedriver quit Chromium and wait for it. Killing
/// chromedriver alone left its Chromium running, reparented to init: about 170 processes and
/// 2.3 GB after one CI run, there to slow down whatever ran next on the machine. Blocking, and
/// over a plain socket: a drop cannot await, and it also runs when a test panics.
impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(addr) = self.base.strip_prefix("http://")
            && let Ok(mut stream) = std::net::TcpStream::connect(addr)
        {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
            let request = format!(
                "DELETE /session/{} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                self.session
            );
            let _ = stream.write_all(request.as_bytes());
            // The answer comes once Chromium has quit; chromedriver may keep the connection
            // open after it, so its first bytes are all there is to wait for.
            let _ = stream.read(&mut [0; 256]);
        }
        // `_driver` drops next and kills whatever is left.
    }
}

/// chromedriver and every process under it (Chromium and its helpers), killed on drop: a
/// `Browser` whose start fails must not leave a browser running behind it.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole tree is listed before anything is killed: an orphan is re-parented and
        // could no longer be found from here.
        let mut tree = vec![self.0.id()];
        let mut i = 0;
        while let Some(&pid) = tree.get(i) {
            tree.extend(procs::child_pids(pid));
            i += 1;
        }
        for pid in tree.iter().skip(1).rev() {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Site {
    _dir: tempfile::TempDir,
    snapshot: PathBuf,
    token: PathBuf,
    blocklist: PathBuf,
}

fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let pairs = [
        ("capital one", 90.0),
        ("captain america", 80.0),
        ("cap city", 70.0),
        ("capitol hill", 60.0),
        ("caps lock", 50.0),
        ("captcha", 40.0),
        ("captain hook", 30.0),
        ("cape cod", 20.0),
        ("capri pants", 10.0),
        ("capybara", 5.0),
        ("cat", 100.0),
        ("café de flore", 3.0),
        // For the later tiers: "york times" holds the words of one key and starts none;
        // "facebok" is a typo away from one key and starts none.
        ("new york times", 8.0),
        ("facebook", 7.0),
        // For highlights: a vowel sign after the first consonant; a text typed full-width.
        ("किताब", 2.0),
        ("youtube", 6.0),
        // For the keyboard in right-to-left text: a row and a longer one after it.
        ("שלום", 4.6),
        ("שלום עולם", 4.4),
    ];
    let mut entries: Vec<Entry> = pairs
        .iter()
        .map(|(k, s)| Entry { key: (*k).to_owned(), display: None, score: *s })
        .collect();
    // Shown in capitals: lowercased, a Σ cut from the end of a text is "ς", not "σ".
    entries
        .push(Entry { key: "πασοκ".into(), display: Some("ΠΑΣΟΚ".into()), score: 1.5 });
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    let info = BuildInfo { watermark_hour: Some(1), ..BuildInfo::default() };
    let snapshot = dir.path().join("s.snap");
    snapshot::write_file(&snapshot, &entries, &info).unwrap();
    let token = dir.path().join("token");
    crate::support::write_secret(&token, TOKEN.trim_start_matches("Bearer "));
    let blocklist = dir.path().join("blocklist.txt");
    std::fs::write(&blocklist, "").unwrap();
    Site { snapshot, token, blocklist, _dir: dir }
}

/// The test site served, and a browser on its page.
async fn page() -> (Site, Server, Browser) {
    let s = site();
    let server = Server::start(&s.snapshot, &[]);
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    (s, server, browser)
}

/// The test site served, and a browser on its page, where `script` ran before any script of
/// the page (Chrome DevTools Protocol, via chromedriver): a browser altered or broken.
async fn page_where(script: &str) -> (Site, Server, Browser) {
    let (site, server, browser) = page().await;
    browser.cdp("Page.addScriptToEvaluateOnNewDocument", json!({ "source": script })).await;
    browser.goto(&server.url("/")).await;
    (site, server, browser)
}

/// The test site served, and a browser, instrumented, on its page after an earlier visit's
/// searches `recent`.
async fn page_with_recent(recent: &[&str]) -> (Site, Server, Browser) {
    let (site, server, browser) = page().await;
    with_earlier_searches(&browser, &server.url("/"), recent).await;
    browser.instrument().await;
    (site, server, browser)
}

/// An earlier visit's searches `queries` (recorded in order, as the page records searches),
/// then the page at `url` loaded afresh.
async fn with_earlier_searches(browser: &Browser, url: &str, queries: &[&str]) {
    browser.goto(url).await;
    for q in queries {
        browser
            .call(
                "POST",
                "/execute/sync",
                json!({"script": "TypeaheadHistory.record(arguments[0]);", "args": [q]}),
            )
            .await;
    }
    browser.goto(url).await;
}

async fn api_texts(server: &Server, q: &str) -> Vec<String> {
    let j = Client::new().get(&server.url(&format!("/v1/suggest?q={q}"))).await.json();
    j["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_debounces_cancels_and_shows_the_api_answer() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = site();
    let server = Server::start(&s.snapshot, &[]);
    let browser = Browser::start().await;
    let expected = api_texts(&server, "cap").await;

    // Slowly: one request per pause, each answer shown.
    browser.goto(&server.url("/")).await;
    browser.instrument().await;
    for c in ["c", "a", "p"] {
        browser.keys(c).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    browser.wait_for(&expected).await;
    let fetches = browser.suggest_fetches().await;
    assert_eq!(fetches.len(), 3, "{fetches:?}");
    assert!(fetches.iter().all(|f| !f.1));
    assert_eq!(
        browser.run("return document.getElementById('q').getAttribute('aria-expanded')").await,
        "true"
    );
    // The list is really on screen, attached below the input, before the artifact is taken.
    let (list, input) = (
        browser
            .run("return document.getElementById('suggestions').getBoundingClientRect().toJSON()")
            .await,
        browser.run("return document.getElementById('q').getBoundingClientRect().toJSON()").await,
    );
    assert!(list["height"].as_f64().unwrap() > 200.0, "{list}");
    assert!(
        (list["top"].as_f64().unwrap() - input["bottom"].as_f64().unwrap()).abs() < 2.0,
        "{list} {input}"
    );
    browser
        .screenshot(Path::new(concat!(env!("CARGO_TARGET_TMPDIR"), "/browser/suggestions.png")))
        .await;

    // Quickly: keystrokes inside the 50 ms pause make one request.
    browser.goto(&server.url("/")).await;
    browser.instrument().await;
    browser.keys("cap").await;
    browser.wait_for(&expected).await;
    let fetches = browser.suggest_fetches().await;
    assert_eq!(fetches.len(), 1, "debounce: {fetches:?}");
    assert!(fetches[0].0.ends_with("q=cap"));

    // Backspacing to an earlier prefix reuses the local answer: no request.
    browser.keys("\u{E003}").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    browser.keys("p").await;
    browser.wait_for(&expected).await;
    let again = browser.suggest_fetches().await;
    assert_eq!(again.len(), 2, "only 'ca' was new: {again:?}");
    assert!(browser.errors().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_answer_is_cancelled_when_typing_goes_on() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = site();
    let server = Server::start(&s.snapshot, &["--inject-delay-ms", "400"]);
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    browser.instrument().await;
    browser.keys("c").await;
    tokio::time::sleep(Duration::from_millis(150)).await; // the "c" request is in flight
    browser.keys("a").await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    browser.keys("p").await;
    browser.wait_for(&api_texts(&server, "cap").await).await;
    let fetches = browser.suggest_fetches().await;
    assert_eq!(fetches.iter().map(|f| f.1).collect::<Vec<_>>(), [true, true, false], "{fetches:?}");
    assert!(browser.errors().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyboard_selection_runs_the_search_with_prefix_and_index() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = site();
    let server = Server::start(&s.snapshot, &[]);
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    browser.keys("cap").await;
    let expected = api_texts(&server, "cap").await;
    browser.wait_for(&expected).await;
    browser.keys(&format!("{KEY_DOWN}{KEY_DOWN}")).await;
    let active = browser
        .run("return document.getElementById('q').getAttribute('aria-activedescendant')")
        .await;
    assert_eq!(active, "suggestion-1");
    let shown = browser.run("return document.getElementById('q').value").await;
    assert_eq!(shown, expected[1].as_str());
    browser.keys(KEY_ENTER).await;
    browser.wait_for_results().await;
    let url = browser.url().await;
    let query: Vec<(String, String)> =
        form_urlencoded::parse(url.split_once('?').unwrap().1.as_bytes()).into_owned().collect();
    assert!(query.contains(&("q".into(), expected[1].clone())), "{url}");
    assert!(query.contains(&("suggestionPrefix".into(), "cap".into())), "{url}");
    assert!(query.contains(&("suggestionIndex".into(), "1".into())), "{url}");
    let m = String::from_utf8(Client::new().get(&server.url("/metrics")).await.body).unwrap();
    assert!(m.contains("typeahead_suggestion_picks_total{index=\"1\"} 1"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_suggestion_disappears_on_the_next_keystroke() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = site();
    let server = Server::start(
        &s.snapshot,
        &[
            "--admin-token-file",
            s.token.to_str().unwrap(),
            "--blocklist",
            s.blocklist.to_str().unwrap(),
        ],
    );
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    browser.keys("capt").await;
    browser.wait_for(&api_texts(&server, "capt").await).await;
    assert!(browser.shown().await.contains(&"captain america".to_owned()));
    let r = Client::new()
        .request(
            "PUT",
            &server.admin_url("/admin/blocklist"),
            &[("authorization", TOKEN)],
            b"America\n",
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    browser.keys("a").await;
    let after = api_texts(&server, "capta").await;
    assert!(!after.contains(&"captain america".to_owned()));
    browser.wait_for(&after).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_survives_a_slow_or_dead_server() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = site();
    let server =
        Server::start(&s.snapshot, &["--inject-delay-ms", "2500", "--request-timeout-ms", "1000"]);
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    browser.instrument().await;
    browser.keys("ca").await;
    tokio::time::sleep(Duration::from_millis(1500)).await; // the server answers 503 (timeout)
    assert!(browser.shown().await.is_empty());
    drop(server); // down
    browser.keys("p").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        browser.run("return document.getElementById('q').value").await,
        "cap",
        "typing is never blocked"
    );
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn word_and_typo_matches_do_not_highlight_a_typed_prefix() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = site();
    let server = Server::start(&s.snapshot, &[]);
    let browser = Browser::start().await;
    // The data reaches the tiers meant: no key starts with either query.
    let words = Client::new().get(&server.url("/v1/suggest?q=york%20times")).await.json();
    assert_eq!(words["suggestions"][0]["text"], "new york times", "{words}");
    assert_eq!(words["suggestions"][0]["match"], "words", "{words}");
    let fuzzy = Client::new().get(&server.url("/v1/suggest?q=facebok")).await.json();
    assert_eq!(fuzzy["suggestions"][0]["text"], "facebook", "{fuzzy}");
    assert_eq!(fuzzy["suggestions"][0]["match"], "fuzzy", "{fuzzy}");

    // Words: the matched words are the plain (typed) parts, wherever they are in the text
    // (an answer to "york t" shows the same row, with "t" typed: wait for the last one).
    browser.goto(&server.url("/")).await;
    browser.instrument().await;
    browser.keys("york times").await;
    browser.wait_for(&api_texts(&server, "york%20times").await).await;
    let row = browser
        .poll(
            "const li = document.querySelector('#suggestions li[data-match=\"words\"]');
             return li && { text: li.querySelector('.text').textContent,
                            typed: [...li.querySelectorAll('.typed')].map(e => e.textContent) };",
            |row| row["typed"] == json!(["york", "times"]),
        )
        .await;
    assert_eq!(row["text"], "new york times", "{row}");
    assert_eq!(row["typed"], json!(["york", "times"]), "{row}");
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);

    // Fuzzy: nothing shown as typed; described to screen readers as a correction, with the
    // option's text (its name) unchanged. ("facebo" shows "facebook" too, as a prefix match.)
    browser.goto(&server.url("/")).await;
    browser.instrument().await;
    browser.keys("facebok").await;
    browser.wait_for(&api_texts(&server, "facebok").await).await;
    let row = browser
        .poll(
            "const li = document.querySelector('#suggestions li[data-match=\"fuzzy\"]');
             const hint = li && document.getElementById(li.getAttribute('aria-describedby'));
             return li && { text: li.querySelector('.text').textContent,
                            typed: [...li.querySelectorAll('.typed')].map(e => e.textContent),
                            hint: hint ? hint.textContent : null };",
            |row| !row.is_null(),
        )
        .await;
    assert_eq!(row["text"], "facebook", "{row}");
    assert_eq!(row["typed"], json!([]), "{row}");
    assert_eq!(row["hint"], "Spelling corrected", "{row}");
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

/// A highlight covers what the service matched however it was typed (full-width letters from
/// an IME, doubled spaces: the service's normalization, not only case and accents) and never
/// splits a character from its marks (the Devanagari vowel sign after "क" goes with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn highlights_cover_whole_characters_and_what_the_service_matched() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;
    let cases = [
        ("क", "किताब", "कि"),
        ("ｙｏｕ", "youtube", "you"),
        ("new  york", "new york times", "new york"),
        ("πασο", "ΠΑΣΟΚ", "ΠΑΣΟ"),
    ];
    for (typed, text, want) in cases {
        browser.goto(&server.url("/")).await;
        browser.instrument().await;
        let typed_js = serde_json::to_string(typed).unwrap();
        browser
            .run(&format!(
                "const q = document.getElementById('q'); q.focus(); q.value = {typed_js};
                 q.dispatchEvent(new Event('input')); return 0;"
            ))
            .await;
        let text_js = serde_json::to_string(text).unwrap();
        let row = browser
            .poll(
                &format!(
                    "const li = [...document.querySelectorAll('#suggestions li')]
                       .find(li => li.querySelector('.text').textContent === {text_js});
                     return li ? [...li.querySelectorAll('.typed')].map(e => e.textContent) : null;"
                ),
                |row| !row.is_null(),
            )
            .await;
        assert_eq!(row, json!([want]), "{typed} -> {text}");
    }
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

// A person's own searches first, kept in the browser: recorded, shown, removed, cleared,
// turned off, never sent; the page agrees with `typeahead::history` and `normalize`.
mod history;
// The page under failure and at the edges: a dead service, the keyboard, Back, contrast.
mod edges;
