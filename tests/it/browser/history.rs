//! A person's own searches first, in the browser only.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use typeahead::history::History;
use typeahead::normalize;

use super::{
    Browser, KEY_DOWN, KEY_ENTER, api_texts, page, page_where, page_with_recent,
    with_earlier_searches,
};

const SHIFT_DELETE: &str = "\u{E008}\u{E017}\u{E000}";
/// Empties the focused box as a person would (an input event follows).
const CLEAR_BOX: &str = "const q = document.getElementById('q'); q.focus(); q.value = ''; q.dispatchEvent(new Event('input')); return 0;";

/// The stored history: key -> { count, last, text } (without the mark of the rules its
/// entries were checked under).
async fn stored(browser: &Browser) -> serde_json::Map<String, Value> {
    let v = browser
        .run("return JSON.parse(localStorage.getItem('typeahead.history.v1') || '{}');")
        .await;
    let mut entries = v.as_object().unwrap().clone();
    let mark = entries.remove("\u{0}checked");
    assert!(entries.is_empty() || mark.is_some(), "entries stored unmarked: {entries:?}");
    entries
}

/// The rows on screen: (recent?, text).
async fn rows(browser: &Browser) -> Vec<(bool, String)> {
    let v = browser
        .run(
            "const l = document.getElementById('suggestions');
             return l.hidden ? [] : [...l.children].map(li =>
               [li.dataset.recent === 'true', li.querySelector('.text').textContent]);",
        )
        .await;
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_bool().unwrap(), r[1].as_str().unwrap().to_owned()))
        .collect()
}

async fn wait_rows(
    browser: &Browser,
    done: impl Fn(&[(bool, String)]) -> bool,
) -> Vec<(bool, String)> {
    let started = Instant::now();
    loop {
        let got = rows(browser).await;
        if done(&got) {
            return got;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "rows on screen: {got:?}");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// Waits until the status region (what screen readers are told) says `text`.
async fn said(browser: &Browser, text: &str) {
    let started = Instant::now();
    let status = "return document.getElementById('status').textContent";
    while browser.run(status).await != text {
        assert!(started.elapsed() < Duration::from_secs(5), "never said {text:?}");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

async fn click(browser: &Browser, css: &str) {
    let el = browser.call("POST", "/element", json!({"using": "css selector", "value": css})).await;
    let id = el[super::ELEMENT].as_str().unwrap().to_owned();
    browser.call("POST", &format!("/element/{id}/click"), json!({})).await;
}

/// The Rust rule's history for a stored one (each entry recorded `count` times at `last`).
fn rust_history(stored: &serde_json::Map<String, Value>) -> History {
    let mut h = History::default();
    for (key, e) in stored {
        for _ in 0..e["count"].as_u64().unwrap() {
            h.record(key, e["text"].as_str().unwrap(), e["last"].as_u64().unwrap());
        }
    }
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_searches_are_recorded_shown_first_removed_cleared_and_turned_off() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;

    // Recorded when submitted: typed text with Enter, and a picked suggestion.
    browser.goto(&server.url("/")).await;
    browser.keys("  Café   De Flore ").await;
    browser.keys(KEY_ENTER).await;
    browser.wait_for_results().await;
    browser.goto(&server.url("/")).await;
    browser.keys("capt").await;
    let capt = api_texts(&server, "capt").await;
    browser.wait_for(&capt).await;
    browser.keys(&format!("{KEY_DOWN}{KEY_ENTER}")).await;
    browser.wait_for_results().await;
    browser.goto(&server.url("/")).await;
    let history = stored(&browser).await;
    let mut keys: Vec<&String> = history.keys().collect();
    keys.sort();
    assert_eq!(keys, [&"café de flore".replace('é', "e"), &capt[0]], "{history:?}");
    assert_eq!(history["cafe de flore"]["text"], "café de flore", "the surface text is kept");
    assert_eq!(history["cafe de flore"]["count"], 1);

    // Shown first, marked, newest first at equal counts; the rest is the service's answer
    // without them, exactly as `typeahead::history` says.
    browser.keys("ca").await;
    let api = api_texts(&server, "ca").await;
    let want = rust_history(&history);
    let api_keys: Vec<String> = api.iter().map(|t| normalize::key(t)).collect();
    let expected = want.merge(&normalize::prefix("ca"), &api_keys, 10);
    let keys_of =
        |r: &[(bool, String)]| r.iter().map(|(_, t)| normalize::key(t)).collect::<Vec<_>>();
    let page = wait_rows(&browser, |r| keys_of(r) == expected).await;
    assert_eq!(page[0], (true, capt[0].clone()));
    assert_eq!(page[1], (true, "café de flore".to_owned()));
    let label = browser
        .run("return [...document.querySelectorAll('#suggestions li[data-recent] .visually-hidden')].map(e => e.textContent)")
        .await;
    assert_eq!(label, json!(["Recent search: ", "Recent search: "]));

    // Removed from the keyboard (Shift+Delete on the highlighted row; plain Delete is for
    // editing the text) ...
    browser.keys(KEY_DOWN).await;
    browser.keys("\u{E017}").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(stored(&browser).await.contains_key(&capt[0]), "plain Delete removed a recent search");
    browser.keys(SHIFT_DELETE).await;
    let page = wait_rows(&browser, |r| r.first().is_some_and(|x| x.1 == "café de flore")).await;
    assert!(page[0].0 && !page.iter().skip(1).any(|x| x.0), "{page:?}");
    assert!(!stored(&browser).await.contains_key(&capt[0]));
    assert_eq!(browser.run("return document.getElementById('q').value").await, "ca");
    // ... and with the pointer (the row's remove button).
    click(&browser, "#suggestions li[data-recent] button.remove").await;
    wait_rows(&browser, |r| !r.is_empty() && !r.iter().any(|x| x.0)).await;
    assert!(stored(&browser).await.is_empty());

    // An empty box shows the 5 most recent searches.
    browser
        .run("for (const [i, q] of ['one', 'two', 'three', 'four', 'five', 'six'].entries()) TypeaheadHistory.record(q, 1000 + i); return 0;")
        .await;
    browser.run(CLEAR_BOX).await;
    let page = wait_rows(&browser, |r| r.len() == 5).await;
    let texts: Vec<&str> = page.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(texts, ["six", "five", "four", "three", "two"]);

    // Cleared (the open list covers the controls: Escape closes it first).
    browser.keys("\u{E00C}").await;
    click(&browser, "#history-clear").await;
    assert!(stored(&browser).await.is_empty());
    // Said to screen readers too (the live region), not only on the button.
    said(&browser, "History cleared").await;

    // Turned off: nothing recorded or shown, and it stays off on the next visit.
    click(&browser, "#history-toggle").await;
    said(&browser, "History turned off and cleared").await;
    browser.keys("capybara").await;
    browser.keys(KEY_ENTER).await;
    browser.wait_for_results().await;
    browser.goto(&server.url("/")).await;
    browser.instrument().await;
    assert!(stored(&browser).await.is_empty());
    let toggle = browser.run("return document.getElementById('history-toggle').textContent").await;
    assert_eq!(toggle, "Turn history on");
    // Turned on, then off in another tab (its storage event is not seen here): the click on
    // "Turn history off" turns it off, as it says. It used to flip what storage held, and so
    // turned the history back on under a label that still said "Turn history off".
    click(&browser, "#history-toggle").await;
    browser.run("localStorage.setItem('typeahead.history.off', '1'); return 0;").await;
    click(&browser, "#history-toggle").await;
    let (enabled, toggle) = (
        browser.run("return TypeaheadHistory.enabled()").await,
        browser.run("return document.getElementById('history-toggle').textContent").await,
    );
    assert_eq!((enabled, toggle), (serde_json::json!(false), serde_json::json!("Turn history on")));
    browser.keys("cap").await;
    browser.wait_for(&api_texts(&server, "cap").await).await;
    assert!(!rows(&browser).await.iter().any(|r| r.0));
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_never_leaves_the_browser() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;
    // An earlier visit's searches, then a fresh page.
    with_earlier_searches(&browser, &server.url("/"), &["Zanzibar holidays", "cat videos"]).await;
    browser.requests_sent().await; // what came before
    browser.keys("ca").await;
    // The service's answer is in too (its request is in the log).
    wait_rows(&browser, |r| {
        r.first().is_some_and(|x| x.0 && x.1 == "cat videos")
            && r.contains(&(false, "cat".to_owned()))
    })
    .await;
    browser.run(CLEAR_BOX).await;
    wait_rows(&browser, |r| r.iter().any(|x| x.1 == "zanzibar holidays")).await;
    // Picking a recent search: the results URL does not say it came from the history.
    browser.keys("ca").await;
    wait_rows(&browser, |r| r.first().is_some_and(|x| x.0 && x.1 == "cat videos")).await;
    browser.keys(&format!("{KEY_DOWN}{KEY_ENTER}")).await;
    browser.wait_for_results().await;
    let url = browser.url().await;
    assert!(url.contains("q=cat%20videos") || url.contains("q=cat+videos"), "{url}");
    assert!(!url.contains("suggestion"), "{url}");
    let sent = browser.requests_sent().await;
    assert!(sent.iter().any(|r| r.contains("/v1/suggest")), "the log holds the requests: {sent:?}");
    for request in &sent {
        for secret in ["zanzibar", "Zanzibar", "holidays", "typeahead.history"] {
            assert!(!request.contains(secret), "history sent: {request}");
        }
    }
    assert_eq!(browser.run("return document.cookie").await, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_the_rust_rule_agree_on_keys_and_order() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, _server, browser) = page().await;
    // The page's normalization is the service's.
    let texts = [
        "Café",
        "  New   York  ",
        "new\u{200b}york",
        "new\u{ad}york",
        "ﬁne ﬂour",
        "İstanbul",
        "ΣΊΣΥΦΟΣ",
        "a\u{b4} b",
        "e\u{301}",
        "Ｆｕｌｌｗｉｄｔｈ",
        "x\u{200d}y z",
        "tab\there\n",
        "\u{130}\u{319}",
        "नमस्\u{200d}ते",
        "東京 タワー ",
        "co\u{200b}\u{301}",
        "ÅNGSTRÖM ",
        "\u{1f600} smile",
        "nul\u{0}byte",
        "\u{3000}wide\u{3000}space\u{3000}",
    ];
    let v = browser
        .call(
            "POST",
            "/execute/sync",
            json!({"script": "return arguments[0].map(t => [TypeaheadHistory.key(t), TypeaheadHistory.prefix(t), TypeaheadHistory.surface(t)]);",
                   "args": [texts]}),
        )
        .await;
    for (t, got) in texts.iter().zip(v.as_array().unwrap()) {
        let want = json!([normalize::key(t), normalize::prefix(t), normalize::surface(t)]);
        assert_eq!(got, &want, "{t:?}");
    }
    // The order: count, then last use, then key bytewise (with keys where UTF-16 order
    // differs from UTF-8 order), at most 3; an empty box, the 5 most recent.
    let marks = format!("c{}", "\u{301}".repeat(600));
    let searches = [
        ("cab", 10),
        ("cab", 11),
        ("car wash", 9),
        ("cake", 9),
        ("ca\u{fffd}", 12),
        ("ca\u{1f600}", 12),
        ("cats", 5),
        ("dog", 13),
        ("cap", 8),
        // A text the service would not keep (one letter, 600 marks: 1,200 bytes) is not
        // recorded, by either; nor are a card number and an address.
        (marks.as_str(), 14),
        ("4111 1111 1111 1111", 15),
        ("cab@gmail.com", 16),
    ];
    let mut rust = History::default();
    for (q, t) in searches {
        rust.record(&normalize::key(q), &normalize::surface(q), t);
        browser
            .call("POST", "/execute/sync", json!({"script": "TypeaheadHistory.record(arguments[0], arguments[1]);", "args": [q, t]}))
            .await;
    }
    for q in ["c", "ca", "caf", "cat", "d", "x", "4", ""] {
        let page = browser
            .call("POST", "/execute/sync", json!({"script": "return TypeaheadHistory.matches(arguments[0]).map(e => e.key);", "args": [q]}))
            .await;
        let want: Vec<&str> =
            rust.matches(&normalize::prefix(q)).into_iter().map(|(k, _)| k).collect();
        assert_eq!(page, json!(want), "{q:?}");
    }
}

/// What the page keeps of a person's searches is what the service would suggest: the privacy
/// rules' verdict in the page is the Rust one, on texts made of what the rules look for (as
/// scripts/privacy_check.py makes them), and an entry stored before the rules applied in the
/// page is not shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_withholds_what_the_privacy_rules_withhold() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;
    let mut texts = privacy_edge_texts(4_000);
    // What a review found the first port reading otherwise: a byte-order mark in an escape
    // (the decoder dropped it) and a name of Object.prototype taken for a reference.
    texts.extend(
        ["call 555 123&#xa%ef%bb%bf0;", "a&%ef%bb%bf#64;gmail.com", "40jon15xrde07u&constructor;"]
            .map(str::to_owned),
    );
    let page_verdicts = browser
        .call(
            "POST",
            "/execute/sync",
            json!({"script": "return arguments[0].map(t => TypeaheadHistory.withheld(t));", "args": [texts]}),
        )
        .await;
    let rules = typeahead::builder::privacy::Privacy::new();
    let mut withheld = 0;
    for (t, got) in texts.iter().zip(page_verdicts.as_array().unwrap()) {
        let want = rules.check(&normalize::surface(t), &normalize::key(t)).is_some();
        assert_eq!(got, &json!(want), "{t:?}");
        withheld += usize::from(want);
    }
    // Both verdicts are common: the texts sit on the rules' edges.
    assert!((texts.len() / 5..texts.len() * 4 / 5).contains(&withheld), "{withheld}");

    // The port follows the rules the service runs.
    let version = browser.run("return TypeaheadPrivacy.RULES").await;
    assert_eq!(version, json!(normalize::RULES_VERSION));

    // An earlier release's store: a phone number in it, and no mark of a check.
    browser.goto(&server.url("/")).await;
    browser
        .run(
            r#"localStorage.setItem('typeahead.history.v1', JSON.stringify({
                 "call 555 123 4567": { "text": "call 555 123 4567", "count": 9, "last": 9 },
                 "cat videos": { "text": "cat videos", "count": 2, "last": 5 } }));
               TypeaheadHistory.record("cats pin: 1234", 10);
               return 0;"#,
        )
        .await;
    let recent = browser.run("return TypeaheadHistory.matches('').map(e => e.key)").await;
    assert_eq!(recent, json!(["cat videos"]));
    assert!(!stored(&browser).await.contains_key("call 555 123 4567"), "still stored");
}

/// Texts glued from the pieces the privacy patterns look for (look-alikes, escapes, marks,
/// brackets, token prefixes), digit runs and letter runs, with or without spaces.
fn privacy_edge_texts(n: usize) -> Vec<String> {
    use typeahead::synth::rand::RngExt;
    #[rustfmt::skip]
    const PIECES: &[&str] = &[
        " ", " ", "at", " at ", "dot", " dot ", "(", ")", "[", "]", "<", ">", "@", ".", ",", ":",
        "=", "?", "&", "#", ";", "-", "_", "/", "+", "gmail", "aol", "com", "john", "call", "tel",
        "dob", "pass", "pw", "pin", "password", "ghp_", "xoxb-", "sk-", "akia", "eyj", "ya29.",
        "access_token", "token", "api_key", "code", "\u{30fc}", "\u{3161}", "\u{b7}", "\u{2022}",
        "\u{2800}", "\u{3002}", "\u{301c}", "\u{2212}", "\u{301}", "\u{20e3}", "\u{200b}",
        "\u{fffb}", "\u{278a}", "\u{24f5}", "\u{ff11}\u{ff12}", "\u{661}\u{662}", "caf\u{e9}",
        "JOHN", "(at)", " [at] ", "<dot>", "@gmail", " at gmail", "john.doe", "%40", "%20",
        "%e2%9e%8a", "%ff", "&#64;", "&#x40", "&commat;", "&nbsp;", "&bogus;", "\u{2219}",
        "\u{2027}", "\u{1c0}", "\u{4e00}", "\u{5e74}", "%ef%bb%bf", "&#xa", "&constructor;",
    ];
    let mut rng = typeahead::synth::rng(41);
    (0..n)
        .map(|_| {
            let glue = if rng.random_bool(0.5) { "" } else { " " };
            let pieces: Vec<String> = (0..rng.random_range(1..=9))
                .map(|_| match rng.random_range(0..20) {
                    0..11 => PIECES[rng.random_range(0..PIECES.len())].to_owned(),
                    11..16 => {
                        (0..rng.random_range(1..=6)).map(|_| rng.random_range('0'..='9')).collect()
                    }
                    _ => (0..rng.random_range(2..=24))
                        .map(|_| b"abcdef0123456789xyz"[rng.random_range(0..19)] as char)
                        .collect(),
                })
                .collect();
            pieces.join(glue)
        })
        .collect()
}

/// A service row picked below a row the history took out of the service's answer reports its
/// place in that answer: a place counted after the removal would tell the results page (and
/// the service's pick counter) which higher row is in the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picked_row_reports_its_place_in_the_service_answer() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;
    let answer = api_texts(&server, "ca").await;
    let j = answer.iter().position(|t| t == "cat").expect("the data answers \"cat\" for \"ca\"");
    assert!(j + 1 < answer.len(), "{answer:?}");
    with_earlier_searches(&browser, &server.url("/"), &["cat"]).await;
    browser.keys("ca").await;
    let want = answer[j + 1].clone();
    let shown =
        wait_rows(&browser, |r| r.first().is_some_and(|x| x.0 && x.1 == "cat") && r.len() > 1)
            .await;
    let at = shown.iter().position(|r| !r.0 && r.1 == want).expect("the row after \"cat\"");
    browser.keys(&format!("{}{KEY_ENTER}", KEY_DOWN.repeat(at + 1))).await;
    browser.wait_for_results().await;
    let url = browser.url().await;
    assert!(url.contains(&format!("suggestionIndex={}", j + 1)), "{url}");
}

/// Storage left by another version of the page (entries without text or counts) is skipped,
/// not a reason for every keystroke to fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_stored_entries_are_skipped() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;
    browser.goto(&server.url("/")).await;
    browser
        .run(
            r#"localStorage.setItem('typeahead.history.v1', JSON.stringify({
                 "news": { "count": 1, "last": 1 },
                 "cab": { "text": 7, "count": 1, "last": 1 },
                 "cat videos": { "text": "cat videos", "count": 2, "last": 5 } }));
               return 0;"#,
        )
        .await;
    browser.goto(&server.url("/")).await;
    browser.instrument().await;
    browser.keys("ca").await;
    wait_rows(&browser, |r| {
        r.first().is_some_and(|x| x.0 && x.1 == "cat videos")
            && r.iter().filter(|x| x.0).count() == 1
            && r.len() > 1
    })
    .await;
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

/// The page over a service that answers after 1.5 s, with "cape town trip" in the history:
/// the recent row is on screen well before the service's rows.
async fn slow_page_with_a_recent_search() -> (super::Site, crate::http::Server, Browser) {
    let s = super::site();
    let server = crate::http::Server::start(&s.snapshot, &["--inject-delay-ms", "1500"]);
    let browser = Browser::start().await;
    with_earlier_searches(&browser, &server.url("/"), &["cape town trip"]).await;
    (s, server, browser)
}

/// A recent search highlighted (so in the box) when the service's answer comes: the rows are
/// replaced, and the box goes back to what was typed. Left in it, a text nobody typed or chose
/// would be searched for on Enter and sent to the service on the next focus.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_answer_puts_the_typed_text_back() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, _server, browser) = slow_page_with_a_recent_search().await;
    browser.keys("c").await;
    wait_rows(&browser, |r| r.first().is_some_and(|x| x.0 && x.1 == "cape town trip")).await;
    browser.keys(KEY_DOWN).await;
    let value = "return document.getElementById('q').value";
    assert_eq!(browser.run(value).await, "cape town trip");
    // The service's answer for "c" arrives (with "cat", which no recent search holds).
    wait_rows(&browser, |r| r.contains(&(false, "cat".to_owned()))).await;
    assert_eq!(browser.run(value).await, "c");
}

/// A row pressed (mouse down) when an answer comes is the row the release picks: rebuilt under
/// the pointer, its element was gone by the release and the click picked nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_pressed_when_an_answer_comes_is_the_one_picked() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, _server, browser) = slow_page_with_a_recent_search().await;
    browser
        .run(
            "window.__answers = 0; const real = window.fetch;
             window.fetch = (u, o) => real(u, o).then(r => {
               if (String(u).includes('/v1/suggest')) window.__answers++;
               return r;
             });
             return 0;",
        )
        .await;
    browser.keys("c").await;
    wait_rows(&browser, |r| r == [(true, "cape town trip".to_owned())]).await;
    let row = browser
        .call(
            "POST",
            "/element",
            json!({"using": "css selector", "value": "#suggestions li:first-child .text"}),
        )
        .await;
    let mouse = |actions: Value| {
        json!({"actions": [{"type": "pointer", "id": "mouse",
            "parameters": {"pointerType": "mouse"}, "actions": actions}]})
    };
    let origin = json!({ super::ELEMENT: row[super::ELEMENT] });
    let down = json!([{"type": "pointerMove", "duration": 0, "origin": origin, "x": 0, "y": 0},
        {"type": "pointerDown", "button": 0}]);
    browser.call("POST", "/actions", mouse(down)).await;
    // The service's answer for "c" arrives while the row is held down.
    let answered = browser.poll("return window.__answers;", |v| v.as_u64() >= Some(1)).await;
    assert_eq!(answered, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    browser.call("POST", "/actions", mouse(json!([{"type": "pointerUp", "button": 0}]))).await;
    browser.wait_for_results().await;
    let url = browser.url().await;
    assert!(url.contains("q=cape%20town%20trip") || url.contains("q=cape+town+trip"), "{url}");
}

/// A recent search only highlighted when the person left (Back), and the page restored from
/// the back/forward cache: the box holds what was typed again, so focusing it asks the service
/// about nothing from the history. (The restore is driven by the event it fires: whether
/// Chromium under WebDriver caches a page is its own choice.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recent_search_only_highlighted_is_not_asked_about_after_a_return() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, _server, browser) = page_with_recent(&["zanzibar holidays"]).await;
    browser.run(CLEAR_BOX).await;
    wait_rows(&browser, |r| r.first().is_some_and(|x| x.0 && x.1 == "zanzibar holidays")).await;
    browser.keys(KEY_DOWN).await;
    let value = "return document.getElementById('q').value";
    assert_eq!(browser.run(value).await, "zanzibar holidays");
    browser
        .run(
            "window.dispatchEvent(new PageTransitionEvent('pageshow', { persisted: true }));
             document.getElementById('q').blur(); return 0;",
        )
        .await;
    assert_eq!(browser.run(value).await, "");
    browser.run("document.getElementById('q').focus(); return 0;").await;
    wait_rows(&browser, |r| r.first().is_some_and(|x| x.0 && x.1 == "zanzibar holidays")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = browser.suggest_fetches().await;
    assert!(!asked.iter().any(|(url, _)| url.contains("zanzibar")), "history sent: {asked:?}");
}

/// A browser whose storage throws on every read (a corrupted Firefox profile does) loses the
/// history, not the suggestions or the search.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_that_throws_costs_the_history_only() {
    let _turn = crate::support::HEAVY.lock().await;
    let broken = "Storage.prototype.getItem = function () { throw new DOMException('corrupted', 'UnknownError'); };";
    let (_site, server, browser) = page_where(broken).await;
    browser.instrument().await;
    browser.keys("ca").await;
    browser.wait_for(&api_texts(&server, "ca").await).await;
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
    // The page offers nothing it cannot keep.
    let controls = browser
        .run("return ['history-note', 'history-toggle', 'history-clear'].map(id => document.getElementById(id)).map(e => [e.textContent, e.hidden])")
        .await;
    assert_eq!(
        controls[0],
        json!(["This browser keeps no recent searches here.", false]),
        "{controls}"
    );
    assert_eq!((controls[1][1].as_bool(), controls[2][1].as_bool()), (Some(true), Some(true)));
    browser.enter_searches("ca").await;
}

/// Rows kept from the previous answer while the next one is on its way have no place in the
/// answer for what is typed now: a pick of one reports the prefix and no index (the index
/// of the older answer counted picks at the wrong place).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_kept_from_an_older_answer_reports_no_index() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = super::site();
    let server = crate::http::Server::start(&s.snapshot, &["--inject-delay-ms", "1500"]);
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    browser.keys("ca").await;
    let answer = api_texts(&server, "ca").await;
    assert!(answer.iter().any(|t| t.starts_with("cat")), "{answer:?}");
    browser.wait_for(&answer).await;
    // "t": the rows "cat" starts stay until the (slow) answer for "cat" comes.
    browser.keys("t").await;
    let kept: Vec<String> = answer.iter().filter(|t| t.starts_with("cat")).cloned().collect();
    browser.wait_for(&kept).await;
    browser.keys(&format!("{KEY_DOWN}{KEY_ENTER}")).await;
    browser.wait_for_results().await;
    let url = browser.url().await;
    assert!(url.contains("suggestionPrefix=cat"), "{url}");
    assert!(!url.contains("suggestionIndex"), "{url}");
}

/// Focuses the box and starts a composition in it, as an input method does.
const COMPOSITION_START: &str = "const q = document.getElementById('q'); q.focus();
    q.dispatchEvent(new CompositionEvent('compositionstart', { data: '' })); return 0;";

/// Types `text` into the focused box as an input method does mid-composition.
const COMPOSE: &str = "const q = document.getElementById('q'); q.value = arguments[0];
    q.dispatchEvent(new InputEvent('input', { isComposing: true, inputType: 'insertCompositionText' }));";

/// A recent row removed (its button) while an input method composes leaves the box alone:
/// writing it would commit or cancel the text being composed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_recent_row_mid_composition_leaves_the_box_alone() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, _server, browser) = page_with_recent(&["cape town trip"]).await;
    browser.run(COMPOSITION_START).await;
    let compose = |text: &str| json!({"script": format!("{COMPOSE} return 0;"), "args": [text]});
    browser.call("POST", "/execute/sync", compose("ca")).await;
    // Asked for once the composition pauses: the recent row comes first.
    wait_rows(&browser, |r| r.first().is_some_and(|x| x.0 && x.1 == "cape town trip")).await;
    // Composing on ("cap", not asked for yet), the row's remove button is pressed.
    browser.call("POST", "/execute/sync", compose("cap")).await;
    let value = browser
        .run(
            "document.querySelector('#suggestions li[data-recent] button.remove').click();
             return document.getElementById('q').value;",
        )
        .await;
    assert_eq!(value, "cap", "the box was written mid-composition");
    assert!(!stored(&browser).await.contains_key("cape town trip"), "not removed");
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

/// A composition that ends without its `compositionend` (browsers differ) ends with the next
/// plain input: the box is the page's to write again, so a recent row highlighted and then
/// removed puts back what was typed rather than leaving the removed search in the box.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_composition_without_its_end_ends_at_the_next_plain_input() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, _server, browser) = page_with_recent(&["cape town trip"]).await;
    browser.run(COMPOSITION_START).await;
    // "ca" composed, then "cap" typed plainly at once: the composition's pending ask (300 ms)
    // goes with it.
    let script = format!(
        "{COMPOSE} q.value = 'cap'; q.dispatchEvent(new InputEvent('input', {{ inputType: 'insertText', data: 'p' }})); return 0;"
    );
    browser.call("POST", "/execute/sync", json!({"script": script, "args": ["ca"]})).await;
    // The service's answer for "cap" is on screen (a later one would replace the rows).
    let asked_for =
        |q: &'static str| move |s: &super::Sent| s.url.split(['?', '&']).any(|p| p == q);
    let started = Instant::now();
    while !browser
        .suggest_timeline()
        .await
        .iter()
        .any(|s| asked_for("q=cap")(s) && s.answered.is_some())
    {
        assert!(started.elapsed() < Duration::from_secs(5), "cap never answered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    wait_rows(&browser, |r| r.first().is_some_and(|x| x.0 && x.1 == "cape town trip")).await;
    browser.keys(KEY_DOWN).await;
    let value = "return document.getElementById('q').value";
    assert_eq!(browser.run(value).await, "cape town trip");
    // Past the composition's pause: the highlighted recent search was not asked about.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = browser.suggest_timeline().await;
    assert!(
        !sent.iter().any(asked_for("q=cape%20town%20trip")),
        "a recent search only highlighted was sent"
    );
    browser.keys(SHIFT_DELETE).await;
    assert!(!stored(&browser).await.contains_key("cape town trip"), "not removed");
    assert_eq!(browser.run(value).await, "cap");
}
