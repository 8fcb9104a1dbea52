#!/usr/bin/env python3
"""Checks `typeahead build` + `typeahead query --json` against an independent implementation of
the contract (normalization, privacy rules, EMA score, ranking) written from the issue text.

Usage: oracle_check.py BINARY LOG [--half-life H] [--prefixes N] [--date-prefix YYYY-MM-DD]
                       [--partitions N]

With --partitions N the answers come from `typeahead cluster` (N partition servers and the
aggregator, over loopback HTTP) instead of `typeahead query`.

LOG is `timestamp<TAB>query[...]` (plain or .gz). With --date-prefix, timestamps are `HH:MM:SS`
(Sogou) and get that date prepended. Exits 1 on any mismatch. Real data stays outside the repo.
"""
import argparse, bisect, datetime, gzip, json, os, random, re, subprocess, sys, tempfile, unicodedata

def is_space(c):
    return c.isspace() or unicodedata.category(c) == "Cc"

def surface(q):
    q = unicodedata.normalize("NFKC", q).lower()
    out, pend = [], False
    for c in q:
        if is_space(c):
            pend = bool(out)
        else:
            if pend:
                out.append(" ")
                pend = False
            out.append(c)
    return "".join(out)

def fold(s):
    d = unicodedata.normalize("NFD", s)
    return unicodedata.normalize("NFC", "".join(c for c in d if not 0x300 <= ord(c) <= 0x36F))

def prefix(q):
    q2 = unicodedata.normalize("NFKC", q).lower()
    s = surface(q)
    if s and q2 and is_space(q2[-1]):
        s += " "
    return fold(s)

PRIVACY = [re.compile(p) for p in [
    r"[^\s@]+@[^\s@]+\.[^\s@]+", r"\d(?:[-.]?\d){8,}", r"://[^\s/]*@",
    r"[?&](?:token|key|api_key|apikey|password|passwd|pwd|secret|session|sid|auth)="]]

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
                s = surface(parts[1]); k = fold(s)
                if not k or len(k.encode()) > 256 or any(p.search(s) for p in PRIVACY):
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
