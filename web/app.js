// The autocomplete box, following the client rules of the seed design:
// - ask only after the user paused typing for `debounceMs` (50 ms);
// - cancel the request in flight when typing goes on (AbortController), ignore late answers;
// - start after `minChars` characters; reuse recent answers (backspacing to "cap" is instant);
// - open the connection early, so the first keystroke does not pay for the handshake;
// - never block typing; the list never contradicts the box: rows that no longer match what
//   is typed go at once, and when the service fails only what still matches stays, with a
//   visible notice (a 400 for an over-long query is not a failure of the service);
// - a failed answer is asked for again without waiting for a keystroke, but a service that
//   says it is busy (429, 503) only after its Retry-After, and an unreachable one after a
//   pause that grows (1, 2, 4 ... 30 s) or when the browser is back online (or the window
//   back in front); never while the box is closed or the page is not in front;
// - while an input method composes (CJK, or the word a phone keyboard is forming), ask only
//   once the composition ends or pauses for `composeIdleMs` (300 ms): the romaji or pinyin on
//   its way to becoming a word is not what anyone searches for;
// - the person's own earlier searches (history.js, in this browser only) come first.
// Keyboard as in common search boxes: ArrowDown (re)opens, ArrowRight at the end of the text
// (ArrowLeft in right-to-left text) fills the highlighted row, Escape closes and a second Escape
// clears, Shift+Delete removes a highlighted recent search (plain Delete is left to edit the text);
// Tab is left to move focus.
// Accessibility: the WAI-ARIA 1.2 combobox pattern (combobox + listbox/option,
// aria-expanded, aria-activedescendant), with a polite live region for counts.
(() => {
  "use strict";
  const config = Object.assign(
    { api: "", resultsUrl: "/search?q={searchTerms}", minChars: 1, debounceMs: 50, composeIdleMs: 300, cacheSize: 200, cacheMs: 2000, maxQueryBytes: 1024 },
    JSON.parse(document.getElementById("config").textContent || "{}"),
  );
  const input = document.getElementById("q");
  const list = document.getElementById("suggestions");
  const popup = document.getElementById("popup");
  const status = document.getElementById("status");
  const form = document.getElementById("search");
  const notice = document.getElementById("notice");
  const historyToggle = document.getElementById("history-toggle");
  const historyClear = document.getElementById("history-clear");
  const historyNote = document.getElementById("history-note");
  // history.js holds the key normalization the list's checks use: without it (a failed load,
  // a blocker) the box stays the plain form it is without scripts, and searching still works.
  const own = window.TypeaheadHistory;
  if (!own) {
    historyNote.textContent = "This browser keeps no recent searches here.";
    historyToggle.hidden = historyClear.hidden = true;
    return;
  }
  // typed text -> { at, suggestions }, least recently used first. Entries live `cacheMs`: long
  // enough for backspacing, short enough that a blocked query does not come back from here.
  const cache = new Map();
  let timer = 0;
  let inflight = null; // AbortController of the request in flight
  let sequence = 0; // requests sent
  let shown = 0; // sequence number of the answer on screen
  let items = []; // rows on screen: { text, key, match, recent }
  let service = { q: null, suggestions: [] }; // the last answer of the service
  let blurTimer = 0;
  let active = -1; // highlighted option
  let typed = ""; // what the user typed (the input shows a highlighted suggestion instead)
  let composing = false; // an input method is composing text in the box
  let announced; // the timer of a history change being said (`announce`)
  let composeTimer = 0;
  let quietUntil = 0; // Date.now() before which the service, busy, is not asked
  let failures = 0; // answers failed in a row
  let pressed = false; // a pointer is down on a row: the rows stay as they are
  let held = null; // [q, rows]: what came to be shown while a row was pressed
  let heldTimer = 0;

  // Early connection: a cheap request now keeps a warm keep-alive connection for typing.
  // No Referer on any request: on the results page it would carry the last search.
  fetch(`${config.api}/healthz`, { cache: "no-store", referrerPolicy: "no-referrer" }).catch(() => {});

  // Rows the list shows at most.
  const ROWS = 10;

  function remember(q, suggestions) {
    cache.delete(q);
    cache.set(q, { at: Date.now(), suggestions });
    if (cache.size > config.cacheSize) cache.delete(cache.keys().next().value);
  }

  function recall(q) {
    const hit = cache.get(q);
    if (!hit) return null;
    if (Date.now() - hit.at > config.cacheMs) {
      cache.delete(q);
      return null;
    }
    return hit.suggestions;
  }

  // Stops whatever is pending: the debounce and composition timers and the request in flight.
  function cancel() {
    stopAsking();
    clearTimeout(composeTimer);
  }

  // Stops the debounce (or a later ask) and the request in flight; a composition's pending
  // ask stays.
  function stopAsking() {
    clearTimeout(timer);
    if (inflight) {
      inflight.abort();
      inflight = null;
    }
  }

  // The input method is done composing (its end event, or a blur or return to the page
  // standing in for one): its pending ask goes with it.
  function endComposition() {
    composing = false;
    clearTimeout(composeTimer);
  }

  // Whether `q` is too short to ask for: nothing but spaces, or under `minChars` characters
  // as the service counts them (code points, not UTF-16 units: one emoji is one).
  function tooShort(q) {
    const text = q.trim();
    return text === "" || [...text].length < config.minChars;
  }

  function schedule() {
    // Typing ends a press whose release never came (let go outside the window): the rows
    // must follow what is typed.
    release();
    cancel();
    typed = input.value;
    const q = typed;
    // Nothing is asked for these, so a notice that the service is unavailable no longer holds
    // (the failures in a row stand: the pause before the next try still grows with them).
    if (tooShort(q)) {
      unavailable(false);
      return q.trim() === "" ? showRecent() : show(q, []);
    }
    const cached = recall(q);
    if (cached) return show(q, cached);
    // Until the answer comes, keep only the rows that still match what is in the box.
    show(q, stillMatching(q));
    // A busy service is asked once its Retry-After has passed, not at every keystroke, which
    // would keep it shedding.
    const busy = busyFor();
    if (busy > 0) unavailable(true);
    timer = setTimeout(() => request(q), Math.max(config.debounceMs, busy));
  }

  // The service's last rows that the typed text still starts (words and spelling matches
  // wait for the new answer: only the service can say whether they still hold).
  // They are marked as kept: their place in an older answer is no place in the answer for `q`.
  function stillMatching(q) {
    const p = own.prefix(q);
    return service.suggestions
      .filter((s) => (s.match ?? "prefix") === "prefix" && own.key(s.text).startsWith(p))
      .map((s) => ({ ...s, kept: true }));
  }

  // An empty box on focus: the most recent searches.
  function showRecent() {
    const recent = own.matches("");
    if (recent.length === 0 || document.activeElement !== input) return close();
    show("", []);
  }

  const encoder = new TextEncoder();

  async function request(q) {
    const mine = ++sequence;
    const text = wellFormed(q);
    // Not a failure: the service refuses a text this long, so nothing is asked.
    if (encoder.encode(text).length > config.maxQueryBytes) return refused(mine, q);
    const controller = new AbortController();
    inflight = controller;
    try {
      // A service that never answers is as unavailable as one that refuses: 3 s at most.
      const signal = withTimeout(controller, 3000);
      // `no-store`: what was typed is not kept in the browser's disk cache, where "Clear
      // history" cannot reach it (the page keeps its own answers for 2 s, in memory).
      const response = await fetch(`${config.api}/v1/suggest?q=${encodeURIComponent(text)}`, {
        signal,
        referrerPolicy: "no-referrer",
        cache: "no-store",
      });
      // Refused for its length (by the service, or before it by the URI or header limits a
      // percent-encoded non-Latin text reaches first): nothing to suggest, not an outage.
      if ([400, 414, 431].includes(response.status)) return refused(mine, q);
      if ([429, 503].includes(response.status)) quietUntil = Date.now() + retryAfterMs(response);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const body = await response.json();
      // A body of another shape is a failing service, not an empty answer (and must not
      // replace the last good rows, which the list keeps while they still match).
      if (!wellShaped(body)) throw new Error("malformed answer");
      // Out of order, or typing moved on (the box may show a highlighted row: `typed` counts).
      if (mine < shown || typed !== q) return;
      failures = 0;
      unavailable(false);
      // The service answers 10 (its default k); more is a broken proxy's, and would be kept
      // and mapped again at every keystroke that recalls it.
      const suggestions = body.suggestions.slice(0, ROWS);
      if (!body.partial) remember(q, suggestions);
      // A partial answer with nothing in it is worse than the last good list.
      if (body.partial && suggestions.length === 0 && items.length > 0) return;
      shown = mine;
      show(q, suggestions);
    } catch (error) {
      // Aborted because typing went on (one cut at the page's time limit failed), or older
      // than the answer on screen.
      if ((error.name === "AbortError" && !controller.timedOut) || typed !== q || mine < shown) return;
      failures += 1;
      unavailable(true);
      // The rows for `q` are already what still matches (`schedule`): shown again, they would
      // lose the row highlighted meanwhile at every failed retry.
      if (service.q !== q) show(q, stillMatching(q));
      askAgainLater(q);
    } finally {
      if (inflight === controller) inflight = null;
    }
  }

  // Whether the person is at the box: it has the focus and its window is in front.
  const atTheBox = () => document.activeElement === input && document.hasFocus();

  // Asks for `q` again while it is what the box holds: once a busy service's Retry-After has
  // passed, and no sooner than a pause that doubles with each failure in a row (a service
  // that is down is not asked every second by every open page). Typing and closing cancel it
  // (`cancel`); a page not in front asks nothing (`askAgainNow` once it is back).
  function askAgainLater(q) {
    const pause = Math.min(1000 * 2 ** (failures - 1), 30000);
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (atTheBox() && typed === q) request(q);
    }, Math.max(pause, busyFor()));
  }

  // Back online, or this window back in front, while the notice is up: ask now, not after
  // the pause (a busy service still only once its Retry-After has passed).
  function askAgainNow() {
    if (failures === 0 || notice.textContent === "" || !atTheBox()) return;
    const q = typed;
    // What the box holds now may be nothing to ask for (emptied since the failure).
    if (tooShort(q)) return;
    // Not `cancel`: a composition's pending ask stays (it asks for newer text than this).
    stopAsking();
    timer = setTimeout(() => request(q), busyFor());
  }
  window.addEventListener("online", askAgainNow);
  window.addEventListener("focus", askAgainNow);

  // How long a busy service still asked not to be asked (at most the longest window: a clock
  // set back after a 503 must not stop the asking).
  function busyFor() {
    return Math.max(0, Math.min(quietUntil - Date.now(), 30000));
  }

  // Retry-After in seconds (what the service sends), 2 s without one it can read (an HTTP
  // date, or a header a cross-origin service does not expose), 30 s at most.
  function retryAfterMs(response) {
    const seconds = Number.parseInt(response.headers.get("Retry-After") ?? "", 10);
    return 1000 * (Number.isFinite(seconds) ? Math.min(Math.max(seconds, 1), 30) : 2);
  }

  function refused(mine, q) {
    if (mine >= shown && typed === q) {
      unavailable(false);
      show(q, []);
    }
  }

  // Browsers before Chrome 116, Firefox 124 and Safari 17.4 lack `AbortSignal.any`, and before
  // Chrome 111, Firefox 119 and Safari 16.4 `String.prototype.toWellFormed`: without these two
  // fallbacks they could neither get suggestions nor search. Browsers before Chrome 98,
  // Firefox 97 and Safari 15.4 also drop an abort's reason (the fetch fails as an AbortError,
  // as if typing had cancelled it), so the controller says it timed out.
  function withTimeout(controller, ms) {
    if (typeof AbortSignal.any === "function") return AbortSignal.any([controller.signal, AbortSignal.timeout(ms)]);
    const timer = setTimeout(() => {
      controller.timedOut = true;
      controller.abort(new DOMException("no answer in time", "TimeoutError"));
    }, ms);
    controller.signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
    return controller.signal;
  }

  // A lone surrogate (half an emoji, cut by an edit) becomes U+FFFD, which `encodeURIComponent`
  // needs: it throws on one.
  function wellFormed(s) {
    if (typeof s.toWellFormed === "function") return s.toWellFormed();
    return s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]|[\uD800-\uDFFF]/g, (c) => (c.length === 2 ? c : "\uFFFD"));
  }

  function wellShaped(body) {
    return Array.isArray(body?.suggestions) && body.suggestions.every((s) => typeof s?.text === "string");
  }

  // The notice is a live region that is always there: only its text comes and goes, which is
  // what screen readers announce.
  function unavailable(yes) {
    const text = yes ? "Suggestions are unavailable right now." : "";
    if (notice.textContent !== text) notice.textContent = text;
  }

  // Shows the person's own matching searches, then the service's `suggestions` for `q`
  // without those keys: 10 rows at most.
  function show(q, suggestions) {
    service = { q, suggestions };
    const recent = own.matches(q).map((e) => ({ text: e.text, key: e.key, match: "prefix", recent: true }));
    const seen = new Set(recent.map((r) => r.key));
    // `index`: the row's place in the service's answer, which is what a pick reports; a
    // place counted after the rows the history took out would tell which ones those were.
    // A row kept from an older answer has none.
    const rest = suggestions
      .map((s, index) => ({
        text: s.text,
        key: own.key(s.text),
        match: s.match ?? "prefix",
        recent: false,
        index: s.kept ? null : index,
      }))
      .filter((s) => !seen.has(s.key));
    render(q, [...recent, ...rest].slice(0, ROWS));
  }

  function render(q, rows) {
    // An answer arriving after the box lost focus (or was closed) must not pop the list open.
    if (document.activeElement !== input) return;
    // Rows never change under a pressed pointer: a click goes to the element pressed, and a
    // row rebuilt between press and release lost the pick. The newest rows wait for the release.
    if (pressed) {
      held = [q, rows];
      return;
    }
    held = null; // older than these
    // A row highlighted in the box goes with the rows: what was typed comes back, or the box
    // would keep a text nobody typed or chose (and ask the service for it on the next focus).
    // (Not while an input method composes: writing the box would commit or cancel its text.)
    if (active >= 0 && !composing) input.value = typed;
    items = rows;
    active = -1;
    input.removeAttribute("aria-activedescendant");
    list.replaceChildren(...rows.map((s, i) => option(q, s, i)));
    const open = rows.length > 0;
    list.hidden = !open;
    popup.classList.toggle("open", open);
    input.setAttribute("aria-expanded", String(open));
    clearTimeout(announced); // newer than a history change being said
    status.textContent = open ? `${rows.length} ${rows.length === 1 ? "suggestion" : "suggestions"}` : "";
  }

  // A text's user-perceived characters: a highlight never splits one (a Devanagari vowel sign,
  // a Thai tone mark or an emoji's joined parts from its base). Without Intl.Segmenter: a
  // base with its marks and whatever joiners glue to it.
  const segmenter = typeof Intl.Segmenter === "function" ? new Intl.Segmenter(undefined, { granularity: "grapheme" }) : null;
  function graphemes(text) {
    if (segmenter) return Array.from(segmenter.segment(text), (g) => g.segment);
    return text.match(/[^\p{M}\u200c\u200d]\p{M}*(?:[\u200c\u200d]+(?:[^\p{M}\u200c\u200d]\p{M}*)?)*|[\p{M}\u200c\u200d]+/gsu) ?? [];
  }

  // Lowercasing makes a Σ that ends a text "ς", and a cut text ends where the whole did not
  // ("ΠΑΣ" of "ΠΑΣΟΚ"): the two sigmas compare equal.
  const sigma = (s) => s.replace(/ς/g, "σ");

  // How many UTF-16 units of `text` the typed `head` covers: the shortest run of whole
  // characters whose prefix normalization (the service's: case, width, accents, spacing,
  // invisible characters) starts with the typed text's; 0 when the text does not start so.
  function matched(head, text) {
    const want = sigma(own.prefix(head));
    if (want === "") return 0;
    let n = 0;
    for (const g of graphemes(text)) {
      n += g.length;
      const have = sigma(own.prefix(text.slice(0, n)));
      if (have.startsWith(want)) return n;
      if (!want.startsWith(have.trimEnd())) return 0;
    }
    return 0;
  }

  // The typed words, normalized like the server's words tier: complete ones (a space follows)
  // and the partial last one (when the text does not end in a space).
  function typedWords(q) {
    const p = own.prefix(q);
    const words = p.split(" ").filter(Boolean);
    const partial = p.endsWith(" ") ? null : (words.pop() ?? null);
    return { complete: new Set(words), partial };
  }

  function span(className, text) {
    const el = document.createElement("span");
    el.className = className;
    el.textContent = text;
    return el;
  }

  // Prefix tier: the start matching what was typed is plain, the completion is bold.
  function prefixParts(q, text) {
    const n = matched(q.trimStart(), text);
    return [span("typed", text.slice(0, n)), span("completion", text.slice(n))];
  }

  // Words tier ("york times" -> "new york times"), wherever the words are: a suggestion word
  // equal to a complete typed word is plain, and so is the typed part of a word that the
  // partial last word starts; the rest is bold. Compared word by word, normalized.
  function wordsParts(q, text) {
    const { complete, partial } = typedWords(q);
    const parts = [];
    for (const piece of text.split(/(\s+)/)) {
      if (piece === "") continue;
      if (/^\s+$/.test(piece)) {
        parts.push(document.createTextNode(piece));
        continue;
      }
      const word = own.key(piece);
      let n = 0;
      if (complete.has(word)) n = piece.length;
      else if (partial && word.startsWith(partial)) n = matched(partial, piece);
      if (n > 0) parts.push(span("typed", piece.slice(0, n)));
      if (n < piece.length) parts.push(span("completion", piece.slice(n)));
    }
    return parts;
  }

  // One option. `data-match` names the tier that found it ("prefix", "words", "fuzzy"); only
  // a prefix match shows the typed text as its start. A fuzzy match ("facebok" -> "facebook")
  // highlights nothing typed: it is marked as a correction (CSS) and described as one to
  // screen readers, its text (the option's name) left as it is.
  // A recent search has an icon and says so to screen readers ("Recent search"), and a remove
  // button; every row has a fill button (as in Google's box) that puts its text in the box
  // without searching. The buttons are for pointers: the keyboard has Shift+Delete and
  // ArrowRight, so they stay out of the tab order and out of the option's name.
  function option(q, s, i) {
    const li = document.createElement("li");
    li.id = `suggestion-${i}`;
    li.setAttribute("role", "option");
    li.setAttribute("aria-selected", "false");
    const tier = s.match;
    li.dataset.match = tier;
    const text = span("text", "");
    text.dir = "auto"; // a right-to-left suggestion reads right to left
    if (s.recent) {
      li.dataset.recent = "true";
      li.append(span("icon", "\u21ba"), span("visually-hidden", "Recent search: "));
      li.setAttribute("aria-describedby", "recent-hint");
    }
    if (tier === "prefix") text.append(...prefixParts(q, s.text));
    else if (tier === "words") text.append(...wordsParts(q, s.text));
    else text.append(span("completion", s.text));
    if (tier === "fuzzy") li.setAttribute("aria-describedby", "fuzzy-hint");
    li.append(text);
    if (s.recent) li.append(button("remove", "Remove from history", "\u00d7", () => forget(i)));
    li.append(button("fill", `Fill in ${s.text}`, "\u2196", () => fill(i)));
    li.querySelector(".icon")?.setAttribute("aria-hidden", "true");
    // pointerdown keeps the focus in the box (mouse, touch and pen); the pick waits for the
    // click, so a touch that starts a scroll or a secondary button picks nothing.
    li.addEventListener("pointerdown", (event) => {
      event.preventDefault();
      press(event);
    });
    li.addEventListener("click", () => pick(i));
    return li;
  }

  // The click that ends a press comes after its pointerup (it may pick, which closes the list
  // and drops what was held); rows held for a press that picks nothing are shown after it.
  // A touch's click can come a little later than its pointerup, hence the timer's margin.
  // Only the primary button (a touch, a pen's tip) picks: a secondary one opens a context
  // menu, which takes the release.
  function press(event) {
    if (event.button !== 0) return;
    pressed = true;
    clearTimeout(heldTimer);
  }
  function release() {
    if (!pressed) return;
    pressed = false;
    heldTimer = setTimeout(showHeld, 100);
  }
  function showHeld() {
    clearTimeout(heldTimer);
    if (pressed || !held) return;
    const rows = held;
    held = null;
    render(...rows);
  }
  window.addEventListener("pointerup", release, true);
  window.addEventListener("pointercancel", release, true);
  window.addEventListener("contextmenu", release, true);
  window.addEventListener("click", showHeld);

  function button(className, label, glyph, action) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = className;
    b.tabIndex = -1;
    b.title = label;
    b.setAttribute("aria-hidden", "true");
    b.textContent = glyph;
    b.addEventListener("pointerdown", (event) => {
      event.preventDefault();
      event.stopPropagation();
      press(event);
    });
    b.addEventListener("click", (event) => {
      event.stopPropagation();
      action();
    });
    return b;
  }

  // Puts row i's text in the box and asks for what follows it.
  function fill(i) {
    input.value = items[i].text;
    input.focus();
    schedule();
  }

  // Removes recent search i from the history and from the list.
  function forget(i) {
    release(); // Shift+Delete with a row held down: the row goes now
    own.remove(items[i].key);
    if (!composing) input.value = typed;
    show(service.q ?? typed, service.suggestions);
  }

  function highlight(i) {
    if (items.length === 0) return;
    active = i;
    for (const [n, li] of [...list.children].entries()) {
      li.setAttribute("aria-selected", String(n === active));
    }
    if (active < 0) {
      input.removeAttribute("aria-activedescendant");
      input.value = typed;
    } else {
      input.setAttribute("aria-activedescendant", `suggestion-${active}`);
      input.value = items[active].text;
      list.children[active].scrollIntoView({ block: "nearest" });
    }
  }

  function close() {
    cancel();
    pressed = false;
    held = null;
    items = [];
    active = -1;
    list.hidden = true;
    popup.classList.remove("open");
    list.replaceChildren();
    input.setAttribute("aria-expanded", "false");
    // The notice drops down with the list; what it says holds while typing, which is over,
    // and nothing is asked again (`cancel`) until the box is used again.
    failures = 0;
    unavailable(false);
    input.removeAttribute("aria-activedescendant");
  }

  // Runs the search, telling the results page which prefix and position were picked
  // (the OpenSearch 1.1 suggestions extension's suggestionPrefix and suggestionIndex).
  // A recent search says nothing of where it came from (that would reveal the history), and
  // a service row gives its place in the service's own answer (one counted on the screen, or
  // after the rows the history took out, would reveal the history too).
  function pick(i) {
    const row = items[i];
    // Chosen, so no longer a highlight to put back when the page returns from the cache.
    close();
    input.value = row.text;
    const from = { suggestionPrefix: typed };
    if (row.index !== null) from.suggestionIndex = String(row.index);
    go(row.text, row.recent ? {} : from);
  }

  // Searches for `query`. Nothing pending may reopen the list while the results load. This
  // service's own results page keeps the first 1,024 bytes of a search (as its suggestions
  // do), and a longer one, percent-encoded, can pass its URI limit: the search is cut to
  // what that page would keep. Another site's results page gets the whole text.
  function go(query, extra) {
    close();
    const template = new URL(config.resultsUrl.replaceAll("{searchTerms}", ""), location.href);
    if (template.origin === location.origin) query = cut(wellFormed(query), config.maxQueryBytes);
    own.record(query);
    const url = new URL(config.resultsUrl.replaceAll("{searchTerms}", encodeURIComponent(wellFormed(query))), location.href);
    for (const [k, v] of Object.entries(extra)) url.searchParams.set(k, v);
    location.assign(url.toString());
  }

  // The longest start of `text` whose UTF-8 form fits in `max` bytes, whole code points.
  function cut(text, max) {
    if (encoder.encode(text).length <= max) return text;
    let bytes = 0;
    let end = 0;
    for (const c of text) {
      bytes += encoder.encode(c).length;
      if (bytes > max) break;
      end += c.length;
    }
    return text.slice(0, end);
  }

  // Each update of a composition waits for the next one, up to `composeIdleMs`; its end asks
  // at once. (Phone keyboards compose every word: waiting for the end alone would show
  // nothing until a space.)
  // A composition ended without its event (the box blurred, the page restored, browsers
  // differ) ends with the next plain input, a blur or a return to the page.
  input.addEventListener("compositionstart", () => (composing = true));
  input.addEventListener("compositionend", () => {
    endComposition();
    // Ended by a blur: nothing to ask for a box that is closing.
    if (document.activeElement === input) schedule();
  });
  input.addEventListener("input", (event) => {
    if (!event.isComposing) {
      composing = false;
      return schedule();
    }
    // The text asked for (or to be asked again) is no longer the box's: its answer, come
    // now, would be shown under the text composed since.
    stopAsking();
    clearTimeout(composeTimer);
    composeTimer = setTimeout(schedule, config.composeIdleMs);
  });
  input.addEventListener("keydown", (event) => {
    // Keys that compose text in an input method (CJK) are the method's, not the list's.
    if (event.isComposing || event.keyCode === 229) return;
    const open = !list.hidden && items.length > 0;
    switch (event.key) {
      case "ArrowDown":
      case "ArrowUp":
        if (leftToTheBrowser(event)) break;
        if (event.altKey) {
          // As the combobox pattern has it: Alt+ArrowDown opens a closed list, Alt+ArrowUp
          // closes an open one, and neither moves the highlight. The caret is the system's
          // (macOS's Option+ArrowUp/Down go to an end of the text). Closing puts back what was
          // typed, as Escape does: a highlighted row's text left in the box would be asked for
          // as if typed (a recent search's too).
          if (event.key === "ArrowDown" && !open) schedule();
          if (event.key === "ArrowUp" && open) {
            input.value = typed;
            close();
          }
          break;
        }
        event.preventDefault();
        if (!open) {
          // A closed list reopens (ArrowDown), from what is typed now.
          if (event.key === "ArrowDown") schedule();
          return;
        }
        highlight(((active + 1 + (event.key === "ArrowDown" ? 1 : -1) + items.length + 1) % (items.length + 1)) - 1);
        break;
      case "ArrowRight":
      case "ArrowLeft":
        // At the end of the text, the arrow toward it (ArrowLeft in right-to-left text, where
        // ArrowRight moves the caret back) makes the highlighted row's text what is typed.
        // With Alt too it is the browser's (Alt+ArrowLeft goes Back).
        if (event.altKey || leftToTheBrowser(event)) break;
        if (event.key !== arrowToTheEnd()) break;
        if (open && active >= 0 && input.selectionStart === input.value.length) {
          event.preventDefault();
          fill(active);
        }
        break;
      case "Delete":
        if (event.shiftKey && open && active >= 0 && items[active].recent) {
          event.preventDefault();
          forget(active);
        }
        break;
      case "Enter":
        event.preventDefault();
        if (open && active >= 0) pick(active);
        else if (input.value.trim()) go(input.value, {});
        break;
      case "Escape":
        // The first Escape closes the list, the second clears the box.
        event.preventDefault();
        if (open) {
          input.value = typed;
          close();
        } else {
          input.value = "";
          typed = "";
          close();
        }
        break;
      default:
    }
  });
  // Shift selects text and Ctrl or Cmd moves the caret by words or to an end: with any of
  // them an arrow is the browser's, never the list's.
  function leftToTheBrowser(event) {
    return event.ctrlKey || event.metaKey || event.shiftKey;
  }

  // The box is `dir="auto"`: its direction follows the text in it.
  function arrowToTheEnd() {
    return getComputedStyle(input).direction === "rtl" ? "ArrowLeft" : "ArrowRight";
  }

  input.addEventListener("focus", () => {
    // Back from a quick blur: the list stays (or comes back), it is not closed under the user.
    clearTimeout(blurTimer);
    if (list.hidden) schedule();
  });
  input.addEventListener("blur", () => {
    endComposition();
    clearTimeout(blurTimer);
    blurTimer = setTimeout(() => {
      // A highlighted row left in the box was never chosen: what was typed comes back.
      if (active >= 0) input.value = typed;
      close();
    }, 150);
  });
  // Back to a page restored from the back/forward cache: no stale open list.
  // A row still highlighted was never chosen (as on blur): what was typed comes back, so a
  // recent search the person only looked at is not asked about when the box is focused.
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) {
      endComposition();
      if (active >= 0) input.value = typed;
      close();
      typed = input.value;
    }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) go(input.value, {});
  });

  // Where the browser keeps no site data, there is no history to clear or turn on.
  function syncHistoryControls() {
    const on = own.enabled();
    const usable = own.available();
    historyNote.textContent = usable ? "Recent searches stay in this browser." : "This browser keeps no recent searches here.";
    historyToggle.textContent = on ? "Turn history off" : "Turn history on";
    historyToggle.dataset.on = String(on);
    historyToggle.hidden = !usable;
    historyClear.hidden = !on || !usable;
  }
  // Says `text` to screen readers, in the status region: a changed button label is not said by
  // every reader. Emptied first, as the same text written twice in a row may not be said again.
  function announce(text) {
    clearTimeout(announced);
    status.textContent = "";
    announced = setTimeout(() => (status.textContent = text), 100);
  }

  // The click does what the button says, not the opposite of what storage holds now: another
  // tab (or this page's earlier life, back from the back/forward cache) may have changed it
  // since the label was set, and "Turn history off" then turned it on.
  historyToggle.addEventListener("click", () => {
    const on = historyToggle.dataset.on !== "true";
    own.setEnabled(on);
    syncHistoryControls();
    if (own.enabled() !== on) {
      // Turning it off empties it first: that may have been done.
      return announce(on ? "History could not be turned on" : "History could not be turned off");
    }
    announce(on ? "History turned on" : "History turned off and cleared");
  });
  // And the label follows such changes as soon as the page can see them: another tab's at
  // once, this page's earlier life when it is shown again.
  window.addEventListener("storage", (event) => {
    if (event.key === null || event.key.startsWith("typeahead.history.")) syncHistoryControls();
  });
  // (Not on focus: the click that focuses a window comes after its focus event, and would act
  // on a label changed under the pointer.)
  window.addEventListener("pageshow", syncHistoryControls);
  historyClear.addEventListener("click", () => {
    if (!own.clear()) {
      syncHistoryControls();
      return announce("History could not be cleared");
    }
    historyClear.textContent = "History cleared";
    announce("History cleared");
    setTimeout(() => (historyClear.textContent = "Clear history"), 2000);
  });
  syncHistoryControls();
})();
