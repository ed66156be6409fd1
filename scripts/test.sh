#!/usr/bin/env bash
# The one test command: installs what is missing, checks formatting and lints,
# then runs every test (Rust unit, property and end-to-end tests against a real
# SecantusDB upstream, and the Python and Node client smoke tests).
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
