"""Network namespaces for the replication bench's ``--netns``: one namespace per broker,
each joined to the host by a veth pair whose host end sits on one bridge.

Layout (every name starts with ``lsb-``; interface names stay within Linux's 15 bytes):

- bridge ``lsb-br`` on the host with ``10.213.0.1/24``;
- broker ``i``: namespace ``lsb-b<i>``, veth ``lsb-h<i>`` (host end, on the bridge) and
  ``lsb-n<i>`` (inside, ``10.213.0.<10 + i>/24``), and the namespace's own ``lo`` up.

Brokers reach each other and the host across the bridge; the client stays on the host.
ZooKeeper listens on the host's 127.0.0.1 only, which a namespace cannot reach, so
:meth:`Netns.forward` relays a host port on the bridge address to it (a thread per
direction per connection; ZooKeeper's traffic is small). Needs root and ``ip``.
"""

from __future__ import annotations

import socket
import subprocess
import threading

PREFIX = "lsb-"
BRIDGE = "lsb-br"
SUBNET = "10.213.0"
HOST_IP = f"{SUBNET}.1"


def _ip(*args: str) -> str:
    return subprocess.run(
        ["ip", *args], check=True, capture_output=True, text=True, timeout=15
    ).stdout


def cleanup_stale() -> list[str]:
    """Deletes every ``lsb-*`` namespace and link (left by a run that was killed); returns
    their names."""
    gone = []
    for line in _ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(PREFIX):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=15)
            gone.append(name)
    for line in _ip("-o", "link", "show").splitlines():
        # "<index>: <name>[@<peer>]: <flags> ..."
        name = line.split(":", 2)[1].strip().split("@")[0]
        if name.startswith(PREFIX):
            subprocess.run(["ip", "link", "del", name], capture_output=True, timeout=15)
            gone.append(name)
    return gone


class Netns:
    """The namespaces of ``n`` brokers (ids 1..n), created on enter and removed on exit,
    also when the set-up or the run fails."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.stale: list[str] = []
        self._listeners: list[socket.socket] = []
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    @staticmethod
    def namespace(i: int) -> str:
        return f"{PREFIX}b{i}"

    @staticmethod
    def address(i: int) -> str:
        return f"{SUBNET}.{10 + i}"

    def prefix(self, i: int) -> list[str]:
        """The command prefix that runs a process inside broker ``i``'s namespace
        (``ip netns exec`` execs the command: the process keeps the pid it started with)."""
        return ["ip", "netns", "exec", self.namespace(i)]

    def __enter__(self) -> Netns:
        self.stale = cleanup_stale()
        try:
            _ip("link", "add", BRIDGE, "type", "bridge")
            _ip("addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
            _ip("link", "set", BRIDGE, "up")
            for i in range(1, self.n + 1):
                ns, host_end, inside = self.namespace(i), f"{PREFIX}h{i}", f"{PREFIX}n{i}"
                _ip("netns", "add", ns)
                _ip("link", "add", host_end, "type", "veth", "peer", "name", inside)
                _ip("link", "set", inside, "netns", ns)
                _ip("link", "set", host_end, "master", BRIDGE, "up")
                _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", inside)
                _ip("-n", ns, "link", "set", inside, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            socks, self._listeners, self._conns = self._listeners + self._conns, [], []
        for s in socks:
            try:
                s.close()
            except OSError:
                pass
        cleanup_stale()

    # ---- a relay from the bridge address to a port on the host's 127.0.0.1 ----

    def forward(self, target_port: int) -> int:
        """Listens on ``HOST_IP`` (a free port, returned) and relays each connection to
        ``127.0.0.1:target_port``."""
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((HOST_IP, 0))
        ls.listen(16)
        with self._lock:
            self._listeners.append(ls)
        threading.Thread(
            target=self._accept, args=(ls, target_port), name="netns-forward", daemon=True
        ).start()
        port: int = ls.getsockname()[1]
        return port

    def _accept(self, ls: socket.socket, target_port: int) -> None:
        while True:
            try:
                a, _ = ls.accept()
            except OSError:
                return  # closed
            try:
                b = socket.create_connection(("127.0.0.1", target_port), timeout=10)
                b.settimeout(None)
            except OSError:
                a.close()
                continue
            with self._lock:
                self._conns += [a, b]
            for src, dst in ((a, b), (b, a)):
                threading.Thread(
                    target=_pipe, args=(src, dst), name="netns-pipe", daemon=True
                ).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
