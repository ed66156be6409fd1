"""Captures codec fixtures from real drivers talking to the real upstream, and
tshark's decoding of the same traffic for the cross-check in wire/tests/fixtures.rs.

    .venv/bin/python scripts/capture_fixtures.py      (after ./scripts/setup.sh and cargo build --example orders)

For each client (pymongo, the Rust driver via examples/orders.rs, the Node driver)
a recording relay sits between the client and SecantusDB and writes
wire/tests/fixtures/<client>.stream: records of one direction byte (C: client to
server, S: server to client) followed by one whole message, in arrival order.
dumpcap captures the relay-to-upstream traffic, and tshark's dissector turns it into
<client>.tshark.tsv: one line per message (direction, requestID, responseTo,
opcode, OP_MSG flags, section kinds, sequence identifiers). compressed.stream holds
pymongo requests compressed by pymongo's own snappy, zlib and zstd code, each
preceded by its plain original (records P then Z).
"""
import asyncio
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "wire", "tests", "fixtures")
VENV = os.path.join(ROOT, ".venv", "bin")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port):
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"port {port} never opened")


class Relay:
    """Forwards 127.0.0.1:listen to the upstream, recording each connection's bytes."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.port = free_port()
        self.conns = []  # per connection: {"up_port", "chunks": [(t, dir, bytes)]}
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result()

    async def _serve(self):
        self.server = await asyncio.start_server(self._conn, "127.0.0.1", self.port)

    async def _conn(self, cr, cw):
        ur, uw = await asyncio.open_connection("127.0.0.1", self.upstream)
        rec = {"up_port": uw.get_extra_info("sockname")[1], "chunks": [], "done": 0}
        self.conns.append(rec)

        async def pipe(r, w, d):
            while data := await r.read(65536):
                rec["chunks"].append((time.monotonic_ns(), d, data))
                w.write(data)
                await w.drain()
            w.close()
            rec["done"] += 1

        await asyncio.gather(pipe(cr, uw, "C"), pipe(ur, cw, "S"), return_exceptions=True)

    def take(self):
        """The messages recorded so far, as (time, dir, bytes) in arrival order; resets.
        Waits (up to 10 s) for the client's connections to close in both directions."""
        deadline = time.time() + 10
        while time.time() < deadline and any(rec["done"] < 2 for rec in self.conns):
            time.sleep(0.05)
        conns, self.conns = self.conns, []
        out = []
        for rec in conns:
            for d in "CS":
                buf, t_last = b"", 0
                for t, dd, data in rec["chunks"]:
                    if dd != d:
                        continue
                    buf += data
                    t_last = t
                    while len(buf) >= 16 and len(buf) >= struct.unpack_from("<i", buf)[0]:
                        n = struct.unpack_from("<i", buf)[0]
                        out.append((t_last, d, buf[:n]))
                        buf = buf[n:]
        out.sort(key=lambda m: m[0])
        return out, {rec["up_port"] for rec in conns}


def write_stream(name, messages):
    with open(os.path.join(OUT, name), "wb") as f:
        for _, d, msg in messages:
            f.write(d.encode() + msg)


def pymongo_workload(uri):
    import pymongo
    from pymongo import CursorType, InsertOne, UpdateOne, DeleteOne
    from pymongo.write_concern import WriteConcern

    c = pymongo.MongoClient(uri, appname="fixture-pymongo")
    db = c.fx
    db.items.insert_many([{"_id": i, "k": i % 3, "pad": "p" * (i % 50)} for i in range(120)])  # documents sequence
    list(db.items.find({"k": 1}, cursor_type=CursorType.EXHAUST, batch_size=10))  # exhaust getMore
    w0 = db.get_collection("log", write_concern=WriteConcern(w=0))
    for i in range(3):
        w0.insert_one({"i": i})  # moreToCome request
    db.items.bulk_write([InsertOne({"_id": 1000}), UpdateOne({"_id": 1}, {"$set": {"k": 9}}), DeleteOne({"_id": 2})])
    list(db.items.aggregate([{"$match": {"k": 0}}, {"$lookup": {"from": "log", "localField": "k",
                                                                "foreignField": "i", "as": "l"}}]))
    list(db.items.find({"k": {"$in": [0, 2]}}, batch_size=25))
    c.close()


def tshark_messages(pcap, ports, upstream):
    """tshark's view of each message on connections whose relay-side port is in `ports`."""
    out = subprocess.run(
        ["tshark", "-r", pcap, "-d", f"tcp.port=={upstream},mongo", "-Y", "mongo", "-T", "json"],
        capture_output=True, text=True, check=True).stdout
    lines = []
    # tshark repeats keys (one "section" per section) in one object: keep them all.
    for pkt in json.loads(out, object_pairs_hook=Pairs):
        layers = pkt.get("_source").get("layers")
        src = int(layers.get("tcp").get("tcp.srcport"))
        dst = int(layers.get("tcp").get("tcp.dstport"))
        if src not in ports and dst not in ports:
            continue
        d = "C" if dst == upstream else "S"
        for m in layers.get_all("mongo"):
            ids = [str(int(m.get(k), 0)) for k in ("mongo.request_id", "mongo.response_to", "mongo.opcode")]
            lines.append("\t".join([d, *ids, *msg_fields(m)]))
    return sorted(lines)


class Pairs(list):
    """A JSON object as its list of (key, value) pairs, duplicates kept."""

    def get(self, key, default=None):
        return next((v for k, v in self if k == key), default)

    def get_all(self, key):
        out = []
        for k, v in self:
            if k == key:
                out += v if type(v) is list else [v]  # a Pairs is one object, not a list of them
        return out


def msg_fields(m):
    flags = m.get("mongo.msg.flags", "")
    if flags:
        flags = str(int(flags, 0))
    kinds, seq_ids = [], []

    def walk(node):
        if isinstance(node, Pairs):
            for k, v in node:
                if k == "mongo.msg.sections.section.kind":
                    kinds.append(str(v))
                elif k == "mongo.msg.sections.section.doc_sequence_id":
                    seq_ids.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for x in node:
                walk(x)

    walk(m)
    return [flags, ",".join(kinds), ",".join(seq_ids)]


def compressed_fixture(messages):
    from pymongo.compression_support import SnappyContext, ZlibContext, ZstdContext
    from pymongo.message import _compress

    requests = [msg for _, d, msg in messages if d == "C"][:12]
    out = []
    for i, plain in enumerate(requests):
        ctx = [SnappyContext(), ZlibContext(6), ZstdContext()][i % 3]
        opcode = struct.unpack_from("<i", plain, 12)[0]
        _, wrapped = _compress(opcode, plain[16:], ctx)
        out += [(0, "P", plain), (0, "Z", wrapped)]
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    upstream = free_port()
    server = subprocess.Popen([os.path.join(VENV, "secantusd-py"), "--host", "127.0.0.1", "--port", str(upstream),
                               "--storage-path", ":memory:", "--log-level", "WARNING"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pcap = os.path.join("/tmp", f"mongotap-fixtures-{upstream}.pcapng")
    dumpcap = subprocess.Popen(["dumpcap", "-q", "-i", "lo", "-f", f"tcp port {upstream}", "-w", pcap],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(upstream)
        time.sleep(1.0)  # let dumpcap start
        relay = Relay(upstream)
        uri = f"mongodb://127.0.0.1:{relay.port}/?directConnection=true"
        phases = {}
        pymongo_workload(uri)
        phases["pymongo"] = relay.take()
        subprocess.run([os.path.join(ROOT, "target", "debug", "examples", "orders"), uri + "&appName=fixture-rust"],
                       check=True, stdout=subprocess.DEVNULL)
        phases["rust"] = relay.take()
        subprocess.run(["node", os.path.join(ROOT, "tests", "node", "smoke.js"), uri], check=True,
                       stdout=subprocess.DEVNULL)
        phases["node"] = relay.take()
        time.sleep(1.0)
    finally:
        dumpcap.send_signal(signal.SIGINT)
        dumpcap.wait()
        server.terminate()
        server.wait()
    for name, (messages, ports) in phases.items():
        write_stream(f"{name}.stream", messages)
        lines = tshark_messages(pcap, ports, upstream)
        with open(os.path.join(OUT, f"{name}.tshark.tsv"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{name}: {len(messages)} messages recorded, {len(lines)} decoded by tshark")
    write_stream("compressed.stream", compressed_fixture(phases["pymongo"][0]))
    os.remove(pcap)


if __name__ == "__main__":
    sys.exit(main())
