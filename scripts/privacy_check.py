#!/usr/bin/env python3
"""Checks that `typeahead build` withholds exactly the queries oracle_check.py's privacy rules
withhold, on queries made to sit on the rules' edges.

Usage: privacy_check.py BINARY [--queries N] [--seed S]

The queries are drawn from pieces the patterns look for (`at`, `dot`, brackets, providers,
separators and their look-alikes, digits, token prefixes, words that announce a number,
combining marks, zero-width characters, full-width forms) glued with or without spaces, so
that most of them are one piece away from a rule matching or not. Each is logged once, in one
hour; the build (`--top-k 200`) is then asked for every distinct key as a prefix (`--match
prefix --k 200`): a key is kept when it is in its own answer, which holds every key it begins.
Left out: keys that begin more than 200 keys, and keys a typed prefix cannot be (those that
begin or end with a space, when a mark next to it folded away). The oracle keeps a key when any of its surface
forms breaks no rule (a key written several ways is kept if one way passes).

The real logs (oracle_check.py) hold few queries near these edges; a disagreement here is a
gate or a pattern the two implementations read differently. Exits 1 on any disagreement,
printing the first ones. Needs the PyPI module `regex`.
"""
import argparse, bisect, json, os, random, signal, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_check import key_of_surface, prefix, privacy_reason, surface  # noqa: E402

# The answer size asked for: every key a compared key begins is in its answer.
TOP_K = 200

PIECES = [
    " ", " ", "at", " at ", "dot", " dot ", "(", ")", "[", "]", "{", "}", "<", ">", "@", ".",
    ",", ":", "=", "?", "&", "#", ";", "-", "_", "~", "*", "|", "'", "/", "+",
    "gmail", "yahoo", "aol", "com", "nl", "john", "mail", "shop",
    "call", "tel", "phone", "cell", "dob", "ssn", "pass", "pw", "pin", "password", "passwort",
    "ghp_", "xoxb-", "sk-", "sk_live_", "akia", "aiza", "eyj", "ya29.", "glpat-",
    "access_token", "token", "api_key", "client_secret", "code", "sig",
    "\u30fc", "\uff70", "\u3161", "\u00b7", "\u2022", "\u30fb", "\u02d7", "\u2500", "\u223c",
    "\u2044", "\u2019", "\u2800", "\uff5e", "\u3002", "\u301c", "\u2013", "\u2212", "\u066c",
    "\u0301", "\u20e3", "\u200b", "\u200d", "\ufffb", "\u278a", "\u24f5", "\u2796",
    "\uff10", "\uff11\uff12\uff13", "\u0661\u0662\u0663", "caf\u00e9", "\u00f1", "JOHN", "AT",
    "(at)", " [at] ", "{at}", "<at>", "(dot)", " [ dot ] ", "<dot>", "@gmail", " at gmail",
    "john.doe", "gmail.com",
    # Escapes, base64 joiners and look-alikes the fourth attacker's pass used.
    "%40", "%20", "%2", "%e2%9e%8a", "%ff", "&#64;", "&#x40", "&commat;", "&nbsp;", "&amp;", "&bogus;",
    "\u2219", "\u22c5", "\u2027", "\u2e31", "\u00b4", "\u00b0", "\u01c0", "\ue000", "%", "+", "/",
    "\"",
    # Letters that stand for a dash or a bar (rules version 9), and letters that do not.
    "\u4e00", "\u4e28", "\u01c1", "\ua78f", "\u02c8", "\u02bc", "\u3163", "\u5e74", "\u65e5",
]

def piece(rng):
    """A piece: one of PIECES, a run of digits, or a run of letters and digits."""
    r = rng.random()
    if r < 0.55:
        return rng.choice(PIECES)
    if r < 0.8:
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 6)))
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789" if rng.random() < 0.7 else "abcdef0123456789"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 24)))

def queries(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        glue = "" if rng.random() < 0.5 else " "
        q = glue.join(piece(rng) for _ in range(rng.randint(1, 9)))
        # Tabs and line ends would break the log line; they are whitespace to the rules anyway.
        out.append(q.replace("\t", " ").replace("\n", " ").replace("\r", " "))
    return out

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--queries", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=6)
    a = ap.parse_args()
    # `timeout` in CI stops a run with SIGTERM: exit through the clean-up, not around it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))
    qs = queries(a.queries, a.seed)
    # The oracle's verdict per key: kept when one of its surface forms passes every rule.
    kept = {}
    for q in qs:
        s = surface(q)
        k = key_of_surface(s)
        if not k or len(k.encode()) > 256 or len(s.encode()) > 1024:
            continue
        passes = privacy_reason(s, k) is None
        kept[k] = kept.get(k, False) or passes
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "edges.tsv")
        with open(log, "w", encoding="utf-8", newline="\n") as f:
            for q in qs:
                f.write(f"2026-01-05 10:00:00\t{q}\n")
        snap = os.path.join(tmp, "edges.snap")
        subprocess.run([a.binary, "build", "--input", log, "--out", snap, "--min-score", "0",
                        "--top-k", str(TOP_K)], check=True, stdout=subprocess.DEVNULL)
        # Only keys that are their own typed prefix (a key may begin with a space, when a mark
        # before it folded away, and typing trims it), and that begin fewer than TOP_K keys.
        ordered = sorted(kept)
        begun = {k: bisect.bisect_left(ordered, k + "\U0010ffff") - i for i, k in enumerate(ordered)}
        keys = [k for k in ordered if prefix(k) == k and begun[k] <= TOP_K]
        # Keys never hold a line end; each goes to the query command as one prefix line.
        done = subprocess.run([a.binary, "query", "--snapshot", snap, "--json", "--match", "prefix",
                               "--k", str(TOP_K)], input="\n".join(keys) + "\n",
                              capture_output=True, text=True, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    if len(answers) != len(keys):
        sys.exit(f"privacy check: {len(answers)} answers for {len(keys)} keys")
    wrong = []
    for k, answer in zip(keys, answers):
        # Every key it begins is in the answer, so it is there itself unless withheld.
        served = any(key_of_surface(surface(s["text"])) == k for s in answer["suggestions"])
        if served != kept[k]:
            wrong.append((k, "served" if served else "withheld"))
    withheld = sum(not kept[k] for k in keys)
    print(f"privacy check: {len(qs)} queries, {len(keys)} keys compared ({len(kept) - len(keys)} "
          f"not their own prefix), {withheld} withheld by the oracle; {len(wrong)} disagreements")
    for k, what in wrong[:10]:
        print(f"  {what} by the build, not by the oracle: {k!r}")
    # Both sides of the rules must be compared, or the check says nothing.
    if withheld == 0 or withheld == len(keys):
        sys.exit(f"privacy check: NOTHING COMPARED on one side ({withheld} of {len(keys)} withheld)")
    sys.exit(1 if wrong else 0)

if __name__ == "__main__":
    main()
