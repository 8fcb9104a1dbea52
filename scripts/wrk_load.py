#!/usr/bin/env python3
"""`/v1/suggest` against the trivial endpoint of the same server, with wrk.

Usage: wrk_load.py BINARY SNAPSHOT LOG [--rounds 3] [--seconds 5] [--prefixes 4000]
                   [--cache-entries N] [--match prefix|all]

The server runs pinned to core 1, wrk (`-t1 -c32`) to core 0. PREFIXES real prefixes of 1-12
characters are cut from query events sampled from LOG (random.Random(7); `timestamp<TAB>query`,
plain or .gz) and cycled through by scripts/wrk/suggest.lua. After a warm-up, each round runs
`/healthz` then `/v1/suggest` for SECONDS each; the report gives every round, the median of
the rounds' own ratios (each pairs two runs side by side), the ratio of the medians, and the
server's answer-cache hit rate over the timed runs. A round with non-2xx answers or socket
errors (timeouts included, which wrk leaves out of Requests/sec) fails the run. `--match prefix` asks for the prefix tier only. Traffic goes to 127.0.0.1 only; every run is bounded by --seconds.
"""
import argparse, gzip, os, random, re, statistics, subprocess, sys, tempfile, urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def prefixes(log, count, seed=7):
    opener = gzip.open if log.endswith(".gz") else open
    with opener(log, "rt", encoding="utf-8", errors="replace") as f:
        queries = [line.rstrip("\n").split("\t")[1] for line in f if line.count("\t") >= 1]
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        q = rng.choice(queries)
        if q.strip():
            out.append(q[: rng.randint(1, min(12, len(q)))])
    return out


def wrk(url, seconds, script=None, env=None):
    cmd = ["taskset", "-c", "0", "wrk", "-t1", "-c32", f"-d{seconds}s", "--latency"]
    if script:
        cmd += ["-s", script]
    out = subprocess.run(cmd + [url], capture_output=True, text=True, env=env, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:([^\n]*)", out)
    failed = int(non2xx.group(1)) if non2xx else 0
    failed += sum(int(n) for n in re.findall(r"\d+", errors.group(1))) if errors else 0
    # The distribution's own line: a thread statistic such as "98.99%" also ends in "99%".
    p99 = re.search(r"^\s*99%\s+(\S+)", out, re.M)
    return rps, failed, p99.group(1) if p99 else "?"


def cache_counts(base):
    """(hits, misses) of the server's answer cache so far."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as r:
        text = r.read().decode()
    def value(name):
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(m.group(1)) if m else 0.0
    return value("typeahead_answer_cache_hits_total"), value("typeahead_answer_cache_misses_total")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("snapshot")
    ap.add_argument("log")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--prefixes", type=int, default=4000)
    ap.add_argument("--cache-entries")
    ap.add_argument("--match", choices=["prefix", "all"], default="all")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        listing = os.path.join(tmp, "prefixes.txt")
        with open(listing, "w", encoding="utf-8") as f:
            for p in prefixes(a.log, a.prefixes):
                f.write(urllib.parse.quote_plus(p) + "\n")
        cmd = ["taskset", "-c", "1", a.binary, "serve", "--snapshot", a.snapshot,
               "--listen", "127.0.0.1:0", "--max-concurrency", "4096"]
        if a.cache_entries is not None:
            cmd += ["--cache-entries", a.cache_entries]
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            addr = None
            for line in server.stdout:
                if line.startswith("listening on "):
                    addr = line.split()[-1]
                    break
            if addr is None:
                sys.exit("the server did not start")
            base = f"http://{addr}"
            env = dict(os.environ, PREFIXES=listing, EXTRA=f"&match={a.match}")
            script = os.path.join(HERE, "wrk", "suggest.lua")
            wrk(f"{base}/v1/suggest", 2, script, env)  # warm-up
            hits0, misses0 = cache_counts(base)
            trivial, suggest = [], []
            for r in range(a.rounds):
                t = wrk(f"{base}/healthz", a.seconds)
                s = wrk(f"{base}/v1/suggest", a.seconds, script, env)
                trivial.append(t[0])
                suggest.append(s[0])
                print(f"round {r + 1}: /healthz {t[0]:,.0f} req/s (p99 {t[2]}, errors {t[1]}), "
                      f"/v1/suggest {s[0]:,.0f} req/s (p99 {s[2]}, errors {s[1]}), "
                      f"ratio {s[0] / t[0]:.2f}")
                if t[1] or s[1]:
                    sys.exit("errors during the run (non-2xx answers or socket errors)")
            hits, misses = (b - a for a, b in zip((hits0, misses0), cache_counts(base)))
            mt, ms = statistics.median(trivial), statistics.median(suggest)
            ratios = [s / t for s, t in zip(suggest, trivial)]
            print(f"median: /healthz {mt:,.0f} req/s, /v1/suggest {ms:,.0f} req/s; "
                  f"ratio {statistics.median(ratios):.2f} (median of the rounds' ratios; "
                  f"of the medians {ms / mt:.2f}); answer cache hit rate "
                  f"{100 * hits / max(hits + misses, 1):.1f}% ({hits:,.0f} hits, {misses:,.0f} misses)")
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
