#!/usr/bin/env python3
"""Measures what the new privacy rules (and Default_Ignorable removal) withhold on a real log,
compared with the old rules.

Usage: privacy_diff.py LOG [--show N]

LOG is `timestamp<TAB>query[...]` (plain or .gz). The unit is the distinct key (the contract's
normalization; keys that are empty or longer than 256 bytes are never counted and are left out).
A key counts as withheld when any of its queries is:
  - old: the four rules as they were before this change, on the old surface form (NFKC,
    lowercase, whitespace collapsed; no Default_Ignorable removal), surface only;
  - new: oracle_check.PRIVACY on the new surface form or the key.
Prints both totals, the keys the new rules withhold and the old did not (by first matching
rule), and the N most frequent of those (by events, ties by text). The examples are real query
text: print them, never write them into the repository. Needs the PyPI module `regex`.
"""
import argparse, gzip, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_check import PRIVACY, collapse, key_of_surface, nfkc_lower, privacy_reason, surface  # noqa: E402
import regex  # noqa: E402  (oracle_check has already said how to install it if it is missing)

# The rules before this change (oracle_check.py and builder/src/privacy.rs, now builder/src/privacy/, had exactly these).
OLD_PRIVACY = [regex.compile(p) for p in [
    r"[^\s@]+@[^\s@]+\.[^\s@]+", r"\d(?:[-.]?\d){8,}", r"://[^\s/]*@",
    r"[?&](?:token|key|api_key|apikey|password|passwd|pwd|secret|session|sid|auth)="]]

def old_surface(q):
    """The surface form before this change: no Default_Ignorable removal."""
    return collapse(nfkc_lower(q))[0]

def shown(text):
    """The text with invisible and other unprintable characters spelled out."""
    return "".join(c if c.isprintable() else f"\\u{{{ord(c):04x}}}" for c in text)

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("--show", type=int, default=20, help="how many newly withheld examples to print")
    a = ap.parse_args()
    opener = gzip.open if a.log.endswith(".gz") else open
    events = 0
    invalid = {}      # key -> events, for empty or too-long keys
    per_key = {}      # key -> [events, old_withheld, {surface: events}]
    raw_seen = {}     # raw query -> (surface, key, old_withheld): logs repeat queries a lot
    with opener(a.log, "rt", encoding="utf-8", newline="\n") as f:
        for line in f:
            parts = line.rstrip("\n").removesuffix("\r").split("\t")
            if len(parts) < 2:
                continue
            events += 1
            q = parts[1]
            if q not in raw_seen:
                s = surface(q)
                raw_seen[q] = (s, key_of_surface(s), any(p.search(old_surface(q)) for p in OLD_PRIVACY))
            s, k, old = raw_seen[q]
            if not k or len(k.encode()) > 256:
                invalid[k] = invalid.get(k, 0) + 1
                continue
            e = per_key.setdefault(k, [0, False, {}])
            e[0] += 1
            e[1] = e[1] or old
            e[2][s] = e[2].get(s, 0) + 1

    def top_surface(surfaces):
        return min(surfaces, key=lambda s: (-surfaces[s], s.encode()))

    def reason(k, surfaces):
        # First rule (in PRIVACY order) that any of the key's surfaces or the key itself breaks.
        found = [privacy_reason(s, k) for s in surfaces]
        names = [n for n, _ in PRIVACY]
        return min((r for r in found if r), key=names.index, default=None)

    old_n = old_ev = new_n = new_ev = 0
    old_only = 0
    new_by_rule, fresh_by_rule, fresh_ev_by_rule, key_only = {}, {}, {}, 0
    fresh = []
    for k, (n, old, surfaces) in per_key.items():
        r = reason(k, surfaces)
        if old:
            old_n += 1; old_ev += n
        if r:
            new_n += 1; new_ev += n
            new_by_rule[r] = new_by_rule.get(r, 0) + 1
            if all(privacy_reason(s, s) is None for s in surfaces):
                key_only += 1
        if old and not r:
            old_only += 1
        if r and not old:
            fresh_by_rule[r] = fresh_by_rule.get(r, 0) + 1
            fresh_ev_by_rule[r] = fresh_ev_by_rule.get(r, 0) + n
            fresh.append((n, top_surface(surfaces), r))

    def pct(x, y):
        return f"{100 * x / y:.3f}%" if y else "-"

    keys, valid_ev = len(per_key), events - sum(invalid.values())
    print(f"privacy_diff {os.path.basename(a.log)}: {events} events, {keys} distinct keys "
          f"({len(invalid)} empty or over-long keys, {sum(invalid.values())} events, left out)")
    print(f"  old rules withhold: {old_n} keys ({pct(old_n, keys)}), {old_ev} events ({pct(old_ev, valid_ev)})")
    print(f"  new rules withhold: {new_n} keys ({pct(new_n, keys)}), {new_ev} events ({pct(new_ev, valid_ev)})")
    print(f"    matched on the key only (not on any surface form): {key_only} keys")
    print("    by first matching rule: " + ", ".join(f"{n} {new_by_rule[n]}" for n, _ in PRIVACY if n in new_by_rule))
    print(f"  withheld by the old rules but not the new: {old_only} keys")
    fresh_ev = sum(fresh_ev_by_rule.values())
    print(f"  newly withheld (new rules, not old): {len(fresh)} keys ({pct(len(fresh), keys)}), "
          f"{fresh_ev} events ({pct(fresh_ev, valid_ev)})")
    for n, _ in PRIVACY:
        if n in fresh_by_rule:
            print(f"    {n:<14} {fresh_by_rule[n]:>6} keys {fresh_ev_by_rule[n]:>7} events")
    if a.show > 0 and fresh:
        fresh.sort(key=lambda t: (-t[0], t[1].encode()))
        print(f"  the {min(a.show, len(fresh))} most frequent newly withheld (events, first rule, most frequent surface):")
        for n, s, r in fresh[:a.show]:
            print(f"    {n:>5}  {r:<14} {shown(s)}")

if __name__ == "__main__":
    main()
