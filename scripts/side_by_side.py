#!/usr/bin/env python3
"""Puts a round of the prefix-lookup side-by-side together (issue 16, target 1).

Our half comes from `cargo bench --bench scale -- --snapshot S --side-by-side DIR --round N`
(see benches/scale/side_by_side.rs: it writes DIR/entries.tsv, DIR/queries.txt and
DIR/classes.txt, then DIR/ours.N.times and DIR/ours.N.answers). The other index is built from
DIR/entries.tsv (line i = document id i, best first) and times one top-10 lookup per line of
DIR/queries.txt, writing OTHER_TIMES (nanoseconds, one per line) and OTHER_ANSWERS (the
completions best first, tab-separated). Nothing of the other index lives in this repository.

    scripts/side_by_side.py DIR N OTHER_TIMES OTHER_ANSWERS

Prints per length class the medians and p99s of both and their ratios (ours / other), and how
many answers are identical; exits 1 if any differs. The warm-up lines are left out.
"""

import sys

WARM_UP = 2000
CLASSES = ["1", "2", "4", "8", "whole"]


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][WARM_UP:]


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] / 1000.0


def main(argv):
    if len(argv) != 5:
        sys.exit(__doc__)
    directory, round_, other_times, other_answers = argv[1:]
    classes = lines(f"{directory}/classes.txt")
    queries = lines(f"{directory}/queries.txt")
    ours = [int(t) for t in lines(f"{directory}/ours.{round_}.times")]
    other = [int(t) for t in lines(other_times)]
    if not len(classes) == len(ours) == len(other):
        sys.exit("the files do not hold one line per query")
    print(f"{'class':<7} {'n':>6}  {'p50 ours':>8} {'other':>8} {'ratio':>5}"
          f"  {'p99 ours':>8} {'other':>8} {'ratio':>5}   (us)")
    for name in CLASSES + ["all"]:
        at = [i for i, c in enumerate(classes) if name in (c, "all")]
        if not at:
            continue
        a, b = [ours[i] for i in at], [other[i] for i in at]
        p50 = (percentile(a, 0.5), percentile(b, 0.5))
        p99 = (percentile(a, 0.99), percentile(b, 0.99))
        print(f"{name:<7} {len(at):>6}  {p50[0]:>8.2f} {p50[1]:>8.2f} {p50[0] / p50[1]:>5.2f}"
              f"  {p99[0]:>8.2f} {p99[1]:>8.2f} {p99[0] / p99[1]:>5.2f}")
    mine, theirs = lines(f"{directory}/ours.{round_}.answers"), lines(other_answers)
    differ = [i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y]
    differ += list(range(min(len(mine), len(theirs)), max(len(mine), len(theirs))))
    print(f"answers identical: {len(mine) - len(differ)} of {len(mine)}")
    for i in differ[:5]:
        print(f"  {queries[i]!r}\n    ours  {mine[i] if i < len(mine) else None!r}"
              f"\n    other {theirs[i] if i < len(theirs) else None!r}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
