#!/usr/bin/env bash
# The demo: a real upstream (SecantusDB), mongotap in front of it, the orders
# example workload through mongotap, and the reports in ./out.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/setup.sh
echo "[demo] building (release)" >&2
cargo build --release --quiet --bin mongotap --example orders

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p out
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
wait_port() { for _ in $(seq 200); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; return 1; }
wait_port "$up_port"

proxy_port=$(free_port)
./target/release/mongotap proxy --listen "127.0.0.1:$proxy_port" --upstream "127.0.0.1:$up_port" \
  --report-json out/report.json --report-md out/report.md --report-html out/report.html &
proxy_pid=$!
wait_port "$proxy_port"
echo "[demo] upstream on $up_port, mongotap on $proxy_port; running examples/orders.rs through mongotap" >&2

./target/release/examples/orders "mongodb://127.0.0.1:$proxy_port/?directConnection=true&appName=orders-service"

kill -TERM "$proxy_pid"
wait "$proxy_pid"
proxy_pid=
echo
echo "[demo] reports: out/report.md, out/report.json, out/report.html"
sed -n '/^## Access patterns/,/^## Findings/{/^## Findings/!p}' out/report.md
echo "[demo] the findings, with their evidence and fixes, are in out/report.md (## Findings) and out/report.html"
