#!/usr/bin/env python3
"""Checks `typeahead build` + `typeahead query --json` against an independent implementation of
the contract (normalization, privacy rules, EMA score, ranking, the three answer tiers) written
from the issue text.

Usage: oracle_check.py BINARY LOG [--half-life H] [--prefixes N] [--typos N] [--raw N]
                       [--block] [--date-prefix YYYY-MM-DD] [--partitions N]
       oracle_check.py --self-test    (the contract's examples against this implementation)

With --partitions N the answers come from `typeahead cluster` (N partition servers and the
aggregator, over loopback HTTP) instead of `typeahead query`.

LOG is `timestamp<TAB>query[...]` (plain or .gz). With --date-prefix, timestamps are `HH:MM:SS`
(Sogou) and get that date prepended. Exits 1 on any mismatch. Real data stays outside the repo.

Besides --prefixes N cuts of sampled keys, --typos N adds N typed texts made from keys
(random.Random(2)): a cut of >= 5 characters with one edit that never touches the first character
(delete, insert or substitute a QWERTY-neighbour letter, swap two adjacent characters), or, for
keys of >= 2 words, the words reversed (the last one sometimes cut to a non-empty prefix).
--raw N adds N texts as people type them, so that the service's normalization of typed text is
compared too, not only its answers to text already folded (random.Random(3)): a query of the
log as written, cut at a random character, with sometimes an invisible character put in, a
space made a no-break space, a tab or a run of spaces, letters made full-width or upper case.

--block adds a blocklist (random.Random(4)): four words and a two-word phrase of popular keys,
and two entries that match only through look-alike letters (a popular word with "m" written
"rn": its confusable skeleton is the word's). A build gets it with --blocklist, a cluster
(--partitions) at serve time, so the servers' filter and the aggregator's merge are what is
checked. The contract: an entry blocks a completion when " " + entry + " " occurs in " " + key +
" " (whole words, runs of spaces in the key read as one), or when the entry's TS #39 skeleton
does in the key's, word by word; blocked completions are in no tier and the next ones fill in.
Skeletons come from ICU (PyPI `pyicu-wheels`), not from the Rust crate's tables.

The check fails when it compared nothing: no key, or no expected item of a tier its options
ask for (prefix always; words and fuzzy with --typos). Every run of the binary has a time limit.

Every answer is compared (text, score to a relative 1e-9, and "match") with the tiered answer
below; an answer with "complete": false (or "partial": true) is a failure.

TIERED ANSWER CONTRACT. For a typed text, p = prefix(text) (key folding, one trailing space
kept). The answer is up to k (= 10) completions in three tiers, concatenated in this order; a
key appears at most once (in its first tier):
1. prefix -- the key starts with p. Order: score desc, key bytewise (UTF-8) asc.
2. words -- split p on spaces into non-empty words. Every *complete* word (all words, or all but
   the last when p does not end with a space) is a word of the key (key words = non-empty pieces
   of key.split(' ')), and the *partial* last word (when p does not end with a space) is a prefix
   of some word of the key. Set semantics (a typed word may match the same key word as another
   typed word). If p has no word at all, nothing matches. Keys starting with p are in tier 1, not
   here. Order: score desc, key bytewise asc.
3. fuzzy -- n = number of characters (code points) of p (a trailing space counts). D = 0 if
   n < 4, 1 if 4 <= n <= 7, 2 if n >= 8. The key's first character equals p's first character,
   and d = the minimum over all prefixes q of the key (including the empty prefix and the whole
   key) of the optimal-string-alignment distance between p and q (insert, delete, substitute,
   transpose two adjacent characters -- the restricted edit distance, NOT unrestricted Damerau;
   over code points) satisfies 1 <= d <= D. Keys matching tier 1 or tier 2 are not in tier 3.
   Order: d asc, then score desc, then key bytewise asc.
A later tier is used only while the answer holds fewer than k.

This implementation is deliberately plain: a sorted key list (tier 1), an inverted index
word -> keys (tier 2), and for tier 3 the full OSA matrix of p against key[:n+D] for every key
with p's first character, after two exact filters that cannot change the result (length, and
the multiset bound: OSA(p, q) >= the number of p's characters missing from q).

Needs the PyPI module `regex`. scripts/privacy_diff.py imports the contract functions from here.
"""
import argparse, bisect, datetime, gzip, json, os, random, re, subprocess, sys, tempfile, time, unicodedata

try:
    import regex  # PyPI `regex`: \p{Default_Ignorable_Code_Point}, independent of the Rust table
except ImportError:
    sys.exit("oracle_check.py needs the Python module `regex` (PyPI) for "
             "\\p{Default_Ignorable_Code_Point}: python3 -m pip install regex")

# Default_Ignorable_Code_Point: removed from the key; the surface keeps ZWNJ/ZWJ (U+200C/U+200D).
IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}")
SURFACE_IGNORABLE = regex.compile(r"(?V1)[\p{Default_Ignorable_Code_Point}--[\u200c\u200d]]")

def is_space(c):
    return c.isspace() or unicodedata.category(c) == "Cc"

def nfkc_lower(q):
    return unicodedata.normalize("NFKC", q).lower()

def collapse(t):
    """Whitespace runs become one space, ends trimmed; also says whether a whitespace run after
    visible text ends `t`."""
    out, pend = [], False
    for c in t:
        if is_space(c):
            pend = bool(out)
        else:
            if pend:
                out.append(" ")
                pend = False
            out.append(c)
    return "".join(out), pend

def surface_and_trailing(q):
    """NFKC, lowercase, Default_Ignorable removed (but ZWNJ/ZWJ), NFC again (an invisible
    character between a letter and its mark leaves no trace), then whitespace collapsed."""
    return collapse(unicodedata.normalize("NFC", SURFACE_IGNORABLE.sub("", nfkc_lower(q))))

def display_of(scores):
    """The display text among a key's surface forms {text: score}: the most frequent, ties
    (scores within 1e-9 relative: the same counts summed in another order) bytewise smallest."""
    best = max(scores.values())
    return min((s for s, v in scores.items() if v >= best - 1e-9 * abs(best)), key=str.encode)


def surface(q):
    return surface_and_trailing(q)[0]

def fold(s):
    """Folds diacritics: NFD, drop U+0300..U+036F, NFC."""
    d = unicodedata.normalize("NFD", s)
    return unicodedata.normalize("NFC", "".join(c for c in d if not 0x300 <= ord(c) <= 0x36F))

def key_text_and_trailing(q):
    """NFKC, lowercase, every Default_Ignorable removed (the joiners too), then whitespace
    collapsed; also says whether a whitespace run after visible text ends the result."""
    return collapse(IGNORABLE.sub("", nfkc_lower(q)))

def key(q):
    return fold(key_text_and_trailing(q)[0])

def key_of_surface(s):
    """The key of a surface form, the same as key() of the query: the joiners go before
    whitespace is collapsed again ("a \u200d b" -> "a b"), then diacritics are folded."""
    return fold(collapse(IGNORABLE.sub("", s))[0])

def prefix(q):
    """Like key(), but a trailing whitespace run after visible text becomes one trailing space,
    decided after Default_Ignorable removal ("new\u200b " and "new \u200b" both give "new ")."""
    s, trailing = key_text_and_trailing(q)
    return fold(s + " " if trailing else s)

# Privacy rules, in reporting order; a query is withheld if its surface OR its key matches one.
# The `regex` module is used for its Unicode \w and \b (marks and joiners are word characters, as
# in Rust's regex crate); surfaces and keys hold no whitespace but " ", so \s is plain.
# Between two digits of a number: anything but a letter, a digit, ":" (times of day), a currency
# sign (prices) or × ÷ (sizes), or one of the letters that stand for a dash, a bar or a tick:
# any modifier letter (Lm: the katakana prolonged sound mark among them), the sinological dot
# U+A78F, the four clicks
# U+01C0..U+01C3, Hangul eu and i (compatibility jamo and what NFKC makes of them), CJK one and
# the CJK stroke U+4E28.
SEPARATOR = (r"(?:[^\p{L}\p{N}\p{Sc}:\u00d7\u00f7]"
             r"|[\p{Lm}\ua78f\u01c0-\u01c3\u3161\u1173\u3163\u1175\u4e00\u4e28]){0,4}")
PROVIDERS = (r"gmail|googlemail|yahoo|ymail|hotmail|outlook|aol|icloud|gmx|protonmail|proton|yandex|comcast"
             r"|verizon|sbcglobal|bellsouth|earthlink|msn|qq|naver|rediffmail")
TLDS = (r"com|net|org|edu|gov|mil|info|biz|io|co|us|uk|ca|de|fr|au|jp|ru|cn|in|me|tv|nl|be|ch|at|se|no|dk|fi"
        r"|es|it|pt|pl|cz|nz|br|mx|ar|za|ie|il|kr|tw|hk|sg|eu")
AT_BRACKET = r" ?[(\[{<] ?at ?[)\]}>] ?"
AT = rf"(?: at | ?@ ?|{AT_BRACKET})"
DOT = r"(?: dot | ?[(\[{<] ?dot ?[)\]}>] ?)"
ANY_DOT = r"(?: ?[.\u00b7] ?| dot | ?[(\[{<] ?dot ?[)\]}>] ?)"

class RandomRun:
    """A run of 20+ ASCII letters and digits switching between the two at least 4 times; or a
    run of 32+ of those and `+ / _ -` (base64, base64url) holding at most one of the four per 8
    characters, its letters and digits (the four left out) switching at least 4 times."""
    def search(self, text):
        def switches(run):
            alnum = [c for c in run if c.isalnum()]
            return sum(a.isdigit() != b.isdigit() for a, b in zip(alnum, alnum[1:]))
        for run in regex.findall(r"[A-Za-z0-9]{20,}", text):
            if switches(run) >= 4:
                return True
        for run in regex.findall(r"[A-Za-z0-9+/_-]{32,}", text):
            joiners = sum(c in "+/_-" for c in run)
            if joiners * 8 <= len(run) and switches(run) >= 4:
                return True
        return None

PRIVACY = [(name, regex.compile(p) if isinstance(p, str) else p) for name, p in [
    ("email", r"[^\s@]+@[^\s@]+[.\u3002\u00b7\u30fb\u2022,][^\s@]+"),
    ("spaced_email", r"\w\s*@\s*\w[\w-]*(?:\s?\.\s?[\w-]+)*\s?\.\s?(?:[a-z]{2}|рф|срб|укр|бел|қаз|мон|мкд|中国|中國|香港|台灣|台湾|한국|ไทย|مصر|السعودية|امارات|ایران|भारत)"),
    ("provider_email", rf"\w(?: ?@ ?|{AT_BRACKET})(?:{PROVIDERS})\b"),
    ("spelled_email", rf"\w+{AT}[\w-]+(?:{DOT}[\w-]+)*{DOT}(?:{TLDS})\b"),
    ("bracketed_email", rf"\w{AT_BRACKET}[\w-]+(?:{ANY_DOT}[\w-]+)+"),
    ("provider_at_email", rf"\w at (?:{PROVIDERS}){ANY_DOT}[a-z]{{2,}}\b"),
    ("long_number", rf"\d(?:{SEPARATOR}\d){{8,}}"),
    ("announced_number", rf"(?:\b|_)(?:call|tel|phone|ph|mobile|mob|cell|fax|whatsapp|ssn|dob)\W{{0,4}}\d(?:{SEPARATOR}\d){{6,}}"),
    ("url_userinfo", r"://[^\s/]*@"),
    ("url_secret", r"[?&#;](?:access_token|refresh_token|id_token|auth_token|oauth_token|api_token|session_token"
                   r"|private_token|access-token|token|api_key|api-key|apikey|key|password|passwd|pwd|secret"
                   r"|client_secret|session|session_id|sessionid|jsessionid|phpsessid|sid|auth|code|otp|signature"
                   r"|sig|x-amz-signature|x-amz-credential|x-amz-security-token)="),
    ("credential_name", r"(?:^|\s)(?:access_token|refresh_token|id_token|auth_token|oauth_token|api_token"
                        r"|session_token|private_token|access-token|api_key|api-key|apikey|client_secret"
                        r"|secret_key|x-amz-security-token)\s*[=:]\s*\S"),
    ("password", r"(?:password|passwd|passwort|passcode|wachtwoord|mot de passe|contrase[\u00f1n]a|senha"
                 r"|(?:\b|_)(?:pwd|pin|pw|pass))\s*[:=]\s*\S"),
    ("known_token", r"\b(?:gh[pousr]_[a-z0-9]{30,}|github_pat_[a-z0-9_]{30,}|glpat-[a-z0-9_-]{20,}"
                    r"|xox[abprs]-[a-z0-9-]{15,}|[sr]k_(?:live|test)_[a-z0-9]{16,}|sk-[a-z0-9_-]{20,}"
                    r"|(?:akia|asia)[0-9a-z]{16}|aiza[0-9a-z_-]{35}|ya29\.[0-9a-z_-]{20,}"
                    r"|eyj[a-z0-9_-]{8,}\.eyj[a-z0-9_-]{8,}\.[a-z0-9_-]+)"),
    ("random_run", RandomRun()),
]]
MARKS = regex.compile(r"\p{M}+")
# What stands for a dot in an address: ideographic full stop, middle dots, bullets, dot
# operators, hyphenation point, Arabic decimal separator, word-separator middle dot.
DOTS = "\u3002\u00b7\u30fb\u2022\u2219\u22c5\u2027\u066b\u2e31"
LOOK_ALIKES = regex.compile(rf"[\p{{No}}\p{{Pd}}\p{{Cf}}\u2796\u2800{DOTS}]")
SPACE_RUNS = regex.compile(r"\s{2,}")

def plain_char(m):
    """A look-alike's plain stand-in: a digit (any: only the count matters), `-`, `.`, a space
    for the blank braille pattern, or nothing for an invisible format character."""
    c = m.group(0)
    if regex.match(r"\p{No}", c):
        return "0"
    if regex.match(r"[\p{Pd}\u2796]", c):
        return "-"
    if c in DOTS:
        return "."
    return " " if c == "\u2800" else ""

# Named character references decoded: those of the characters the rules look for.
ENTITIES = {"amp": "&", "apos": "'", "colon": ":", "comma": ",", "commat": "@", "equals": "=",
            "excl": "!", "gt": ">", "hyphen": "-", "lowbar": "_", "lpar": "(", "lsqb": "[",
            "lt": "<", "nbsp": " ", "num": "#", "percnt": "%", "period": ".", "plus": "+",
            "quest": "?", "quot": '"', "rpar": ")", "rsqb": "]", "semi": ";", "sol": "/"}
PERCENT_RUN = regex.compile(r"(?:%[0-9a-fA-F]{2})+")
REFERENCE = regex.compile(r"&(?:#([0-9]{1,7});?|#[xX]([0-9a-fA-F]{1,6});?|([a-zA-Z]+);)")

def decoded(text):
    """decoded_once until nothing changes, three rounds at most (escapes of escapes)."""
    for _ in range(3):
        once = decoded_once(text)
        if once == text:
            break
        text = once
    return text

def decoded_once(text):
    """Percent escapes decoded (each run of them as UTF-8, invalid sequences replaced), then
    character references: decimal or hex (up to 7 / 6 digits, `;` optional; not a scalar value:
    left as written) and the ENTITIES, names in either case."""
    text = PERCENT_RUN.sub(
        lambda m: bytes.fromhex(m.group(0).replace("%", "")).decode("utf-8", "replace"), text)
    def reference(m):
        if m.group(3) is not None:
            return ENTITIES.get(m.group(3).lower(), m.group(0))
        n = int(m.group(1)) if m.group(1) is not None else int(m.group(2), 16)
        return chr(n) if n <= 0x10FFFF and not 0xD800 <= n <= 0xDFFF else m.group(0)
    return REFERENCE.sub(reference, text)

def privacy_reason(s, k):
    """The first privacy rule that one of these breaks, or None: the surface `s`, the key `k`,
    the key without combining marks (whitespace runs made one space), that with its look-alike
    digits, dashes, dots and spaces made plain (runs made one space again); and the last three
    for the key of `k` percent- and reference-decoded."""
    forms = [s]
    for k in (k, key(decoded(k))):
        bare = SPACE_RUNS.sub(" ", MARKS.sub("", k))
        forms += [k, bare, SPACE_RUNS.sub(" ", LOOK_ALIKES.sub(plain_char, bare))]
    for name, p in PRIVACY:
        if any(p.search(f) for f in forms):
            return name
    return None

# ---- The three answer tiers (see the module docstring for the contract). ----

K = 10

def osa(a, b):
    """Optimal string alignment distance (restricted edit distance) over code points, as the plain
    full matrix: insert, delete, substitute, transpose two adjacent characters."""
    n, m = len(a), len(b)
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            v = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                v = min(v, d[i - 2][j - 2] + 1)
            d[i][j] = v
    return d

def prefix_distance(p, key):
    """min over every prefix q of key (empty and whole included) of osa(p, q): the last row of
    the full matrix of p against key."""
    return min(osa(p, key)[len(p)])

def max_typos(n):
    return 0 if n < 4 else 1 if n <= 7 else 2

def typed_words(p):
    """(complete words, partial last word or None) of a normalized prefix p."""
    words = [w for w in p.split(" ") if w]
    if not words:
        return [], None
    if p.endswith(" "):
        return words, None
    return words[:-1], words[-1]

def words_match(p, key):
    """Tier 2's predicate alone (without the 'not a tier-1 key' exclusion)."""
    complete, partial = typed_words(p)
    if not complete and partial is None:
        return False
    kw = set(w for w in key.split(" ") if w)
    if any(w not in kw for w in complete):
        return False
    return partial is None or any(w.startswith(partial) for w in kw)

class Tiers:
    """The tiered answer over a {key: score} map."""

    def __init__(self, score, display=None):
        self.score = score
        self.display = display if display is not None else {k: k for k in score}
        self.keys = sorted(score, key=lambda k: k.encode())
        self.bkeys = [k.encode() for k in self.keys]
        order = lambda k: (-score[k], k.encode())
        self.by_first = {}
        for k in sorted(score, key=order):
            self.by_first.setdefault(k[0], []).append(k)
        self.index = {}
        for k in score:
            for w in set(w for w in k.split(" ") if w):
                self.index.setdefault(w, set()).add(k)
        self.words = sorted(self.index)
        self.order = order

    def tier1(self, p):
        pk = p.encode()
        i = bisect.bisect_left(self.bkeys, pk)
        cand = []
        while i < len(self.bkeys) and self.bkeys[i].startswith(pk):
            cand.append(self.keys[i]); i += 1
        return sorted(cand, key=self.order)

    def tier2(self, p):
        complete, partial = typed_words(p)
        if complete:
            cand = min((self.index.get(w, set()) for w in complete), key=len)
        elif partial is not None:
            cand = set()
            i = bisect.bisect_left(self.words, partial)
            while i < len(self.words) and self.words[i].startswith(partial):
                cand |= self.index[self.words[i]]; i += 1
        else:
            return []
        return sorted((k for k in cand if not k.startswith(p) and words_match(p, k)), key=self.order)

    def tier3(self, p, need):
        """Up to `need` fuzzy keys as (d, key), in the tier's order."""
        n = len(p)
        D = max_typos(n)
        if D == 0:
            return []
        from collections import Counter
        pc = list(Counter(p).items())
        found = {1: [], 2: []}
        for k in self.by_first.get(p[0], ()):
            if len(k) < n - D:           # every prefix q within D has len(q) >= n - D
                continue
            t = k[:n + D]                # a longer prefix q has |len(q) - n| > D
            missing = 0
            for c, cnt in pc:            # OSA(p, q) >= characters of p missing from q (a multiset)
                have = t.count(c)
                if have < cnt:
                    missing += cnt - have
                    if missing > D:
                        break
            if missing > D:
                continue
            d = prefix_distance(p, t)
            if 1 <= d <= D and not k.startswith(p) and not words_match(p, k):
                found[d].append(k)
                if len(found[1]) >= need:   # keys come by (-score, key): later ones rank lower
                    break
        return [(d, k) for d in (1, 2) for k in found[d]][:need]

    def answer(self, p, k=K):
        """[(key, match)] for the normalized prefix p."""
        out = [(key, "prefix") for key in self.tier1(p)[:k]]
        if len(out) < k:
            out += [(key, "words") for key in self.tier2(p)[:k - len(out)]]
        if len(out) < k:
            out += [(key, "fuzzy") for _, key in self.tier3(p, k - len(out))]
        return out

QWERTY_ROWS = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]

def qwerty_neighbours(c):
    """Letters next to c on a QWERTY keyboard (same row and the rows above/below), or all
    letters when c is not a plain ASCII letter."""
    for r, row in enumerate(QWERTY_ROWS):
        if c in row:
            i = row.index(c)
            out = set()
            for rr in (r - 1, r, r + 1):
                if 0 <= rr < len(QWERTY_ROWS):
                    for j in (i - 1, i, i + 1):
                        if 0 <= j < len(QWERTY_ROWS[rr]):
                            out.add(QWERTY_ROWS[rr][j])
            out.discard(c)
            return sorted(out)
    return list("abcdefghijklmnopqrstuvwxyz")

def skeleton(word):
    """The TS #39 skeleton of one word, from ICU."""
    try:
        import icu  # PyPI `pyicu-wheels`: ICU's uspoof_getSkeleton
    except ImportError:
        sys.exit("oracle_check.py --block needs ICU's skeletons: python3 -m pip install pyicu-wheels")
    global SPOOF
    if "SPOOF" not in globals():
        SPOOF = icu.SpoofChecker()
    return SPOOF.getSkeleton(0, word)

def padded(text, f=lambda w: w):
    """" " + f(w1) + " " + f(w2) + ... + " " for the words of text (runs of spaces are one)."""
    return " " + "".join(f(w) + " " for w in text.split(" ") if w)

class Blocked:
    """The blocklist contract over keys (see the module docstring)."""

    def __init__(self, entries):
        self.entries = entries
        self.literal = [padded(e) for e in entries]
        self.skeletal = [padded(e, skeleton) for e in entries] if entries else []

    def literally(self, key):
        k = padded(key)
        return any(e in k for e in self.literal)

    def __call__(self, key):
        if not self.entries:
            return False
        return self.literally(key) or any(e in padded(key, skeleton) for e in self.skeletal)

def blocklist_entries(score):
    """Entries for --block: words and a phrase of popular keys, and popular words containing
    "m" written with "rn" (blocking only through their skeletons)."""
    rng = random.Random(4)
    top = sorted(score, key=lambda k: (-score[k], k.encode()))[:2000]
    words = sorted({w for k in top for w in k.split(" ") if len(w) >= 3 and w.isascii() and w.isalpha()})
    if not words:
        return []
    entries = rng.sample(words, min(4, len(words)))
    phrases = [ws[:2] for ws in ([w for w in k.split(" ") if w] for k in top) if len(ws) >= 2]
    if phrases:
        entries.append(" ".join(rng.choice(phrases)))
    with_m = [w for w in words if "m" in w and w.replace("m", "rn") not in words]
    entries += [w.replace("m", "rn") for w in rng.sample(with_m, min(2, len(with_m)))]
    return sorted(set(entries))

def raw_text(rng, query):
    """A typed text made from a query as logged (see the module docstring), or None when the
    query has no visible character."""
    if not query.strip():
        return None
    t = query[:rng.randint(1, len(query))]
    kind = rng.choice(["plain", "invisible", "nbsp", "tab", "spaces", "fullwidth", "upper"])
    if kind == "invisible":
        i = rng.randint(0, len(t))
        t = t[:i] + rng.choice(["\u200b", "\u00ad", "\u200d", "\ufeff", "\u2060"]) + t[i:]
    elif kind in ("nbsp", "tab", "spaces"):
        t = t.replace(" ", {"nbsp": "\u00a0", "tab": "\t", "spaces": "   "}[kind])
        if rng.random() < 0.5:
            t += {"nbsp": "\u00a0", "tab": "\t", "spaces": "  "}[kind]
    elif kind == "fullwidth":
        t = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in t)
    elif kind == "upper":
        t = t.upper()
    # The query command reads one text per line (a CR before the line end is not part of it).
    t = t.replace("\n", " ").replace("\r", " ")
    return t if t.strip() else None

def typo_text(rng, key):
    """A typed text made from key (see the module docstring), or None when key does not fit."""
    words = [w for w in key.split(" ") if w]
    if len(words) >= 2 and rng.random() < 0.3:
        words.reverse()
        if rng.random() < 0.5:
            words[-1] = words[-1][:rng.randint(1, len(words[-1]))]
        return " ".join(words)
    if len(key) < 5:
        return None
    t = key[:rng.randint(5, len(key))]
    kind = rng.choice(["delete", "insert", "substitute", "swap"])
    if kind == "delete":
        i = rng.randint(1, len(t) - 1)
        return t[:i] + t[i + 1:]
    if kind == "insert":
        i = rng.randint(1, len(t))       # before t[i]; never before the first character
        return t[:i] + rng.choice(qwerty_neighbours(t[i - 1])) + t[i:]
    if kind == "substitute":
        i = rng.randint(1, len(t) - 1)
        return t[:i] + rng.choice(qwerty_neighbours(t[i])) + t[i + 1:]
    i = rng.randint(1, len(t) - 2)
    return t[:i] + t[i + 1] + t[i] + t[i + 2:]

def tier_self_test():
    """OSA and the tier split on a small corpus; returns (cases, failures)."""
    fails = []
    eq = [
        (osa("ca", "abc")[2][3], 3), (osa("abc", "ca")[3][2], 3), (osa("", "")[0][0], 0),
        (osa("ab", "ba")[2][2], 1), (osa("kitten", "sitting")[6][7], 3),
        (osa("abcdef", "abdcef")[6][6], 1), (osa("a\u00e9b", "ab\u00e9")[3][3], 1),
        (prefix_distance("facebok", "facebook"), 1), (prefix_distance("new yokr", "new york times"), 1),
        (prefix_distance("facebook", "face"), 4), (prefix_distance("abc", ""), 3),
        (prefix_distance("faceb", "facebook"), 0), (prefix_distance("fcaebook", "facebook"), 1),
        (prefix_distance("ca", "abc"), 1),
        # OSA, not Damerau (which gives 2: swap "ca", then insert "b" between them).
        (prefix_distance("zcazzzzz", "zabczzzzz"), 3),
        (max_typos(3), 0), (max_typos(4), 1), (max_typos(7), 1), (max_typos(8), 2),
        (words_match("york times", "new york times"), True), (words_match("yor", "new york"), True),
        (words_match("yor ", "new york"), False), (words_match("york york", "new york"), True),
        (words_match("times new", "new york times"), True), (words_match("", "new york"), False),
        (words_match("new ti", "new york times"), True), (words_match("new ti ", "new york times"), False),
        (typed_words("a b "), (["a", "b"], None)), (typed_words("a b"), (["a"], "b")),
    ]
    for i, (got, want) in enumerate(eq):
        if got != want:
            fails.append(f"tier case {i}: got {got!r}, want {want!r}")
    t = Tiers({"new york times": 9.0, "new york": 8.0, "newark": 7.0, "york": 6.0, "facebook": 10.0,
               "facebook login": 5.0, "fcaebook": 1.0, "face": 4.0, "new yolk": 2.0, "times new roman": 3.0,
               "nyc": 1.0, "yorkshire": 0.5})
    answers = [
        ("new yokr", [("new york times", "fuzzy"), ("new york", "fuzzy"), ("new yolk", "fuzzy")]),
        ("new york", [("new york times", "prefix"), ("new york", "prefix"), ("new yolk", "fuzzy")]),
        ("york", [("york", "prefix"), ("yorkshire", "prefix"), ("new york times", "words"), ("new york", "words")]),
        ("yor ", [("york", "fuzzy"), ("yorkshire", "fuzzy")]),   # not words: "yor" is complete
        ("new", [("new york times", "prefix"), ("new york", "prefix"), ("newark", "prefix"),
                 ("new yolk", "prefix"), ("times new roman", "words")]),
        ("facebok", [("facebook", "fuzzy"), ("facebook login", "fuzzy")]),
        ("fcae", [("fcaebook", "prefix"), ("facebook", "fuzzy"), ("facebook login", "fuzzy"), ("face", "fuzzy")]),
        ("fce", []),
        ("", [(k, "prefix") for k in ["facebook", "new york times", "new york", "newark", "york",
                                      "facebook login", "face", "times new roman", "new yolk", "fcaebook"]]),
    ]
    # d orders before score: a d=2 key with a higher score comes after a d=1 key.
    t2 = Tiers({"abcdefxy": 5.0, "abcdefgz": 1.0})
    if (got := t2.answer("abcdefgh", 1)) != [("abcdefgz", "fuzzy")]:
        fails.append(f"tiers of 'abcdefgh' with k=1: got {got!r}")
    for p, want in answers:
        if (got := t.answer(p)) != want:
            fails.append(f"tiers of {p!r}: got {got!r}, want {want!r}")
    # The indexes, filters and early stop of Tiers against the contract read literally, over
    # every key, on random corpora (a small alphabet, so that many keys are near each other).
    rng = random.Random(11)
    n_brute = 0
    for _ in range(40):
        alphabet = "abc d\u00e9"
        score = {}
        for _ in range(rng.randint(1, 120)):
            k = collapse("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 11))))[0]
            if k:
                score[k] = float(rng.randint(1, 5))
        t = Tiers(score)
        for _ in range(20):
            p = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
            if rng.random() < 0.6:
                p = typo_text(rng, rng.choice(sorted(score))) or p
            p = prefix(p)
            n_brute += 1
            k = rng.choice([1, 2, 3, K, K, K])
            if (got := t.answer(p, k)) != (want := brute_answer(score, p, k)):
                fails.append(f"tiers of {p!r} over {sorted(score)!r}: got {got!r}, want {want!r}")
    return len(eq) + len(answers) + 1 + n_brute, fails

def brute_answer(score, p, k=K):
    """The tiered answer read literally from the contract, over every key (self-test only)."""
    order = lambda key: (-score[key], key.encode())
    t1 = sorted((key for key in score if key.startswith(p)), key=order)
    t2 = sorted((key for key in score if key not in t1 and words_match(p, key)), key=order)
    D = max_typos(len(p))
    t3 = []
    for key in score:
        if p and key[0] == p[0] and key not in t1 and key not in t2:
            d = min(osa(p, key[:j])[len(p)][j] for j in range(len(key) + 1))
            if 1 <= d <= D:
                t3.append((d, key))
    t3.sort(key=lambda dk: (dk[0],) + order(dk[1]))
    out = [(key, "prefix") for key in t1] + [(key, "words") for key in t2] + [(key, "fuzzy") for _, key in t3]
    return out[:k]

def self_test():
    """The contract's examples, plus key_of_surface(surface(q)) == key(q) on random queries."""
    withheld = [
        "4111 1111 1111 1111", "(555) 123-4567", "555 123 4567", "+1 555 123 4567", "123 45 6789",
        "4111\u200b1111\u200b1111\u200b1111", "4111_1111_1111_1111", "4111,1111,1111,1111",
        "4111/1111/1111/1111", "site.com/?access_token=abc", "x.com/#token=abc", "x.com/?api-key=1",
        "x.com/a;jsessionid=1", "password: hunter2", "john doe at gmail dot com", "john.doe @ gmail.com",
        "mail john.doe@example.com now", "ftp://user:pw@host/x", "ssn 123.45.6789",
        "\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669", "4111\u200d1111\u200d1111\u200d1111",
        "call 555 - 123 - 4567", "555\u2013123\u20134567", "4\u20e31\u20e31\u20e31\u20e35\u20e35\u20e35\u20e31\u20e32\u20e3",
        "db_password=hunter2", "mypassword: hunter2", "john(at)gmail(dot)com", "john@gmail dot com",
        "john @ gmail . com", "john@gmail\u3002com", "\u0438\u0432\u0430\u043d @ \u043f\u043e\u0447\u0442\u0430.\u0440\u0444",
        "\u738b @ \u4f8b\u5b50.\u4e2d\u56fd",
        # Forms the rules of version 6 added (builder/src/privacy/tests.rs has the same).
        "john(at)gmail.com", "john.doe at gmail.com", "john{at}gmail{dot}com", "john [ at ] gmail [ dot ] com",
        "jan at bedrijf dot nl", "john@gmail com", "john@gmail,com", "john@gmail\u00b7com", "JOHN (AT) WEB.DE", "john(at)gmail", "john [at] yahoo",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "sk-proj-abcDEFghijKLmnopQRstuvWX", "AKIAIOSFODNN7EXAMPLE",
        "xoxb-12345-abcdefghijklmnop", "d41d8cd98f00b204e9800998ecf8427e", "my key 8f3a9c2e7b1d4f6a0c5e",
        "access_token=ya29.a0AfH6SMBx", "x.com/?oauth_token=abc", "client_secret: abc", "pass: hunter2",
        "pw: hunter2", "passcode: 1234", "mot de passe: azerty", "contrase\u00f1a: secreto",
        "\uff10\uff19\uff10\u30fc\uff11\uff12\uff13\uff14\u30fc\uff15\uff16\uff17\uff18", "090\uff701234\uff705678",
        "555\uff5e123\uff5e4567", "010\u31611234\u31615678", "4111\u28001111\u28001111\u28001111",
        "555\u00b7123\u00b74567", "555\u2044123\u20444567", "[555] 123 4567", "555'123'4567",
        "(555) - 123 4567", "call 555-1234", "tel: 9123 4567", "john smith dob 03/14/1985",
        # Forms the rules of version 7 added (builder/src/privacy/tests.rs has the same).
        "4111\u00b4\u00b4\u00b4\u00b4\u00b41111\u00b4\u00b4\u00b4\u00b4\u00b41111\u00b4\u00b4\u00b4\u00b4\u00b41111",
        "mike at\u00b4 hotmail.com", "john%40gmail.com", "4111%201111%201111%201111", "password%3dhunter2",
        "https%3a%2f%2fuser%3ahunter2%40example.com", "john&#64;gmail.com", "john&commat;gmail.com",
        "4111&nbsp;1111&nbsp;1111&nbsp;1111", "Xk3Lm9Qr2/Tz8Wv1Ys5+Nb7Hd4Jf6_Pg0Rc2-Ue",
        "3q2-7wEjXyZ_Pn9kL0aB4cD-eFgH1iJ_kLmN2oPq", "mike\u2800at\u2800hotmail.com", "password\u2800=\u2800hunter2",
        "4111\u22191111\u22191111\u22191111", "555\u00b0123\u00b04567", "4111\u01c01111\u01c01111\u01c01111",
        "4111\ue0001111\ue0001111\ue0001111", "john@example\u2219org", "john@example\u2e31org",
        "john%2540gmail.com", "john&amp;#64;gmail.com", "john%26%23X40;gmail.com",
        # Forms the rules of version 9 added (builder/src/privacy/tests.rs has the same).
        "4111\u4e001111\u4e001111\u4e001111", "555\u01c1123\u01c14567", "4111\ua78f1111\ua78f1111\ua78f1111",
        "555\u02c8123\u02c84567", "010\u31631234\u31635678", "555\u4e28123\u4e284567", "call 555\u02bc1234"]
    # An accented TLD: the surface spells no address; only the key (marks folded) does. (Marks
    # between digit groups no longer serve here: since version 7 any non-letter separates digits.)
    key_only = ["john at gmail dot c\u00f3m", "jan at bedrijf dot n\u0308l"]
    passed = ["ebay", "weather 90210", "1-800-flowers", "12345678", "a@b", "key=value", "mykey=1",
              "pin cushion", "at home dot", "spin cycle", "shipping: free", "1999 - 2000", "iphone 15",
              "windows 11 23h2 22631", "route 66", "1984 book", "shop at walmart.com", "boarding pass requirements",
              "password is incorrect", "phone 555 area code", "tel aviv 2006 2007",
              "americanidolseason5votingresults2006", "mx25l6406em2i12g", "12:00 - 13:00 - 14:00",
              "1600 pennsylvania ave", "mp3-downloads-for-2pac-songs", "windows-xp-sp2-download-2006-free",
              "10:30 11:45 12:00", "50% off", "caf%C3%A9 paris", "tom &amp; jerry", "$19.99 $24.99 $29.99",
              "2560\u00d71440 165hz", "123 \u00d7 456 \u00f7 789", "rtx4090-vs-rtx3080ti",
              "\u30e9\u30a4\u30d6 @ \u30b8\u30e7\u30f3\u30fb\u30ec\u30ce\u30f3", "concert @ \u6771\u4eac\u30fb\u30c9\u30fc\u30e0",
              "kpop @ \uc11c\uc6b8\u00b7\ubd80\uc0b0",
              "2008\u5e7412\u670831\u65e5 20\u65f630\u5206", "\u7b2c2008\u5c4a123\u53f7"]
    norm = [
        (key("new\u200byork"), "newyork"), (key("newyork"), "newyork"), (key("new\u00adyork"), "newyork"),
        (surface("a\u200db"), "a\u200db"), (key("a\u200db"), "ab"), (surface("a\u200cb"), "a\u200cb"),
        (key("a\u200cb"), "ab"), (prefix("new\u200b "), "new "), (prefix("new \u200b"), "new "),
        (prefix("new\u200b"), "new"), (prefix("\u200b "), ""), (surface("a \u200b b"), "a b"),
        (surface("\ufeffA\u2060 "), "a"), (surface("a\u00adb\ufe0f\U000e0041"), "ab"), (surface("\u3164"), ""),
        (surface("a \u200d b"), "a \u200d b"), (key("a \u200d b"), "a b"), (key_of_surface("a \u200d b"), "a b"),
        (key_of_surface("\u200d a\u200c"), "a"), (key("\u200b\u200d"), ""), (key("Caf\u00e9\u200d"), "cafe"),
        (prefix("Caf\u00e9 "), "cafe "), (surface("  Hello   World \t"), "hello world"), (surface("\u2003\u00a0"), ""),
        (display_of({"caf\u00e9": 0.1 + 0.2, "cafe": 0.3}), "cafe"), (display_of({"caf\u00e9": 2.0, "cafe": 1.0}), "caf\u00e9")]
    # The builder's timestamp grammar (`builder/src/logline.rs`, whose unit tests hold the same).
    stamps = [("1700000000", 1700000000), (" 1700000000.25 ", 1700000000), ("2023-11-14 22:13:20", 1700000000),
              ("2023-11-14T22:13:20Z", 1700000000), ("2023-11-14t22:13:20.5+01:00", 1699996400),
              ("2023-11-14 22:13:60", 1700000039), ("1969-12-31 23:30:00-01:00", 1800),
              ("9999-12-31 23:59:59", 253402300799), ("2023-11-14T22:13:20", None), ("2006-5-1 1:2:3", None),
              ("\u0661\u0662\u0663", None), ("\u00b2", None), ("2023-02-29 00:00:00", None), ("1.", None),
              (".5", None), ("0000-01-01 00:00:00", None), ("2023-11-14 24:00:00", None),
              ("2023-11-14 22:13:20+24:00", None), ("99999999999999999999", None),
              ("9" * 25, None), ("1" * 5000, None)]
    fails = [f"timestamp {t!r}: got {parse_ts(t)}, want {want}" for t, want in stamps if parse_ts(t) != want]
    for q in withheld + key_only:
        s = surface(q)
        if privacy_reason(s, key_of_surface(s)) is None:
            fails.append(f"not withheld: {q!r}")
    for q in key_only:
        if any(p.search(surface(q)) for _, p in PRIVACY):
            fails.append(f"should match on its key only: {q!r}")
    for q in passed:
        s = surface(q)
        if (r := privacy_reason(s, key_of_surface(s))) is not None:
            fails.append(f"withheld ({r}): {q!r}")
    for i, (got, want) in enumerate(norm):
        if got != want:
            fails.append(f"normalization case {i}: got {got!r}, want {want!r}")
    rng = random.Random(7)
    alphabet = "ab1 \t\u00e9\u0301\u00ad\u200b\u200c\u200d\u2060\ufeff\u3164\u034f\u00b4\u2003"
    for _ in range(3000):
        q = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        if key_of_surface(surface(q)) != key(q) or IGNORABLE.search(key(q)) or IGNORABLE.search(prefix(q)):
            fails.append(f"key_of_surface(surface(q)) != key(q) or invisible left: {q!r}")
    tier_cases, tier_fails = tier_self_test()
    fails += tier_fails
    for f in fails[:20]:
        print("SELF-TEST FAIL", f)
    n = len(stamps) + len(withheld) + 2 * len(key_only) + len(passed) + len(norm) + 3000 + tier_cases
    print(f"oracle self-test: {n} cases, {len(fails)} failed")
    return not fails

MAX_LINE_BYTES = 64 << 10


def log_fields(raw):
    """A log line's (timestamp, query[, user]) as the builder reads them, or None when it
    skips the line: too long, no tab, or a query or user that is not UTF-8 (columns after
    the user are not read)."""
    raw = raw.removesuffix(b"\n")
    if len(raw) > MAX_LINE_BYTES:
        return None
    parts = raw.removesuffix(b"\r").split(b"\t")[:3]
    if len(parts) < 2:
        return None
    try:
        return [parts[0].decode("latin-1")] + [p.decode("utf-8") for p in parts[1:]]
    except UnicodeDecodeError:
        return None


_UNIX = re.compile(r"([0-9]+)(?:\.[0-9]+)?\Z")
_DATETIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})([ Tt])([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(.*)\Z", re.S)
_ZONE = re.compile(r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))\Z")
MAX_TIMESTAMP = 253_402_300_799  # 9999-12-31 23:59:59


def parse_ts(ts):
    """Unix seconds of a log line's first field, or None: the builder's grammar (ASCII spaces
    around it ignored): Unix seconds with an optional fraction, `YYYY-MM-DD HH:MM:SS[.frac]`
    (UTC), RFC 3339 with `T`, `t` or a space and a zone (`Z`, `z`, `+HH:MM`); fractions floored,
    second 60 read as 59; nothing before 1970 or after 9999."""
    ts = ts.strip(" ")
    if len(ts) > 4 and ts[4] == "-":
        m = _DATETIME.match(ts)
        if not m:
            return None
        year, month, day, sep, hour, minute, second, zone = m.groups()
        year, month, day, hour, minute, second = map(int, (year, month, day, hour, minute, second))
        if hour >= 24 or minute >= 60 or second > 60:
            return None
        if zone == "":
            if sep != " ":
                return None
            offset = 0
        else:
            z = _ZONE.match(zone)
            if not z:
                return None
            offset = 0
            if z.group(1):
                oh, om = int(z.group(2)), int(z.group(3))
                if oh >= 24 or om >= 60:
                    return None
                offset = (oh * 3600 + om * 60) * (-1 if z.group(1) == "-" else 1)
        try:
            days = (datetime.date(year, month, day) - datetime.date(1970, 1, 1)).days
        except ValueError:  # no such day, or year 0
            return None
        t = days * 86400 + hour * 3600 + minute * 60 + min(second, 59) - offset
    else:
        m = _UNIX.match(ts)
        if not m or len(m.group(1)) > 20:  # past u64, as the builder; and int() limits digits
            return None
        t = int(m.group(1))
    return t if 0 <= t <= MAX_TIMESTAMP else None

def ask_cluster(binary, snapshot_dir, prefixes, blocklist=None):
    """Starts `typeahead cluster` on the partitioned build (its servers with `blocklist`) and
    asks its aggregator."""
    import urllib.parse, urllib.request
    extra = ["--blocklist", blocklist] if blocklist else []
    proc = subprocess.Popen([binary, "cluster", "--snapshot-dir", snapshot_dir, "--listen", "127.0.0.1:0",
                             "--deadline-ms", "5000", "--try-timeout-ms", "2000"] + extra,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        addr = None
        for line in proc.stdout:
            if line.startswith("aggregator listening on "):
                addr = line.split()[-1]
                break
        if not addr:  # (not `assert`: `python3 -O` would drop it)
            raise SystemExit("the cluster did not start")
        out = []
        for p in prefixes:
            url = f"http://{addr}/v1/suggest?q={urllib.parse.quote(p)}"
            with urllib.request.urlopen(url, timeout=10) as r:
                out.append(r.read().decode())
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=10)

def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    ap = argparse.ArgumentParser()
    ap.add_argument("binary"); ap.add_argument("log")
    ap.add_argument("--half-life", type=float, default=168.0)
    ap.add_argument("--prefixes", type=int, default=3000)
    ap.add_argument("--typos", type=int, default=0)
    ap.add_argument("--raw", type=int, default=0)
    ap.add_argument("--block", action="store_true")
    ap.add_argument("--date-prefix")
    ap.add_argument("--partitions", type=int)
    a = ap.parse_args()
    opener = gzip.open if a.log.endswith(".gz") else open
    with tempfile.TemporaryDirectory() as tmp:
        log = a.log
        if a.date_prefix:
            log = os.path.join(tmp, "log.tsv")
            with opener(a.log, "rt", encoding="utf-8") as src, open(log, "w", encoding="utf-8") as dst:
                for line in src:
                    dst.write(f"{a.date_prefix} {line}")
        counts, surfaces, T, raw = {}, {}, None, []
        now_hour = int(time.time()) // 3600
        with (gzip.open if log.endswith(".gz") else open)(log, "rb") as f:
            for line in f:
                parts = log_fields(line)
                if parts is None:
                    continue
                t = parse_ts(parts[0])
                # A line stamped after this hour is skipped (builder: future_timestamp).
                if t is None or t // 3600 > now_hour:
                    continue
                h = t // 3600
                T = h if T is None else max(T, h)
                if len(raw) < 200_000:
                    raw.append(parts[1])
                s = surface(parts[1]); k = key_of_surface(s)
                if not k or len(k.encode()) > 256 or len(s.encode()) > 1024 or privacy_reason(s, k):
                    continue
                counts.setdefault(k, {}).setdefault(h, 0)
                counts[k][h] += 1
                surfaces.setdefault(k, {}).setdefault(s, {}).setdefault(h, 0)
                surfaces[k][s][h] += 1
        ema = lambda hours: sum(n * 2 ** (-(T - h) / a.half_life) for h, n in hours.items())
        score = {k: ema(c) for k, c in counts.items()}
        display = {k: display_of({s: ema(h) for s, h in v.items()}) for k, v in surfaces.items()}
        snap = os.path.join(tmp, "s.snap")
        build = [a.binary, "build", "--input", log, "--out", snap, "--min-score", "0", "--half-life", str(a.half_life)]
        if a.partitions:
            build += ["--partitions", str(a.partitions)]
        blocklist, blocked = None, Blocked([])
        if a.block:
            blocked = Blocked(blocklist_entries(score))
            blocklist = os.path.join(tmp, "blocklist.txt")
            with open(blocklist, "w", encoding="utf-8") as f:
                f.write("# oracle_check.py --block\n" + "".join(e + "\n" for e in blocked.entries))
            if not a.partitions:
                build += ["--blocklist", blocklist]
        subprocess.run(build, check=True, stdout=subprocess.DEVNULL, timeout=1800)
        keys = sorted(score, key=lambda k: k.encode())
        rng = random.Random(1)
        prefixes = {"", " ", "a", "e"}
        for k in rng.sample(keys, min(a.prefixes, len(keys))):
            cut = rng.randint(1, len(k))
            prefixes.add(k[:cut].upper() if rng.random() < 0.1 else k[:cut])
        rng, typos, tries = random.Random(2), set(), 0
        while len(typos) < a.typos and tries < 20 * a.typos and keys:
            tries += 1
            t = typo_text(rng, rng.choice(keys))
            if t is not None and t not in prefixes:
                typos.add(t)
        rng, typed, tries = random.Random(3), set(), 0
        while len(typed) < a.raw and tries < 20 * a.raw and raw:
            tries += 1
            t = raw_text(rng, rng.choice(raw))
            if t is not None and t not in prefixes and t not in typos:
                typed.add(t)
        prefixes = sorted(prefixes | typos | typed)
        if a.partitions:
            out = ask_cluster(a.binary, snap, prefixes, blocklist)
        else:
            out = subprocess.run([a.binary, "query", "--snapshot", snap, "--json"], input="\n".join(prefixes) + "\n",
                                 capture_output=True, text=True, check=True, timeout=1800).stdout.splitlines()
        if len(out) != len(prefixes):
            raise SystemExit(f"{len(out)} answers for {len(prefixes)} prefixes")
        hidden = {k for k in score if blocked(k)}
        skeletal = {k for k in hidden if not blocked.literally(k)}
        tiers = Tiers({k: v for k, v in score.items() if k not in hidden}, display)
        bkeys = [k.encode() for k in sorted(hidden, key=str.encode)]
        def hides_in_range(p):
            pk = prefix(p).encode()
            i = bisect.bisect_left(bkeys, pk)
            return i < len(bkeys) and bkeys[i].startswith(pk)
        touched = sum(1 for p in prefixes if hides_in_range(p))
        bad, by_match = 0, {}
        for p, line in zip(prefixes, out):
            got = json.loads(line)
            exp = [(display[k], score[k], m) for k, m in tiers.answer(prefix(p))]
            for _, _, m in exp:
                by_match[m] = by_match.get(m, 0) + 1
            sugg = got["suggestions"]
            ok = (got.get("q", p) == p and not got.get("partial") and got.get("complete", True) is not False
                  and len(sugg) == len(exp) and all(
                      g["text"] == t and abs(g["score"] - sc) <= 1e-9 * sc and g.get("match") == m
                      for g, (t, sc, m) in zip(sugg, exp)))
            if not ok:
                bad += 1
                if bad <= 10:
                    i = next((i for i, (g, e) in enumerate(zip(sugg, exp))
                              if (g["text"], g.get("match")) != (e[0], e[2]) or abs(g["score"] - e[1]) > 1e-9 * e[1]),
                             min(len(sugg), len(exp)))
                    flags = {f: got[f] for f in ("complete", "partial") if f in got}
                    print(f"MISMATCH {p!r} (normalized {prefix(p)!r}) {flags} first difference at #{i}")
                    print("   got:", [(g["text"], g["score"], g.get("match")) for g in sugg])
                    print("  want:", exp)
        via = f" via a {a.partitions}-partition cluster" if a.partitions else ""
        tally = ", ".join(f"{by_match.get(m, 0)} {m}" for m in ("prefix", "words", "fuzzy"))
        print(f"oracle check {os.path.basename(a.log)}{via}: {len(prefixes)} prefixes ({len(typos)} typed with typos, "
              f"{len(typed)} typed as logged), {len(keys)} keys, expected items {tally}; {bad} mismatches")
        if a.block:
            print(f"  blocklist {blocked.entries}: {len(hidden)} keys blocked ({len(skeletal)} by their "
                  f"skeleton alone); {touched} prefixes have a blocked key in their range")
        asked = ["prefix"] + (["words", "fuzzy"] if a.typos else [])
        empty = [m for m in asked if not by_match.get(m)]
        blind = a.block and not (skeletal and touched)
        if not keys or empty or len(typed) < a.raw or blind:
            print(f"NOTHING COMPARED: {len(keys)} keys, no expected {' or '.join(empty) or '-'} items, "
                  f"{len(typed)} of {a.raw} texts typed as logged"
                  + (f", blocklist: {len(skeletal)} keys by skeleton, {touched} prefixes" if a.block else ""))
            sys.exit(1)
        sys.exit(1 if bad else 0)

if __name__ == "__main__":
    main()
