// A person's own searches, kept in this browser only (localStorage) and never sent anywhere:
// not in a request, a header, a cookie or a log. One leaves the browser only as the person's
// choice, like anything typed: searched, or put in the box (→, the fill button) to go on from,
// which asks the service for what it begins. The rule is the one `typeahead::history`
// states and `typeahead eval --history-log` measures; a browser test checks they agree.
//
// - A search is recorded per key (the service's key normalization, mirrored below): count,
//   last use (ms), and the latest surface text for display. At most 500 keys; the least
//   recently used goes first. Not recorded: an empty key, a key over 256 bytes or a text
//   over 1,024 (the service keeps neither; one letter and a thousand marks would otherwise
//   fill the storage); nor one the service's privacy rules withhold (a card or phone number,
//   an e-mail address, a password, a token: the rows an empty box shows are for whoever sits
//   at the screen next; the rules are privacy.js's). Entries stored before (by a release
//   without the rules in the page, or under older ones) are checked once and dropped.
// - For a typed prefix p (the service's prefix normalization), entries whose key starts with p
//   come first: count desc, last use desc, key bytewise asc, at most 3. An empty box shows the
//   5 most recent.
// - History can be cleared and turned off; "off" is remembered and also empties it.
window.TypeaheadHistory = (() => {
  "use strict";
  const MAX_KEYS = 500;
  const MAX_SHOWN = 3;
  const RECENT = 5;
  const STORE = "typeahead.history.v1";
  const OFF = "typeahead.history.off";
  // A stored entry that is none: no key holds a control character.
  const CHECKED = "\u0000checked";

  // typeahead::normalize, step by step: NFKC, lowercase, default-ignorable code points
  // removed (the joiners U+200C/U+200D kept in the surface form), NFC, White_Space and control
  // runs collapsed to one space and trimmed; a key also drops the joiners and folds
  // diacritics (NFD, U+0300..U+036F removed, NFC) after the collapse.
  const IGNORABLE = /\p{Default_Ignorable_Code_Point}/gu;
  const SPACE = /[\p{White_Space}\p{Cc}]+/gu;
  const MARKS = /[\u0300-\u036f]/g;
  const isJoiner = (c) => c === "\u200c" || c === "\u200d";

  // Returns [collapsed text, whether whitespace trailed visible text].
  function normalized(q, keepJoiners) {
    const visible = q
      .normalize("NFKC")
      .toLowerCase()
      .replace(IGNORABLE, (c) => (keepJoiners && isJoiner(c) ? c : ""))
      .normalize("NFC")
      .replace(SPACE, " ");
    const trailing = visible.endsWith(" ") && visible.trim() !== "";
    return [visible.replace(/^ /, "").replace(/ $/, ""), trailing];
  }

  const fold = (s) => s.normalize("NFD").replace(MARKS, "").normalize("NFC");
  const surface = (q) => normalized(q, true)[0];
  const key = (q) => fold(normalized(q, false)[0]);
  function prefix(q) {
    const [s, trailing] = normalized(q, false);
    return fold(trailing ? `${s} ` : s);
  }

  // Bytewise (UTF-8) order, like Rust's str comparison; JS compares UTF-16 code units.
  const encoder = new TextEncoder();
  function bytewise(a, b) {
    const [x, y] = [encoder.encode(a), encoder.encode(b)];
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
    return x.length - y.length;
  }

  function storage() {
    try {
      return window.localStorage;
    } catch {
      return null; // storage disabled: no history, nothing breaks
    }
  }

  // The service's privacy rules (privacy.js); null in a browser that cannot compile them,
  // which then keeps no history.
  const privacy = () => window.TypeaheadPrivacy ?? null;

  // A storage that throws on reads (a corrupted Firefox profile) means no history, not a
  // page whose suggestions and Enter stop working; so does none at all (site data blocked).
  function enabled() {
    try {
      const s = storage();
      return s !== null && privacy() !== null && s.getItem(OFF) !== "1";
    } catch {
      return false;
    }
  }

  // Whether this browser lets the page keep a history at all: its storage is there and
  // reads, and the privacy rules run. (Not whether it writes: a full one still holds a
  // history to clear or turn off.)
  function available() {
    try {
      const s = storage();
      if (s === null || privacy() === null) return false;
      s.getItem(OFF);
      return true;
    } catch {
      return false;
    }
  }

  // key -> { count, last, text }, without a prototype: a key may be "constructor". The store
  // is read on every keystroke: the entries of a stored text are worked out once (`read`).
  let read = { text: null, entries: null };
  function load() {
    try {
      const text = storage()?.getItem(STORE) || "{}";
      if (text !== read.text) read = { text, entries: usable(JSON.parse(text)) };
      return Object.assign(Object.create(null), read.entries);
    } catch {
      return Object.create(null); // unreadable, or a check that failed: nothing is shown
    }
  }

  // The entries of a stored object this page may show. Only those it can use: one left by
  // another version, or edited by hand, would otherwise break matching for every keystroke.
  // And none the privacy rules withhold: the store holds CHECKED, the version of the rules its
  // entries were all checked under and their digest, when this page wrote it; entries written
  // by a release without the rules in the page (another tab, a rollback) come without it, or
  // with entries it does not describe. Those are checked, and the withheld ones dropped from
  // storage.
  function usable(raw) {
    const entries = Object.create(null);
    for (const [k, e] of Object.entries(raw && typeof raw === "object" ? raw : {})) {
      if (typeof e?.text === "string" && Number.isFinite(e.count) && Number.isFinite(e.last)) {
        entries[k] = e;
      }
    }
    const rules = privacy();
    if (rules === null) return Object.create(null);
    const mark = raw?.[CHECKED];
    if (mark?.rules === rules.VERSION && mark?.digest === digest(entries)) return entries;
    const withheld = Object.keys(entries).filter((k) => rules.withheld(entries[k].text, k, key));
    for (const k of withheld) delete entries[k];
    save(entries);
    return entries;
  }

  // A digest of the entries' keys and texts (FNV-1a), kept in the mark: the first releases of
  // the page kept entries they could not use as they were, the mark among them, so one of
  // their writes would otherwise pass for checked.
  function digest(entries) {
    let h = 0x811c9dc5;
    for (const k of Object.keys(entries).sort()) {
      for (const c of `${k}\u0000${entries[k].text}\u0000`) {
        h = Math.imul(h ^ c.codePointAt(0), 0x01000193) >>> 0;
      }
    }
    return h;
  }

  // Stores the entries, marked as checked under this page's rules (they all are: `usable`
  // and `record` let no other in).
  function save(entries) {
    try {
      const mark = { rules: privacy().VERSION, digest: digest(entries) };
      const marked = { ...entries, [CHECKED]: mark };
      storage()?.setItem(STORE, JSON.stringify(marked));
    } catch {
      // quota or privacy mode: history is a convenience, never an error
    }
  }

  // The service never keeps keys or texts longer than these (typeahead::normalize's
  // MAX_KEY_BYTES and MAX_SURFACE_BYTES).
  const MAX_KEY_BYTES = 256;
  const MAX_SURFACE_BYTES = 1024;

  function record(text, now = Date.now()) {
    const [k, shown] = [key(text), surface(text)];
    if (!enabled() || k === "" || encoder.encode(k).length > MAX_KEY_BYTES) return;
    if (encoder.encode(shown).length > MAX_SURFACE_BYTES) return;
    if (privacy().withheld(shown, k, key)) return;
    const entries = load();
    const e = entries[k] || { count: 0, last: now, text: "" };
    entries[k] = { count: e.count + 1, last: Math.max(e.last, now), text: shown };
    const keys = Object.keys(entries);
    if (keys.length > MAX_KEYS) {
      // The least recently used; on equal times the bytewise greatest key (as in Rust). All
      // past the limit, not one: a store left by another version may hold more.
      keys.sort((a, b) => entries[a].last - entries[b].last || bytewise(b, a));
      for (const k of keys.slice(0, keys.length - MAX_KEYS)) delete entries[k];
    }
    save(entries);
  }

  // The entries shown first for typed text q: [{ key, count, last, text }], best first.
  function matches(q) {
    if (!enabled()) return [];
    const p = prefix(q);
    const entries = load();
    const hits = Object.keys(entries)
      .filter((k) => k.startsWith(p))
      .map((k) => ({ ...entries[k], key: k }));
    if (p === "") {
      hits.sort((a, b) => b.last - a.last || bytewise(a.key, b.key));
      return hits.slice(0, RECENT);
    }
    hits.sort((a, b) => b.count - a.count || b.last - a.last || bytewise(a.key, b.key));
    return hits.slice(0, MAX_SHOWN);
  }

  function remove(k) {
    const entries = load();
    delete entries[k];
    save(entries);
  }

  // Whether the history is gone (false: the storage refused).
  function clear() {
    try {
      storage()?.removeItem(STORE);
      return true;
    } catch {
      return false;
    }
  }

  function setEnabled(on) {
    // Emptied first: a full storage then has room for the "off" flag.
    if (!on) clear();
    try {
      if (on) storage()?.removeItem(OFF);
      else storage()?.setItem(OFF, "1");
    } catch {
      // storage refused: the toggle still reads what `enabled()` says, as it is
    }
  }

  // Whether a search typed as `text` is one the privacy rules withhold (for the tests, which
  // compare it with the Rust; without the rules, every one is).
  const withheld = (text) => privacy()?.withheld(surface(text), key(text), key) ?? true;

  return {
    key, prefix, surface, withheld, record, matches, remove, clear, enabled, available, setEnabled,
  };
})();
