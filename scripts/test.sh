#!/usr/bin/env bash
# The one test command: installs what is missing, checks formatting and lints,
# then runs every test (Rust unit, property and end-to-end tests against a real
# SecantusDB upstream, the Python and Node client smoke tests, a short soak, and
# the labelled detector scenarios with real drivers and ODMs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/setup.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace --quiet 2>&1
if [ -x scripts/smoke.sh ]; then
  echo "== client smoke tests (pymongo, mongoengine, Node driver)"
  ./scripts/smoke.sh
fi
echo "== soak, 90 s (pymongo threads, connection churn, the Node driver; every byte compared at both ends; RSS and descriptors flat)"
cargo build --quiet --bin mongotap
.venv/bin/python bench/soak.py --minutes 1.5 --warmup 20 --mongotap target/debug/mongotap --out target/soak
echo "== detector scenarios (pymongo, mongoengine, Node driver, Mongoose, mongosh; precision and recall)"
cargo build --quiet --bin mongotap
.venv/bin/python tests/scenarios/run.py --mongotap target/debug/mongotap
