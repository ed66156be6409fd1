#!/usr/bin/env bash
# Installs everything the tests need, from the package registries only, and only
# what is missing: the SecantusDB upstream and the Python clients in ./.venv, the
# Node driver, Mongoose and mongosh in tests/node, and tshark, haproxy and
# chromium from Debian. `setup.sh python` installs the first part only (the demo's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

log() { printf '[setup] %s\n' "$*" >&2; }

# Python: the upstream server and the Python clients.
req=scripts/requirements.txt
stamp=.venv/.installed
if [ ! -f "$stamp" ] || ! cmp -s "$req" "$stamp"; then
  log "installing SecantusDB and Python clients into .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r "$req"
  cp "$req" "$stamp"
fi

[ "${1:-}" = python ] && { log "ready (Python part)"; exit 0; }

# mongoengine's own tests, from the sdist of the version installed: foreign traffic for the scenarios.
suite=.venv/mongoengine-tests
version=$(sed -n 's/^mongoengine==//p' "$req")
if [ ! -f "$suite/.version" ] || [ "$(cat "$suite/.version")" != "$version" ]; then
  log "fetching mongoengine $version's own tests (its sdist on PyPI)"
  rm -rf "$suite" .venv/sdist
  .venv/bin/pip download -q --disable-pip-version-check --no-binary :all: --no-deps "mongoengine==$version" -d .venv/sdist
  mkdir -p "$suite"
  tar xzf ".venv/sdist/mongoengine-$version.tar.gz" -C "$suite" --strip-components=2 \
    "mongoengine-$version/tests/test_dereference.py" "mongoengine-$version/tests/test_signals.py"
  echo "$version" > "$suite/.version"
fi

# Node: the official driver (smoke test), Mongoose and mongosh (scenarios).
node_missing=0
for m in mongodb mongoose @mongosh/cli-repl; do
  [ -f "tests/node/node_modules/$m/package.json" ] || node_missing=1
done
if command -v npm >/dev/null 2>&1 && [ "$node_missing" = 1 ]; then
  log "installing the Node mongodb driver, Mongoose and mongosh"
  (cd tests/node && npm install --no-audit --no-fund --silent >/dev/null)
fi

# Debian: independent checkers, the benchmark baseline, and a browser for the HTML report's test.
missing=()
command -v tshark >/dev/null 2>&1 || missing+=(tshark)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing ${missing[*]} from Debian"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    log "not root: skipping ${missing[*]} (the tests that need them will say so)"
  fi
fi
log "ready"
