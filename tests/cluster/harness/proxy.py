"""The network-fault layer of the cluster harness: per-link loopback TCP proxies whose
traffic a test can partition (one way or both ways) and delay, by source and destination.

Nodes are named ``"zk"``, ``"b1"`` .. ``"bN"`` and ``"client"``. Every connection that
goes through a proxy belongs to one directed link ``(src, dst)``:

- A *Kafka proxy* stands in front of one listener of one broker (``dst`` = ``"b<i>"``):
  each broker has one for its CLIENT listener and one for its INTERNAL
  (inter-broker) listener, and advertises the proxies' ports, so every client and every
  other broker reaches it through them. The source of a connection is read from the
  client_id of its first request frame (request header v1/v2: int32 size, int16
  api_key, int16 api_version, int32 correlation_id, int16-length client_id, never
  compact): ``broker-<id>-...`` (e.g. ``broker-2-fetcher-0``,
  ``broker-3-controller-to-broker-1``) is ``"b<id>"``; anything else, a null client_id
  included, is ``"client"``. Nothing after that header is parsed.
- A *ZooKeeper proxy* stands between one broker and ZooKeeper (``src`` = ``"b<i>"``,
  ``dst`` = ``"zk"``): each broker's ``zookeeper.connect`` names its own proxy, so the
  source of ZooKeeper's plain-TCP connections is known from the proxy they use.

Faults are rules on directed node pairs, in effect from the moment the control call
returns (bytes already written to a socket are "in flight" and arrive):

- ``partition(a, b, direction)``: bytes from a node of ``a`` to a node of ``b`` (and
  back, with ``"both"``) are held. Connections stay open and new connections are
  accepted but silent; nothing is delivered while the rule stands. The proxy stops
  reading the held direction, so the sender's socket buffers fill as they would when a
  network drops every packet. When the partition heals, what was held is delivered in
  order, as TCP's retransmissions would deliver it, unless an endpoint gave up and
  closed the connection first (the held close then follows the held bytes).
- ``delay(a, b, ms)``: every chunk of bytes from ``a`` to ``b`` is delivered no earlier
  than ``ms`` after the proxy read it; order is kept. ``delay(..., 0)`` removes it.
- ``isolate(node)``: partitions ``node`` from every other node, ZooKeeper and clients
  included (``keep_clients=True`` spares the ``"client"`` links).
- ``heal()`` lifts every partition; ``clear_delays()`` every delay; ``reset()`` both.

A node is never partitioned from itself. Everything listens and connects on 127.0.0.1
only. One asyncio loop in a daemon thread serves every proxy of a :class:`Network`::

    net = Network()
    p = net.add_kafka_proxy("b1", target_port=9092, listener="CLIENT")
    z = net.add_zk_proxy("b1", target_port=2181)
    net.partition(["b1"], ["zk"])        # b1 loses ZooKeeper, both ways
    net.heal()
    net.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

LOOPBACK = "127.0.0.1"
CLIENT = "client"
ZK = "zk"
_BROKER_CLIENT_ID = re.compile(r"^broker-(\d+)-")
_HEADER = struct.Struct(">ihhih")  # size, api_key, api_version, correlation_id, client_id length
_CHUNK = 64 * 1024
_QUEUE_CHUNKS = 64  # per direction: beyond this the proxy stops reading (backpressure)
_CONNECT_TIMEOUT = 10.0
_DOWN_CLOSE_DELAY_S = 0.5  # see LinkProxy._accept
_WATCH_S = 0.25
STALL_S = 1.0  # a proxy loop this late is reported (Network.stalls)


def source_of(client_id: str | None) -> str:
    """The node a Kafka connection comes from, by the client_id of its first request:
    ``broker-<id>-...`` is ``"b<id>"``, anything else (``None`` included) ``"client"``."""
    if client_id:
        m = _BROKER_CLIENT_ID.match(client_id)
        if m:
            return f"b{int(m.group(1))}"
    return CLIENT


def _nodes(x: str | Iterable[str]) -> list[str]:
    return [x] if isinstance(x, str) else list(x)


@dataclass
class LinkStats:
    """What one proxy saw: connections accepted, their sources, bytes delivered per
    direction ``(src, dst)``."""

    connections: int = 0
    sources: set[str] = field(default_factory=set)
    delivered: dict[tuple[str, str], int] = field(default_factory=dict)


# Ports chosen for processes that bind them later (brokers, ZooKeeper): a proxy, which
# binds port 0 at once, must not take one of them in the meantime.
RESERVED_PORTS: set[int] = set()


def reserve_port() -> int:
    """A free loopback port, kept from proxies until its process binds it."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind((LOOPBACK, 0))
            port = s.getsockname()[1]
        if port not in RESERVED_PORTS:
            RESERVED_PORTS.add(port)
            return port
    raise RuntimeError("no free port")


def _bind_unreserved() -> socket.socket:
    rejected = []
    try:
        for _ in range(100):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((LOOPBACK, 0))
            if sock.getsockname()[1] not in RESERVED_PORTS:
                return sock
            rejected.append(sock)  # held open so the next bind gets another port
        raise RuntimeError("no unreserved port")
    finally:
        for sock in rejected:
            sock.close()


class LinkProxy:
    """One listening proxy: ``kind`` is ``"kafka"`` (source from the client_id) or
    ``"zk"`` (source fixed). ``port`` is where it listens; ``target_port`` where it
    connects (on 127.0.0.1), which may be down: a connection is then closed at once."""

    def __init__(
        self, net: Network, kind: str, target_port: int, dst: str, src: str | None, name: str
    ) -> None:
        self.net = net
        self.kind = kind
        self.target_port = target_port
        self.dst = dst
        self.src = src
        self.name = name
        self.stats = LinkStats()
        self._sock = _bind_unreserved()
        self._sock.listen(256)
        self._sock.setblocking(False)
        self.port: int = self._sock.getsockname()[1]
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[_Conn] = set()

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def __repr__(self) -> str:
        return f"LinkProxy({self.name} :{self.port} -> :{self.target_port})"

    def drop_connections(self) -> None:
        """Abort (RST) every open connection of this proxy now."""
        self.net._call(self._drop_all)

    def _drop_all(self) -> None:
        for conn in list(self._conns):
            conn.abort()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, sock=self._sock)

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        _nodelay(client_w)
        conn = _Conn(client_w)
        self._conns.add(conn)
        self.stats.connections += 1
        try:
            if self.kind == "kafka":
                first, src = await _identify(client_r)
            else:
                first, src = b"", self.src or CLIENT
            if first is None:
                return
            self.stats.sources.add(src)
            # Held like a SYN while the link is cut: the connection exists but is silent.
            await self.net._passable(src, self.dst, None)
            try:
                target_r, target_w = await asyncio.wait_for(
                    asyncio.open_connection(LOOPBACK, self.target_port), _CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError):
                # The destination is down: the client sees its connection close, after a
                # pause for a Kafka client. The proxy accepted the connection (a dead
                # broker's own port would have refused it), so a client that resets its
                # reconnect backoff on every accepted connection would otherwise reconnect
                # in a tight loop, and that storm runs in this process beside the proxies.
                if self.kind == "kafka":
                    await asyncio.sleep(_DOWN_CLOSE_DELAY_S)
                return
            _nodelay(target_w)
            conn.writers.append(target_w)
            up = asyncio.ensure_future(self._pump(client_r, target_w, src, self.dst, first))
            down = asyncio.ensure_future(self._pump(target_r, client_w, self.dst, src, b""))
            conn.tasks += [up, down]
            done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_EXCEPTION)
            if any(t.exception() for t in done if not t.cancelled()):
                return
            # One direction ended cleanly (EOF delivered): the other ends when its peer
            # closes in turn; a stopped process may never do so, and that is realistic.
            await asyncio.gather(up, down, return_exceptions=True)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            conn.abort()
            self._conns.discard(conn)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        src: str,
        dst: str,
        first: bytes,
    ) -> None:
        """Relays bytes ``src`` -> ``dst`` until EOF, which it passes on as a FIN.
        A reader task fills a bounded queue; the writer delivers each chunk once the
        link is passable and the chunk's delay has elapsed."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue(_QUEUE_CHUNKS)

        async def read() -> None:
            if first:
                await queue.put((loop.time(), first))
            while True:
                try:
                    data: bytes | None = await reader.read(_CHUNK)
                except OSError:
                    data = None  # a reset: passed on in order, after what came before
                await queue.put((loop.time(), data))
                if not data:
                    return

        reading = asyncio.ensure_future(read())
        try:
            while True:
                t, data = await queue.get()
                await self.net._passable(src, dst, t)
                if data is None:
                    raise ConnectionResetError(f"{src} reset its connection to {dst}")
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    await writer.drain()
                    return
                writer.write(data)
                await writer.drain()
                key = (src, dst)
                self.stats.delivered[key] = self.stats.delivered.get(key, 0) + len(data)
        finally:
            reading.cancel()


class _Conn:
    def __init__(self, client_w: asyncio.StreamWriter) -> None:
        self.writers = [client_w]
        self.tasks: list[asyncio.Future] = []

    def abort(self) -> None:
        for t in self.tasks:
            t.cancel()
        for w in self.writers:
            with contextlib.suppress(Exception):
                w.transport.abort()


def _nodelay(w: asyncio.StreamWriter) -> None:
    sock = w.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _identify(reader: asyncio.StreamReader) -> tuple[bytes | None, str]:
    """Reads the first request's header up to its client_id: (the bytes read, the
    source node); (None, "client") when the peer closed first."""
    try:
        head = await reader.readexactly(_HEADER.size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None, CLIENT
    size, _api_key, _version, _corr, id_len = _HEADER.unpack(head)
    if id_len <= 0 or size < _HEADER.size - 4 + id_len or id_len > 4096:
        return head, CLIENT
    try:
        raw = await reader.readexactly(id_len)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None, CLIENT
    return head + raw, source_of(raw.decode("utf-8", "replace"))


class Network:
    """Owns the proxies and the fault rules. Control methods may be called from any
    thread; rules are read by the proxy loop. ``blocked`` holds directed pairs
    ``(src, dst)`` whose bytes are held; ``delays`` maps directed pairs to ms."""

    def __init__(self) -> None:
        self.proxies: list[LinkProxy] = []
        self.blocked: frozenset[tuple[str, str]] = frozenset()
        self.delays: dict[tuple[str, str], float] = {}
        self._extra_nodes: set[str] = {CLIENT}
        # When the proxy loop itself stalled (see _watch_lateness), for failure reports.
        self.stalls: list[str] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._changed: asyncio.Event | None = None
        self._started = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="cluster-network", daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("network loop did not start")

    # ---- proxies ----

    def add_kafka_proxy(self, dst: str, target_port: int, listener: str) -> LinkProxy:
        """A proxy in front of broker ``dst``'s listener ``listener`` at ``target_port``."""
        return self._add(LinkProxy(self, "kafka", target_port, dst, None, f"{listener}->{dst}"))

    def add_zk_proxy(self, src: str, target_port: int, dst: str = ZK) -> LinkProxy:
        """A proxy through which node ``src`` (only) reaches ZooKeeper at ``target_port``."""
        return self._add(LinkProxy(self, "zk", target_port, dst, src, f"{src}->{dst}"))

    def _add(self, proxy: LinkProxy) -> LinkProxy:
        asyncio.run_coroutine_threadsafe(proxy._start(), self._loop).result(10)
        with self._lock:
            self.proxies.append(proxy)
        return proxy

    def proxy(self, name: str) -> LinkProxy:
        """The proxy named ``"<listener>-><dst>"`` or ``"<src>->zk"``."""
        for p in self.proxies:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def nodes(self) -> set[str]:
        """Every node a proxy names, plus ``"client"``."""
        out = set(self._extra_nodes)
        for p in self.proxies:
            out.add(p.dst)
            if p.src:
                out.add(p.src)
        return out

    # ---- faults ----

    def partition(
        self, a: str | Iterable[str], b: str | Iterable[str], direction: str = "both"
    ) -> None:
        """Holds bytes from every node of ``a`` to every node of ``b`` (``"a_to_b"``),
        and back too (``"both"``). Adds to the partitions already in force."""
        if direction not in ("both", "a_to_b"):
            raise ValueError(f"direction must be 'both' or 'a_to_b', not {direction!r}")
        pairs = set()
        for x in _nodes(a):
            for y in _nodes(b):
                if x != y:
                    pairs.add((x, y))
                    if direction == "both":
                        pairs.add((y, x))
        with self._lock:
            self.blocked = self.blocked | pairs
        self._notify()

    def isolate(self, node: str, keep_clients: bool = False) -> None:
        """Partitions ``node`` from every other node (ZooKeeper and clients included,
        unless ``keep_clients``), both ways."""
        others = self.nodes - {node}
        if keep_clients:
            others.discard(CLIENT)
        self.partition([node], sorted(others))

    def heal(self) -> None:
        """Lifts every partition; held bytes flow again."""
        with self._lock:
            self.blocked = frozenset()
        self._notify()

    def delay(
        self, a: str | Iterable[str], b: str | Iterable[str], ms: float, direction: str = "both"
    ) -> None:
        """Delays bytes from ``a`` to ``b`` (and back with ``"both"``) by ``ms``;
        0 removes the delay. Replaces earlier delays of the same pairs."""
        if direction not in ("both", "a_to_b"):
            raise ValueError(f"direction must be 'both' or 'a_to_b', not {direction!r}")
        with self._lock:
            delays = dict(self.delays)
            for x in _nodes(a):
                for y in _nodes(b):
                    for pair in [(x, y)] + ([(y, x)] if direction == "both" else []):
                        if ms > 0:
                            delays[pair] = float(ms)
                        else:
                            delays.pop(pair, None)
            self.delays = delays
        self._notify()

    def clear_delays(self) -> None:
        with self._lock:
            self.delays = {}
        self._notify()

    def reset(self) -> None:
        """No partitions, no delays."""
        with self._lock:
            self.blocked = frozenset()
            self.delays = {}
        self._notify()

    def is_blocked(self, src: str, dst: str) -> bool:
        return (src, dst) in self.blocked

    def drop_connections(self) -> None:
        """Aborts every open connection of every proxy (an RST on each)."""
        for p in list(self.proxies):
            p.drop_connections()

    # ---- lifecycle ----

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True

        async def shutdown() -> None:
            for p in self.proxies:
                if p._server is not None:
                    p._server.close()
                p._drop_all()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        for p in self.proxies:
            with contextlib.suppress(OSError):
                p._sock.close()

    def __enter__(self) -> Network:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- loop side ----

    async def _watch_lateness(self) -> None:
        """Records each time the proxy loop woke more than STALL_S late: every proxied
        byte (ZooKeeper's included) waits for this one loop, in the test's process."""
        while True:
            started = time.monotonic()
            await asyncio.sleep(_WATCH_S)
            late = time.monotonic() - started - _WATCH_S
            if late > STALL_S and len(self.stalls) < 100:
                self.stalls.append(f"{time.strftime('%H:%M:%S')} proxy loop {late:.1f} s late")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._changed = asyncio.Event()
        self._loop.create_task(self._watch_lateness())
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    def _call(self, fn) -> None:
        if not self._closed:
            self._loop.call_soon_threadsafe(fn)

    def _notify(self) -> None:
        """Wakes every writer waiting on a rule (on the loop thread)."""

        def bump() -> None:
            assert self._changed is not None
            self._changed.set()
            self._changed = asyncio.Event()

        self._call(bump)

    async def _passable(self, src: str, dst: str, stamp: float | None) -> None:
        """Returns once bytes read at loop time ``stamp`` may go ``src`` -> ``dst``:
        the pair is not blocked and its delay (if ``stamp`` is given) has elapsed."""
        loop = asyncio.get_running_loop()
        while True:
            assert self._changed is not None
            changed = self._changed
            if (src, dst) in self.blocked:
                await changed.wait()
                continue
            if stamp is None:
                return
            due = stamp + self.delays.get((src, dst), 0.0) / 1000.0
            left = due - loop.time()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), left)
