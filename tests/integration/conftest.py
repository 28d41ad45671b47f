"""A real broker process on a free loopback port, for tests that drive it with real clients.

``broker`` is a fresh broker per test; ``module_broker`` one broker shared by a test
module (faster where tests use distinct topics). Both keep their data in a temporary
directory and can be stopped (SIGTERM), killed (SIGKILL) and restarted on the same
port and data directory. The broker's stderr goes to ``broker.log`` beside the data,
and is printed when a test fails to start it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

import pytest

from tests.support import processes
from tests.support.ports import free_port


def consume_values(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> list[bytes]:
    """The values of ``topic`` from the start, read by a confluent-kafka consumer of a
    group of its own until ``count`` arrived or ``timeout`` passed (every error fails)."""
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{topic}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        c.close()
    return got


class BrokerProcess:
    def __init__(self, workdir: str, overrides: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.data_dir = os.path.join(workdir, "data")
        self.log_path = os.path.join(workdir, "broker.log")
        self.port = free_port()
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": self.data_dir,
            "group.initial.rebalance.delay.ms": "0",
            "num.partitions": "1",
            **(overrides or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        # Run in the broker's process before it starts, e.g. to set a resource limit.
        self.preexec_fn: Callable[[], None] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                processes.broker_command(overrides=self.overrides),
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.workdir,
                env=processes.repo_env(),
                preexec_fn=self.preexec_fn,
            )
        ready, out = processes.wait_for_output(self.proc, processes.LISTENING, timeout)
        if not ready:
            processes.kill(self.proc)
            raise RuntimeError(f"broker did not start: {out!r}\n{self.log_text()[-4000:]}")

    def log_text(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown returns 0. SIGKILLed after ``timeout``
        seconds, and ``subprocess.TimeoutExpired`` raised."""
        return processes.terminate(self.proc, timeout) if self.proc is not None else 0

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc is not None:
            processes.kill(self.proc)

    def restart(self) -> None:
        assert self.stop() == 0, self.log_text()[-4000:]
        self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(str(tmp_path))
    b.start()
    yield b
    b.kill()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("broker")))
    b.start()
    yield b
    b.kill()


@pytest.fixture
def broker_factory(tmp_path):
    """Builds brokers with config overrides: ``broker_factory({"key": "value"})``."""
    made: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, start: bool = True) -> BrokerProcess:
        b = BrokerProcess(str(tmp_path / f"b{len(made)}"), overrides)
        os.makedirs(b.workdir, exist_ok=True)
        made.append(b)
        if start:
            b.start()
        return b

    yield make
    for b in made:
        b.kill()
