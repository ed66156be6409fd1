#!/usr/bin/env bash
# Proxy overhead: direct vs haproxy vs mongotap, measured side by side in one run.
# ROUNDS=5 SECONDS=4 by default.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo build --release --quiet --bin mongotap -p mongotap -p mongotap-bench --bins
exec .venv/bin/python bench/proxy.py
