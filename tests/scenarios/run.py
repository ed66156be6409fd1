#!/usr/bin/env python3
"""Runs the labelled end-to-end scenarios through mongotap and scores its findings.

    .venv/bin/python tests/scenarios/run.py [--mongotap target/debug/mongotap] [--only NAME,...]
        [--keep DIR] [--scored n_plus_one,redundant_query,lookup_chain] [--jobs 3] [--verbose]

Starts one SecantusDB (in memory) on a free port per job (--jobs scenarios run side by side, each
job with its own upstream, so one slow server never times another job's scenario); then, for each
scenario of scenarios.json, a fresh
`mongotap proxy --admin off --report-json` on a free port, runs the scenario's client through it
(appName=<scenario name>, database <scenario name>), stops mongotap with SIGTERM and scores its
final report against the scenario's expected findings:

  - only findings whose kind is in --scored count;
  - a finding matches an expected item when kind and namespace are equal and, where the expected
    item gives them, child_namespace, link (parent_field, child_field), lookups and field are equal;
  - matched = TP, expected but not reported = FN, reported but not expected = FP.

Exits 1 if any scenario has an FP or FN or failed to run, 0 otherwise. Standard library only.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_SCORED = ("n_plus_one,redundant_query,lookup_chain,full_document_rewrite,unbounded_array_growth,inefficient_regex,ttl_candidate,hot_document,schema_drift,computed_candidate,outlier_candidate,attribute_candidate,"
                  "large_document,fan_out_update,bucket_candidate,over_fetch,missing_index,redundant_index,unused_index,"
                  "unknown_field,embed_candidate,extended_reference_candidate,bad_shard_key")
# A planted operation's count must be within this share of the count mongotap reports.
OPERATION_TOLERANCE = 0.05
CLIENT_TIMEOUT = 120

started = []  # every process this runner started, for cleanup
started_lock = threading.Lock()


class ScenarioError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ScenarioError(f"{what} exited with code {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise ScenarioError(f"{what} is not listening on port {port} after {timeout:.0f} s")


def start(argv, log_path, **kw):
    log = open(log_path, "wb")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, **kw)
    log.close()
    with started_lock:
        started.append(proc)
    return proc


def forget(proc):
    with started_lock:
        if proc in started:  # cleanup() may have stopped it already (an interrupt)
            started.remove(proc)


def stop(proc, sig=signal.SIGTERM, grace=20.0):
    """Signals the process group this runner created for proc, waits, kills it if needed.
    Returns the exit code and whether it exited within the grace period."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            return proc.returncode, False
    # the group may still hold children of proc
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return proc.returncode, True


def cleanup():
    with started_lock:
        procs = list(reversed(started))
        started.clear()
    for proc in procs:
        stop(proc, grace=5.0)


def tail(path, lines=40):
    try:
        text = Path(path).read_text(errors="replace").rstrip("\n").splitlines()
    except OSError:
        return "    (no output)"
    cut = text[-lines:]
    prefix = [f"    ... ({len(text) - len(cut)} earlier lines in {path})"] if len(text) > len(cut) else []
    return "\n".join(prefix + ["    " + line for line in cut]) or "    (no output)"


def tools():
    venv_python = ROOT / ".venv" / "bin" / "python"
    return {
        "python": str(venv_python if venv_python.exists() else Path(sys.executable)),
        "node": shutil.which("node") or "node",
        "mongosh": str(ROOT / "tests" / "node" / "node_modules" / ".bin" / "mongosh"),
    }


def substitute(value, mapping):
    if isinstance(value, str):
        for key, repl in mapping.items():
            value = value.replace("{" + key + "}", repl)
        return value
    if isinstance(value, list):
        return [substitute(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, mapping) for k, v in value.items()}
    return value


def matches(expected, finding):
    if finding.get("kind") != expected["kind"] or finding.get("namespace") != expected["namespace"]:
        return False
    if "child_namespace" in expected and finding.get("child_namespace") != expected["child_namespace"]:
        return False
    if "link" in expected:
        link = finding.get("link")
        if not isinstance(link, dict) or any(link.get(k) != v for k, v in expected["link"].items()):
            return False
    for key in ("lookups", "field", "severity"):
        if key in expected and finding.get(key) != expected[key]:
            return False
    return True


def score(expect, findings, scored):
    """(tp, fp, fn) as lists of expected items / findings."""
    pool = [f for f in findings if f.get("kind") in scored]
    tp, fn = [], []
    for item in expect:
        hit = next((f for f in pool if matches(item, f)), None)
        if hit is None:
            fn.append(item)
        else:
            pool.remove(hit)
            tp.append(item)
    return tp, pool, fn


def steps_of(operation):
    """An operation's steps as "collection command" (the database left out)."""
    return [f"{st['namespace'].split('.', 1)[-1]} {st['command']}" for st in operation.get("steps", [])]


def score_workload(scenario, report, db):
    """(tp, fp, fn) for the scenario's planted operations and relationship verdicts.

    - an expected operation {"steps": ["orders find", ...], "count": N} is a TP when an operation with those
      steps (in order) was reported with a count within OPERATION_TOLERANCE of N, else an FN;
    - an expected relationship {"parent", "child", "verdict"} (or "verdict_not": [...], for the controls) is a TP
      when reported with that verdict, an FN when missing (unless "absent": true, which asks that it is not
      reported), an FP when reported with a verdict it must not have;
    - an expected schema {"namespace", "version_field", "required", "not_required"}: a version field named is
      a TP when the schemas section names it (null: an FP when it names any); the inferred validator's
      `required` must hold every field of "required" (TP, else FN) and none of "not_required" (else FP);
      "enums" fields must be marked as having few values (TP, else FN), "not_enums" must not (else FP), and
      "enum" {field: [values]} must be the validator's `enum` for the field (scenarios run with
      "show_values": true, which starts mongotap with --show-values);
    - an expected shard_keys item: "first" (the rank-1 key's first field), "monotonic" / "not_recommended"
      (ranged candidates so marked: TP, else FN), "not_monotonic" (marked monotonic: FP), "scatter_gather",
      "current" (the current key's first field, read from the cluster and judged among the candidates).
    """
    tp, fp, fn = [], [], []
    ops = report.get("operations") or []
    for want in scenario.get("operations", []):
        item = {"kind": "operation", "namespace": " then ".join(want["steps"]), "count": want["count"]}
        hit = next((o for o in ops if steps_of(o) == want["steps"]), None)
        if hit is not None and abs(hit["count"] - want["count"]) <= OPERATION_TOLERANCE * want["count"]:
            tp.append(item)
        else:
            item["reported"] = hit["count"] if hit else None
            fn.append(item)
    rels = report.get("relationships") or []
    for want in substitute(scenario.get("relationships", []), {"db": db}):
        item = {"kind": "relationship", "namespace": f"{want['parent']} -> {want['child']}"}
        hit = next((r for r in rels if r["parent"] == want["parent"] and r["child"] == want["child"]), None)
        if want.get("absent"):
            (fp if hit else tp).append({**item, "verdict": hit and hit["verdict"]})
        elif hit is None:
            fn.append(item)
        elif "verdict" in want:
            (tp if hit["verdict"] == want["verdict"] else fn).append({**item, "verdict": hit["verdict"]})
        else:
            (fp if hit["verdict"] in want["verdict_not"] else tp).append({**item, "verdict": hit["verdict"]})
    schemas = {c["namespace"]: c for c in report.get("schemas") or []}
    for want in substitute(scenario.get("schemas", []), {"db": db}):
        seen = schemas.get(want["namespace"]) or {}
        version = (seen.get("versions") or {}).get("field")
        if want.get("version_field"):
            item = {"kind": "schema_version", "namespace": want["namespace"], "field": want["version_field"]}
            (tp if version == want["version_field"] else fn).append({**item, "reported": version})
        elif "version_field" in want and version is not None:
            fp.append({"kind": "schema_version", "namespace": want["namespace"], "field": version})
        required = ((seen.get("validator") or {}).get("$jsonSchema") or {}).get("required") or []
        if "required" in want:
            item = {"kind": "validator", "namespace": want["namespace"], "field": ", ".join(want["required"])}
            (tp if set(want["required"]) <= set(required) else fn).append({**item, "reported": required})
        for field in set(want.get("not_required", [])) & set(required):
            fp.append({"kind": "validator", "namespace": want["namespace"], "field": field, "reported": required})
        fields = {f["path"]: f for f in seen.get("fields") or []}
        for field in want.get("enums", []):
            item = {"kind": "enum", "namespace": want["namespace"], "field": field}
            (tp if (fields.get(field) or {}).get("enum_values") else fn).append(item)
        for field in want.get("not_enums", []):
            if (fields.get(field) or {}).get("enum_values"):
                fp.append({"kind": "enum", "namespace": want["namespace"], "field": field})
        props = ((seen.get("validator") or {}).get("$jsonSchema") or {}).get("properties") or {}
        for field, values in (want.get("enum") or {}).items():
            got = (props.get(field) or {}).get("enum")
            item = {"kind": "enum", "namespace": want["namespace"], "field": field, "reported": got}
            (tp if got == values else fn).append(item)
    sections = {c["namespace"]: c for c in report.get("shard_keys") or []}
    for want in substitute(scenario.get("shard_keys", []), {"db": db}):
        seen = sections.get(want["namespace"]) or {}
        candidates = seen.get("candidates") or []
        first_field = lambda c: c["key"][0][0]  # noqa: E731
        if "first" in want:
            best = candidates[0] if candidates else None
            item = {"kind": "shard_key", "namespace": want["namespace"], "field": want["first"],
                    "reported": best and best["key"]}
            ok = best is not None and best["recommended"] and first_field(best) == want["first"]
            (tp if ok else fn).append(item)
        for field in want.get("monotonic", []):
            ranged = [c for c in candidates if first_field(c) == field and c["key"][0][1] == 1]
            ok = any(c["monotonic"] and not c["recommended"] for c in ranged)
            (tp if ok else fn).append({"kind": "shard_key_monotonic", "namespace": want["namespace"], "field": field})
        for field in want.get("not_monotonic", []):
            if any(first_field(c) == field and c["monotonic"] for c in candidates):
                fp.append({"kind": "shard_key_monotonic", "namespace": want["namespace"], "field": field})
        for field in want.get("not_recommended", []):
            ok = any(first_field(c) == field and not c["recommended"] for c in candidates) and not any(
                first_field(c) == field and c["recommended"] for c in candidates)
            (tp if ok else fn).append({"kind": "shard_key_rejected", "namespace": want["namespace"], "field": field})
        if want.get("scatter_gather"):
            ok = bool(seen) and seen.get("command") is None and "every shard" in seen.get("recommendation", "")
            (tp if ok else fn).append({"kind": "shard_key_scatter", "namespace": want["namespace"]})
        if "current" in want:
            key = seen.get("current_key") or []
            ok = bool(key) and key[0][0] == want["current"] and any(c.get("current") for c in candidates)
            (tp if ok else fn).append({"kind": "shard_key_current", "namespace": want["namespace"],
                                       "field": want["current"], "reported": key})
    return tp, fp, fn


def describe(item):
    if item.get("kind") == "operation":
        return f"operation [{item['namespace']}] x{item['count']}" + (
            f" (reported {item['reported']})" if "reported" in item else "")
    if item.get("kind") == "relationship":
        return f"relationship {item['namespace']}" + (f" verdict {item['verdict']}" if item.get("verdict") else "")
    text = f"{item.get('kind')} {item.get('namespace')}"
    if item.get("child_namespace") is not None or item.get("link") is not None:
        link = item.get("link") or {}
        text += f" -> {item.get('child_namespace')} ({link.get('parent_field')} -> {link.get('child_field')})"
    if item.get("lookups") is not None:
        text += f" lookups {item.get('lookups')}"
    if item.get("field") is not None:
        text += f" field {item.get('field')}"
    if item.get("kind") in ("schema_version", "validator", "shard_key") and "reported" in item:
        text += f" (reported {item['reported']})"
    return text


def run_scenario(scenario, args, upstream_port, upstream, workdir, tool_paths):
    name = scenario["name"]
    port = free_port()
    uri = f"mongodb://127.0.0.1:{port}/?directConnection=true&appName={name}"
    direct = f"mongodb://127.0.0.1:{upstream_port}/?directConnection=true&appName={name}-direct"
    mapping = {"uri": uri, "db": name, "upstream": direct, **tool_paths}
    report = workdir / f"{name}.report.json"
    report.unlink(missing_ok=True)
    proxy = start([str(args.mongotap), "proxy", "--listen", f"127.0.0.1:{port}",
                   "--upstream", f"127.0.0.1:{upstream_port}", "--admin", "off", "--report-json", str(report)]
                  + (["--show-values"] if scenario.get("show_values") else []),
                  workdir / f"{name}.mongotap.log", cwd=ROOT)
    client = None
    try:
        wait_listening(port, proxy, "mongotap")
        client_log = workdir / f"{name}.client.log"
        env = dict(os.environ, MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING="1")
        client = start(substitute(scenario["argv"], mapping), client_log, cwd=ROOT, env=env)
        try:
            code = client.wait(CLIENT_TIMEOUT)
        except subprocess.TimeoutExpired:
            stop(client, signal.SIGKILL)
            raise ScenarioError(f"client timed out after {CLIENT_TIMEOUT} s; its output:\n{tail(client_log)}")
        if code != 0:
            raise ScenarioError(f"client exited with code {code}; its output:\n{tail(client_log)}")
        if upstream.poll() is not None:
            raise ScenarioError(f"SecantusDB exited with code {upstream.returncode}")
        out = client_log.read_text(errors="replace").strip().splitlines()
        summary = out[-1] if out else ""
    finally:
        if client is not None:
            stop(client, signal.SIGKILL, grace=5.0)
            forget(client)
        code, in_time = stop(proxy)
        forget(proxy)
    if not in_time:
        raise ScenarioError(f"mongotap did not exit within 20 s of SIGTERM; its log:\n"
                            f"{tail(workdir / f'{name}.mongotap.log')}")
    if code != 0:
        raise ScenarioError(f"mongotap exited with code {code}; its log:\n{tail(workdir / f'{name}.mongotap.log')}")
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError) as e:
        raise ScenarioError(f"cannot read the report {report}: {e}")
    findings = data.get("findings")
    if not isinstance(findings, list):
        raise ScenarioError(f"the report {report} has no findings array")
    return findings, summary, data


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mongotap", type=Path, default=ROOT / "target" / "debug" / "mongotap")
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--keep", type=Path, help="keep reports and logs in this directory")
    parser.add_argument("--scored", default=DEFAULT_SCORED, help=f"finding kinds that count (default {DEFAULT_SCORED})")
    parser.add_argument("--jobs", "-j", type=int, default=3,
                        help="scenarios run side by side, each job with its own SecantusDB (default 3)")
    parser.add_argument("--verbose", "-v", action="store_true", help="also print each client's last output line")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    args.mongotap = args.mongotap.resolve()
    if not args.mongotap.exists():
        sys.exit(f"no mongotap binary at {args.mongotap} (build it, or pass --mongotap)")
    scored = {k.strip() for k in args.scored.split(",") if k.strip()}
    scenarios = json.loads((HERE / "scenarios.json").read_text())
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - {s["name"] for s in scenarios})
        if unknown:
            sys.exit(f"unknown scenario(s): {', '.join(unknown)}")
        scenarios = [s for s in scenarios if s["name"] in wanted]
    tool_paths = tools()
    secantusd = ROOT / ".venv" / "bin" / "secantusd-py"
    if not secantusd.exists():
        sys.exit(f"no {secantusd}: run scripts/setup.sh first")
    if any(s["client"] in ("node", "mongoose", "mongosh") for s in scenarios) and not shutil.which("node"):
        sys.exit("node is not installed")

    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        workdir = args.keep.resolve()
    else:
        workdir = Path(tempfile.mkdtemp(prefix="mongotap-scenarios-"))

    rows = [None] * len(scenarios)
    t_start = time.monotonic()
    print_lock = threading.Lock()
    local = threading.local()
    width = max(len(s["name"]) for s in scenarios) if scenarios else 10

    def upstream_of_this_job():
        """This job's SecantusDB, started on its first scenario (and again if it died)."""
        if getattr(local, "upstream", None) is None or local.upstream[1].poll() is not None:
            port = free_port()
            log = workdir / f"secantusdb-{port}.log"
            proc = start([str(secantusd), "--host", "127.0.0.1", "--port", str(port), "--storage-path",
                          ":memory:", "--standalone", "--log-level", "WARNING"], log, cwd=ROOT)
            try:
                wait_listening(port, proc, "SecantusDB", timeout=30)
            except ScenarioError as e:
                raise ScenarioError(f"{e}; its log:\n{tail(log)}")
            local.upstream = (port, proc)
        return local.upstream

    def attempt(index, scenario):
        name, client = scenario["name"], scenario["client"]
        expect = substitute(scenario["expect"], {"db": name})
        t0 = time.monotonic()
        try:
            upstream_port, upstream = upstream_of_this_job()
            findings, summary, data = run_scenario(scenario, args, upstream_port, upstream, workdir, tool_paths)
        except ScenarioError as e:
            rows[index] = (scenario, None)
            with print_lock:
                print(f"ERROR {name:<{width}} {client:<11} {time.monotonic() - t0:5.1f} s  {e}", flush=True)
            return
        tp, fp, fn = score(expect, findings, scored)
        w_tp, w_fp, w_fn = score_workload(scenario, data, name)
        tp, fp, fn = tp + w_tp, fp + w_fp, fn + w_fn
        rows[index] = (scenario, (tp, fp, fn))
        verdict = "ok  " if not fp and not fn else "FAIL"
        lines = [f"{verdict}  {name:<{width}} {client:<11} {time.monotonic() - t0:5.1f} s  "
                 f"TP {len(tp)} FP {len(fp)} FN {len(fn)}"]
        lines += [f"        FN {describe(item)}" for item in fn]
        lines += [f"        FP {describe(item)}" for item in fp]
        if args.verbose and summary:
            lines.append(f"        client: {summary}")
        with print_lock:
            print("\n".join(lines), flush=True)

    pool = ThreadPoolExecutor(max_workers=args.jobs)
    try:
        print(f"{len(scenarios)} scenarios, {args.jobs} side by side (each job its own SecantusDB), "
              f"mongotap {args.mongotap}, scored: {', '.join(sorted(scored))}", flush=True)
        for done in [pool.submit(attempt, i, s) for i, s in enumerate(scenarios)]:
            done.result()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        cleanup()  # the jobs still running see their processes gone and end
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    failures = sum(1 for _, r in rows if r is None)
    scoredrows = [r for _, r in rows if r is not None]
    tp = sum(len(r[0]) for r in scoredrows)
    fp = sum(len(r[1]) for r in scoredrows)
    fn = sum(len(r[2]) for r in scoredrows)

    def ratio(a, b):
        return f"{a / b:.3f}" if b else "n/a"

    print()
    print(f"{len(rows)} scenarios in {time.monotonic() - t_start:.1f} s: {failures} failed to run; "
          f"TP {tp}  FP {fp}  FN {fn}  precision {ratio(tp, tp + fp)}  recall {ratio(tp, tp + fn)}")
    kinds = sorted(scored | {i["kind"] for r in scoredrows for part in r for i in part})
    for kind in kinds:
        k_tp, k_fp, k_fn = (sum(1 for r in scoredrows for i in r[n] if i.get("kind") == kind) for n in range(3))
        print(f"  {kind:<22} TP {k_tp}  FP {k_fp}  FN {k_fn}  precision {ratio(k_tp, k_tp + k_fp)}  "
              f"recall {ratio(k_tp, k_tp + k_fn)}")
    clients = sorted({s["client"] for s, _ in rows})
    print("  per client (scenarios clean / total):")
    for client in clients:
        mine = [(s, r) for s, r in rows if s["client"] == client]
        positive = lambda s: s["expect"] or s.get("operations") or any(  # noqa: E731
            "verdict" in r for r in s.get("relationships", [])) or any(
            c.get("version_field") or c.get("required") or c.get("enums") or c.get("enum")
            for c in s.get("schemas", [])) or s.get("shard_keys")
        pos = [(s, r) for s, r in mine if positive(s)]
        neg = [(s, r) for s, r in mine if not positive(s)]
        clean = lambda group: sum(1 for _, r in group if r is not None and not r[1] and not r[2])  # noqa: E731
        print(f"    {client:<12} positives {clean(pos)}/{len(pos)}  negatives {clean(neg)}/{len(neg)}")
    if args.keep:
        print(f"reports and logs kept in {workdir}")
    return 1 if failures or fp or fn else 0


def interrupted(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGINT, interrupted)  # even where SIGINT was ignored (a background job)
    signal.signal(signal.SIGTERM, interrupted)  # clean up on SIGTERM as on Ctrl-C
    sys.exit(main())
