#!/usr/bin/env bash
# The one test command: installs what is missing, checks formatting and lints,
# then runs every test (Rust unit, property and end-to-end tests against a real
# SecantusDB upstream, the Python and Node client smoke tests, a short soak, and
# the labelled detector scenarios with real drivers and ODMs). Prints each stage's
# time at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
times=()
stage() { # name, command...
  local name=$1 start=$SECONDS; shift
  echo "== $name"
  "$@"
  times+=("$(printf '%5d s  %s' $((SECONDS - start)) "$name")")
}
report() {
  echo "== stage times"
  printf '%s\n' "${times[@]}"
  printf '%5d s  total\n' "$SECONDS"
}
# Jobs run beside others each lead their own process group (setsid), so that an
# early exit stops them with everything they started (pip, npm, servers).
stop_group() { [ -n "${1:-}" ] && kill -- "-$1" 2>/dev/null; true; }
trap 'report; stop_group "${setup_pid:-}"; stop_group "${smoke_pid:-}"; stop_group "${soak_pid:-}"' EXIT
# The set-up downloads (PyPI, npm, Debian) while the compiler has the cores: it runs
# beside formatting, lints and the test build, and is waited for before the first test.
mkdir -p target
setsid ./scripts/setup.sh >target/setup.log 2>&1 &
setup_pid=$!
setup_done() {
  local code=0
  wait "$setup_pid" || code=$?
  setup_pid=
  cat target/setup.log
  return "$code"
}
stage "cargo fmt --check" cargo fmt --all -- --check
stage "cargo clippy" cargo clippy --workspace --all-targets --quiet -- -D warnings
# nextest runs the test binaries side by side (cargo test runs them one after the
# other: the idle test's 45 s alone would wait for nothing); doc tests apart.
nextest=0
cargo nextest --version >/dev/null 2>&1 && nextest=1
if [ "$nextest" = 1 ]; then
  stage "build the tests" cargo nextest run --workspace --no-run --cargo-quiet
else
  stage "build the tests" cargo test --workspace --no-run --quiet
fi
stage "setup (installs what is missing; ran beside the build, its log above)" setup_done
# The build of the tests built target/debug/mongotap too, with the features the
# tests' dependencies unify: every stage below runs that one. (`cargo build --bin
# mongotap` would build a second one with the binary's own features: 50 s.)
export MONGOTAP_BUILT=1
# The tests that measure the process itself (its memory, its descriptors) run one
# at a time, apart from the other Rust tests, and the short soak runs beside them:
# it waits on its clients more than it computes, and measures its own mongotap
# only. The long soak is a benchmark (bench/soak.sh). These are the four binaries
# of .config/nextest.toml's override: change both together.
alone='binary(churn) | binary(leaks) | binary(backpressure) | binary(faults)'
soak=(.venv/bin/python bench/soak.py --minutes 0.75 --warmup 15 --mongotap target/debug/mongotap --out target/soak)
alone_and_soak() {
  local code=0
  setsid "${soak[@]}" >target/soak.log 2>&1 &
  soak_pid=$!
  cargo nextest run --workspace --no-fail-fast --status-level fail --final-status-level slow \
    --test-threads 1 -E "$alone" || code=$?
  echo "== soak, 45 s (pymongo threads, connection churn, the Node driver; every byte compared at both ends; RSS and descriptors flat), ran beside them"
  wait "$soak_pid" || code=$?
  soak_pid=
  cat target/soak.log
  return "$code"
}
if [ "$nextest" = 1 ]; then
  stage "cargo nextest (every Rust test but those alone below, binaries side by side) and doc tests" \
    bash -c "cargo nextest run --workspace --no-fail-fast --status-level fail --final-status-level slow -E 'not ($alone)' && cargo test --doc --workspace --quiet"
  stage "the Rust tests that measure the process, one at a time, and a short soak beside them" alone_and_soak
else
  stage "cargo test" cargo test --workspace --quiet
  stage "soak, 45 s" "${soak[@]}"
fi
stage "docs: every relative link resolves, every finding kind has its page" \
  python3 docs/check_links.py target/debug/mongotap
# The client smoke tests and the labelled scenarios each start their own servers on
# free ports, and both wait on slow clients more than they compute: side by side.
clients_and_scenarios() {
  local code=0
  setsid ./scripts/smoke.sh >target/smoke.log 2>&1 &
  smoke_pid=$!
  .venv/bin/python tests/scenarios/run.py --mongotap target/debug/mongotap || code=$?
  echo "== client smoke tests (pymongo, mongoengine, Node driver, Mongoose, mongosh), ran beside the scenarios"
  wait "$smoke_pid" || code=$?
  smoke_pid=
  cat target/smoke.log
  return "$code"
}
stage "detector scenarios (pymongo, mongoengine, Node driver, Mongoose, mongosh; precision and recall) and client smoke tests, side by side" \
  clients_and_scenarios
