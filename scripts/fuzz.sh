#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo-fuzz (libFuzzer; needs a nightly toolchain and
# `cargo install cargo-fuzz`). Runs every target (or those named) for SECONDS each, one job,
# then minimizes each corpus so what is committed under fuzz/corpus/ stays small. Exits 1 if
# any target crashed (the input is in fuzz/artifacts/<target>/; copy it to
# fuzz/regressions/<target>/ and run `cargo test --test fuzz` to read the panic).
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
    list=$(cargo +nightly fuzz list)
    mapfile -t targets <<<"$list"
fi
failed=()
for t in "${targets[@]}"; do
    case $t in snapshot_*) max_len=65536 ;; *) max_len=4096 ;; esac
    echo "== $t: ${seconds}s"
    set +e
    cargo +nightly fuzz run -O "$t" -- -max_total_time="$seconds" -max_len="$max_len" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"/tmp/fuzz-$t.log" 2>&1
    status=$?
    set -e
    grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss|==[0-9]+== ERROR|SUMMARY|Test unit written)' \
        "/tmp/fuzz-$t.log" || true
    if [ "$status" -ne 0 ]; then
        failed+=("$t")
        echo "   FAILED (exit $status); full output: /tmp/fuzz-$t.log"
    fi
    cargo +nightly fuzz cmin -O "$t" -- -max_len="$max_len" >"/tmp/fuzz-cmin-$t.log" 2>&1 ||
        echo "   corpus minimization failed; see /tmp/fuzz-cmin-$t.log"
    echo "   corpus: $(find "fuzz/corpus/$t" -type f | wc -l) inputs"
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "crashed: ${failed[*]}"
    exit 1
fi
