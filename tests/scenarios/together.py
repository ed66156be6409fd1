#!/usr/bin/env python3
"""Every labelled scenario through ONE mongotap, round after round: traffic nobody planted for any one finding.

    .venv/bin/python tests/scenarios/together.py [--mongotap target/release/mongotap] [--rounds 2]
        [--only NAME,...] [--keep DIR] [--scored KIND,...]

run.py gives each scenario a fresh mongotap, so a finding can only come from the traffic planted for it.
Here one SecantusDB and one `mongotap proxy` see every scenario's client one after another (each round on
databases of their own, `<name>_r<round>`; clients that use fixed databases, like mongoengine's own tests,
share them across rounds), and the one final report is scored against all the scenarios' expected findings
together: a finding no scenario expects on its database is a false positive, an expected one missing a
false negative. What it catches that run.py cannot: state that builds up across runs and apps (three runs
of mongoengine's tests in one capture made a full_document_rewrite finding), findings that cross
databases, and positives drowned by other traffic. Scenarios that need their own proxy flags
(`show_values`) are left out. Exits 1 on any false positive, false negative or client failure.
Standard library only; takes a few minutes per round.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from run import (CLIENT_TIMEOUT, DEFAULT_SCORED, HERE, ROOT, ScenarioError, cleanup, describe, forget, free_port,
                 score, start, stop, substitute, tail, tools, wait_listening)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mongotap", type=Path, default=ROOT / "target" / "release" / "mongotap")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--keep", type=Path, help="keep the report and logs in this directory")
    parser.add_argument("--scored", default=DEFAULT_SCORED)
    args = parser.parse_args()
    mongotap = args.mongotap.resolve()
    if not mongotap.exists():
        sys.exit(f"no mongotap binary at {mongotap} (build it, or pass --mongotap)")
    scored = {k.strip() for k in args.scored.split(",") if k.strip()}
    scenarios = [s for s in json.loads((HERE / "scenarios.json").read_text()) if not s.get("show_values")]
    if args.only:
        wanted = {n.strip() for n in args.only.split(",") if n.strip()}
        unknown = sorted(wanted - {s["name"] for s in scenarios})
        if unknown:
            sys.exit(f"unknown scenario(s) (or ones that need their own proxy flags): {', '.join(unknown)}")
        scenarios = [s for s in scenarios if s["name"] in wanted]
    secantusd = ROOT / ".venv" / "bin" / "secantusd-py"
    if not secantusd.exists():
        sys.exit(f"no {secantusd}: run scripts/setup.sh first")
    workdir = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="mongotap-together-"))
    workdir.mkdir(parents=True, exist_ok=True)
    report = workdir / "together.report.json"
    started = time.monotonic()
    try:
        db_port, proxy_port = free_port(), free_port()
        db = start([str(secantusd), "--host", "127.0.0.1", "--port", str(db_port),
                    "--storage-path", ":memory:", "--standalone", "--log-level", "WARNING"],
                   workdir / "secantusdb.log", cwd=ROOT)
        wait_listening(db_port, db, "SecantusDB", timeout=30)
        # Look like `mongos` from the start, whose config.collections always holds the sessions
        # collection: mongotap asks once whether the upstream is a cluster, and the shard-key
        # scenarios write their collections' entries only when their turn comes.
        seed = ("import pymongo, sys; pymongo.MongoClient(sys.argv[1]).config.collections.replace_one("
                "{'_id': 'config.system.sessions'}, {'key': {'_id': 1}, 'unique': False}, upsert=True)")
        subprocess.run([tools()["python"], "-c", seed, f"mongodb://127.0.0.1:{db_port}/?directConnection=true"],
                       check=True, timeout=60)
        proxy = start([str(mongotap), "proxy", "--listen", f"127.0.0.1:{proxy_port}", "--upstream",
                       f"127.0.0.1:{db_port}", "--admin", "off", "--report-json", str(report)],
                      workdir / "mongotap.log", cwd=ROOT)
        wait_listening(proxy_port, proxy, "mongotap")
        env = dict(os.environ, MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING="1")
        expected, failed, runs = [], [], Counter()
        for rnd in range(args.rounds):
            for s in scenarios:
                name, dbname = s["name"], f"{s['name']}_r{rnd}"
                mapping = {"uri": f"mongodb://127.0.0.1:{proxy_port}/?directConnection=true&appName={name}",
                           "upstream": f"mongodb://127.0.0.1:{db_port}/?directConnection=true&appName={name}-direct",
                           "db": dbname, **tools()}
                log = workdir / f"{dbname}.client.log"
                client = start(substitute(s["argv"], mapping), log, cwd=ROOT, env=env)
                try:
                    code = client.wait(CLIENT_TIMEOUT)
                except subprocess.TimeoutExpired:
                    code = "timeout"
                finally:
                    stop(client, signal.SIGKILL, grace=5.0)
                    forget(client)
                if code != 0:
                    failed.append((dbname, code, tail(log, 5)))
                    continue
                runs[s["client"]] += 1
                expected += [dict(e, _scenario=dbname) for e in substitute(s["expect"], {"db": dbname})]
        code, in_time = stop(proxy, grace=60.0)
        forget(proxy)
        if code != 0 or not in_time:
            raise ScenarioError(f"mongotap exited with {code} (in time: {in_time}):\n{tail(workdir / 'mongotap.log')}")
        findings = json.loads(report.read_text())["findings"]
    except ScenarioError as e:
        sys.exit(f"ERROR {e}\n(logs in {workdir})")
    finally:
        cleanup()

    tp, fp, fn = score(expected, findings, scored)
    ratio = lambda a, b: f"{a / b:.3f}" if b else "n/a"  # noqa: E731
    print(f"{len(scenarios)} scenarios x {args.rounds} round(s) through one mongotap in "
          f"{time.monotonic() - started:.0f} s ({', '.join(f'{c} {n}' for c, n in sorted(runs.items()))} runs); "
          f"{len(failed)} failed to run; TP {len(tp)}  FP {len(fp)}  FN {len(fn)}  "
          f"precision {ratio(len(tp), len(tp) + len(fp))}  recall {ratio(len(tp), len(tp) + len(fn))}")
    for dbname, code, out in failed:
        print(f"  ERROR {dbname}: exited with {code}\n{out}")
    for item in fn:
        print(f"  FN {item['_scenario']}: {describe({k: v for k, v in item.items() if k != '_scenario'})}")
    for f in fp:
        print(f"  FP {f['kind']} on {f['namespace']} ({f.get('severity')}): {f.get('recommendation', '')[:200]}")
    if args.keep:
        print(f"report and logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed or fp or fn else 0


if __name__ == "__main__":
    sys.exit(main())
