#!/usr/bin/env bash
# Offline analysis speed: a capture of real clients' traffic to SecantusDB made with
# dumpcap (bench/mixed_traffic.py: pymongo, mongoengine, Mongoose, mongosh and the Node
# driver, in turn), then `mongotap analyze` (shapes, table, every detector and section,
# a JSON report) and tshark's MongoDB dissector (decoding only: the opcode of every message) on
# the same file, seven runs each, interleaved, in this one run: the medians, spreads and
# the ratio. Then the same capture tiled to LARGE_MB (its copies later in time, their
# clients at addresses of their own: target/release/tile) and analysed on every core
# and pinned to one (taskset), three runs each, interleaved: the speed-up, and whether
# the two reports agree.
#   ./bench/offline.sh [TARGET_MB]      (default 10; LARGE_MB=1024 by default, 0 skips it)
set -euo pipefail
cd "$(dirname "$0")/.."
target_mb=${1:-10}
[ -x .venv/bin/secantusd-py ] && [ -x tests/node/node_modules/.bin/mongosh ] || ./scripts/setup.sh
command -v tshark >/dev/null || { echo "tshark is missing: ./scripts/setup.sh installs it" >&2; exit 2; }
cargo build --release --quiet -p mongotap -p mongotap-bench --bin mongotap --bin tile
work=$(mktemp -d /tmp/mongotap-offline-bench.XXXXXX)
port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cleanup() {
  [ -n "${cap_pid:-}" ] && kill -INT "$cap_pid" 2>/dev/null || true
  [ -n "${db_pid:-}" ] && kill "$db_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
.venv/bin/secantusd-py --host 127.0.0.1 --port "$port" --storage-path :memory: --standalone --log-level WARNING \
  >"$work/db.log" 2>&1 &
db_pid=$!
dumpcap -q -i lo -f "tcp port $port" -w "$work/cap.pcapng" >"$work/dumpcap.log" 2>&1 &
cap_pid=$!
sleep 1.5
# Real clients of every kind (the examples' pymongo apps, mongoengine, Mongoose, mongosh, the
# Node driver), one of each in turn, until the capture is big enough.
.venv/bin/python bench/mixed_traffic.py "$port" "$work/cap.pcapng" $((target_mb * 1024 * 1024))
sleep 1
kill -INT "$cap_pid"; wait "$cap_pid" 2>/dev/null || true; cap_pid=
size=$(stat -c %s "$work/cap.pcapng")
[ -n "${KEEP_CAPTURE:-}" ] && cp "$work/cap.pcapng" "$KEEP_CAPTURE"

# Wall time of each command, 7 runs each, interleaved (a busy moment of the shared
# machine slows both), the medians (timed in Python: no shell overhead).
read -r m t m_lo m_hi t_lo t_hi < <(.venv/bin/python - "$work" "$port" <<'PY'
import statistics, subprocess, sys, time
work, port = sys.argv[1], sys.argv[2]
commands = [
    ["target/release/mongotap", "analyze", f"{work}/cap.pcapng", "--port", port, "--report-json", f"{work}/r.json"],
    ["tshark", "-r", f"{work}/cap.pcapng", "-d", f"tcp.port=={port},mongo", "-Y", "mongo", "-T", "fields", "-e", "mongo.opcode"],
]
times = [[], []]
for _ in range(7):
    for i, argv in enumerate(commands):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times[i].append(time.perf_counter() - t0)
print(*(statistics.median(x) for x in times), min(times[0]), max(times[0]), min(times[1]), max(times[1]))
PY
)
messages=$(tshark -r "$work/cap.pcapng" -d "tcp.port==$port,mongo" -Y mongo -T fields -e mongo.opcode 2>/dev/null | wc -l)
ops=$(.venv/bin/python -c "import json; print(json.load(open('$work/r.json'))['totals']['operations'])")
printf 'capture: %.1f MB, %s packets with MongoDB messages (tshark), %s operations (mongotap)\n' \
  "$(echo "$size / 1048576" | bc -l)" "$messages" "$ops"
printf 'mongotap analyze (every detector, JSON report): %.3f s (%.3f-%.3f)   tshark (opcode of each message): %.3f s (%.3f-%.3f)\n' \
  "$m" "$m_lo" "$m_hi" "$t" "$t_lo" "$t_hi"
printf 'offline analysis of a pcap: mongotap is %.1fx faster than tshark decoding the same file (target >= 40)\n' "$(echo "$t / $m" | bc -l)"

large_mb=${LARGE_MB:-1024}
[ "$large_mb" -gt 0 ] || exit 0
./target/release/tile "$work/cap.pcapng" "$work/large.pcapng" "$port" "$large_mb"
.venv/bin/python - "$work" "$port" "$(nproc)" <<'PY'
import json, statistics, subprocess, sys, time
work, port, cores = sys.argv[1], sys.argv[2], sys.argv[3]
cap = f"{work}/large.pcapng"
def run(prefix, out):
    t0 = time.perf_counter()
    p = subprocess.run(prefix + ["/usr/bin/time", "-f", "%M", "target/release/mongotap", "analyze", cap, "--port", port,
                        "--report-json", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    return time.perf_counter() - t0, int(p.stderr.strip().splitlines()[-1]) / 1024
every, one = [], []
for _ in range(3):
    every.append(run([], f"{work}/every.json"))
    one.append(run(["taskset", "-c", "0"], f"{work}/one.json"))
def same(a, b):
    # Distinct-value estimates are HyperLogLog counts of values hashed with a key of
    # each process's own: they differ by a few percent from one run to the next.
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "distinct_values"}
        return [strip(x) for x in v] if isinstance(v, list) else v
    return strip(json.load(open(a))) == strip(json.load(open(b)))
r = json.load(open(f"{work}/every.json"))
size = __import__("os").path.getsize(cap) / 2**20
e, o = statistics.median(t for t, _ in every), statistics.median(t for t, _ in one)
fmt = lambda runs: ", ".join(f"{t:.2f}" for t, _ in runs)
print(f"large capture: {size:.0f} MB, {r['totals']['operations']} operations")
print(f"mongotap analyze on {cores} cores: median {e:.2f} s ({fmt(every)}), {size / e:.0f} MB/s, peak RSS {max(m for _, m in every):.1f} MiB")
print(f"mongotap analyze on one core (taskset): median {o:.2f} s ({fmt(one)}), peak RSS {max(m for _, m in one):.1f} MiB")
print(f"speed-up on {cores} cores: {o / e:.2f}x (target >= 1.6); reports identical but for the distinct-value estimates: {same(f'{work}/every.json', f'{work}/one.json')}")
PY
