#!/usr/bin/env bash
# Drives pymongo, mongoengine and the Node driver, unmodified, through mongotap
# against SecantusDB (a one-member replica set, for transactions; then with --auth
# for SCRAM-SHA-256; then with TLS on both sides; then in replica-set mode, where the
# clients discover the set through mongotap), and checks the reports mongotap wrote.
# Part of scripts/test.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# scripts/test.sh has built it with the tests; a plain `cargo build` would build it
# again with other features (the tests' dependencies unify theirs): a minute here.
{ [ -n "${MONGOTAP_BUILT:-}" ] && [ -x target/debug/mongotap ]; } || cargo build --quiet --bin mongotap
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { .venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 400); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; return 1; }
passed=0; failed=0
# Each check gets 3 minutes: a client or upstream that hangs fails its check, with its
# name, instead of holding up the whole run (SecantusDB once spun at full CPU over TLS
# while a Mongoose client waited on it).
run() {
  local name=$1 rc=0; shift
  timeout 180 "$@" || rc=$?
  if [ "$rc" = 0 ]; then passed=$((passed+1)); else
    [ "$rc" = 124 ] && echo "FAILED: $name (no answer in 180 s)" >&2 || echo "FAILED: $name" >&2
    failed=$((failed+1))
  fi
}

start_upstream() { # port, extra args...
  local port=$1; shift
  .venv/bin/secantusd-py --host 127.0.0.1 --port "$port" --log-level WARNING "$@" >>"$work/upstream.log" 2>&1 &
  up_pid=$!; pids+=("$up_pid"); wait_port "$port"
}
start_proxy() { # upstream port, report path
  proxy_port=$(free_port)
  ./target/debug/mongotap proxy --listen "127.0.0.1:$proxy_port" --upstream "127.0.0.1:$1" --report-json "$2" \
    2>>"$work/proxy.log" &
  proxy_pid=$!; pids+=("$proxy_pid"); wait_port "$proxy_port"
}
# TERM, then KILL after 10 s: a wedged upstream must not hold the run either.
stop() {
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
every_client() { # label, uri: pymongo and mongoengine, the Node driver, Mongoose, mongosh
  run "pymongo $1" .venv/bin/python tests/python/smoke.py "$2"
  run "node $1" node tests/node/smoke.js "$2"
  run "mongoose $1" node tests/node/mongoose.js "$2"
  run "mongosh $1" bash -c "tests/node/node_modules/.bin/mongosh --quiet '$2' --eval 'db.getSiblingDB(\"shell\").t.insertOne({a: 1}); print(db.getSiblingDB(\"shell\").t.countDocuments({a: 1}))' | grep -qx '[1-9][0-9]*'"
}

# 1. Clients against a replica-set upstream (directConnection: mongotap is the only address they see).
up=$(free_port); start_upstream "$up" --storage-path :memory:
start_proxy "$up" "$work/clients.json"
uri="mongodb://127.0.0.1:$proxy_port/?directConnection=true"
run pymongo .venv/bin/python tests/python/smoke.py "$uri"
run node node tests/node/smoke.js "$uri"
stop "$proxy_pid"; stop "$up_pid"
run "report of the client run" .venv/bin/python - "$work/clients.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["totals"]
cmds = {(p["command"], p["namespace"]) for p in r["access_patterns"]}
apps = {a for p in r["access_patterns"] for a in p["apps"]}
need = {("insert", "smoke.people"), ("update", "smoke.people"), ("delete", "smoke.people"), ("getMore", "smoke.people"),
        ("aggregate", "smoke.people"), ("insert", "smoke.events"), ("commitTransaction", "admin"),
        ("find", "blog.authors"), ("insert", "nodesmoke.orders"), ("getMore", "nodesmoke.orders")}
assert need <= cmds, need - cmds
assert {"python-smoke", "mongoengine-smoke", "node-smoke"} <= apps, apps
assert t["parse_errors"] == 0 and t["events_dropped"] == 0, t
assert r["traffic"]["unpaired_replies"] == 0, r["traffic"]
print(f"ok   report: {t['operations']} operations, {len(r['access_patterns'])} shapes, apps {sorted(apps)}")
PY

# 2. SCRAM-SHA-256 through the proxy: create a user, restart the upstream with --auth.
data="$work/authdata"; up=$(free_port)
start_upstream "$up" --storage-path "$data" --standalone
.venv/bin/python -c "
import pymongo,sys
c=pymongo.MongoClient('mongodb://127.0.0.1:$up/?directConnection=true')
c.admin.command('createUser','app',pwd='s3cret-PASSWORD',roles=[{'role':'readWrite','db':'app'}])"
stop "$up_pid"; sleep 2
start_upstream "$up" --storage-path "$data" --standalone --auth
start_proxy "$up" "$work/auth.json"
run scram .venv/bin/python tests/python/smoke.py --auth \
  "mongodb://app:s3cret-PASSWORD@127.0.0.1:$proxy_port/?directConnection=true&authSource=admin"
stop "$proxy_pid"; stop "$up_pid"
run "no secret in the auth report" .venv/bin/python - "$work/auth.json" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
r = json.loads(text)
cmds = {p["command"] for p in r["access_patterns"]}
assert cmds & {"saslStart", "saslContinue"}, cmds
assert "s3cret" not in text and "payload" not in text, "a secret reached the report"
print("ok   auth commands counted, no payload or password in the report")
PY

# 3. TLS on both sides: clients -> TLS -> mongotap -> TLS -> SecantusDB serving TLS (a replica set).
tls="$work/tls"; mkdir -p "$tls"
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$tls/server.ext"
(cd "$tls" && openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj /CN=smoke-ca \
  && openssl req $ec -keyout server.key -out server.csr -subj /CN=localhost \
  && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.crt \
  && cat server.crt server.key >server.pem) >/dev/null 2>&1
up=$(free_port); start_upstream "$up" --storage-path :memory: --tls-cert-file "$tls/server.crt" --tls-key-file "$tls/server.key"
proxy_port=$(free_port)
./target/debug/mongotap proxy --listen "127.0.0.1:$proxy_port" --admin off --report-json "$work/tls.json" \
  --upstream "mongodb://localhost:$up/?tls=true&tlsCAFile=$tls/ca.pem" --tls-certificate-key-file "$tls/server.pem" \
  2>>"$work/proxy.log" &
proxy_pid=$!; pids+=("$proxy_pid"); wait_port "$proxy_port"
uri="mongodb://localhost:$proxy_port/?directConnection=true&tls=true&tlsCAFile=$tls/ca.pem"
every_client "over TLS" "$uri"
stop "$proxy_pid"; stop "$up_pid"
run "report of the TLS run" .venv/bin/python - "$work/tls.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
apps = {a for p in r["access_patterns"] for a in p["apps"]}
assert {"python-smoke", "mongoengine-smoke", "node-smoke", "mongoose-smoke"} <= apps, apps
assert any(p["namespace"] == "shell.t" for p in r["access_patterns"]), "mongosh's insert"
assert r["totals"]["parse_errors"] == 0, r["totals"]
print(f"ok   TLS report: {r['totals']['operations']} operations, apps {sorted(apps)}")
PY

# 4. Replica-set mode: clients discover the set (no directConnection) and mongotap renames its
#    members in every hello reply. Every connection the upstream gets must be mongotap's: the
#    kernel's connection table is sampled every 50 ms while the clients run.
up=$(free_port); start_upstream "$up" --storage-path :memory:
proxy_port=$(free_port)
./target/debug/mongotap proxy --listen "127.0.0.1:$proxy_port" --upstream "127.0.0.1:$up" --rewrite-topology \
  --admin off --report-json "$work/rs.json" 2>>"$work/proxy.log" &
proxy_pid=$!; pids+=("$proxy_pid"); wait_port "$proxy_port"
(while :; do ss -tnpH state established "( dport = :$up )" | grep -o 'pid=[0-9]*' || true; sleep 0.05; done) >"$work/owners" &
sampler=$!; pids+=("$sampler")
every_client "discovering the set" "mongodb://127.0.0.1:$proxy_port/?heartbeatFrequencyMS=500"
every_client "naming the set" "mongodb://127.0.0.1:$proxy_port/?replicaSet=secantus&heartbeatFrequencyMS=500"
kill "$sampler"; wait "$sampler" 2>/dev/null || true
stop "$proxy_pid"; stop "$up_pid"
run "every connection to the upstream was mongotap's" bash -c "
  owners=\$(sort -u '$work/owners'); echo \"owners of connections to the upstream in \$(wc -l <'$work/owners') samples: \$owners (mongotap: pid=$proxy_pid)\"
  [ \"\$owners\" = 'pid=$proxy_pid' ]"
run "report of the replica-set run" .venv/bin/python - "$work/rs.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
apps = {a for p in r["access_patterns"] for a in p["apps"]}
assert {"python-smoke", "mongoengine-smoke", "node-smoke", "mongoose-smoke"} <= apps, apps
assert any(p["command"] == "commitTransaction" for p in r["access_patterns"]), "transactions went through"
assert r["totals"]["parse_errors"] == 0, r["totals"]
print(f"ok   replica-set report: {r['totals']['operations']} operations, apps {sorted(apps)}")
PY

echo "smoke: $passed passed, $failed failed"
[ "$failed" = 0 ]
