#!/usr/bin/env bash
# The demo: a real upstream (SecantusDB), mongotap in front of it, the bad version of
# every example in examples/ through it, then the fixed versions through a fresh
# mongotap, and a before/after summary. Reports in ./out/before and ./out/after.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/setup.sh python
t0=$SECONDS
# The debug build: half the release build's time from a cold cache (96 s against 203 s
# on two cores), shared with ./scripts/test.sh, and the workloads run at the
# database's pace either way.
echo "[demo] building mongotap (about 100 s the first time, seconds once cached)" >&2
cargo build --quiet --bin mongotap
echo "[demo] build: $((SECONDS - t0)) s" >&2

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 400); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; return 1; }
rm -rf out/before out/after
mkdir -p out/before out/after
up_port=$(free_port)
.venv/bin/secantusd-py --host 127.0.0.1 --port "$up_port" --storage-path :memory: --standalone --log-level WARNING \
  > out/upstream.log 2>&1 &
up_pid=$!
proxy_pid=
cleanup() {
  [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
  kill "$up_pid" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
wait_port "$up_port"

examples=(order_page blog reviews order_updates sensors order_history display_name contacts totals page_views sessions search books catalog)
run() { # version (bad|fixed), report directory
  local proxy_port; proxy_port=$(free_port)
  ./target/debug/mongotap proxy --listen "127.0.0.1:$proxy_port" --upstream "127.0.0.1:$up_port" --admin off \
    --report-json "$2/report.json" --report-md "$2/report.md" --report-html "$2/report.html" 2>"$2/mongotap.log" &
  proxy_pid=$!
  wait_port "$proxy_port"
  local i=0
  for e in "${examples[@]}"; do
    i=$((i + 1))
    printf '[demo] %s %d/%d %-14s ' "$1" "$i" "${#examples[@]}" "$e" >&2
    .venv/bin/python "examples/$e/app.py" "mongodb://127.0.0.1:$proxy_port/?directConnection=true" "$e" "$1" >&2
  done
  kill -TERM "$proxy_pid"; wait "$proxy_pid"; proxy_pid=
}
t1=$SECONDS
echo "[demo] upstream on $up_port; the bad versions through mongotap" >&2
run bad out/before
echo "[demo] the fixed versions through a fresh mongotap" >&2
run fixed out/after
echo
echo "What mongotap found (out/before/report.md has each finding's evidence and fix):"
sed -n '/^## Findings/,/^## /{/^## [^F]/!p}' out/before/report.md | grep -E '^### ' | sed 's/^### /  /' || true
echo
.venv/bin/python examples/summary.py out/before/report.json out/after/report.json
echo
echo "[demo] workloads: $((SECONDS - t1)) s. Reports: out/before/report.{md,html,json} (bad), out/after/report.{md,html,json} (fixed)"
