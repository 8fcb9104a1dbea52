// The service's privacy rules (`typeahead_builder::privacy`), for what the page keeps of a
// person's searches (history.js): a card or phone number, an e-mail address, a password or a
// token typed in the box is no more a recent search than it is a suggestion.
//
// Written after the independent port in scripts/oracle_check.py (`privacy_reason`), not from
// the Rust; a browser test checks the verdicts agree with the Rust on texts made to sit on the
// rules' edges. JavaScript's \w, \d and \b are ASCII-only: the classes below are Unicode's,
// as in Rust's regex crate. A browser whose tables predate a newly assigned character may read
// it otherwise; that is all the ports may differ on.
//
// `window.TypeaheadPrivacy` is null in a browser that cannot compile the rules: history.js
// then keeps no history.
window.TypeaheadPrivacy = (() => {
  "use strict";

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
  const DOTS = "\u3002\u00b7\u30fb\u2022\u2219\u22c5\u2027\u066b\u2e31";
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
  let rules, LOOK_ALIKE, NUMBER_LIKE, DASH_LIKE, ALL_MARKS, SPACE_RUNS;
  try {
    rules = patterns.map((p) => new RegExp(p, "u"));
    LOOK_ALIKE = new RegExp(String.raw`[\p{No}\p{Pd}\p{Cf}\u2796\u2800${DOTS}]`, "gu");
    NUMBER_LIKE = new RegExp(String.raw`\p{No}`, "u");
    DASH_LIKE = new RegExp(String.raw`[\p{Pd}\u2796]`, "u");
    ALL_MARKS = new RegExp(String.raw`\p{M}+`, "gu");
    SPACE_RUNS = new RegExp(String.raw`\p{White_Space}{2,}`, "gu");
  } catch {
    // A browser without lookbehind (Safari before 16.4): no rules, so the page keeps no
    // history rather than what they would withhold.
    return null;
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
  // A Map, not an object: `&constructor;` is no reference, whatever Object.prototype holds.
  const ENTITIES = new Map(Object.entries({
    amp: "&", apos: "'", colon: ":", comma: ",", commat: "@", equals: "=", excl: "!", gt: ">",
    hyphen: "-", lowbar: "_", lpar: "(", lsqb: "[", lt: "<", nbsp: " ", num: "#", percnt: "%",
    period: ".", plus: "+", quest: "?", quot: '"', rpar: ")", rsqb: "]", semi: ";", sol: "/",
  }));
  const REFERENCE = /&(?:#([0-9]{1,7});?|#[xX]([0-9a-fA-F]{1,6});?|([a-zA-Z]+);)/g;
  const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });
  function decodedOnce(text) {
    const percent = text.replace(/(?:%[0-9a-f]{2})+/gi, (run) =>
      utf8.decode(new Uint8Array(run.slice(1).split("%").map((h) => parseInt(h, 16)))),
    );
    return percent.replace(REFERENCE, (all, dec, hex, name) => {
      if (name !== undefined) return ENTITIES.get(name.toLowerCase()) ?? all;
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

  // What stands for a digit, a dash, a dot or a space without being one (LOOK_ALIKE), or is
  // not seen: read as the digit (any: only the count matters), `-`, `.` or space it stands for.
  function plainChar(c) {
    if (NUMBER_LIKE.test(c)) return "0";
    if (DASH_LIKE.test(c)) return "-";
    if (DOTS.includes(c)) return ".";
    return c === "\u2800" ? " " : "";
  }

  // Whether a search whose surface form is `shown` and key `k` breaks a rule: in the surface,
  // the key, the key without marks, that with its look-alikes made plain; and the last three
  // for the key (`keyOf`: the service's key normalization) of the key decoded.
  function withheld(shown, k, keyOf) {
    const forms = [shown];
    for (const form of [k, keyOf(decoded(k))]) {
      const bare = form.replace(ALL_MARKS, "").replace(SPACE_RUNS, " ");
      forms.push(form, bare, bare.replace(LOOK_ALIKE, plainChar).replace(SPACE_RUNS, " "));
    }
    return forms.some((f) => rules.some((r) => r.test(f)) || randomRun(f));
  }

  // RULES: the rules version (`typeahead_core::normalize::RULES_VERSION`) this port follows;
  // a browser test checks it is the service's, so a change of rules cannot miss the page.
  // VERSION adds the revision of the port itself (2: a byte-order mark in an escape, and
  // `&constructor;`): history.js checks its stored entries again under each.
  const RULES = 9;
  return { RULES, VERSION: `${RULES}.2`, withheld };
})();
