#!/usr/bin/env bash
# Soak test (issue #16): pymongo threads, connection churn and the Node driver through mongotap for
# --minutes (default 3; 30 or more for the note), every byte compared at both ends, RSS and open
# descriptors sampled every --sample-every seconds. Arguments go to bench/soak.py (--help lists them).
# Exit 0 on PASS, 1 on FAIL. Builds the release binary only if it is missing (pass --mongotap to use another).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ] || [ ! -x .venv/bin/secantusd-py ]; then
  ./scripts/setup.sh
fi
case " $* " in
  *" --mongotap"*) ;;  # a binary is given
  *) [ -x target/release/mongotap ] || cargo build --release --quiet -p mongotap ;;
esac
exec .venv/bin/python bench/soak.py "$@"
