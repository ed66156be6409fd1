"""The byte-recording relays of the soak test (bench/soak.py), and the comparison of
what they recorded on either side of mongotap.

A relay accepts on a free loopback port and relays each connection to its target,
keeping per connection and direction a running SHA-256 and a byte count of what it
read (never the bytes). mongotap opens one upstream connection per client connection
and forwards byte for byte, so the multiset of per-connection (digest, length) pairs
must be the same on the client side and the upstream side, in each direction.
"""
import asyncio
import collections
import hashlib
import threading



class Stream:
    __slots__ = ("h", "n")

    def __init__(self):
        self.h = hashlib.sha256()
        self.n = 0


class Relay:
    """Accepts on a free loopback port and relays each connection to target_port, recording per
    connection and direction a SHA-256 and a byte count of what it read from each side."""

    def __init__(self, name, target_port):
        self.name = name
        self.target_port = target_port
        self.port = None
        self.server = None
        self.records = []  # (c2s SHA-256, c2s bytes, s2c SHA-256, s2c bytes), one per finished connection
        self.open = {}  # id -> (c2s Stream, s2c Stream) of connections still open
        # The tasks relaying them. Held here because asyncio does not: once a transport to the client is
        # lost (a write to a client that has gone), nothing else refers to its task, and the garbage
        # collector would destroy it while it still reads from the other side.
        self.tasks = set()
        self.accepted = 0
        self.connect_failures = 0
        self.read_resets = 0
        self.write_failures = 0
        self._next = 0

    async def start(self):
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0, backlog=512)
        self.port = self.server.sockets[0].getsockname()[1]

    async def handle(self, creader, cwriter):
        task = asyncio.current_task()
        self.tasks.add(task)
        try:
            await self.relay(creader, cwriter)
        finally:
            self.tasks.discard(task)

    async def relay(self, creader, cwriter):
        self.accepted += 1
        try:
            ureader, uwriter = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            self.connect_failures += 1
            cwriter.transport.abort()
            return
        key = self._next
        self._next += 1
        c2s, s2c = Stream(), Stream()
        self.open[key] = (c2s, s2c)
        try:
            await asyncio.gather(self.pump(creader, uwriter, c2s), self.pump(ureader, cwriter, s2c))
        finally:
            for w in (cwriter, uwriter):
                w.close()
            del self.open[key]
            self.records.append((c2s.h.digest(), c2s.n, s2c.h.digest(), s2c.n))

    async def pump(self, reader, writer, st):
        """Reads until EOF, counting and hashing every byte read, writing it on while the other side
        takes it; then passes the half-close on. A write failure does not stop the reading, so the
        record is of all the source sent."""
        ok = True
        while True:
            try:
                data = await reader.read(65536)
            except (ConnectionError, OSError):
                self.read_resets += 1
                break
            if not data:
                break
            st.h.update(data)
            st.n += len(data)
            if ok:
                try:
                    writer.write(data)
                    await writer.drain()
                except (ConnectionError, OSError):
                    ok = False
                    self.write_failures += 1
        if ok:
            try:
                if writer.can_write_eof() and not writer.is_closing():
                    writer.write_eof()
            except (ConnectionError, OSError, RuntimeError):
                pass

    def snapshot(self):
        """(finished records, records of connections still open so far). Runs on the relay loop."""
        unfinished = [(a.h.digest(), a.n, b.h.digest(), b.n) for a, b in self.open.values()]
        return list(self.records), unfinished


class Relays:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.errors = []  # whatever asyncio reports on the relay loop (a failure of the harness)
        self.loop.set_exception_handler(lambda loop, context: self.errors.append(
            f"{context.get('message')}: {context.get('exception') or context.get('task') or ''}"))
        self.thread = threading.Thread(target=self.loop.run_forever, name="relays", daemon=True)
        self.thread.start()

    def call(self, coro_or_fn, timeout=30):
        if asyncio.iscoroutine(coro_or_fn):
            return asyncio.run_coroutine_threadsafe(coro_or_fn, self.loop).result(timeout)

        async def wrap():
            return coro_or_fn()
        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result(timeout)

    def add(self, name, target_port):
        relay = Relay(name, target_port)
        self.call(relay.start())
        return relay

    def stop(self):
        if not self.loop.is_running():
            return

        async def shutdown():
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
        try:
            self.call(shutdown(), timeout=5)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def multiset_diff(a, b):
    ca, cb = collections.Counter(a), collections.Counter(b)
    return ca - cb, cb - ca


def compare(c_records, u_records):
    c2s_c = [(r[0], r[1]) for r in c_records]
    c2s_u = [(r[0], r[1]) for r in u_records]
    s2c_c = [(r[2], r[3]) for r in c_records]
    s2c_u = [(r[2], r[3]) for r in u_records]
    c2s_only_c, c2s_only_u = multiset_diff(c2s_c, c2s_u)
    s2c_only_c, s2c_only_u = multiset_diff(s2c_c, s2c_u)
    pair_only_c, pair_only_u = multiset_diff(c_records, u_records)
    diffs = sum(c2s_only_c.values()) + sum(c2s_only_u.values()) + sum(s2c_only_c.values()) + sum(s2c_only_u.values())
    pair_diffs = sum(pair_only_c.values()) + sum(pair_only_u.values())
    examples = ([("client side only", r) for r in list(pair_only_c.elements())[:3]]
                + [("upstream side only", r) for r in list(pair_only_u.elements())[:3]])
    return {"c2s_differences": sum(c2s_only_c.values()) + sum(c2s_only_u.values()),
            "s2c_differences": sum(s2c_only_c.values()) + sum(s2c_only_u.values()),
            "connection_pair_differences": pair_diffs,
            "differences": diffs if diffs else pair_diffs,
            "examples": [f"{side}: c2s {r[1]} bytes {r[0].hex()[:12]}, s2c {r[3]} bytes {r[2].hex()[:12]}" for side, r in examples]}
