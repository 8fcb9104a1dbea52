//! The page under failure and at the edges, tried as a new user would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Browser, KEY_DOWN, KEY_ENTER, Site, api_texts, page, page_where, page_with_recent};
use crate::http::Client;
use crate::http::Server;

const ESCAPE: &str = "\u{E00C}";
const TAB: &str = "\u{E004}";
const ARROW_RIGHT: &str = "\u{E014}";
const ARROW_LEFT: &str = "\u{E012}";
const SHIFT: &str = "\u{E008}";
const ALT: &str = "\u{E00A}";
const KEY_UP: &str = "\u{E013}";
/// Releases the modifiers a key sequence pressed.
const RELEASE: &str = "\u{E000}";

async fn value(browser: &Browser) -> Value {
    browser.run("return document.getElementById('q').value").await
}

/// Whether the "unavailable" notice says so on screen: with its text, inside the window
/// without scrolling, and not covered by anything at its centre (an open list once covered it).
const NOTICE_SHOWN: &str = "const n = document.getElementById('notice');
  if (n.textContent === '') return false;
  const r = n.getBoundingClientRect();
  if (r.width === 0 || r.height === 0 || r.top < 0 || r.bottom > innerHeight) return false;
  return n.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2));";

async fn notice_shown(browser: &Browser) -> bool {
    browser.run(NOTICE_SHOWN).await.as_bool().unwrap()
}

/// The page, instrumented, showing the service's answer for `q` typed.
async fn page_showing(q: &str) -> (Site, Server, Browser) {
    let (site, server, browser) = page().await;
    browser.instrument().await;
    browser.keys(q).await;
    browser.wait_for(&api_texts(&server, q).await).await;
    (site, server, browser)
}

/// Waits until `script` returns `want`.
async fn wait_value(browser: &Browser, script: &str, want: Value) {
    let got = browser.poll(script, |v| *v == want).await;
    assert_eq!(got, want, "{script}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_never_contradicts_the_box_when_the_service_fails() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page_showing("caf").await;
    assert!(!notice_shown(&browser).await);
    drop(server); // the service dies
    browser.keys("z").await;
    // Nothing that contradicts "cafz" stays; the notice says why the list is empty.
    browser.wait_for(&[]).await;
    wait_value(&browser, NOTICE_SHOWN, json!(true)).await;
    browser.keys(KEY_DOWN).await;
    assert_eq!(value(&browser).await, "cafz", "ArrowDown must not bring back a stale row");
    // Backspace to "caf": only rows that "caf" starts may come back (from the page's memory).
    browser.keys("\u{E003}").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for row in browser.shown().await {
        assert!(row.starts_with("caf"), "{row}");
    }
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

/// A service answering 200 with a body of another shape is failing: the page says so, keeps
/// what still matches, and asks again at the next keystroke.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_answer_is_a_failure_and_typing_recovers() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page_showing("ca").await;
    // The next answers are 200s of the wrong shape.
    browser
        .run(
            "window.__realFetch = window.fetch;
             window.fetch = (url, options) => String(url).includes('/v1/suggest')
               ? Promise.resolve(new Response('{\"suggestions\": null}', { status: 200 }))
               : window.__realFetch(url, options);
             return 0;",
        )
        .await;
    browser.keys("p").await;
    wait_value(&browser, NOTICE_SHOWN, json!(true)).await;
    for row in browser.shown().await {
        assert!(row.starts_with("cap"), "{row}");
    }
    browser.run("window.fetch = window.__realFetch; return 0;").await;
    browser.keys("t").await;
    browser.wait_for(&api_texts(&server, "capt").await).await;
    wait_value(&browser, NOTICE_SHOWN, json!(false)).await;
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

/// A browser without `AbortSignal.any` and `String.prototype.toWellFormed` (before Chrome 116,
/// Firefox 124, Safari 17.4) still gets suggestions and searches, lone surrogates included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_browser_without_two_recent_apis_still_works() {
    let _turn = crate::support::HEAVY.lock().await;
    // Removed before any script of the page runs.
    let older = "delete AbortSignal.any; delete String.prototype.toWellFormed;";
    let (_site, server, browser) = page_where(older).await;
    let missing = "return [typeof AbortSignal.any, typeof ''.toWellFormed]";
    assert_eq!(browser.run(missing).await, json!(["undefined", "undefined"]));
    browser.instrument().await;
    browser.keys("ca").await;
    browser.wait_for(&api_texts(&server, "ca").await).await;
    // Half an emoji: asked for (as U+FFFD) without an error, then searched for.
    browser
        .run("const q = document.getElementById('q'); q.value = 'cap\\uD83D'; q.dispatchEvent(new Event('input')); return 0;")
        .await;
    let started = Instant::now();
    while !browser.suggest_fetches().await.iter().any(|(url, _)| url.contains("cap%EF%BF%BD")) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            browser.suggest_fetches().await
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
    browser.enter_searches("cap%EF%BF%BD").await;
}

/// A text longer than the service accepts (1,024 bytes) is not asked for, and the page does
/// not claim the service is down. Percent-encoded, 1,400 Cyrillic letters pass the server's
/// URI limit (8 KiB, answered 414 before the length rule's 400), which the page once took
/// for an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_long_query_is_refused_without_claiming_the_service_is_down() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, _server, browser) = page_showing("ca").await;
    let asked = browser.suggest_fetches().await.len();
    for text in ["'c' + 'a'.repeat(2000)", "'\\u0436'.repeat(1400)"] {
        browser
            .run(&format!("const q = document.getElementById('q'); q.value = {text}; q.dispatchEvent(new Event('input')); return 0;"))
            .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!notice_shown(&browser).await, "{text}: refused is not 'unavailable'");
        assert!(browser.shown().await.is_empty(), "{text}");
    }
    assert_eq!(browser.suggest_fetches().await.len(), asked, "a text too long is not asked for");
    // Exactly the limit is asked for, and answered (nothing matches).
    browser
        .run("const q = document.getElementById('q'); q.value = 'c'.repeat(1024); q.dispatchEvent(new Event('input')); return 0;")
        .await;
    let started = Instant::now();
    while browser.suggest_fetches().await.len() == asked {
        assert!(started.elapsed() < Duration::from_secs(5), "1,024 bytes were not asked for");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!notice_shown(&browser).await);
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
    // Searched for, it is cut to what the results page keeps (1,024 bytes: 512 of these
    // letters), not sent whole past the URI limit to come back as a 414.
    browser
        .run("const q = document.getElementById('q'); q.value = '\\u0436'.repeat(1400); q.dispatchEvent(new Event('input')); return 0;")
        .await;
    browser.keys(KEY_ENTER).await;
    browser.wait_for_results().await;
    let shown = browser
        .run("return document.getElementById('q')?.value ?? document.body.textContent")
        .await;
    assert_eq!(shown, "\u{436}".repeat(512), "the results page");
}

/// A failed answer is asked for again without a keystroke: after a pause when the service
/// was unreachable, after its Retry-After when it was busy. Meanwhile the rows that still
/// match stay, and the notice stays in sight below them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_answer_is_asked_again_without_typing_with_the_notice_in_sight() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page_showing("ca").await;
    let kept: Vec<String> =
        api_texts(&server, "ca").await.into_iter().filter(|t| t.starts_with("cap")).collect();
    assert!(!kept.is_empty(), "the site has no 'cap' row under 'ca'");
    // Suggestions fail as `__mode` says: unreachable, busy (503, Retry-After: 2) or not.
    browser
        .run(
            "window.__mode = 'down'; window.__tries = [];
             const through = window.fetch;
             window.fetch = (url, options) => {
               if (!String(url).includes('/v1/suggest')) return through(url, options);
               window.__tries.push([window.__mode, performance.now()]);
               if (window.__mode === 'down') return Promise.reject(new TypeError('Failed to fetch'));
               if (window.__mode === 'busy')
                 return Promise.resolve(new Response('{}', { status: 503, headers: { 'Retry-After': '2' } }));
               return through(url, options);
             };
             return 0;",
        )
        .await;
    browser.keys("p").await;
    let both = format!(
        "const rows = document.querySelectorAll('#suggestions:not([hidden]) li').length;
         return rows > 0 && (() => {{ {NOTICE_SHOWN} }})();"
    );
    wait_value(&browser, &both, json!(true)).await;
    assert_eq!(browser.shown().await, kept);
    // A row highlighted stays highlighted through the failed retry (after 1 s).
    browser.keys(KEY_DOWN).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let tries = browser.run("return window.__tries.length").await;
    assert!(tries.as_u64().unwrap() >= 2, "no retry within 1.5 s: {tries}");
    assert_eq!(value(&browser).await, kept[0].as_str(), "the highlight was lost");
    // Reachable again: the answer for "cap" comes with no keystroke.
    browser.run("window.__mode = 'up'; return 0;").await;
    browser.wait_for(&api_texts(&server, "cap").await).await;
    wait_value(&browser, NOTICE_SHOWN, json!(false)).await;

    browser.run("window.__mode = 'busy'; return 0;").await;
    browser.keys("t").await;
    wait_value(&browser, NOTICE_SHOWN, json!(true)).await;
    browser.run("window.__mode = 'up'; return 0;").await;
    let started = Instant::now();
    let capt = api_texts(&server, "capt").await;
    while browser.shown().await != capt {
        assert!(started.elapsed() < Duration::from_secs(10), "never asked again after the 503");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let tries = browser.run("return window.__tries").await;
    let tries: Vec<(String, f64)> = serde_json::from_value(tries).unwrap();
    let busy = tries.iter().rposition(|(mode, _)| mode == "busy").unwrap();
    let after = tries[busy + 1].1 - tries[busy].1;
    assert!(after >= 1990.0, "asked again {after:.0} ms after a 503 with Retry-After: 2 s");
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keyboard_works_as_in_the_combobox_pattern() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;
    let cap = api_texts(&server, "cap").await;
    browser.keys("cap").await;
    browser.wait_for(&cap).await;
    // Escape closes and keeps the text; ArrowDown reopens; a second Escape clears.
    browser.keys(ESCAPE).await;
    browser.wait_for(&[]).await;
    assert_eq!(value(&browser).await, "cap");
    browser.keys(KEY_DOWN).await;
    browser.wait_for(&cap).await;
    browser.keys(ESCAPE).await;
    browser.keys(ESCAPE).await;
    assert_eq!(value(&browser).await, "");
    // ArrowRight at the end of the text fills the highlighted row and asks what follows it.
    browser.keys("capt").await;
    let capt = api_texts(&server, "capt").await;
    browser.wait_for(&capt).await;
    // Alt+ArrowDown on an open list moves no highlight and keeps it open; Alt+ArrowUp closes
    // it with the typed text back in the box (not the highlighted row's), and Alt+ArrowDown
    // opens it again.
    browser.keys(&format!("{ALT}{KEY_DOWN}{RELEASE}")).await;
    assert_eq!(browser.run(CARET).await, json!(["ltr", "capt", 4, 0]), "Alt+ArrowDown");
    assert_eq!(browser.shown().await, capt, "Alt+ArrowDown closed the list");
    browser.keys(&format!("{KEY_DOWN}{ALT}{KEY_UP}{RELEASE}")).await;
    browser.wait_for(&[]).await;
    assert_eq!(value(&browser).await, "capt", "Alt+ArrowUp kept the highlighted row's text");
    browser.keys(&format!("{ALT}{KEY_DOWN}{RELEASE}")).await;
    browser.wait_for(&capt).await;
    assert_eq!(browser.run(CARET).await, json!(["ltr", "capt", 4, 0]), "reopened");
    // With Shift the arrow selects text, as in any box: no row is highlighted.
    browser.keys(&format!("{SHIFT}{KEY_DOWN}{RELEASE}")).await;
    assert_eq!(browser.run(CARET).await, json!(["ltr", "capt", 4, 0]), "Shift+ArrowDown");
    browser.keys(&format!("{KEY_DOWN}{ARROW_RIGHT}")).await;
    assert_eq!(value(&browser).await, capt[0].as_str());
    let after = api_texts(&server, &capt[0].replace(' ', "%20")).await;
    browser.wait_for(&after).await;
    // Tab leaves the box as it is and moves focus on (no completion hijack).
    browser.keys(TAB).await;
    assert_eq!(value(&browser).await, capt[0].as_str());
    assert_eq!(browser.run("return document.activeElement.id").await, "go");
    // Refocusing at once after a blur does not leave the list closed.
    browser.run("document.getElementById('q').focus(); return 0;").await;
    browser.wait_for(&after).await;
    browser.run("const q = document.getElementById('q'); q.blur(); q.focus(); return 0;").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(browser.shown().await, after, "the list stays open");
    // After a pick and Back, no stale open list.
    browser.keys(&format!("{KEY_DOWN}{KEY_ENTER}")).await;
    browser.wait_for_results().await;
    browser.call("POST", "/back", json!({})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(browser.shown().await.is_empty(), "a stale list is open after Back");
}

/// The box's direction, its text, where the caret is (in UTF-16 units, as the page counts)
/// and how many rows are highlighted.
const CARET: &str = "const q = document.getElementById('q');
  return [getComputedStyle(q).direction, q.value, q.selectionStart,
          document.querySelectorAll('#suggestions [aria-selected=\"true\"]').length];";

/// In right-to-left text the end of the text is on the left: ArrowLeft there fills the
/// highlighted row, and ArrowRight moves the caret back, as in any right-to-left box.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_right_to_left_text_arrow_left_fills_the_highlighted_row() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;
    let rows = api_texts(&server, "שלו").await;
    assert_eq!(rows, ["שלום", "שלום עולם"]);
    browser.keys("שלו").await;
    browser.wait_for(&rows).await;
    browser.keys(KEY_DOWN).await;
    assert_eq!(browser.run(CARET).await, json!(["rtl", "שלום", 4, 1]));
    // With a modifier the arrow is the browser's (Shift selects; Alt+ArrowLeft goes Back).
    browser.keys(&format!("{SHIFT}{ARROW_LEFT}{RELEASE}")).await;
    assert_eq!(browser.run(CARET).await, json!(["rtl", "שלום", 4, 1]), "Shift+ArrowLeft filled");
    browser.keys(ARROW_RIGHT).await;
    assert_eq!(browser.run(CARET).await, json!(["rtl", "שלום", 3, 1]), "the caret moved back");
    browser.keys(&format!("{ARROW_LEFT}{ARROW_LEFT}")).await;
    assert_eq!(browser.run(CARET).await, json!(["rtl", "שלום", 4, 0]), "the row was filled in");
    // The filled-in text is what is typed now: a space after it asks what follows it.
    browser.keys(" ").await;
    browser.wait_for(&api_texts(&server, "שלום%20").await).await;
}

/// WCAG relative luminance contrast of two CSS colours, computed in the page.
const CONTRAST: &str = "
  const rgb = c => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = c => { const [r, g, b] = rgb(c).map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                     return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const li = document.querySelector('#suggestions li[aria-selected=\"true\"]');
  const other = document.querySelector('#suggestions li[aria-selected=\"false\"]');
  const list = getComputedStyle(document.getElementById('suggestions')).backgroundColor;
  const active = getComputedStyle(li).backgroundColor;
  const typed = getComputedStyle(other.querySelector('.typed')).color;
  const done = getComputedStyle(other.querySelector('.completion')).color;
  const typedActive = getComputedStyle(li.querySelector('.typed')).color;
  return { typed: ratio(typed, list), completion: ratio(done, list), typedActive: ratio(typedActive, active),
           completionActive: ratio(getComputedStyle(li.querySelector('.completion')).color, active),
           rowVsList: ratio(active, list) };";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn highlights_meet_wcag_aa_in_light_and_dark_mode() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;
    for scheme in ["light", "dark"] {
        browser
            .cdp(
                "Emulation.setEmulatedMedia",
                json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
            )
            .await;
        browser.goto(&server.url("/")).await;
        browser.keys("cap").await;
        browser.wait_for(&api_texts(&server, "cap").await).await;
        browser.keys(KEY_DOWN).await;
        let c = browser.run(CONTRAST).await;
        for text in ["typed", "completion", "typedActive", "completionActive"] {
            assert!(c[text].as_f64().unwrap() >= 4.5, "{scheme}: {text} contrast {c}");
        }
        // The active row stands out from the list (plus its accent bar).
        assert!(c["rowVsList"].as_f64().unwrap() >= 1.25, "{scheme}: {c}");
    }
    // One suggestion is "1 suggestion".
    browser.goto(&server.url("/")).await;
    browser.keys("cat").await;
    browser.wait_for(&api_texts(&server, "cat").await).await;
    let status = browser
        .poll("return document.getElementById('status').textContent", |v| v == "1 suggestion")
        .await;
    assert_eq!(status, "1 suggestion");
    // The favicon is served and named by the page and the OpenSearch description.
    let icon = Client::new().get(&server.url("/favicon.svg")).await;
    assert_eq!(icon.status, 200);
    assert!(String::from_utf8_lossy(&icon.body).starts_with("<svg"));
    let osd =
        String::from_utf8(Client::new().get(&server.url("/opensearch.xml")).await.body).unwrap();
    assert!(osd.contains("/favicon.svg</Image>"), "{osd}");
    let link =
        browser.run("return document.querySelector('link[rel=icon]').getAttribute('href')").await;
    assert_eq!(link, "/favicon.svg");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_results_page_has_the_search_box_with_suggestions() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;
    browser.goto(&server.url("/search?q=capital%20one")).await;
    assert_eq!(value(&browser).await, "capital one", "the box holds the search");
    let above = browser
        .run("return document.getElementById('q').getBoundingClientRect().top < document.querySelector('h1').getBoundingClientRect().top")
        .await;
    assert_eq!(above, true, "the box is at the top");
    browser.run("const q = document.getElementById('q'); q.focus(); q.value = ''; q.dispatchEvent(new Event('input')); return 0;").await;
    browser.keys("capt").await;
    browser.wait_for(&api_texts(&server, "capt").await).await;
}

/// A service shedding load (503 with `Retry-After: 1`) is not asked again at every keystroke:
/// the page keeps what still matches with the notice, and asks once the Retry-After has
/// passed, for what is typed by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_service_is_asked_again_only_after_its_retry_after() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = super::site();
    let args =
        ["--max-concurrency", "1", "--inject-delay-ms", "4000", "--request-timeout-ms", "10000"];
    let server = Server::start(&s.snapshot, &args);
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    browser.instrument().await;
    // Another client holds the one slot, 4 s a request, and takes it again each time until
    // the page has been shed (on a loaded machine the page may take seconds to ask).
    let url = server.url("/v1/suggest?q=zz");
    let holding = Arc::new(AtomicBool::new(true));
    let holder = {
        let (url, holding) = (url.clone(), Arc::clone(&holding));
        tokio::spawn(async move {
            let mut served = 0;
            while holding.load(Relaxed) {
                match Client::new().get(&url).await.status {
                    200 => served += 1,
                    // Shed while a probe below or the page held the slot: again, soon.
                    _ => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
            served
        })
    };
    let started = Instant::now();
    while Client::new().get(&server.url("/metrics")).await.status != 503 {
        assert!(started.elapsed() < Duration::from_secs(5), "the slot was never taken");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    browser.keys("ca").await;
    // Shed at once, or (if its request came between two of the other client's) cut by the
    // page's own 3 s limit: either shows the notice. A loaded machine (the other browser tests
    // start their Chromiums meanwhile) has made that take over the 5 s of `wait_value`.
    let started = Instant::now();
    while !notice_shown(&browser).await {
        assert!(started.elapsed() < Duration::from_secs(15), "the notice never showed");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    holding.store(false, Relaxed);
    browser.keys("t").await;
    assert_eq!(value(&browser).await, "cat");
    let started = Instant::now();
    while !browser.suggest_fetches().await.iter().any(|(url, _)| url.ends_with("q=cat")) {
        assert!(started.elapsed() < Duration::from_secs(5), "never asked again");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    // On the page's own clock: nothing was sent within the Retry-After (1 s) of a 503. (A
    // request cut by the page's 3 s limit instead has no Retry-After to honour.)
    let timeline = browser.suggest_timeline().await;
    let shed: Vec<f64> =
        timeline.iter().filter(|f| f.status == Some(503)).filter_map(|f| f.answered).collect();
    for &at in &shed {
        for f in timeline.iter().filter(|f| f.at > at) {
            let after = f.at - at;
            assert!(after >= 995.0, "{} sent {after:.0} ms after a 503: {timeline:?}", f.url);
        }
    }
    if shed.is_empty() {
        assert!(timeline.iter().any(|f| f.status.is_none()), "neither shed nor cut: {timeline:?}");
    }
    assert!(holder.await.unwrap() >= 1, "the held requests were answered");
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

/// Emptied after a failure, with a recent search to show, the box asks for nothing: the notice
/// goes (nothing is being asked), and the window coming back in front asks for nothing. It
/// kept the notice, and on `focus` asked for `q=` and filled the empty box with the service's
/// global top 10 under the recent searches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_box_after_a_failure_asks_for_nothing() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, _server, browser) = page_with_recent(&["weather"]).await;
    browser
        .run(
            "window.__asked = [];
             const through = window.fetch;
             window.fetch = (url, options) => {
               if (!String(url).includes('/v1/suggest')) return through(url, options);
               window.__asked.push(String(url));
               return Promise.reject(new TypeError('Failed to fetch'));
             };
             return 0;",
        )
        .await;
    browser.keys("c").await;
    wait_value(&browser, NOTICE_SHOWN, json!(true)).await;
    browser.keys("\u{E003}").await;
    wait_value(&browser, NOTICE_SHOWN, json!(false)).await;
    let asked = browser.run("return window.__asked.length").await;
    browser
        .run("window.dispatchEvent(new Event('online')); window.dispatchEvent(new Event('focus')); return 0;")
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(browser.run("return window.__asked.length").await, asked, "asked for an empty box");
    assert_eq!(browser.shown().await, ["weather"], "the recent searches only");
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

/// While an input method composes (pinyin on its way to 中国), the page asks nothing for the
/// letters being composed, each update coming sooner than `composeIdleMs` (100 ms apart here,
/// by the page's own timers, so a busy machine delays them as it delays the page's); once the
/// composition ends, it asks for what was composed. It used to ask for every update more than
/// `debounceMs` (50 ms) apart: "z", "zh", "zho"... none of which anyone searches for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_asked_for_text_an_input_method_is_still_composing() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, _server, browser) = page().await;
    browser.instrument().await;
    browser
        .run(&composing(
            "const steps = ['z', 'zh', 'zho', 'zhon', 'zhong', 'zhongg', 'zhonggu', 'zhongguo'];
             let i = 0;
             const next = () => {
               if (i < steps.length) {
                 compose(steps[i++]);
                 setTimeout(next, 100);
                 return;
               }
               compose('中国');
               input.dispatchEvent(new CompositionEvent('compositionend', { data: '中国' }));
               window.__composed = true;
             };
             next();
             return 0;",
        ))
        .await;
    let asked = "return window.__fetches.map(f => decodeURIComponent(new URL(f.url, location.href).searchParams.get('q') || ''))";
    let started = Instant::now();
    let fetched = loop {
        let fetched = browser.run(asked).await;
        let fetched: Vec<String> = serde_json::from_value(fetched).unwrap();
        if fetched.iter().any(|q| q == "中国") {
            break fetched;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "never asked: {fetched:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(browser.run("return window.__composed === true").await, json!(true));
    let composing: Vec<&String> = fetched.iter().filter(|q| q.starts_with('z')).collect();
    assert!(composing.is_empty(), "asked for text being composed: {fetched:?}");
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

/// Without history.js (a failed load, a blocker) the box is the plain form it is without
/// scripts: typing and Enter still search, and the page does not offer a history it lacks.
/// (It used to throw at every keystroke, and Enter, taken over, went nowhere.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_whose_history_script_failed_still_searches() {
    let _turn = crate::support::HEAVY.lock().await;
    // The script's result is dropped, as if it never loaded.
    let failed = "Object.defineProperty(window, 'TypeaheadHistory', { get() {}, set(v) {} });";
    let (_site, _server, browser) = page_where(failed).await;
    browser.instrument().await;
    let shown = "return [document.getElementById('history-note').textContent,
                         document.getElementById('history-toggle').hidden,
                         document.getElementById('history-clear').hidden]";
    let no_history = json!(["This browser keeps no recent searches here.", true, true]);
    assert_eq!(browser.run(shown).await, no_history);
    browser.keys("cap").await;
    browser.enter_searches("cap").await;
}

/// An answer asked for before a composition went on is not shown under the text composed
/// since: the request is given up, and the composed text is asked for once it pauses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_for_text_composed_past_is_dropped() {
    let _turn = crate::support::HEAVY.lock().await;
    let (_site, server, browser) = page().await;
    // The answer for "ca" waits until the test lets it go (the request is counted first).
    browser
        .run(
            "const real = window.fetch;
             const held = new Promise(r => (window.__let = r));
             window.fetch = (url, options) =>
               new URL(url, location.href).searchParams.get('q') === 'ca'
                 ? held.then(() => real(url, options))
                 : real(url, options);
             return 0;",
        )
        .await;
    browser.instrument().await;
    browser.run(&composing("compose('ca'); return 0;")).await;
    let asked = "return window.__fetches.filter(f => f.url.includes('/v1/suggest')).map(f =>
                   [new URL(f.url, location.href).searchParams.get('q'), f.aborted])";
    let started = Instant::now();
    while browser.run(asked).await.as_array().unwrap().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(5), "\"ca\" never asked");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    browser.run(&composing("compose('cat'); window.__let(); return 0;")).await;
    browser.wait_for(&api_texts(&server, "cat").await).await;
    assert_eq!(browser.run(asked).await, json!([["ca", true], ["cat", false]]));
    assert!(browser.errors().await.is_empty(), "{:?}", browser.errors().await);
}

/// `script` with `input` (the box) and `compose(text)`, which starts an input method's
/// composition in the box unless one is under way, then shows `text` as its latest update.
fn composing(script: &str) -> String {
    let compose = "const input = document.getElementById('q');
      const compose = text => {
        if (!window.__composing) {
          input.focus();
          input.dispatchEvent(new CompositionEvent('compositionstart', { data: '' }));
          window.__composing = true;
        }
        input.value = text;
        input.dispatchEvent(new InputEvent('input', { isComposing: true, inputType: 'insertCompositionText' }));
      };";
    format!("{compose}\n{script}")
}

/// `--min-chars` counts characters, as the service does: one emoji is one (two UTF-16 units,
/// which the page used to count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_chars_counts_characters_not_utf16_units() {
    let _turn = crate::support::HEAVY.lock().await;
    let s = super::site();
    let server = Server::start(&s.snapshot, &["--min-chars", "2"]);
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    browser.instrument().await;
    let typed = |text: &str| {
        format!(
            "const input = document.getElementById('q'); input.focus(); input.value = {text:?};
             input.dispatchEvent(new InputEvent('input')); return 0;"
        )
    };
    browser.run(&typed("\u{1F600}")).await;
    // Longer than the debounce (50 ms): an ask would have gone out by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(browser.suggest_fetches().await.is_empty(), "{:?}", browser.suggest_fetches().await);
    browser.run(&typed("c\u{1F600}")).await;
    let started = Instant::now();
    while browser.suggest_fetches().await.is_empty() {
        assert!(started.elapsed() < Duration::from_secs(5), "two characters never asked");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}
