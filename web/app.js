// The autocomplete box, following the client rules of the seed design:
// - ask only after the user paused typing for `debounceMs` (50 ms);
// - cancel the request in flight when typing goes on (AbortController), ignore late answers;
// - start after `minChars` characters; reuse recent answers (backspacing to "cap" is instant);
// - open the connection early, so the first keystroke does not pay for the handshake;
// - never block typing: errors and partial answers keep the last good list, quietly.
// Accessibility: the WAI-ARIA 1.2 combobox pattern (combobox + listbox/option,
// aria-expanded, aria-activedescendant), with a polite live region for counts.
(() => {
  "use strict";
  const config = Object.assign(
    { api: "", resultsUrl: "/search?q={searchTerms}", minChars: 1, debounceMs: 50, cacheSize: 200, cacheMs: 2000 },
    JSON.parse(document.getElementById("config").textContent || "{}"),
  );
  const input = document.getElementById("q");
  const list = document.getElementById("suggestions");
  const status = document.getElementById("status");
  const form = document.getElementById("search");
  // typed text -> { at, suggestions }, least recently used first. Entries live `cacheMs`: long
  // enough for backspacing, short enough that a blocked query does not come back from here.
  const cache = new Map();
  let timer = 0;
  let inflight = null; // AbortController of the request in flight
  let sequence = 0; // requests sent
  let shown = 0; // sequence number of the answer on screen
  let items = []; // suggestions on screen
  let active = -1; // highlighted option
  let typed = ""; // what the user typed (the input shows a highlighted suggestion instead)

  // Early connection: a cheap request now keeps a warm keep-alive connection for typing.
  fetch(`${config.api}/healthz`, { cache: "no-store" }).catch(() => {});

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

  // Stops whatever is pending: the debounce timer and the request in flight.
  function cancel() {
    clearTimeout(timer);
    if (inflight) {
      inflight.abort();
      inflight = null;
    }
  }

  function schedule() {
    cancel();
    typed = input.value;
    const q = typed;
    if (q.trim().length < config.minChars) return close();
    const cached = recall(q);
    if (cached) return render(q, cached);
    timer = setTimeout(() => request(q), config.debounceMs);
  }

  async function request(q) {
    const mine = ++sequence;
    const controller = new AbortController();
    inflight = controller;
    try {
      const response = await fetch(`${config.api}/v1/suggest?q=${encodeURIComponent(q)}`, {
        signal: controller.signal,
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const body = await response.json();
      if (mine < shown || input.value !== q) return; // out of order, or typing moved on
      if (!body.partial) remember(q, body.suggestions);
      // A partial answer with nothing in it is worse than the last good list.
      if (body.partial && body.suggestions.length === 0 && items.length > 0) return;
      shown = mine;
      render(q, body.suggestions);
    } catch (error) {
      if (error.name !== "AbortError") status.textContent = "Suggestions are unavailable right now.";
    } finally {
      if (inflight === controller) inflight = null;
    }
  }

  function render(q, suggestions) {
    // An answer arriving after the box lost focus (or was closed) must not pop the list open.
    if (document.activeElement !== input) return;
    items = suggestions;
    active = -1;
    input.removeAttribute("aria-activedescendant");
    list.replaceChildren(...suggestions.map((s, i) => option(q, s, i)));
    const open = suggestions.length > 0;
    list.hidden = !open;
    input.setAttribute("aria-expanded", String(open));
    status.textContent = open ? `${suggestions.length} suggestions` : "";
  }

  // Case and accents do not matter when matching what was typed ("cafe" matches "café").
  const fold = (s) => s.normalize("NFD").replace(/[\u0300-\u036f]/g, "").toLowerCase();

  // How many characters of `text` the typed `head` covers, comparing folded characters.
  function matched(head, text) {
    const want = fold(head);
    let have = "";
    let n = 0;
    for (const ch of text) {
      if (have.length >= want.length) break;
      have += fold(ch);
      n += ch.length;
    }
    return have.startsWith(want) || want.startsWith(have) ? n : 0;
  }

  // The typed words, folded like the server's words tier: complete ones (a space follows) and
  // the partial last one (when the text does not end in a space).
  function typedWords(q) {
    const words = fold(q).split(/\s+/).filter(Boolean);
    const partial = /\s$/.test(q) ? null : (words.pop() ?? null);
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
  // partial last word starts; the rest is bold. Compared word by word, folded.
  function wordsParts(q, text) {
    const { complete, partial } = typedWords(q);
    const parts = [];
    for (const piece of text.split(/(\s+)/)) {
      if (piece === "") continue;
      if (/^\s+$/.test(piece)) {
        parts.push(document.createTextNode(piece));
        continue;
      }
      const word = fold(piece);
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
  function option(q, s, i) {
    const li = document.createElement("li");
    li.id = `suggestion-${i}`;
    li.setAttribute("role", "option");
    li.setAttribute("aria-selected", "false");
    const tier = typeof s.match === "string" ? s.match : "prefix";
    li.dataset.match = tier;
    if (tier === "prefix") li.append(...prefixParts(q, s.text));
    else if (tier === "words") li.append(...wordsParts(q, s.text));
    else li.append(span("completion", s.text));
    if (tier === "fuzzy") li.setAttribute("aria-describedby", "fuzzy-hint");
    // pointerdown, not click: it fires before the input loses focus (mouse, touch and pen).
    li.addEventListener("pointerdown", (event) => {
      event.preventDefault();
      pick(i);
    });
    return li;
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
    items = [];
    active = -1;
    list.hidden = true;
    list.replaceChildren();
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
  }

  // Runs the search, telling the results page which prefix and position were picked
  // (the OpenSearch 1.1 suggestions extension's suggestionPrefix and suggestionIndex).
  function pick(i) {
    const text = items[i].text;
    input.value = text;
    go(text, { suggestionPrefix: typed, suggestionIndex: String(i) });
  }

  function go(query, extra) {
    const url = new URL(config.resultsUrl.replace("{searchTerms}", encodeURIComponent(query)), location.href);
    for (const [k, v] of Object.entries(extra)) url.searchParams.set(k, v);
    location.assign(url.toString());
  }

  input.addEventListener("input", schedule);
  input.addEventListener("keydown", (event) => {
    const open = !list.hidden && items.length > 0;
    switch (event.key) {
      case "ArrowDown":
      case "ArrowUp":
        if (!open) return;
        event.preventDefault();
        highlight(((active + 1 + (event.key === "ArrowDown" ? 1 : -1) + items.length + 1) % (items.length + 1)) - 1);
        break;
      case "Enter":
        event.preventDefault();
        if (open && active >= 0) pick(active);
        else if (input.value.trim()) go(input.value, {});
        break;
      case "Escape":
        if (open) {
          event.preventDefault();
          input.value = typed;
          close();
        }
        break;
      case "Tab":
        // Tab completes the highlighted (or first) suggestion and keeps the box open for more.
        if (open && !event.shiftKey) {
          event.preventDefault();
          input.value = items[Math.max(active, 0)].text + " ";
          schedule();
        }
        break;
      default:
    }
  });
  input.addEventListener("blur", () => setTimeout(close, 150));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) go(input.value, {});
  });
})();
