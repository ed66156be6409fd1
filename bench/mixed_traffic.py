#!/usr/bin/env python3
"""Real clients' traffic to one server, round after round, until a capture file is big enough.

    .venv/bin/python bench/mixed_traffic.py PORT CAPTURE TARGET_BYTES

Each round runs the seven examples' bad versions (pymongo) and every labelled scenario of
tests/scenarios/scenarios.json whose client is not pymongo (mongoengine, Mongoose, mongosh, the Node
driver), taking one of each client in turn (so a small capture has them all), each on a database of
its own for the round, directly against the
server on 127.0.0.1:PORT that a capture is recording; it stops after the client during which
CAPTURE reached TARGET_BYTES. Prints how many runs and seconds each client took. The same
command makes the same traffic (values drawn by the clients aside). Standard library only.
"""
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "scenarios"))
from run import substitute, tools  # noqa: E402  (the scenarios' own runner)

ROOT = Path(__file__).resolve().parents[1]
CLIENT_TIMEOUT = 300  # seconds for one client (mongoengine's own test suite is the longest)
EXAMPLES = ["order_page", "blog", "reviews", "order_updates", "sensors", "order_history", "display_name"]


def runs(port, rnd):
    """The (client, name, argv) of one round, one client after another in turn."""
    python = tools()["python"]
    uri = lambda name: f"mongodb://127.0.0.1:{port}/?directConnection=true&appName={name}"
    by_client = {"pymongo": [(ex, [python, f"examples/{ex}/app.py", uri(ex), f"{ex}_{rnd}", "bad"]) for ex in EXAMPLES]}
    for s in json.loads((ROOT / "tests/scenarios/scenarios.json").read_text()):
        if s["client"] != "pymongo":
            mapping = {"uri": uri(s["name"]), "upstream": uri(s["name"]), "db": f"{s['name']}_{rnd}", **tools()}
            by_client.setdefault(s["client"], []).append((s["name"], substitute(s["argv"], mapping)))
    for turn in range(max(map(len, by_client.values()))):
        for client, todo in by_client.items():
            if turn < len(todo):
                yield (client, *todo[turn])


def main():
    port, capture, target = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    env = dict(os.environ, MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING="1")
    count, seconds = Counter(), Counter()
    rnd = 0
    while True:
        size_before = capture.stat().st_size if capture.exists() else 0
        for client, name, argv in runs(port, rnd):
            started = time.perf_counter()
            try:
                done = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True, timeout=CLIENT_TIMEOUT)
            except subprocess.TimeoutExpired:
                sys.exit(f"{name} ({client}) took more than {CLIENT_TIMEOUT} s")
            if done.returncode != 0:
                sys.exit(f"{name} ({client}) exited with {done.returncode}:\n{done.stderr[-2000:]}")
            count[client] += 1
            seconds[client] += time.perf_counter() - started
            if capture.exists() and capture.stat().st_size >= target:
                tally = ", ".join(f"{c} {count[c]} runs in {seconds[c]:.0f} s" for c in sorted(count))
                print(f"traffic: {rnd + 1} round(s): {tally}")
                return
        if not capture.exists() or capture.stat().st_size == size_before:
            sys.exit(f"{capture} did not grow in a whole round: is the capture recording port {port}?")
        rnd += 1


if __name__ == "__main__":
    main()
