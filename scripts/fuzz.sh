#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo-fuzz (libFuzzer; needs a nightly toolchain and
# `cargo install cargo-fuzz`). Runs every target (or those named) for SECONDS each, one job,
# then minimizes each corpus so what is committed under fuzz/corpus/ stays small.
# The same checks run on stable, bounded, in `cargo test --test fuzz` (see tests/fuzz.rs).
#
#   scripts/fuzz.sh 300                     # every target, 5 minutes each
#   scripts/fuzz.sh 60 logline normalize    # two targets
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
for t in "${targets[@]}"; do
    case $t in snapshot_*) max_len=65536 ;; *) max_len=4096 ;; esac
    echo "== $t: ${seconds}s"
    cargo +nightly fuzz run -O "$t" -- -max_total_time="$seconds" -max_len="$max_len" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>&1 |
        grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss|==|SUMMARY|artifact_prefix|Test unit written)' || true
    cargo +nightly fuzz cmin -O "$t" -- -max_len="$max_len" >/dev/null 2>&1
    echo "   corpus: $(ls "fuzz/corpus/$t" | wc -l) inputs"
done
