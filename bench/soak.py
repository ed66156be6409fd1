#!/usr/bin/env python3
"""Soak test (issue #16): a mixed workload of real drivers through mongotap for a configurable time,
every byte compared at both ends, mongotap's RSS and open descriptors sampled as it runs.

    .venv/bin/python bench/soak.py [--minutes 3] [--out out/soak] [--mongotap PATH] [--threads 4]
        [--sample-every 5] [--warmup 30] [--no-node]

Layout (all on loopback, free ports):

    pymongo threads, churn thread, Node driver --> relay C --> mongotap --> relay U --> SecantusDB

- SecantusDB in memory (.venv/bin/secantusd-py --storage-path :memory: --standalone).
- Relays C and U (bench/relays.py) run in this process (asyncio, one thread). For each accepted connection and each
  direction a relay keeps a running SHA-256 and a byte count of what it read (never the bytes), and
  files (c2s digest, c2s bytes, s2c digest, s2c bytes) when both directions have closed. mongotap
  opens one upstream connection per client connection and forwards byte for byte, so the multiset of
  per-connection (digest, length) pairs must be the same at C and at U, in each direction.
- mongotap: `proxy --listen M --upstream U --admin A --report-json OUT/report.json --report-interval 10
  --no-side-connection` (--no-side-connection: no connection of its own to the upstream, so every
  upstream connection is a client's).
- Workload, until the deadline: --threads pymongo threads (own MongoClient each, appName soak-wN,
  maxPoolSize 2): inserts, finds with filters/sorts/projections, update_one with $set/$inc/$push,
  replace_one upserts, delete_many, aggregate ($match/$group, $lookup), count_documents, distinct,
  cursors read through getMore (small batch_size) and closed early (killCursors), bulk_write, and a
  deliberate duplicate-key insert now and then (an expected error, counted apart). One thread opens a
  fresh MongoClient, runs two commands and closes it, over and over (connection churn). If
  tests/node/node_modules/mongodb exists, bench/soak_node.js runs a Node driver workload of the same kind
  for the same time. The data set is bounded (a ring of ids per thread, old events deleted).
- Every --sample-every seconds: mongotap's RSS (VmRSS) and open descriptors (/proc/PID/fd), operations
  and errors so far. Growth = average of the last 10% of the samples taken after --warmup seconds minus
  the average of the first 10% of them.

Verdict PASS (exit 0) if: 0 byte differences, every relay connection finished and no error on the
relays' event loop, 0 unexpected client errors, RSS growth < 20 MiB, descriptor growth within 10,
mongotap exited 0 on SIGTERM and wrote its report. Otherwise FAIL (exit 1). Samples and summary go to OUT/soak.json; logs of SecantusDB,
mongotap and Node to OUT/*.log.
"""
import argparse
import datetime
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Process helpers shared with the scenario runner: free ports, process groups, log tails.
sys.path.insert(0, str(ROOT / "tests" / "scenarios"))
from run import cleanup, free_port, started, stop, tail  # noqa: E402
from relays import Relays, compare  # noqa: E402
VENV = ROOT / ".venv"
NODE_MODULES = ROOT / "tests" / "node" / "node_modules" / "mongodb"

RSS_GROWTH_LIMIT_MIB = 20.0
FD_GROWTH_LIMIT = 10
DRAIN_TIMEOUT = 30.0  # seconds for every relay connection to finish once the clients are closed
ITEMS_PER_WORKER = 1000  # ring of item ids per thread
ORDERS_PER_WORKER = 300
EVENTS_KEPT = 500  # events per thread kept; older ones are deleted
CUSTOMERS = 200
DB = "soak"



class SoakError(Exception):
    pass


def log(msg):
    print(f"[soak] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# processes


def start(argv, log_path, stdout=None):
    """Starts argv in its own session (process group), output to log_path (stdout: to `stdout` if given)."""
    logf = open(log_path, "wb")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout if stdout is not None else logf,
                            stderr=logf if stdout is not None else subprocess.STDOUT,
                            start_new_session=True, cwd=ROOT)
    logf.close()
    started.append(proc)
    return proc


def wait_connectable(port, proc, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SoakError(f"{what} exited with code {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SoakError(f"{what} is not listening on port {port} after {timeout:.0f} s")


def listening(port):
    """True if a TCP socket listens on 127.0.0.1:port, from /proc/net/tcp (no connection made)."""
    want = f"0100007F:{port:04X}"
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[1] == want and parts[3] == "0A":
                    return True
    except OSError:
        pass
    return False


def wait_listening(port, proc, what, timeout=30.0):
    # Not by connecting: a connection to mongotap would open an upstream connection that no
    # client-side connection matches.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SoakError(f"{what} exited with code {proc.returncode} before listening")
        if listening(port):
            return
        time.sleep(0.05)
    raise SoakError(f"{what} is not listening on port {port} after {timeout:.0f} s")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


# ---------------------------------------------------------------------------------------------
# workload


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = 0
        self.errors = 0
        self.expected_errors = 0
        self.first_errors = []
        self.churn_clients = 0
        self.node_ops = 0
        self.node_errors = 0
        self.node_expected = 0

    def op(self, n=1):
        with self.lock:
            self.ops += n

    def error(self, text):
        with self.lock:
            self.errors += 1
            if len(self.first_errors) < 10:
                self.first_errors.append(text)

    def expected(self):
        with self.lock:
            self.expected_errors += 1
            self.ops += 1

    def totals(self):
        with self.lock:
            return (self.ops + self.node_ops, self.errors + self.node_errors,
                    self.expected_errors + self.node_expected)


CATS = ["books", "games", "garden", "kitchen", "music", "tools", "toys", "sports"]
KINDS = ["view", "click", "cart", "buy", "search"]
STATUSES = ["new", "paid", "shipped", "delivered", "cancelled"]


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def item_doc(rng, wid, _id):
    return {"_id": _id, "w": wid, "name": f"item {_id}", "cat": rng.choice(CATS),
            "score": rng.randint(0, 1000), "price": round(rng.uniform(1, 500), 2),
            "tags": [rng.choice(KINDS) for _ in range(rng.randint(0, 4))],
            "attrs": {"color": rng.choice(["red", "green", "blue"]), "size": rng.randint(1, 50)},
            "blurb": "lorem ipsum " * rng.randint(1, 60), "updated": now(), "v": 0}


def order_doc(rng, wid, _id):
    return {"_id": _id, "w": wid, "customerId": rng.randrange(CUSTOMERS), "status": rng.choice(STATUSES),
            "lines": [{"sku": rng.randrange(10_000), "qty": rng.randint(1, 5), "price": rng.randint(1, 99)}
                      for _ in range(rng.randint(1, 6))], "at": now()}


class PyWorker(threading.Thread):
    def __init__(self, wid, uri, deadline, stop_event, stats):
        super().__init__(name=f"soak-w{wid}", daemon=True)
        self.wid, self.uri, self.deadline, self.stop_event, self.stats = wid, uri, deadline, stop_event, stats
        self.rng = random.Random(wid)
        self.base = wid * 1_000_000
        self.seq = 0

    def run(self):
        import pymongo
        client = None
        try:
            client = pymongo.MongoClient(self.uri, appName=f"soak-w{self.wid}", maxPoolSize=2,
                                         serverSelectionTimeoutMS=15000, socketTimeoutMS=60000)
            db = client[DB]
            self.items, self.orders, self.events = db.items, db.orders, db.events
            ops = [(12, self.insert_event), (3, self.insert_events), (8, self.upsert_item), (12, self.update_item),
                   (12, self.find_items), (5, self.cursor_events), (5, self.count_items), (4, self.group_items),
                   (4, self.lookup_orders), (6, self.upsert_order), (8, self.find_one_item), (2, self.delete_items),
                   (2, self.bulk), (2, self.distinct), (1, self.duplicate)]
            fns = [fn for _, fn in ops]
            weights = [w for w, _ in ops]
            while not self.stop_event.is_set() and time.monotonic() < self.deadline:
                fn = self.rng.choices(fns, weights)[0]
                try:
                    fn()
                    self.stats.op()
                except pymongo.errors.DuplicateKeyError as e:
                    if fn == self.duplicate:
                        self.stats.expected()
                    else:
                        self.stats.error(f"soak-w{self.wid} {fn.__name__}: {e!r}")
                except Exception as e:  # every other exception counts as an error
                    self.stats.error(f"soak-w{self.wid} {fn.__name__}: {e!r}")
                    time.sleep(0.2)
        except Exception as e:
            self.stats.error(f"soak-w{self.wid} (client): {e!r}")
        finally:
            if client is not None:
                client.close()

    def item_id(self):
        return self.base + self.rng.randrange(ITEMS_PER_WORKER)

    def insert_event(self):
        self.seq += 1
        self.events.insert_one({"w": self.wid, "seq": self.seq, "kind": self.rng.choice(KINDS),
                                "payload": "x" * self.rng.randint(10, 3000), "at": now()})
        if self.seq % 100 == 0:
            self.events.delete_many({"w": self.wid, "seq": {"$lt": self.seq - EVENTS_KEPT}})

    def insert_events(self):
        docs = []
        for _ in range(self.rng.randint(2, 20)):
            self.seq += 1
            docs.append({"w": self.wid, "seq": self.seq, "kind": self.rng.choice(KINDS), "at": now()})
        self.events.insert_many(docs, ordered=self.rng.random() < 0.5)

    def upsert_item(self):
        _id = self.item_id()
        self.items.replace_one({"_id": _id}, item_doc(self.rng, self.wid, _id), upsert=True)

    def update_item(self):
        self.items.update_one({"_id": self.item_id()},
                              {"$set": {"score": self.rng.randint(0, 1000), "updated": now(),
                                        "attrs.size": self.rng.randint(1, 50)},
                               "$inc": {"v": 1},
                               "$push": {"tags": {"$each": [self.rng.choice(KINDS)], "$slice": -8}}})

    def find_items(self):
        q = {"w": self.wid, "cat": self.rng.choice(CATS), "score": {"$gte": self.rng.randint(0, 900)}}
        if self.rng.random() < 0.5:
            list(self.items.find(q, {"name": 1, "score": 1, "price": 1, "_id": 0}).sort("score", -1).limit(20))
        else:
            list(self.items.find(q).sort([("price", 1), ("_id", 1)]).skip(self.rng.randint(0, 5)).limit(10))

    def find_one_item(self):
        self.items.find_one({"_id": self.item_id()})

    def cursor_events(self):
        cursor = self.events.find({"w": self.wid}, {"payload": 0}).sort("seq", -1).batch_size(self.rng.randint(3, 10))
        try:
            for n, _ in enumerate(cursor):  # getMores; stopping early leaves a killCursors to send
                if n >= self.rng.randint(10, 80):
                    break
        finally:
            cursor.close()

    def count_items(self):
        self.items.count_documents({"w": self.wid, "cat": self.rng.choice(CATS)})

    def group_items(self):
        list(self.items.aggregate([{"$match": {"w": self.wid}},
                                   {"$group": {"_id": "$cat", "n": {"$sum": 1}, "avg": {"$avg": "$score"},
                                               "top": {"$max": "$price"}}},
                                   {"$sort": {"n": -1}}]))

    def lookup_orders(self):
        list(self.orders.aggregate([{"$match": {"w": self.wid, "status": self.rng.choice(STATUSES)}},
                                    {"$sort": {"at": -1}}, {"$limit": 10},
                                    {"$lookup": {"from": "customers", "localField": "customerId",
                                                 "foreignField": "_id", "as": "customer"}},
                                    {"$project": {"status": 1, "lines": 1, "customer.name": 1}}]))

    def upsert_order(self):
        _id = self.base + self.rng.randrange(ORDERS_PER_WORKER)
        self.orders.replace_one({"_id": _id}, order_doc(self.rng, self.wid, _id), upsert=True)

    def delete_items(self):
        ids = [self.item_id() for _ in range(self.rng.randint(1, 10))]
        self.items.delete_many({"w": self.wid, "_id": {"$in": ids}})

    def bulk(self):
        from pymongo import DeleteOne, InsertOne, ReplaceOne, UpdateOne
        self.seq += 1
        oid = self.base + self.rng.randrange(ORDERS_PER_WORKER)
        reqs = [InsertOne({"w": self.wid, "seq": self.seq, "kind": "bulk", "at": now()}),
                UpdateOne({"_id": self.item_id()}, {"$inc": {"v": 1}, "$set": {"updated": now()}}),
                ReplaceOne({"_id": oid}, order_doc(self.rng, self.wid, oid), upsert=True),
                DeleteOne({"w": self.wid, "seq": {"$lt": self.seq - EVENTS_KEPT}})]
        self.events.bulk_write(reqs[:1] + reqs[3:], ordered=True)
        self.items.bulk_write(reqs[1:2], ordered=False)
        self.orders.bulk_write(reqs[2:3])

    def distinct(self):
        self.orders.distinct("status", {"w": self.wid})

    def duplicate(self):
        """An expected error: inserting an _id that exists (DuplicateKeyError, an error reply)."""
        _id = self.item_id()
        self.items.replace_one({"_id": _id}, item_doc(self.rng, self.wid, _id), upsert=True)
        self.items.insert_one({"_id": _id, "w": self.wid})


class Churn(threading.Thread):
    """Opens a fresh MongoClient, runs two commands, closes it; again and again."""

    def __init__(self, uri, deadline, stop_event, stats):
        super().__init__(name="soak-churn", daemon=True)
        self.uri, self.deadline, self.stop_event, self.stats = uri, deadline, stop_event, stats
        self.rng = random.Random(999)

    def run(self):
        import pymongo
        while not self.stop_event.is_set() and time.monotonic() < self.deadline:
            client = None
            try:
                client = pymongo.MongoClient(self.uri, appName="soak-churn", maxPoolSize=1,
                                             serverSelectionTimeoutMS=15000, socketTimeoutMS=60000)
                client.admin.command("ping")
                self.stats.op()
                client[DB].customers.find_one({"_id": self.rng.randrange(CUSTOMERS)})
                self.stats.op()
            except Exception as e:
                self.stats.error(f"soak-churn: {e!r}")
            finally:
                if client is not None:
                    client.close()
                    with self.stats.lock:
                        self.stats.churn_clients += 1
            self.stop_event.wait(self.rng.uniform(0.3, 1.0))


def seed(uri, workers):
    import pymongo
    client = pymongo.MongoClient(uri, appName="soak-seed", serverSelectionTimeoutMS=15000)
    try:
        client.drop_database(DB)
        db = client[DB]
        db.items.create_index([("w", 1), ("cat", 1)])
        db.items.create_index([("w", 1), ("score", -1)])
        db.events.create_index([("w", 1), ("seq", 1)])
        db.orders.create_index([("w", 1), ("status", 1)])
        db.customers.insert_many([{"_id": c, "name": f"Customer {c}", "tier": ["basic", "gold"][c % 2]}
                                  for c in range(CUSTOMERS)])
        rng = random.Random(0)
        for wid in workers:
            base = wid * 1_000_000
            db.items.insert_many([item_doc(rng, wid, base + i) for i in range(0, ITEMS_PER_WORKER, 2)])
            db.orders.insert_many([order_doc(rng, wid, base + i) for i in range(0, ORDERS_PER_WORKER, 2)])
    finally:
        client.close()


def read_node(proc, stats, lines):
    """Reads soak_node.js's stdout: `progress OPS ERRORS EXPECTED` lines, any other line kept."""
    for raw in proc.stdout:
        line = raw.decode(errors="replace").rstrip("\n")
        parts = line.split()
        if len(parts) == 4 and parts[0] == "progress":
            with stats.lock:
                stats.node_ops, stats.node_errors, stats.node_expected = (int(p) for p in parts[1:])
        else:
            lines.append(line)


# ---------------------------------------------------------------------------------------------
# results


def growth(samples, key, warmup):
    """(mean of the first 10% of the samples after the warm-up, mean of the last 10%, their difference,
    number of samples used, a note)."""
    post = [s for s in samples if s["t"] >= warmup]
    note = None
    if len(post) < 2:
        post, note = samples, f"fewer than 2 samples after the {warmup:g} s warm-up: all samples used"
    if not post:
        return None, None, None, 0, "no samples"
    k = max(1, round(len(post) * 0.1))
    first = statistics.mean(s[key] for s in post[:k])
    last = statistics.mean(s[key] for s in post[-k:])
    return first, last, last - first, len(post), note


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0, help="workload duration (default 3; 30+ for the note)")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "soak", help="output directory (default out/soak)")
    parser.add_argument("--mongotap", type=Path, help="mongotap binary (default target/release/mongotap, "
                                                      "else target/debug/mongotap)")
    parser.add_argument("--threads", type=int, default=4, help="pymongo worker threads (default 4)")
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between samples (default 5)")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds before growth is measured (default 30)")
    parser.add_argument("--no-node", action="store_true", help="skip the Node driver workload")
    args = parser.parse_args()

    if args.mongotap is None:
        release, debug = ROOT / "target" / "release" / "mongotap", ROOT / "target" / "debug" / "mongotap"
        args.mongotap = release if release.exists() else debug
    args.mongotap = args.mongotap.resolve()
    if not args.mongotap.exists():
        sys.exit(f"no mongotap binary at {args.mongotap} (cargo build --release -p mongotap, or pass --mongotap)")
    secantusd = VENV / "bin" / "secantusd-py"
    if not secantusd.exists():
        sys.exit(f"no {secantusd}: run scripts/setup.sh first")
    try:
        import pymongo  # noqa: F401
    except ImportError:
        sys.exit("pymongo is missing: run with .venv/bin/python (scripts/setup.sh installs it)")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    report_path = out / "report.json"
    report_path.unlink(missing_ok=True)
    duration = args.minutes * 60.0

    node_script = ROOT / "bench" / "soak_node.js"
    use_node = not args.no_node
    node_note = None
    if use_node and not NODE_MODULES.exists():
        use_node, node_note = False, f"Node workload skipped: {NODE_MODULES} is missing (scripts/setup.sh installs it)"
    elif use_node and not shutil.which("node"):
        use_node, node_note = False, "Node workload skipped: node is not installed"
    elif not use_node:
        node_note = "Node workload skipped (--no-node)"

    relays = None
    stats = Stats()
    stop_event = threading.Event()
    threads = []
    samples = []
    node = None
    node_lines = []
    failures = []
    summary = {}
    mongotap = None
    try:
        # SecantusDB
        db_port = free_port()
        upstream = start([str(secantusd), "--host", "127.0.0.1", "--port", str(db_port), "--storage-path", ":memory:",
                          "--standalone", "--log-level", "WARNING"], out / "secantusdb.log")
        try:
            wait_connectable(db_port, upstream, "SecantusDB")
        except SoakError as e:
            raise SoakError(f"{e}; its log:\n{tail(out / 'secantusdb.log')}")

        # relay U (mongotap -> SecantusDB), mongotap, relay C (clients -> mongotap)
        relays = Relays()
        relay_u = relays.add("U", db_port)
        tap_port, admin_port = free_port(), free_port()
        mongotap = start([str(args.mongotap), "proxy", "--listen", f"127.0.0.1:{tap_port}",
                          "--upstream", f"127.0.0.1:{relay_u.port}", "--admin", f"127.0.0.1:{admin_port}",
                          "--report-json", str(report_path), "--report-interval", "10", "--no-side-connection"],
                         out / "mongotap.log")
        try:
            wait_listening(tap_port, mongotap, "mongotap")
        except SoakError as e:
            raise SoakError(f"{e}; its log:\n{tail(out / 'mongotap.log')}")
        relay_c = relays.add("C", tap_port)
        time.sleep(0.5)
        idle_before = {"rss_kib": rss_kib(mongotap.pid), "fds": fd_count(mongotap.pid)}
        uri = f"mongodb://127.0.0.1:{relay_c.port}/?directConnection=true"
        log(f"SecantusDB 127.0.0.1:{db_port} <- relay U :{relay_u.port} <- mongotap :{tap_port} (admin :{admin_port}, "
            f"pid {mongotap.pid}, {args.mongotap.relative_to(ROOT) if args.mongotap.is_relative_to(ROOT) else args.mongotap})"
            f" <- relay C :{relay_c.port}")
        log(f"mongotap idle: RSS {idle_before['rss_kib'] / 1024:.1f} MiB, {idle_before['fds']} descriptors")

        workers = list(range(1, args.threads + 1))
        seed(uri, workers)
        log(f"seeded {DB}: {CUSTOMERS} customers, {len(workers)} x {ITEMS_PER_WORKER // 2} items and "
            f"{ORDERS_PER_WORKER // 2} orders")

        t0 = time.monotonic()
        deadline = t0 + duration
        for wid in workers:
            threads.append(PyWorker(wid, uri, deadline, stop_event, stats))
        threads.append(Churn(uri, deadline, stop_event, stats))
        for t in threads:
            t.start()
        if use_node:
            node = start(["node", str(node_script), uri + "&appName=soak-node", DB, f"{duration:.0f}"],
                         out / "node.log", stdout=subprocess.PIPE)
            reader = threading.Thread(target=read_node, args=(node, stats, node_lines), daemon=True)
            reader.start()
        log(f"workload for {duration / 60:g} min: {args.threads} pymongo threads, 1 churn thread"
            + (", Node driver (bench/soak_node.js)" if use_node else "") + f"; a sample every {args.sample_every:g} s")
        if node_note:
            log(node_note)

        last_ops, last_t = 0, 0.0
        next_sample = t0 + args.sample_every
        while True:
            now_m = time.monotonic()
            if now_m >= deadline:
                break
            time.sleep(max(0.0, min(next_sample, deadline) - now_m))
            if time.monotonic() < next_sample - 1e-3:
                continue
            next_sample += args.sample_every
            if mongotap.poll() is not None:
                raise SoakError(f"mongotap exited with code {mongotap.returncode} during the workload; its log:\n"
                                f"{tail(out / 'mongotap.log')}")
            if upstream.poll() is not None:
                raise SoakError(f"SecantusDB exited with code {upstream.returncode} during the workload")
            t = time.monotonic() - t0
            ops, errors, expected = stats.totals()
            s = {"t": round(t, 1), "rss_kib": rss_kib(mongotap.pid), "fds": fd_count(mongotap.pid), "ops": ops,
                 "errors": errors, "expected_errors": expected, "open_c": len(relay_c.open), "open_u": len(relay_u.open),
                 "conns_c": relay_c.accepted}
            samples.append(s)
            rate = (ops - last_ops) / max(t - last_t, 1e-6)
            last_ops, last_t = ops, t
            log(f"{t:7.1f} s  RSS {s['rss_kib'] / 1024:6.1f} MiB  fds {s['fds']:4d}  ops {ops:8d} ({rate:5.0f}/s)  "
                f"errors {errors}  open conns {s['open_c']}/{s['open_u']}  conns {s['conns_c']}")

        # stop the workload; every client closes its connections
        stop_event.set()
        for t in threads:
            t.join(120)
            if t.is_alive():
                failures.append(f"thread {t.name} did not finish within 120 s of the deadline")
        work_seconds = time.monotonic() - t0
        node_code = None
        if node is not None:
            try:
                node_code = node.wait(90)
            except subprocess.TimeoutExpired:
                failures.append("the Node workload did not finish within 90 s of the deadline")
            stop(node, signal.SIGKILL, grace=5)
            reader.join(5)
            if node_code not in (0, None):
                failures.append(f"the Node workload exited with code {node_code}; its log:\n{tail(out / 'node.log')}")

        # wait for every relay connection to finish
        drain_deadline = time.monotonic() + DRAIN_TIMEOUT
        while time.monotonic() < drain_deadline and (relay_c.open or relay_u.open):
            time.sleep(0.1)
        time.sleep(0.5)
        idle_after = {"rss_kib": rss_kib(mongotap.pid), "fds": fd_count(mongotap.pid)}
        c_records, c_open = relays.call(relay_c.snapshot)
        u_records, u_open = relays.call(relay_u.snapshot)
        if c_open or u_open:
            failures.append(f"{len(c_open)} client-side and {len(u_open)} upstream-side connections still open "
                            f"{DRAIN_TIMEOUT:.0f} s after the clients closed (compared as they stood)")

        # stop mongotap: SIGTERM, its final report
        code, in_time = stop(mongotap, signal.SIGTERM, grace=30)
        if not in_time:
            failures.append(f"mongotap did not exit within 30 s of SIGTERM; its log:\n{tail(out / 'mongotap.log')}")
        elif code != 0:
            failures.append(f"mongotap exited with code {code} on SIGTERM; its log:\n{tail(out / 'mongotap.log')}")
        report_totals = None
        try:
            report_totals = json.loads(report_path.read_text())["totals"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            failures.append(f"mongotap's final report {report_path} is missing or unreadable: {e}")

        # compare both ends
        cmp = compare(c_records + c_open, u_records + u_open)
        bytes_c = sum(r[1] + r[3] for r in c_records + c_open)
        bytes_u = sum(r[1] + r[3] for r in u_records + u_open)
        ops, errors, expected = stats.totals()
        _, _, rss_growth, growth_samples, rss_note = growth(samples, "rss_kib", args.warmup)
        _, _, fd_growth, _, fd_note = growth(samples, "fds", args.warmup)

        if cmp["differences"]:
            failures.append(f"{cmp['differences']} byte differences between the two ends")
        if relays.errors:
            failures.append(f"{len(relays.errors)} errors on the relays' event loop (the harness), the first: "
                            f"{relays.errors[0]}")
        if relay_c.connect_failures or relay_u.connect_failures:
            failures.append(f"relay connect failures: C {relay_c.connect_failures}, U {relay_u.connect_failures}")
        if errors:
            failures.append(f"{errors} client errors")
        if ops == 0:
            failures.append("no operation completed")
        if rss_growth is None or rss_growth / 1024 >= RSS_GROWTH_LIMIT_MIB:
            failures.append(f"RSS growth {('%.1f MiB' % (rss_growth / 1024)) if rss_growth is not None else 'unknown'}"
                            f" (limit < {RSS_GROWTH_LIMIT_MIB:g} MiB)")
        if fd_growth is None or abs(fd_growth) > FD_GROWTH_LIMIT:
            failures.append(f"descriptor change {fd_growth if fd_growth is not None else 'unknown'} "
                            f"(limit within {FD_GROWTH_LIMIT})")

        rss = [s["rss_kib"] for s in samples] or [0]
        fds = [s["fds"] for s in samples] or [0]
        mib = lambda k: k / 1024  # noqa: E731
        summary = {
            "verdict": "PASS" if not failures else "FAIL",
            "failures": failures,
            "duration_s": round(work_seconds, 1),
            "mongotap": str(args.mongotap),
            "threads": args.threads,
            "node": use_node, "node_note": node_note, "node_exit_code": node_code,
            "operations": ops, "ops_per_s": round(ops / max(work_seconds, 1e-6), 1),
            "python_operations": stats.ops, "node_operations": stats.node_ops,
            "churn_clients": stats.churn_clients,
            "errors": errors, "expected_errors": expected, "first_errors": stats.first_errors,
            "connections_client_side": len(c_records) + len(c_open),
            "connections_upstream_side": len(u_records) + len(u_open),
            "bytes_client_side": bytes_c, "bytes_upstream_side": bytes_u,
            **cmp,
            "relay_read_resets": relay_c.read_resets + relay_u.read_resets,
            "relay_write_failures": relay_c.write_failures + relay_u.write_failures,
            "samples": len(samples), "growth_samples": growth_samples, "warmup_s": args.warmup,
            "rss_mib": {"first": mib(rss[0]), "min": mib(min(rss)), "max": mib(max(rss)), "last": mib(rss[-1]),
                        "growth": mib(rss_growth) if rss_growth is not None else None, "note": rss_note},
            "fds": {"first": fds[0], "max": max(fds), "last": fds[-1], "growth": fd_growth, "note": fd_note},
            "idle_before": idle_before, "idle_after": idle_after,
            "report_totals": report_totals,
        }
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        failures.append("interrupted")
        summary = {"verdict": "FAIL", "failures": failures}
        return 130
    except SoakError as e:
        failures.append(str(e))
        summary = {"verdict": "FAIL", "failures": failures}
        print(f"[soak] error: {e}", file=sys.stderr)
        return 1
    finally:
        stop_event.set()
        for t in threads:
            t.join(5)
        cleanup()
        if relays is not None:
            relays.stop()
        try:
            (out / "soak.json").write_text(json.dumps({"summary": summary, "samples": samples,
                                                       "node_output": node_lines[-20:]}, indent=1, default=str) + "\n")
        except OSError:
            pass

    print_summary(summary, out)
    return 0 if summary["verdict"] == "PASS" else 1


def print_summary(s, out):
    r, f = s["rss_mib"], s["fds"]
    t = s["report_totals"] or {}
    print()
    print(f"soak summary: {s['duration_s']:.0f} s of workload ({s['duration_s'] / 60:.1f} min), {s['threads']} pymongo "
          f"threads + churn" + (" + Node driver" if s["node"] else "") + f"; mongotap {s['mongotap']}")
    if s["node_note"]:
        print(f"  {s['node_note']}")
    print(f"  operations: {s['operations']} ({s['ops_per_s']:.0f}/s; pymongo {s['python_operations']}, "
          f"Node {s['node_operations']}); churn clients {s['churn_clients']}; errors {s['errors']}, "
          f"expected errors (duplicate key) {s['expected_errors']}")
    for e in s["first_errors"][:5]:
        print(f"    error: {e}")
    print(f"  bytes compared: {s['connections_client_side']} connections / {s['bytes_client_side']} bytes client side, "
          f"{s['connections_upstream_side']} connections / {s['bytes_upstream_side']} bytes upstream side; "
          f"differences {s['differences']} (client->server {s['c2s_differences']}, server->client "
          f"{s['s2c_differences']}, whole connections {s['connection_pair_differences']}; an unmatched "
          f"connection counts once at each end)")
    for e in s["examples"]:
        print(f"    {e}")
    print(f"  relays: {s['relay_read_resets']} reads ended by a reset, {s['relay_write_failures']} writes to a side "
          f"that had gone (the rest of that direction still read and compared)")
    print(f"  RSS MiB: first {r['first']:.1f}, min {r['min']:.1f}, max {r['max']:.1f}, last {r['last']:.1f}; "
          f"growth {r['growth']:+.1f} (limit < {RSS_GROWTH_LIMIT_MIB:g})" if r["growth"] is not None else "  RSS: no samples")
    print(f"  descriptors: first {f['first']}, max {f['max']}, last {f['last']}; growth {f['growth']:+.1f} "
          f"(limit within {FD_GROWTH_LIMIT})" if f["growth"] is not None else "  descriptors: no samples")
    for note in {r["note"], f["note"]} - {None}:
        print(f"  note: {note}")
    print(f"  growth = mean of the last 10% minus mean of the first 10% of the {s['growth_samples']} samples "
          f"taken after a {s['warmup_s']:g} s warm-up ({s['samples']} samples in all)")
    ib, ia = s["idle_before"], s["idle_after"]
    print(f"  mongotap idle (no connections) before / after: RSS {ib['rss_kib'] / 1024:.1f} / {ia['rss_kib'] / 1024:.1f} "
          f"MiB, descriptors {ib['fds']} / {ia['fds']}")
    if t:
        print(f"  mongotap's report: {t.get('connections')} connections, {t.get('operations')} operations, "
              f"{t.get('events_dropped')} events dropped, {t.get('parse_errors')} parse errors")
    print(f"  samples and summary: {out / 'soak.json'}")
    for failure in s["failures"]:
        print(f"  FAIL: {failure}")
    print(f"verdict: {s['verdict']}")


def interrupted(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    sys.exit(main())
