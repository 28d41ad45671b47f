"""A real ZooKeeper server for cluster tests: Debian's ``zookeeper`` package (3.8),
run as ``ZooKeeperServerMain`` on a free loopback port with its own data dir.

``scripts/test.sh`` installs the package. The server can be stopped (SIGTERM), killed
(SIGKILL), paused (SIGSTOP) and resumed (SIGCONT), and started again on the same port
and data dir, so sessions and znodes survive a restart as they would in production.
Session timeouts are bounded by ``minSessionTimeout`` / ``maxSessionTimeout``: 0.4 s
to 60 s here, so tests may use short sessions and brokers Kafka's 18 s default.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support import processes
from tests.support.ports import free_port

CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
JAVA = "/usr/bin/java"
_SAFEPOINT_TOTAL = re.compile(r"Total: (\d+) ns")


class ZooKeeperServer:
    def __init__(self, workdir: Path, tick_ms: int = 200) -> None:
        if not os.path.exists("/usr/share/java/zookeeper.jar") or not os.path.exists(JAVA):
            raise RuntimeError(
                "ZooKeeper is not installed: run scripts/test.sh (apt-get install zookeeper)"
            )
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.port = free_port()
        self.tick_ms = tick_ms
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def gc_log(self) -> Path:
        return self.workdir / "safepoints.log"

    def long_pauses(self, over_s: float) -> list[str]:
        """The JVM's stop-the-world pauses longer than ``over_s`` seconds, from its
        safepoint log (``[<time>] Safepoint "<why>", ... Total: <ns> ns``)."""
        try:
            text = self.gc_log.read_text(errors="replace")
        except OSError:
            return []
        return [
            line
            for line in text.splitlines()
            if (m := _SAFEPOINT_TOTAL.search(line)) and int(m.group(1)) > over_s * 1e9
        ]

    def _config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / "zoo.cfg"
        path.write_text(
            f"tickTime={self.tick_ms}\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n"
            "minSessionTimeout=400\n"
            "maxSessionTimeout=60000\n"
            "maxClientCnxns=0\n"
            # The transaction log is written but not fsynced: a test kills the process, not
            # the machine, so the page cache keeps every write, and a shared host's disk
            # cannot stall every session behind one slow fsync.
            "forceSync=no\n"
        )
        return path

    def start(self, timeout: float = 30.0) -> None:
        config = self._config()
        log = open(self.workdir / "zookeeper.log", "ab")
        self.proc = subprocess.Popen(
            [
                JAVA,
                "-Xmx256m",
                # Every stop-the-world pause (GC included), for long_pauses().
                f"-Xlog:safepoint:file={self.gc_log}:time",
                "-cp",
                CLASSPATH,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(config),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not self.ok():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"ZooKeeper did not start:\n{self.log_text()[-3000:]}")
            time.sleep(0.1)

    def ok(self) -> bool:
        """Whether the server answers ``ruok`` with ``imok``."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"ruok")
                return s.recv(16) == b"imok"
        except OSError:
            return False

    def log_text(self) -> str:
        try:
            return (self.workdir / "zookeeper.log").read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (after SIGCONT) and wait; SIGKILL after ``timeout`` seconds."""
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                processes.terminate(self.proc, timeout)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc is not None:
            processes.kill(self.proc)
        self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
