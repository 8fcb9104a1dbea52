#!/usr/bin/env python3
"""An independent check of `typeahead eval --history-log` on a real users log.

The history rule (issue 14), written again here from its text, not from the Rust: per key the
number of searches, the last use and the latest text; at most 500 keys, the least recently used
dropped first; a search the privacy rules withhold (oracle_check.py's port) not recorded; for a
prefix p, the entries whose key starts with p, by count desc, then last use desc, then key bytewise
asc, at most 3; then the service's suggestions without those keys; at most 10 in all. `eval` seeds
each user's history from the earlier log and replays the later one event by event, scoring every
prefix length of the event's key before adding the event.

The service's own answers come from `typeahead query --match prefix --json` on the same
snapshot; normalization is oracle_check.py's independent implementation. The figures this
script computes must equal the `"history"` object of `eval --json` (events, MRR@10, success@10,
characters to the top 3 and top 1).

Usage: scripts/history_check.py BINARY USERS_LOG.tsv.gz [--split 2006-05-10]
"""

import argparse
import atexit
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_check as oracle  # noqa: E402  (normalization, written independently of the Rust)

MAX_KEYS, SHOWN, K, MAX_KEY_BYTES, MAX_SURFACE_BYTES = 500, 3, 10, 256, 1024


class History:
    def __init__(self):
        self.entries = {}  # key -> [count, last, text]

    def record(self, key, text, now):
        if len(text.encode()) > MAX_SURFACE_BYTES:
            return  # the service keeps no text this long, and neither does the page
        if oracle.privacy_reason(text, key):
            return  # personal data is no suggestion, from the history either
        entry = self.entries.setdefault(key, [0, now, text])
        entry[0] += 1
        entry[1] = max(entry[1], now)
        entry[2] = text
        if len(self.entries) > MAX_KEYS:
            # Equal clocks drop the bytewise greatest key, as the Rust rule and the page do.
            oldest = max(self.entries, key=lambda k: (-self.entries[k][1], k.encode()))
            del self.entries[oldest]

    def merged(self, p, suggested):
        mine = sorted((k for k in self.entries if k.startswith(p)),
                      key=lambda k: (-self.entries[k][0], -self.entries[k][1], k.encode()))[:SHOWN]
        return (mine + [s for s in suggested if s not in mine])[:K]


def events(path):
    """(user, surface, key) of every line with a timestamp, a query with a valid key and a
    user, in order."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        for n, raw in enumerate(f):
            raw = raw.rstrip(b"\n")
            # Read as the builder reads: a byte-order mark before the first line dropped, and
            # a line longer than 64 KiB left out.
            if n == 0 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if len(raw) > oracle.MAX_LINE_BYTES:
                continue
            raw = raw[:-1] if raw.endswith(b"\r") else raw
            # The user is the third field, spaces trimmed; columns after it are not part of
            # it (and not read). A query or user of invalid UTF-8 is skipped, as the builder does.
            fields = raw.split(b"\t")
            try:
                fields = [f.decode("utf-8") for f in fields[:3]]
            except UnicodeDecodeError:
                continue
            if len(fields) < 3 or not fields[2].strip(" ") or oracle.parse_ts(fields[0]) is None:
                continue
            surface = oracle.surface(fields[1])
            key = oracle.key_of_surface(surface)
            # Counted only with a key of 1..=256 bytes and a surface of at most 1024 (a letter
            # and a thousand marks is not a query), as the builder and eval count.
            if key and len(key.encode()) <= MAX_KEY_BYTES and len(surface.encode()) <= MAX_SURFACE_BYTES:
                yield fields[2].strip(" "), surface, key


def prefixes(key):
    """Every prefix of `key` at a character boundary, one character first, the key last."""
    return [key[:i] for i in range(1, len(key) + 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("log")
    ap.add_argument("--split", default="2006-05-10")
    opts = ap.parse_args()
    # `timeout` in CI stops a run with SIGTERM: exit through the clean-up, not around it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))

    work = tempfile.mkdtemp(prefix="history-check-")
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    earlier, later = os.path.join(work, "earlier.tsv"), os.path.join(work, "later.tsv")
    # Bytes as they are: the builder skips a line of invalid UTF-8, which a decoding copy
    # would have repaired.
    with gzip.open(opts.log, "rb") as f, open(earlier, "wb") as e, open(later, "wb") as l:
        for line in f:
            (e if line[:10] < opts.split.encode() else l).write(line)
    snap = os.path.join(work, "train.snap")
    subprocess.run([opts.binary, "build", "--input", earlier, "--out", snap], check=True,
                   stdout=subprocess.DEVNULL)
    report = json.loads(subprocess.run(
        [opts.binary, "eval", "--snapshot", snap, "--log", later, "--history-log", earlier,
         "--json"], check=True, capture_output=True, text=True).stdout)["history"]

    replay = list(events(later))
    asked = sorted({p for _, _, key in replay for p in prefixes(key)})
    out = subprocess.run([opts.binary, "query", "--snapshot", snap, "--match", "prefix", "--json"],
                         input="".join(p + "\n" for p in asked), check=True,
                         capture_output=True, text=True).stdout.splitlines()
    if len(out) != len(asked):
        sys.exit(f"history check: {len(out)} answers for {len(asked)} prefixes")
    answers = {p: [oracle.key_of_surface(s["text"]) for s in json.loads(o)["suggestions"]]
               for p, o in zip(asked, out)}

    histories, clock = {}, 0
    for user, surface, key in events(earlier):
        clock += 1
        histories.setdefault(user, History()).record(key, surface, clock)
    rr_sum, pairs, found, top3, top1 = 0.0, 0, 0, [], []
    for user, surface, key in replay:
        clock += 1
        history = histories.setdefault(user, History())
        ranks = []
        for p in prefixes(key):
            # The page matches its history against the typed text's prefix normalization.
            merged = history.merged(oracle.prefix(p), answers[p])
            ranks.append(merged.index(key) + 1 if key in merged else None)
        for r in ranks:
            rr_sum += 1.0 / r if r else 0.0
            pairs += 1
        found += any(ranks)
        for limit, firsts in ((3, top3), (1, top1)):
            first = next((n + 1 for n, r in enumerate(ranks) if r and r <= limit), None)
            if first:
                firsts.append(first)
        history.record(key, surface, clock)

    mine = {"events": len(replay), "mrr": rr_sum / pairs, "success_at_10": found / len(replay),
            "chars_to_top3": sum(top3) / len(top3), "chars_to_top1": sum(top1) / len(top1)}
    bad = [f"{name}: eval {report[name]}, independent {value}" for name, value in mine.items()
           if abs(report[name] - value) > 1e-9 * max(1.0, abs(value))]
    print(f"history check: {len(replay)} later events, {pairs} prefixes; MRR@10 "
          f"{mine['mrr']:.4f}, success@10 {mine['success_at_10']:.4f}"
          + ("; eval agrees" if not bad else ""))
    if bad:
        sys.exit("history check: eval and the independent replay differ:\n  " + "\n  ".join(bad))


if __name__ == "__main__":
    main()
