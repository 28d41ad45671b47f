"""``logstore consume -g`` ended from outside, as a shell ends it: SIGINT (Ctrl-C), SIGTERM
and a reader that closes the pipe (``| head``). Each time the group must hold exactly what
was written to stdout, the member must have left (the group Empty at once, so ``group
seek`` works), and the exit status must be 130, 143 or 0. The consumer is a real
``python -m logstore`` process against the module's broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any

from confluent_kafka import Producer

from tests.cli.conftest import Cli, unique
from tests.support.processes import repo_env
from tests.support.waiting import wait_until

# Big enough that a few dozen fill a pipe: the consumer is then blocked writing while it
# has fetched far more than it wrote.
BIG = 2000


class Consumer:
    """A ``logstore consume`` process whose stdout lines are collected by a thread."""

    def __init__(self, bootstrap: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "logstore", "consume", *args, "-f", "%p %o %v\\n"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=repo_env(LOGSTORE_BROKERS=bootstrap),
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)

    def start_reading(self) -> Consumer:
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode())

    def wait_lines(self, n: int) -> None:
        wait_until(lambda: len(self.lines) >= n, 60, message=f"{n} lines from consume")

    def read_lines(self, n: int) -> None:
        """Reads exactly ``n`` lines in this thread (no reader thread)."""
        assert self.proc.stdout is not None
        for _ in range(n):
            self.lines.append(self.proc.stdout.readline().decode())

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        """Exit status and stderr, after the reader (if any) has seen end of file."""
        rc = self.proc.wait(timeout)
        if self._reader.is_alive():
            self._reader.join(timeout)
        assert self.proc.stderr is not None
        return rc, self.proc.stderr.read().decode()

    def printed(self) -> dict[int, int]:
        """Per partition, the offset after the last record printed."""
        out: dict[int, int] = {}
        for line in self.lines:
            partition, offset, _value = line.split(" ", 2)
            out[int(partition)] = max(out.get(int(partition), 0), int(offset) + 1)
        return out


def fill(bootstrap: str, topic: str, per_partition: dict[int, int], size: int = 8) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, count in per_partition.items():
        for i in range(count):
            value = f"{partition}-{i}".ljust(size, "x").encode()
            p.produce(topic, value=value, partition=partition)
    assert p.flush(30) == 0


def described(logstore: Cli, group: str) -> dict[str, Any]:
    (g,) = logstore.json("group", "describe", group)
    return g


def committed(g: dict[str, Any]) -> dict[int, int]:
    return {
        p["partition"]: p["current_offset"]
        for p in g["partitions"]
        if p["current_offset"] is not None
    }


def test_sigint_commits_exactly_what_was_printed(logstore: Cli, cli_broker) -> None:
    topic, group = unique("ctrl-c"), unique("g")
    logstore("topic", "create", topic, "-p", "2")
    fill(cli_broker.bootstrap, topic, {0: 100, 1: 100}, BIG)
    c = Consumer(cli_broker.bootstrap, topic, "-g", group)
    # Nothing reads stdout yet: the pipe fills and the consumer blocks writing.
    c.read_lines(5)
    c.proc.send_signal(signal.SIGINT)
    c.start_reading()  # drains the pipe: the blocked write ends, then the loop stops
    rc, err = c.finish()
    assert rc == 130, err
    assert "Traceback" not in err and err == "", err
    assert 5 <= len(c.lines) < 200

    g = described(logstore, group)
    assert g["state"] == "EMPTY" and g["members"] == []
    assert committed(g) == c.printed()
    # Both partitions are listed; one never printed from counts from its log start.
    assert {p["partition"] for p in g["partitions"]} == {0, 1}
    assert g["total_lag"] == 200 - len(c.lines)


def test_sigterm_commits_and_leaves_so_seek_works_at_once(logstore: Cli, cli_broker) -> None:
    topic, group = unique("sigterm"), unique("g")
    logstore("topic", "create", topic, "-p", "2")
    fill(cli_broker.bootstrap, topic, {0: 4, 1: 3})
    c = Consumer(cli_broker.bootstrap, topic, "-g", group).start_reading()
    c.wait_lines(7)
    c.proc.send_signal(signal.SIGTERM)
    rc, err = c.finish()
    assert rc == 143 and err == "", err
    assert c.printed() == {0: 4, 1: 3}

    g = described(logstore, group)
    assert g["state"] == "EMPTY" and g["members"] == []
    assert committed(g) == {0: 4, 1: 3} and g["total_lag"] == 0
    # No member is left behind: the group can be moved right away.
    moved = logstore.json("group", "seek", group, "--to", "start", "--execute")
    assert [(p["partition"], p["new_offset"], p["error"]) for p in moved] == [
        (0, 0, None),
        (1, 0, None),
    ]
    assert described(logstore, group)["total_lag"] == 7


def test_closed_pipe_commits_what_was_written_and_exits_0(logstore: Cli, cli_broker) -> None:
    topic = unique("head")
    logstore("topic", "create", topic, "-p", "1")

    # `| head -3` with a backlog: the reader goes away while the consumer is writing.
    busy = unique("g")
    fill(cli_broker.bootstrap, topic, {0: 200}, BIG)
    c = Consumer(cli_broker.bootstrap, topic, "-g", busy)
    c.read_lines(3)
    assert c.proc.stdout is not None
    c.proc.stdout.close()
    rc, err = c.finish()
    assert rc == 0 and err == "", err
    g = described(logstore, busy)
    assert g["state"] == "EMPTY"
    (written,) = committed(g).values()
    # What reached the pipe: at least what was read, never the whole fetched backlog.
    assert 3 <= written < 200 and g["total_lag"] == 200 - written

    # `| head -3` after everything was written: an idle consumer notices the reader left.
    few, idle = unique("head"), unique("g")
    logstore("topic", "create", few, "-p", "1")
    fill(cli_broker.bootstrap, few, {0: 3})
    c = Consumer(cli_broker.bootstrap, few, "-g", idle)
    c.read_lines(3)
    assert [line.split(" ")[1] for line in c.lines] == ["0", "1", "2"]
    assert c.proc.stdout is not None
    c.proc.stdout.close()
    rc, err = c.finish()
    assert rc == 0 and err == "", err
    g = described(logstore, idle)
    assert g["state"] == "EMPTY" and committed(g) == {0: 3} and g["total_lag"] == 0


def test_a_silent_coordinator_bounds_the_end_and_a_second_signal_aborts(
    logstore: Cli, cli_broker
) -> None:
    topic = unique("frozen")
    logstore("topic", "create", topic, "-p", "1")
    fill(cli_broker.bootstrap, topic, {0: 3})
    broker = cli_broker.proc.pid

    # The broker stops answering: the commit and the LeaveGroup each wait --timeout.
    c = Consumer(cli_broker.bootstrap, topic, "-g", unique("g"), "--timeout", "1")
    c.start_reading().wait_lines(3)
    os.kill(broker, signal.SIGSTOP)
    try:
        c.proc.send_signal(signal.SIGTERM)
        rc, err = c.finish()
    finally:
        os.kill(broker, signal.SIGCONT)
    assert rc == 2, err
    assert "commit of group" in err and "TIMED_OUT" in err and "did not close" in err, err

    # A second signal while the commit waits ends the process at once, with 128 + the
    # signal Python handles first of the two.
    c = Consumer(cli_broker.bootstrap, topic, "-g", unique("g"), "--timeout", "600")
    c.start_reading().wait_lines(3)
    os.kill(broker, signal.SIGSTOP)
    try:
        c.proc.send_signal(signal.SIGTERM)
        c.proc.send_signal(signal.SIGINT)
        rc, err = c.finish()
    finally:
        os.kill(broker, signal.SIGCONT)
    assert rc in (130, 143) and err == "", err
