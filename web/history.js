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
//   at the screen next). Entries stored before are not shown either, and go with the next save.
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

  // A storage that throws on reads (a corrupted Firefox profile) means no history, not a
  // page whose suggestions and Enter stop working; so does none at all (site data blocked).
  function enabled() {
    try {
      const s = storage();
      return s !== null && s.getItem(OFF) !== "1";
    } catch {
      return false;
    }
  }

  // Whether this browser lets the page keep a history at all: its storage is there and
  // reads. (Not whether it writes: a full one still holds a history to clear or turn off.)
  function available() {
    try {
      const s = storage();
      if (s === null) return false;
      s.getItem(OFF);
      return true;
    } catch {
      return false;
    }
  }

  // Whether a stored entry is one the privacy rules withhold (kept before they applied here),
  // asked once per entry: the store is read on every keystroke.
  const verdicts = new Map();
  function withheldEntry(k, text) {
    const id = `${k}\u0000${text}`;
    if (!verdicts.has(id)) {
      if (verdicts.size > 4 * MAX_KEYS) verdicts.clear();
      verdicts.set(id, privacy(text, k));
    }
    return verdicts.get(id);
  }

  // key -> { count, last, text }, without a prototype: a key may be "constructor".
  function load() {
    const entries = Object.create(null);
    try {
      const raw = JSON.parse(storage()?.getItem(STORE) || "{}");
      // Only entries this page can use: one left by another version, or edited by hand, would
      // otherwise break matching for every keystroke.
      for (const [k, e] of Object.entries(raw && typeof raw === "object" ? raw : {})) {
        const usable =
          typeof e?.text === "string" && Number.isFinite(e.count) && Number.isFinite(e.last);
        if (usable && !withheldEntry(k, e.text)) entries[k] = e;
      }
    } catch {
      // unreadable: start afresh
    }
    return entries;
  }

  function save(entries) {
    try {
      storage()?.setItem(STORE, JSON.stringify(entries));
    } catch {
      // quota or privacy mode: history is a convenience, never an error
    }
  }

  // The privacy rules of `typeahead_builder::privacy`, written after the independent port in
  // scripts/oracle_check.py (`privacy_reason`); a browser test checks that they agree with the
  // Rust on texts made to sit on the rules' edges. JavaScript's \w, \d and \b are ASCII-only:
  // the classes below are Unicode's, as in Rust's regex crate.
  const privacy = (() => {
    const W = String.raw`\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}`;
    const w = `[${W}]`;
    const b = `(?:(?<=${w})(?!${w})|(?<!${w})(?=${w}))`;
    const s = String.raw`\p{White_Space}`;
    const d = String.raw`\p{Nd}`;
    const SEPARATOR =
      String.raw`(?:[^\p{L}\p{N}\p{Sc}:\u00d7\u00f7]` +
      String.raw`|[\p{Lm}\ua78f\u01c0-\u01c3\u3161\u1173\u3163\u1175\u4e00\u4e28]){0,4}`;
    const PROVIDERS = [
      "gmail", "googlemail", "yahoo", "ymail", "hotmail", "outlook", "aol", "icloud", "gmx",
      "protonmail", "proton", "yandex", "comcast", "verizon", "sbcglobal", "bellsouth",
      "earthlink", "msn", "qq", "naver", "rediffmail",
    ].join("|");
    const TLDS = [
      "com", "net", "org", "edu", "gov", "mil", "info", "biz", "io", "co", "us", "uk", "ca", "de",
      "fr", "au", "jp", "ru", "cn", "in", "me", "tv", "nl", "be", "ch", "at", "se", "no", "dk",
      "fi", "es", "it", "pt", "pl", "cz", "nz", "br", "mx", "ar", "za", "ie", "il", "kr", "tw",
      "hk", "sg", "eu",
    ].join("|");
    const IDN_TLDS = [
      "рф", "срб", "укр", "бел", "қаз", "мон", "мкд", "中国", "中國", "香港", "台灣", "台湾", "한국", "ไทย",
      "مصر", "السعودية", "امارات", "ایران", "भारत",
    ].join("|");
    const AT_BRACKET = String.raw` ?[(\[{<] ?at ?[)\]}>] ?`;
    const AT = `(?: at | ?@ ?|${AT_BRACKET})`;
    const DOT = String.raw`(?: dot | ?[(\[{<] ?dot ?[)\]}>] ?)`;
    const ANY_DOT = String.raw`(?: ?[.\u00b7] ?| dot | ?[(\[{<] ?dot ?[)\]}>] ?)`;
    const SECRET_PARAMETERS = [
      "access_token", "refresh_token", "id_token", "auth_token", "oauth_token", "api_token",
      "session_token", "private_token", "access-token", "token", "api_key", "api-key", "apikey",
      "key", "password", "passwd", "pwd", "secret", "client_secret", "session", "session_id",
      "sessionid", "jsessionid", "phpsessid", "sid", "auth", "code", "otp", "signature", "sig",
      "x-amz-signature", "x-amz-credential", "x-amz-security-token",
    ].join("|");
    const CREDENTIAL_NAMES = [
      "access_token", "refresh_token", "id_token", "auth_token", "oauth_token", "api_token",
      "session_token", "private_token", "access-token", "api_key", "api-key", "apikey",
      "client_secret", "secret_key", "x-amz-security-token",
    ].join("|");
    const word = `[${W}-]`;
    const patterns = [
      String.raw`[^${s}@]+@[^${s}@]+[.\u3002\u00b7\u30fb\u2022,][^${s}@]+`,
      String.raw`${w}${s}*@${s}*${w}${word}*(?:${s}?\.${s}?${word}+)*` +
        String.raw`${s}?\.${s}?(?:[a-z]{2}|${IDN_TLDS})`,
      `${w}(?: ?@ ?|${AT_BRACKET})(?:${PROVIDERS})${b}`,
      `${w}+${AT}${word}+(?:${DOT}${word}+)*${DOT}(?:${TLDS})${b}`,
      `${w}${AT_BRACKET}${word}+(?:${ANY_DOT}${word}+)+`,
      `${w} at (?:${PROVIDERS})${ANY_DOT}[a-z]{2,}${b}`,
      `${d}(?:${SEPARATOR}${d}){8,}`,
      `(?:${b}|_)(?:call|tel|phone|ph|mobile|mob|cell|fax|whatsapp|ssn|dob)` +
        `[^${W}]{0,4}${d}(?:${SEPARATOR}${d}){6,}`,
      `://[^${s}/]*@`,
      `[?&#;](?:${SECRET_PARAMETERS})=`,
      `(?:^|${s})(?:${CREDENTIAL_NAMES})${s}*[=:]${s}*[^${s}]`,
      String.raw`(?:password|passwd|passwort|passcode|wachtwoord|mot de passe|contrase[\u00f1n]a|` +
        `senha|(?:${b}|_)(?:pwd|pin|pw|pass))${s}*[:=]${s}*[^${s}]`,
      `${b}(?:` +
        [
          "gh[pousr]_[a-z0-9]{30,}", "github_pat_[a-z0-9_]{30,}", "glpat-[a-z0-9_-]{20,}",
          "xox[abprs]-[a-z0-9-]{15,}", "[sr]k_(?:live|test)_[a-z0-9]{16,}", "sk-[a-z0-9_-]{20,}",
          "(?:akia|asia)[0-9a-z]{16}", "aiza[0-9a-z_-]{35}", String.raw`ya29\.[0-9a-z_-]{20,}`,
          String.raw`eyj[a-z0-9_-]{8,}\.eyj[a-z0-9_-]{8,}\.[a-z0-9_-]+`,
        ].join("|") +
        ")",
    ];
    let rules;
    try {
      rules = patterns.map((p) => new RegExp(p, "u"));
    } catch {
      // A browser without lookbehind or Unicode properties (Safari before 16.4): nothing is
      // recorded, rather than what the rules would have withheld.
      return () => true;
    }

    // A run of 20+ ASCII letters and digits switching between the two 4 times or more (hashes,
    // random keys); or a run of 32+ with base64's `+ / _ -` in it, one in 8 at most.
    function switches(run) {
      const alnum = [...run].filter((c) => /[a-z0-9]/i.test(c));
      let n = 0;
      for (let i = 1; i < alnum.length; i++) {
        if (/\d/.test(alnum[i]) !== /\d/.test(alnum[i - 1])) n++;
      }
      return n;
    }
    function randomRun(text) {
      if ((text.match(/[a-z0-9]{20,}/gi) || []).some((run) => switches(run) >= 4)) return true;
      const joiners = (run) => [...run].filter((c) => "+/_-".includes(c)).length;
      const joined = text.match(/[a-z0-9+/_-]{32,}/gi) || [];
      return joined.some((run) => joiners(run) * 8 <= run.length && switches(run) >= 4);
    }

    // Percent escapes (each run as UTF-8, invalid bytes replaced) and character references
    // (decimal, hex, and the names of what the rules look for), three rounds at most.
    const ENTITIES = {
      amp: "&", apos: "'", colon: ":", comma: ",", commat: "@", equals: "=", excl: "!", gt: ">",
      hyphen: "-", lowbar: "_", lpar: "(", lsqb: "[", lt: "<", nbsp: " ", num: "#", percnt: "%",
      period: ".", plus: "+", quest: "?", quot: '"', rpar: ")", rsqb: "]", semi: ";", sol: "/",
    };
    const REFERENCE = /&(?:#([0-9]{1,7});?|#[xX]([0-9a-fA-F]{1,6});?|([a-zA-Z]+);)/g;
    const utf8 = new TextDecoder();
    function decodedOnce(text) {
      const percent = text.replace(/(?:%[0-9a-f]{2})+/gi, (run) =>
        utf8.decode(new Uint8Array(run.slice(1).split("%").map((h) => parseInt(h, 16)))),
      );
      return percent.replace(REFERENCE, (all, dec, hex, name) => {
        if (name !== undefined) return ENTITIES[name.toLowerCase()] ?? all;
        const n = dec !== undefined ? parseInt(dec, 10) : parseInt(hex, 16);
        return n <= 0x10ffff && !(n >= 0xd800 && n <= 0xdfff) ? String.fromCodePoint(n) : all;
      });
    }
    function decoded(text) {
      for (let i = 0; i < 3; i++) {
        const once = decodedOnce(text);
        if (once === text) break;
        text = once;
      }
      return text;
    }

    // What stands for a digit, a dash, a dot or a space without being one, or is not seen.
    const DOTS = "\u3002\u00b7\u30fb\u2022\u2219\u22c5\u2027\u066b\u2e31";
    const LOOK_ALIKE = new RegExp(String.raw`[\p{No}\p{Pd}\p{Cf}\u2796\u2800${DOTS}]`, "gu");
    function plainChar(c) {
      if (/\p{No}/u.test(c)) return "0";
      if (/[\p{Pd}\u2796]/u.test(c)) return "-";
      if (DOTS.includes(c)) return ".";
      return c === "\u2800" ? " " : "";
    }
    const MARKS = /\p{M}+/gu;
    const SPACE_RUNS = /\p{White_Space}{2,}/gu;

    // Whether a surface form `shown` or its key `k` breaks a rule: in the surface, the key, the
    // key without marks, that with its look-alikes made plain; and the last three for the key
    // of the key decoded.
    return function withheld(shown, k) {
      const forms = [shown];
      for (const form of [k, key(decoded(k))]) {
        const bare = form.replace(MARKS, "").replace(SPACE_RUNS, " ");
        forms.push(form, bare, bare.replace(LOOK_ALIKE, plainChar).replace(SPACE_RUNS, " "));
      }
      return forms.some((f) => rules.some((r) => r.test(f)) || randomRun(f));
    };
  })();

  // The service never keeps keys or texts longer than these (typeahead::normalize's
  // MAX_KEY_BYTES and MAX_SURFACE_BYTES).
  const MAX_KEY_BYTES = 256;
  const MAX_SURFACE_BYTES = 1024;

  function record(text, now = Date.now()) {
    const [k, shown] = [key(text), surface(text)];
    if (!enabled() || k === "" || encoder.encode(k).length > MAX_KEY_BYTES) return;
    if (encoder.encode(shown).length > MAX_SURFACE_BYTES || privacy(shown, k)) return;
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

  // Whether a search typed as `text` is one the privacy rules withhold.
  const withheld = (text) => privacy(surface(text), key(text));

  return {
    key, prefix, surface, withheld, record, matches, remove, clear, enabled, available, setEnabled,
  };
})();
