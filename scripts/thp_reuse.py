#!/usr/bin/env python3
"""Do a replaced snapshot's huge pages come back inside requests?

Usage: thp_reuse.py BINARY SNAPSHOT [--seconds 10] [--settle 6]

A snapshot's buffers ask for transparent huge pages; the allocator keeps what a replaced
snapshot frees and hands it out again (core/src/huge.rs). This starts `BINARY serve` on a copy
of SNAPSHOT (answer cache of 2M entries), renames a second copy over it (the server reads it,
finds the same version and frees it again), waits SETTLE seconds, then runs `wrk -t1 -c16`
for SECONDS with `k=50` requests on random prefixes of 1-9 letters, which fill the answer
cache with new allocations. It reports, for the server process: the size of its mappings that
ask for huge pages (`hg` in /proc/PID/smaps) once ready and after the reload, and of those told
not to (`nh`); its `AnonHugePages` once ready (the snapshot's own), before and after the load
(khugepaged may collapse a page or two of the live snapshot's meanwhile, off the request path);
and the system's `thp_fault_alloc` during the load (system-wide: other processes count too).
Exits 1 when more memory asks for huge pages after the reload than once ready: the freed copy's
range still asks, and the load then faults huge pages there (at 1M completions, the server
before the fix: 9-13 faults and 10-26 MB of huge pages outside any snapshot in 5 s; at 10M,
88-101 faults and 146-165 MB in 10 s; the fixed one: none). Use a snapshot of
tens of megabytes or more (`cargo bench --bench scale -- --keys 1000000 --build-only
--keep-snapshot S` makes a 30 MB one; the 10M one is 278 MB); a few megabytes hold no whole
2 MiB page to reuse. Linux only; traffic to 127.0.0.1 only; every phase is bounded in time.
"""
import argparse, os, re, shutil, subprocess, sys, tempfile, time, urllib.request

LUA = """
local chars = "abcdefghijklmnopqrstuvwxyz"
request = function()
  local s = ""
  for i = 1, math.random(1, 9) do
    local j = math.random(1, 26)
    s = s .. chars:sub(j, j)
  end
  return wrk.format("GET", "/v1/suggest?k=50&q=" .. s)
end
"""


def anon_huge_kb(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return int(re.search(r"^AnonHugePages:\s+(\d+)", f.read(), re.M).group(1))


def advised_kb(pid):
    """Sizes of the mappings flagged `hg` and `nh`, in kB."""
    hg = nh = size = 0
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if line.startswith("Size:"):
                size = int(line.split()[1])
            elif line.startswith("VmFlags:"):
                flags = line.split()[1:]
                hg += size if "hg" in flags else 0
                nh += size if "nh" in flags else 0
    return hg, nh


def thp_faults():
    with open("/proc/vmstat") as f:
        return int(re.search(r"^thp_fault_alloc (\d+)", f.read(), re.M).group(1))


def wait_ready(base, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("the server did not get ready")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("snapshot")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--settle", type=float, default=6)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        current, spare = os.path.join(tmp, "cur.snap"), os.path.join(tmp, "next.snap")
        shutil.copyfile(args.snapshot, current)
        shutil.copyfile(args.snapshot, spare)
        server = subprocess.Popen(
            [args.binary, "serve", "--snapshot", current, "--listen", "127.0.0.1:0",
             "--cache-entries", "2000000"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = server.stdout.readline()
            addr = re.search(r"listening on (\S+)", line)
            if not addr:
                sys.exit(f"unexpected first line from the server: {line!r}")
            base = "http://" + addr.group(1)
            wait_ready(base)
            initial, (hg_ready, _) = anon_huge_kb(server.pid), advised_kb(server.pid)
            os.rename(spare, current)
            time.sleep(args.settle)
            hg, nh = advised_kb(server.pid)
            print(f"mappings asking for huge pages: {hg_ready} kB once ready, {hg} kB after the "
                  f"reload (told not to: {nh} kB)")
            lua = os.path.join(tmp, "k50.lua")
            with open(lua, "w") as f:
                f.write(LUA)
            before, faults = anon_huge_kb(server.pid), thp_faults()
            out = subprocess.run(
                ["wrk", "-t1", "-c16", f"-d{args.seconds}s", "-s", lua, base],
                capture_output=True, text=True, timeout=args.seconds + 30).stdout
            after, faults = anon_huge_kb(server.pid), thp_faults() - faults
            rate = re.search(r"Requests/sec:\s+(\S+)", out)
            print(f"load: {rate.group(1) if rate else '?'} req/s for {args.seconds} s")
            print(f"AnonHugePages: {initial} kB once ready, {before} kB before the load, "
                  f"{after} kB after it; huge-page faults in the system during the load: {faults}")
        finally:
            server.terminate()
            server.wait(timeout=30)
    if hg > hg_ready:
        print("FAIL: the freed snapshot's memory still asks for huge pages")
        sys.exit(1)
    if faults > 0:
        print("warning: huge pages were faulted during the load (by this server or another "
              "process)")


if __name__ == "__main__":
    main()
