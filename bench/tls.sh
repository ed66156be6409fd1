#!/usr/bin/env bash
# TLS on the forwarding path: mongotap vs haproxy, TLS to TLS and plaintext, side by side in one run.
# ROUNDS=5 SECONDS=4 by default.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo build --release --quiet --bin mongotap -p mongotap -p mongotap-bench --bins
exec .venv/bin/python bench/tls.py
