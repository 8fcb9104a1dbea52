#!/usr/bin/env python3
"""Checks `typeahead build` + `typeahead query --json` against an independent implementation of
the contract (normalization, privacy rules, EMA score, ranking) written from the issue text.

Usage: oracle_check.py BINARY LOG [--half-life H] [--prefixes N] [--date-prefix YYYY-MM-DD]
                       [--partitions N]
       oracle_check.py --self-test    (the contract's examples against this implementation)

With --partitions N the answers come from `typeahead cluster` (N partition servers and the
aggregator, over loopback HTTP) instead of `typeahead query`.

LOG is `timestamp<TAB>query[...]` (plain or .gz). With --date-prefix, timestamps are `HH:MM:SS`
(Sogou) and get that date prepended. Exits 1 on any mismatch. Real data stays outside the repo.

Needs the PyPI module `regex`. scripts/privacy_diff.py imports the contract functions from here.
"""
import argparse, bisect, datetime, gzip, json, os, random, subprocess, sys, tempfile, unicodedata

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
PRIVACY = [(name, regex.compile(p)) for name, p in [
    ("email", r"[^\s@]+@[^\s@]+\.[^\s@]+"),
    ("spaced_email", r"\w\s*@\s*\w[\w-]*(?:\.[\w-]+)*\.[a-z]{2}"),
    ("spelled_email", r"\w+ (?:at|\(at\)|\[at\]) [\w-]+(?: (?:dot|\(dot\)|\[dot\]) [\w-]+)* "
                      r"(?:dot|\(dot\)|\[dot\]) (?:com|net|org|edu|gov|mil|info|biz|io|co|us|uk|ca|de|fr|au"
                      r"|jp|ru|cn|in|me|tv)\b"),
    ("long_number", r"\d(?:[\s\-./_,()+]{0,2}\d){8,}"),
    ("url_userinfo", r"://[^\s/]*@"),
    ("url_secret", r"[?&#;](?:access_token|refresh_token|id_token|auth_token|token|api_key|api-key|apikey"
                   r"|key|password|passwd|pwd|secret|client_secret|session|session_id|sessionid|jsessionid"
                   r"|phpsessid|sid|auth|code|signature|sig|x-amz-signature|x-amz-credential)="),
    ("password", r"\b(?:password|passwd|pwd|pin)\s*[:=]\s*\S"),
]]

def privacy_reason(s, k):
    """The first privacy rule that the surface `s` or the key `k` breaks, or None."""
    for name, p in PRIVACY:
        if p.search(s) or p.search(k):
            return name
    return None

def self_test():
    """The contract's examples, plus key_of_surface(surface(q)) == key(q) on random queries."""
    withheld = [
        "4111 1111 1111 1111", "(555) 123-4567", "555 123 4567", "+1 555 123 4567", "123 45 6789",
        "4111\u200b1111\u200b1111\u200b1111", "4111_1111_1111_1111", "4111,1111,1111,1111",
        "4111/1111/1111/1111", "site.com/?access_token=abc", "x.com/#token=abc", "x.com/?api-key=1",
        "x.com/a;jsessionid=1", "password: hunter2", "john doe at gmail dot com", "john.doe @ gmail.com",
        "mail john.doe@example.com now", "ftp://user:pw@host/x", "ssn 123.45.6789",
        "\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669"]
    # Combining marks split the digit groups of the surface; only the key (marks folded) matches.
    key_only = ["4111\u0301 1111\u0301 1111\u0301 1111", "555\u0301-123\u0301-4567"]
    passed = ["ebay", "weather 90210", "1-800-flowers", "12345678", "a@b", "key=value", "mykey=1",
              "pin cushion", "at home dot"]
    norm = [
        (key("new\u200byork"), "newyork"), (key("newyork"), "newyork"), (key("new\u00adyork"), "newyork"),
        (surface("a\u200db"), "a\u200db"), (key("a\u200db"), "ab"), (surface("a\u200cb"), "a\u200cb"),
        (key("a\u200cb"), "ab"), (prefix("new\u200b "), "new "), (prefix("new \u200b"), "new "),
        (prefix("new\u200b"), "new"), (prefix("\u200b "), ""), (surface("a \u200b b"), "a b"),
        (surface("\ufeffA\u2060 "), "a"), (surface("a\u00adb\ufe0f\U000e0041"), "ab"), (surface("\u3164"), ""),
        (surface("a \u200d b"), "a \u200d b"), (key("a \u200d b"), "a b"), (key_of_surface("a \u200d b"), "a b"),
        (key_of_surface("\u200d a\u200c"), "a"), (key("\u200b\u200d"), ""), (key("Caf\u00e9\u200d"), "cafe"),
        (prefix("Caf\u00e9 "), "cafe "), (surface("  Hello   World \t"), "hello world"), (surface("\u2003\u00a0"), "")]
    fails = []
    for q in withheld + key_only:
        s = surface(q)
        if privacy_reason(s, key_of_surface(s)) is None:
            fails.append(f"not withheld: {q!r}")
    for q in key_only:
        if privacy_reason(surface(q), surface(q)) is not None:
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
    for f in fails[:20]:
        print("SELF-TEST FAIL", f)
    n = len(withheld) + 2 * len(key_only) + len(passed) + len(norm) + 3000
    print(f"oracle self-test: {n} cases, {len(fails)} failed")
    return not fails

def parse_ts(ts):
    ts = ts.strip()
    if ts.isdigit():
        return int(ts)
    try:
        return int(datetime.datetime.strptime(ts, "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp())
    except ValueError:
        return None

def ask_cluster(binary, snapshot_dir, prefixes):
    """Starts `typeahead cluster` on the partitioned build and asks its aggregator."""
    import urllib.parse, urllib.request
    proc = subprocess.Popen([binary, "cluster", "--snapshot-dir", snapshot_dir, "--listen", "127.0.0.1:0",
                             "--deadline-ms", "5000", "--try-timeout-ms", "2000"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        addr = None
        for line in proc.stdout:
            if line.startswith("aggregator listening on "):
                addr = line.split()[-1]
                break
        assert addr, "the cluster did not start"
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
        counts, surfaces, T = {}, {}, None
        with (gzip.open if log.endswith(".gz") else open)(log, "rt", encoding="utf-8", newline="\n") as f:
            for line in f:
                parts = line.rstrip("\n").removesuffix("\r").split("\t")
                if len(parts) < 2:
                    continue
                t = parse_ts(parts[0])
                if t is None:
                    continue
                h = t // 3600
                T = h if T is None else max(T, h)
                s = surface(parts[1]); k = key_of_surface(s)
                if not k or len(k.encode()) > 256 or privacy_reason(s, k):
                    continue
                counts.setdefault(k, {}).setdefault(h, 0)
                counts[k][h] += 1
                surfaces.setdefault(k, {}).setdefault(s, {}).setdefault(h, 0)
                surfaces[k][s][h] += 1
        ema = lambda hours: sum(n * 2 ** (-(T - h) / a.half_life) for h, n in hours.items())
        score = {k: ema(c) for k, c in counts.items()}
        display = {k: min(v, key=lambda s: (-ema(v[s]), s.encode())) for k, v in surfaces.items()}
        snap = os.path.join(tmp, "s.snap")
        build = [a.binary, "build", "--input", log, "--out", snap, "--min-score", "0", "--half-life", str(a.half_life)]
        if a.partitions:
            build += ["--partitions", str(a.partitions)]
        subprocess.run(build, check=True, stdout=subprocess.DEVNULL)
        keys = sorted(score, key=lambda k: k.encode())
        rng = random.Random(1)
        prefixes = {"", " ", "a", "e"}
        for k in rng.sample(keys, min(a.prefixes, len(keys))):
            cut = rng.randint(1, len(k))
            prefixes.add(k[:cut].upper() if rng.random() < 0.1 else k[:cut])
        prefixes = sorted(prefixes)
        if a.partitions:
            out = ask_cluster(a.binary, snap, prefixes)
        else:
            out = subprocess.run([a.binary, "query", "--snapshot", snap, "--json"], input="\n".join(prefixes) + "\n",
                                 capture_output=True, text=True, check=True).stdout.splitlines()
        assert len(out) == len(prefixes), (len(out), len(prefixes))
        bkeys = [k.encode() for k in keys]
        bad = 0
        for p, line in zip(prefixes, out):
            got = json.loads(line)
            pk = prefix(p).encode()
            i = bisect.bisect_left(bkeys, pk)
            cand = []
            while i < len(bkeys) and bkeys[i].startswith(pk):
                cand.append(keys[i]); i += 1
            cand.sort(key=lambda k: (-score[k], k.encode()))
            exp = [(display[k], score[k]) for k in cand[:10]]
            ok = got.get("q", p) == p and not got.get("partial") and len(got["suggestions"]) == len(exp) and all(
                g["text"] == t and abs(g["score"] - s) <= 1e-9 * s for g, (t, s) in zip(got["suggestions"], exp))
            if not ok:
                bad += 1
                if bad <= 5:
                    print("MISMATCH", repr(p), [g["text"] for g in got["suggestions"]][:5], [t for t, _ in exp][:5])
        via = f" via a {a.partitions}-partition cluster" if a.partitions else ""
        print(f"oracle check {os.path.basename(a.log)}{via}: {len(prefixes)} prefixes, {len(keys)} keys, {bad} mismatches")
        sys.exit(1 if bad else 0)

if __name__ == "__main__":
    main()
