"""What every hardening test checks around its attack: a well-behaved client alongside,
the broker's memory, and the acknowledged messages across a SIGKILL.

- :class:`WellBehavedProducer`: one acks=all message at a time, from a thread, with its
  connection made before the attack; it records each message's latency and every error.
  Beside it a probe connection (also made before the attack) sends ApiVersions every
  10 ms and times each answer: that is the broker's own responsiveness, with nothing of
  a client library's timers in it. "Responsive" means no producer error, no probe
  answer later than ``STALL_S``, and no message waiting more than
  ``PRODUCER_STALL_S`` (librdkafka alone was seen to hold a message 0.5-1 s while the
  probe's answers came within 22 ms, so the producer's bound is looser; it still catches
  a broker frozen for seconds, as the 39.9 s of the issue).
- :func:`rss_mb`: the broker process's resident memory.
- :func:`kill_restart_and_check`: SIGKILL at a random moment, start again, and read back
  every message the well-behaved producer had acknowledged.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

from tests.integration.clients import read_frame
from tests.integration.conftest import BrokerProcess, consume_values

STALL_S = 1.0
PRODUCER_STALL_S = 5.0
MIN_RUN_S = 1.5
WATCH_TOPIC = "watch"


class WellBehavedProducer:
    def __init__(self, bootstrap: str, topic: str = WATCH_TOPIC) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 0,
                "message.timeout.ms": 30000,
                "enable.idempotence": True,
                "socket.keepalive.enable": True,
            }
        )
        self.acked: list[bytes] = []
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._seq = 0
        # Connect and learn the topic's leader before any attack starts.
        self._one()
        assert not self.errors, self.errors
        self._thread = threading.Thread(target=self._run, name="well-behaved", daemon=True)
        host, port = bootstrap.rsplit(":", 1)
        self._probe = socket.create_connection((host, int(port)), timeout=30)
        self.probe_latencies: list[float] = []
        self.probe_errors: list[str] = []
        self._probe_thread = threading.Thread(target=self._run_probe, name="probe", daemon=True)

    def _run_probe(self) -> None:
        request = struct.pack(">ihhih", 10, 18, 0, 7, -1)  # ApiVersions v0, null client id
        while not self._stop.is_set():
            sent = time.monotonic()
            try:
                self._probe.sendall(request)
                read_frame(self._probe)
            except OSError as e:
                self.probe_errors.append(str(e))
                return
            self.probe_latencies.append(time.monotonic() - sent)
            time.sleep(0.01)

    def _one(self) -> None:
        value = f"w{self._seq}".encode()
        self._seq += 1
        done: list = []
        sent = time.monotonic()
        self.producer.produce(self.topic, value, on_delivery=lambda err, msg: done.append(err))
        deadline = sent + 35
        while not done and time.monotonic() < deadline:
            self.producer.poll(0.01)
        latency = time.monotonic() - sent
        if not done:
            self.errors.append(f"{value!r}: no delivery report")
        elif done[0] is not None:
            self.errors.append(f"{value!r}: {done[0]}")
        else:
            self.acked.append(value)
            self.latencies.append(latency)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._one()
            time.sleep(0.02)

    def start(self) -> WellBehavedProducer:
        self._started = time.monotonic()
        self._thread.start()
        self._probe_thread.start()
        return self

    def stop(self) -> None:
        """Stops, after having run for at least MIN_RUN_S."""
        time.sleep(max(0.0, self._started + MIN_RUN_S - time.monotonic()))
        self._stop.set()
        self._thread.join(60)
        self._probe_thread.join(60)
        self._probe.close()
        self.producer.flush(10)

    @property
    def max_latency(self) -> float:
        return max(self.latencies, default=0.0)

    def assert_responsive(self) -> None:
        assert not self.errors, self.errors[:5]
        assert not self.probe_errors, self.probe_errors
        assert len(self.latencies) >= 5, "the well-behaved client hardly produced"
        probe_max = max(self.probe_latencies, default=0.0)
        assert probe_max <= STALL_S, (
            f"the broker answered after {probe_max:.2f} s (over {STALL_S} s)"
        )
        assert self.max_latency <= PRODUCER_STALL_S, f"a message waited {self.max_latency:.2f} s"


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def kill_restart_and_check(
    broker: BrokerProcess, acked: list[bytes], within_s: float = 2.0, topic: str = WATCH_TOPIC
) -> None:
    """SIGKILL at a random moment within ``within_s``, restart, and find every acked value."""
    time.sleep(random.uniform(0, within_s))
    broker.kill()
    broker.start(timeout=120)
    got = set(consume_values(broker.bootstrap, topic, len(acked), timeout=60))
    missing = [v for v in acked if v not in got]
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:3]}"
