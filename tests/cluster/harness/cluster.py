"""A cluster of real processes on loopback: one ZooKeeper (Debian's package) and N
broker processes (``python -m broker_py``), every link between them through the
fault-injecting proxies of :mod:`tests.cluster.harness.proxy`.

Layout under ``workdir``::

    zookeeper/            ZooKeeper's data dir, zoo.cfg, zookeeper.log
    b1/ .. bN/            each broker's cwd: data/ (its log.dirs), broker.log (stderr)

Broker ``i`` (ids 1..N) runs with ``broker.id=i``, its own ``log.dirs``, two listeners
``CLIENT://127.0.0.1:<a>,INTERNAL://127.0.0.1:<b>`` and advertises the ports of its
two proxies (``CLIENT`` for clients, ``INTERNAL`` for other brokers), so every Kafka
connection goes through a proxy. With ``zookeeper=True`` it also gets
``zookeeper.connect=127.0.0.1:<its own ZooKeeper proxy>/<chroot>``, so cutting that one
proxy isolates exactly that broker from ZooKeeper. With ``zookeeper=False`` the brokers
are N independent single brokers with the same proxies (no ZooKeeper runs).

Every process can be SIGKILLed (``kill``), SIGTERMed (``terminate``), SIGSTOPped and
SIGCONTed (``pause``/``resume``) and started again on the same ports and data dir.
Leaving the ``with`` block kills every process and closes the proxies, also when the
block raised; then the tail of every process's log is printed, so pytest's report of a
failing test carries it. A process the harness started is also killed at interpreter
exit, whatever happened::

    with Cluster(tmp_path, n_brokers=3, zookeeper=False) as c:
        c.net.partition(["b1"], ["client"])
        c.broker(2).kill(); c.broker(2).start()
        producer = Producer({"bootstrap.servers": c.bootstrap_servers})
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.cluster.harness.proxy import CLIENT, RESERVED_PORTS, ZK, LinkProxy, Network, reserve_port
from tests.cluster.zookeeper import ZooKeeperServer
from tests.support import processes
from tests.support.processes import wait_stopped
from tests.support.waiting import wait_until

_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()  # processes to kill at interpreter exit


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        try:
            proc.kill()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


@contextlib.contextmanager
def logs_on_failure(request: Any, cluster: Cluster, lines: int = 60) -> Iterator[None]:
    """For a pytest fixture around a test: prints the tail of every process's log in
    teardown when the test failed (pytest reports it under "Captured stdout teardown")::

        @pytest.fixture
        def c(request, cluster):
            with logs_on_failure(request, cluster):
                yield cluster
    """
    failed = request.session.testsfailed
    try:
        yield
    finally:
        if request.session.testsfailed > failed:
            print(cluster.log_tails(lines))


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


class ClusterBroker:
    """One broker process. ``overrides`` are its complete ``--override`` settings.
    Ports and data dir stay the same across restarts."""

    def __init__(
        self,
        broker_id: int,
        workdir: Path,
        overrides: dict[str, str],
        client_port: int,
        internal_port: int,
    ) -> None:
        self.id = broker_id
        self.name = f"b{broker_id}"
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "broker.log"
        self.overrides = overrides
        self.client_port = client_port
        self.internal_port = internal_port
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.exit_codes: list[int] = []  # of every run that ended, in order
        # Put before the broker's command line, e.g. ``["ip", "netns", "exec", NS]``
        # (benches/netns.py); empty by default. It must exec the command, keeping the pid.
        self.command_prefix: list[str] = []

    def __repr__(self) -> str:
        return f"ClusterBroker({self.name}, pid={self.pid})"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        """Running (paused counts as running)."""
        return self.proc is not None and self.proc.poll() is None

    def launch(self) -> None:
        """Starts the process without waiting for it to listen (see :meth:`wait_ready`)."""
        if self.alive():
            raise RuntimeError(f"{self.name} is already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(
                f"---- harness: starting {self.name} at {time.strftime('%H:%M:%S')} ----\n".encode()
            )
            log.flush()
            self.proc = subprocess.Popen(
                [*self.command_prefix, *processes.broker_command(overrides=self.overrides)],
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.workdir,
                env=processes.repo_env(),
            )
        _LIVE.add(self.proc)
        self.paused = False

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Waits for the "listening on" line on stdout; kills the process and raises on
        timeout or exit."""
        assert self.proc is not None
        ready, out = processes.wait_for_output(self.proc, processes.LISTENING, timeout)
        if not ready:
            processes.kill(self.proc)
            raise RuntimeError(f"{self.name} did not start: {out!r}\n{_tail(self.log_text(), 40)}")
        # From now on stdout goes to the log too, so that the pipe never fills.
        threading.Thread(
            target=self._drain_stdout, args=(self.proc,), name=f"{self.name}-stdout", daemon=True
        ).start()

    def _drain_stdout(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        try:
            with open(self.log_path, "ab") as log:
                for line in iter(proc.stdout.readline, b""):
                    log.write(b"[stdout] " + line)
                    log.flush()
        except (OSError, ValueError):
            pass  # the pipe was closed under us
        finally:
            proc.stdout.close()

    def start(self, timeout: float = 30.0) -> None:
        self.launch()
        self.wait_ready(timeout)

    def _ended(self) -> int:
        assert self.proc is not None
        code = self.proc.wait()
        _LIVE.discard(self.proc)
        self.exit_codes.append(code)
        self.paused = False
        return code

    def kill(self) -> None:
        """SIGKILL and reap: no shutdown code runs."""
        if self.alive():
            assert self.proc is not None
            processes.kill(self.proc)
            self._ended()

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM (after SIGCONT, in case it is paused) and wait: a clean shutdown
        returns 0. Killed if it has not exited within ``timeout``."""
        if not self.alive():
            return self.exit_codes[-1] if self.exit_codes else 0
        assert self.proc is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            processes.terminate(self.proc, timeout)
        return self._ended()

    stop = terminate

    def pause(self) -> None:
        """SIGSTOP, and wait until every thread stopped; its sockets stay open."""
        assert self.alive(), f"{self.name} is not running"
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True
        wait_stopped(self.proc.pid)

    def resume(self) -> None:
        """SIGCONT."""
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def restart(self, hard: bool = False, timeout: float = 30.0) -> None:
        """SIGKILL (``hard``) or SIGTERM, then start again on the same ports and data."""
        if hard:
            self.kill()
        else:
            self.terminate()
        self.start(timeout)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def partition_dir(self, topic: str, partition: int) -> Path:
        """``<log dir>/<topic>-<partition>`` in the first of its ``log.dirs`` that holds
        it (the first log dir when none does)."""
        dirs = [self.workdir / d for d in self.overrides["log.dirs"].split(",")]
        held = [d for d in dirs if (d / f"{topic}-{partition}").is_dir()]
        return (held or dirs)[0] / f"{topic}-{partition}"


class ClusterZooKeeper(ZooKeeperServer):
    """:class:`ZooKeeperServer` with the harness's process interface."""

    name = ZK
    paused = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        """SIGSTOP, and wait until every thread stopped."""
        super().pause()
        self.paused = True
        assert self.proc is not None
        wait_stopped(self.proc.pid)

    def resume(self) -> None:
        if self.alive():
            super().resume()
        self.paused = False

    def start(self, timeout: float = 30.0) -> None:  # type: ignore[override]
        super().start(timeout)
        _LIVE.add(self.proc)

    def terminate(self, timeout: float = 20.0) -> int:
        self.stop(timeout)
        self.paused = False
        return 0

    def kill(self) -> None:
        super().kill()
        self.paused = False

    def restart(self, hard: bool = False, timeout: float = 30.0) -> None:
        if hard:
            self.kill()
        else:
            self.stop()
        self.start(timeout)


class Cluster:
    """ZooKeeper (with ``zookeeper=True``), N brokers and the proxies between them.

    - ``overrides``: broker settings for every broker (after the harness's own);
      ``broker_overrides``: per broker id.
    - ``zk_session_timeout_ms``: ``zookeeper.session.timeout.ms`` of every broker.
    - ``chroot``: the ZooKeeper chroot (a fresh one by default).

    Nodes: ``"zk"``, ``"b1"`` .. ``"bN"``, ``"client"`` (see ``net``).
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        n_brokers: int = 3,
        overrides: dict[str, str] | None = None,
        zk_session_timeout_ms: int | None = None,
        zookeeper: bool = True,
        broker_overrides: dict[int, dict[str, str]] | None = None,
        chroot: str | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.n_brokers = n_brokers
        self.chroot = chroot or f"/cluster-{uuid.uuid4().hex[:10]}"
        self.net = Network()
        self.zookeeper: ClusterZooKeeper | None = (
            ClusterZooKeeper(self.workdir / "zookeeper") if zookeeper else None
        )
        if self.zookeeper is not None:
            RESERVED_PORTS.add(self.zookeeper.port)
        if self.zookeeper is not None:
            self.zookeeper.workdir.mkdir(parents=True, exist_ok=True)
        self.brokers: list[ClusterBroker] = []
        self.client_proxies: dict[int, LinkProxy] = {}
        self.internal_proxies: dict[int, LinkProxy] = {}
        self.zk_proxies: dict[int, LinkProxy] = {}
        for i in range(1, n_brokers + 1):
            node = f"b{i}"
            client_port, internal_port = reserve_port(), reserve_port()
            cp = self.net.add_kafka_proxy(node, client_port, "CLIENT")
            ip = self.net.add_kafka_proxy(node, internal_port, "INTERNAL")
            self.client_proxies[i], self.internal_proxies[i] = cp, ip
            settings = {
                "broker.id": str(i),
                "log.dirs": str(self.workdir / node / "data"),
                "listeners": f"CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}",
                "advertised.listeners": f"CLIENT://127.0.0.1:{cp.port},INTERNAL://127.0.0.1:{ip.port}",
                "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
                "group.initial.rebalance.delay.ms": "0",
            }
            if self.zookeeper is not None:
                zp = self.net.add_zk_proxy(node, self.zookeeper.port)
                self.zk_proxies[i] = zp
                settings["zookeeper.connect"] = f"127.0.0.1:{zp.port}{self.chroot}"
                if zk_session_timeout_ms is not None:
                    settings["zookeeper.session.timeout.ms"] = str(zk_session_timeout_ms)
                # A broker (re)starting on a loaded host waits this long for its first
                # connection, rather than the session timeout it defaults to.
                settings["zookeeper.connection.timeout.ms"] = "30000"
            settings.update(overrides or {})
            settings.update((broker_overrides or {}).get(i, {}))
            self.brokers.append(
                ClusterBroker(i, self.workdir / node, settings, client_port, internal_port)
            )

    # ---- access ----

    def broker(self, i: int) -> ClusterBroker:
        """Broker with id ``i`` (1-based)."""
        return self.brokers[i - 1]

    def node(self, name: str) -> ClusterBroker | ClusterZooKeeper:
        """The process of node ``"zk"`` or ``"b<i>"``."""
        if name == ZK:
            if self.zookeeper is None:
                raise KeyError("this cluster runs without ZooKeeper")
            return self.zookeeper
        if name.startswith("b") and name[1:].isdigit() and 1 <= int(name[1:]) <= self.n_brokers:
            return self.broker(int(name[1:]))
        raise KeyError(name)

    @property
    def node_names(self) -> list[str]:
        """Process nodes: ``"zk"`` (when it runs) and ``"b1"`` .. ``"bN"``."""
        return ([ZK] if self.zookeeper is not None else []) + [b.name for b in self.brokers]

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's client proxy, comma-separated."""
        return ",".join(p.address for p in self.client_proxies.values())

    def bootstrap(self, i: int) -> str:
        """Broker ``i``'s client proxy only."""
        return self.client_proxies[i].address

    @property
    def zk_connect(self) -> str:
        """ZooKeeper's own address with the chroot, not proxied (for test inspection)."""
        assert self.zookeeper is not None
        return f"{self.zookeeper.connect}{self.chroot}"

    def add_zk_proxy(self, src: str = CLIENT) -> LinkProxy:
        """Another proxy to ZooKeeper, e.g. for a test's own kazoo client as node ``src``."""
        assert self.zookeeper is not None
        return self.net.add_zk_proxy(src, self.zookeeper.port)

    # ---- lifecycle ----

    def start(self, timeout: float = 60.0) -> Cluster:
        """Starts ZooKeeper (if any), then every broker in parallel, and waits for all."""
        if self.zookeeper is not None and not self.zookeeper.alive():
            self.zookeeper.start()
        pending = [b for b in self.brokers if not b.alive()]
        for b in pending:
            b.launch()
        for b in pending:
            b.wait_ready(timeout)
        return self

    def stop(self) -> None:
        """SIGTERM every broker, then ZooKeeper; the proxies stay."""
        for b in self.brokers:
            b.terminate()
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def kill_all(self) -> None:
        for b in self.brokers:
            b.kill()
        if self.zookeeper is not None:
            self.zookeeper.kill()

    def close(self) -> None:
        """Kills every process and closes the proxies."""
        try:
            self.kill_all()
        finally:
            self.net.close()

    def __enter__(self) -> Cluster:
        try:
            return self.start()
        except BaseException:
            print(self.log_tails())
            self.close()
            raise

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            print(self.log_tails())
        self.close()

    # ---- helpers ----

    wait_until = staticmethod(wait_until)

    def log_tails(self, lines: int = 60) -> str:
        """The last ``lines`` lines of every process's log, one section each."""
        parts = []
        if self.zookeeper is not None:
            parts.append(
                f"==== zookeeper ({self.zookeeper.workdir / 'zookeeper.log'}) ====\n"
                f"{_tail(self.zookeeper.log_text(), lines)}"
            )
        for b in self.brokers:
            parts.append(
                f"==== {b.name} ({b.log_path}, exits {b.exit_codes}) ====\n"
                f"{_tail(b.log_text(), lines)}"
            )
        parts.append(
            "==== the test process's proxy loop: stalls over 1 s ====\n"
            + ("\n".join(self.net.stalls) or "none")
        )
        if self.zookeeper is not None:
            parts.append(
                f"==== zookeeper JVM pauses over 0.5 s ({self.zookeeper.gc_log}) ====\n"
                + ("\n".join(self.zookeeper.long_pauses(0.5)) or "none")
            )
        return "\n".join(parts)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: dict[str, str] | None = None,
        bootstrap: str | None = None,
        timeout: float = 20.0,
    ) -> None:
        """Creates a topic with confluent-kafka's AdminClient (through the client
        proxies) and waits until its metadata lists every partition."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap or self.bootstrap_servers})

        # A broker is ready before the controller has seen the others register; until the
        # metadata lists enough brokers, CreateTopics answers INVALID_REPLICATION_FACTOR.
        def enough_brokers() -> bool:
            return len(admin.list_topics(timeout=5).brokers) >= replication_factor

        wait_until(enough_brokers, timeout, 0.1, f"{replication_factor} brokers in the metadata")
        admin.create_topics([NewTopic(name, partitions, replication_factor, config=config or {})])[
            name
        ].result(timeout)

        def listed() -> bool:
            md = admin.list_topics(name, timeout=5).topics.get(name)
            return md is not None and md.error is None and len(md.partitions) == partitions

        wait_until(listed, timeout, 0.1, f"metadata of {name}")
