#!/usr/bin/env bash
# A real full disk: builds into a small tmpfs until it fills, and checks that the failing build
# says so clearly and leaves the previous generation (state and snapshot) byte for byte; then
# that a follower whose cache is on that disk refuses a partition it cannot hold before
# fetching any of it.
# Needs root to mount. Where it cannot mount it says so and fails, unless told that skipping is
# fine (ALLOW_SKIP=1): a check that passes by not running proves nothing. tests/it/crash.rs
# covers the same on any machine with a file-size limit instead of a mount.
#
#   scripts/disk_full_check.sh target/debug/typeahead
#   ALLOW_SKIP=1 scripts/disk_full_check.sh target/debug/typeahead   # not root: skip, exit 0
set -euo pipefail
bin=$(realpath "$1")
work=$(mktemp -d)
mnt="$work/disk"
trap 'umount "$mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir "$mnt"
if ! command -v python3 >/dev/null || ! mount -t tmpfs -o size=3m tmpfs "$mnt" 2>/dev/null; then
  # Not root, no CAP_SYS_ADMIN or no python3: tests/it/crash.rs still covers a full disk.
  echo "disk-full check: SKIPPED (cannot mount a tmpfs here, or no python3)" >&2
  [ "${ALLOW_SKIP:-}" = 1 ] && exit 0
  echo "disk-full check: not run; set ALLOW_SKIP=1 to accept that" >&2
  exit 1
fi

# Two hours of logs: a small first one that fits, then a large one that cannot.
python3 - "$work" <<'PY'
import random, sys
random.seed(7)
words = [f"w{i}" for i in range(5000)]
def log(path, hour, lines):
    with open(path, "w") as f:
        for i in range(lines):
            q = " ".join(random.choice(words) for _ in range(random.randint(1, 4)))
            f.write(f"2024-01-01 {hour:02d}:{i % 60:02d}:00\t{q}\n")
log(f"{sys.argv[1]}/h00.tsv", 0, 2000)
log(f"{sys.argv[1]}/h01.tsv", 1, 300000)
PY

"$bin" build --input "$work/h00.tsv" --state "$mnt/state" --out "$mnt/live.snap" >/dev/null
before=$(cd "$mnt" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
if "$bin" build --input "$work/h01.tsv" --state "$mnt/state" --out "$mnt/live.snap" \
    >/dev/null 2>"$work/err"; then
  echo "disk-full check: the build succeeded on a full disk" >&2
  exit 1
fi
grep -q "cannot write $mnt/.*: No space left on device" "$work/err" || {
  echo "disk-full check: unclear error:" >&2
  cat "$work/err" >&2
  exit 1
}
after=$(cd "$mnt" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
[ "$before" = "$after" ] || {
  echo "disk-full check: the failed build changed files:" >&2
  diff <(echo "$before") <(echo "$after") >&2
  exit 1
}
"$bin" query --snapshot "$mnt/live.snap" w1 >/dev/null
echo "disk-full check: the build passed ($(head -c 200 "$work/err"))"

# A follower whose cache disk cannot hold its partition is refused before it fetches a byte
# (the space is checked, then allocated, rather than found missing gigabytes in), says how
# much it needed, and leaves nothing in the cache but its lock.
"$bin" build --input "$work/h01.tsv" --partitions 1 --out "$work/bucket" >/dev/null
mkdir "$mnt/cache"
if timeout 60 "$bin" serve --manifest "$work/bucket/manifest.json" --partition 0 \
    --cache-dir "$mnt/cache" --listen 127.0.0.1:0 >/dev/null 2>"$work/serve-err"; then
  echo "disk-full check: the follower started on a cache disk too small" >&2
  exit 1
fi
grep -q "No space left on device: [0-9]* bytes needed, [0-9]* available" "$work/serve-err" || {
  echo "disk-full check: the follower's error is not the space check's:" >&2
  cat "$work/serve-err" >&2
  exit 1
}
left=$(find "$mnt/cache" -type f ! -name '*.lock')
[ -z "$left" ] || { echo "disk-full check: the follower left $left" >&2; exit 1; }
said=$(grep -o "No space left on device: .*" "$work/serve-err" | head -c 200)
echo "disk-full check: the follower passed ($said)"
