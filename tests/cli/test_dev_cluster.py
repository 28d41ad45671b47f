"""``logstore dev-cluster``: one three-broker cluster (Debian's ZooKeeper, as
scripts/test.sh installs, and real brokers) taken through the commands in order: up,
the broker commands against it, stop/status/start/restart of one broker with ``logs
-f`` following, add, a broker started by hand that ``down`` finds, the ports kept
across down/up, and last a broker whose ZooKeeper was SIGKILLed stopping within its
controlled-shutdown budget, then ``down --purge`` leaving no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli, unique
from tests.support.processes import repo_env, wait_for_output
from tests.support.waiting import wait_until

# Small controlled-shutdown budget: 2 attempts, 0.5 s apart.
OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "controlled.shutdown.max.retries": "2",
    "controlled.shutdown.retry.backoff.ms": "500",
}

local = Cli("127.0.0.1:1")  # dev-cluster itself needs no broker


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _naming(directory: Path) -> dict[int, str]:
    """Every live process whose command line names ``directory``: pid -> command line."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in argv and _alive(int(entry)):
            found[int(entry)] = argv
    return found


def dev(directory: Path, *args: object, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return local("dev-cluster", *args, "--dir", directory, timeout=240, **kwargs)


def status(directory: Path) -> dict[str, dict[str, Any]]:
    out = dev(directory, "status", "--format", "json")
    return {n["node"]: n for n in json.loads(out.stdout)["nodes"]}


@pytest.fixture(scope="module")
def dev_cluster(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("dev-cluster")
    overrides = [a for k, v in OVERRIDES.items() for a in ("--override", f"{k}={v}")]
    up = dev(directory, "up", "--brokers", "3", *overrides, "--format", "json", check=False)
    try:
        assert up.returncode == 0, up.stderr
        yield directory, json.loads(up.stdout)
    finally:
        if (directory / "cluster.json").exists():
            dev(directory, "down", check=False)
        for pid in _naming(directory):
            os.kill(pid, signal.SIGKILL)


def test_up_prints_the_bootstrap_servers(dev_cluster) -> None:
    directory, state = dev_cluster
    assert len(state["brokers"]) == 3
    assert state["bootstrap_servers"] == ",".join(
        f"127.0.0.1:{b['port']}" for b in state["brokers"]
    )
    assert all(n["running"] for n in state["nodes"])
    assert [n["registered"] for n in state["nodes"][1:]] == [True, True, True]
    table = dev(directory, "status").stdout
    assert f"Bootstrap servers: {state['bootstrap_servers']}" in table
    assert "REGISTERED" in table and "RUNNING" in table
    again = dev(directory, "up", check=False)
    assert again.returncode == 2 and "already runs" in again.stderr


def test_commands_against_three_brokers(dev_cluster) -> None:
    _directory, state = dev_cluster
    cli = Cli(state["bootstrap_servers"])
    info = cli.json("cluster", "info")
    assert [b["id"] for b in info["brokers"]] == [1, 2, 3] and info["controller"] in (1, 2, 3)

    topic, group = unique("replicated"), unique("g")
    cli("topic", "create", topic, "-p", "3", "-r", "3")
    (described,) = cli.json("topic", "describe", topic)
    for p in described["partitions"]:
        assert sorted(p["replicas"]) == [1, 2, 3] and p["leader"] in (1, 2, 3)
    # Every follower joins the ISR.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        parts = cli.json("topic", "describe", topic, "-p")[0]["partitions"]
        if all(sorted(p["isr"]) == [1, 2, 3] for p in parts):
            break
        time.sleep(0.5)
    assert all(sorted(p["isr"]) == [1, 2, 3] for p in parts), parts

    cli("produce", topic, "--acks", "all", input="".join(f"r{i}\n" for i in range(30)))
    got = cli("consume", topic, "-g", group, "-n", "20").stdout.splitlines()
    assert len(got) == 20
    (g,) = cli.json("group", "describe", group)
    # The group committed the 20 records it read, on the partitions it read them from.
    assert sum(p["current_offset"] or 0 for p in g["partitions"]) == 20
    assert g["total_lag"] == sum(p["log_end_offset"] for p in g["partitions"]) - 20
    cli("group", "seek", group, "--to", "start", "--topics", topic, "--execute")
    (g,) = cli.json("group", "describe", group)
    assert len(g["partitions"]) == 3 and g["total_lag"] == 30
    assert sorted(cli("consume", topic, "-g", group, "-e").stdout.splitlines()) == sorted(
        f"r{i}" for i in range(30)
    )

    assert cli.json("cluster", "config", "set", "log.retention.ms", "7200000")[0]["error"] is None
    for broker in (1, 2, 3):
        (entry,) = cli.json("cluster", "config", "get", "log.retention.ms", "--broker", str(broker))
        assert entry["value"] == "7200000"
    cli("topic", "delete", topic, "--no-confirm")


def test_stop_start_restart_one_broker_and_follow_the_logs(dev_cluster) -> None:
    directory, state = dev_cluster
    follow = subprocess.Popen(
        [sys.executable, "-m", "logstore", "dev-cluster", "logs", "-f", "-n", "1"]
        + ["--dir", str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=repo_env(),
    )
    # It prints each log's last line, then follows.
    ready, head = wait_for_output(follow, b"broker 3  | ", timeout=60)
    try:
        assert ready, head
        stopped = json.loads(dev(directory, "stop", "2", "--format", "json").stdout)["stopped"]
        assert [(s["node"], s["clean"]) for s in stopped] == [("broker 2", True)]
        nodes = status(directory)
        assert (nodes["broker 2"]["running"], nodes["broker 2"]["registered"]) == (False, False)
        assert all(nodes[f"broker {i}"]["registered"] for i in (1, 3))
        assert nodes["broker 2"]["address"] == f"127.0.0.1:{state['brokers'][1]['port']}"
        again = dev(directory, "stop", "2")
        assert "broker 2 is not running" in again.stderr

        started = json.loads(dev(directory, "start", "2", "--format", "json").stdout)
        (b2,) = [n for n in started["nodes"] if n["node"] == "broker 2"]
        assert b2["running"] and b2["registered"]
        busy = dev(directory, "start", "2", check=False)
        assert busy.returncode == 2 and "broker 2 already runs" in busy.stderr

        before = status(directory)["broker 3"]["pid"]
        restarted = json.loads(dev(directory, "restart", "3", "--format", "json").stdout)
        (b3,) = [n for n in restarted["nodes"] if n["node"] == "broker 3"]
        assert b3["running"] and b3["registered"] and b3["pid"] != before
        assert b3["address"] == f"127.0.0.1:{state['brokers'][2]['port']}"
        assert Cli(restarted["bootstrap_servers"]).json("cluster", "info")["brokers"]
    finally:
        follow.send_signal(signal.SIGINT)
        out, err = follow.communicate(timeout=30)
    text = (head + out).decode()
    assert follow.returncode == 130, err
    # Lines of several logs, each behind its node's name.
    assert "broker 2  | " in text and "broker 2 stopped: every log closed" in text, text[-2000:]
    assert "broker 3  | " in text and "registered broker 3 in ZooKeeper" in text

    one = dev(directory, "logs", "1", "-n", "5").stdout.splitlines()
    assert len(one) == 5 and not one[0].startswith("broker 1")
    every = dev(directory, "logs", "-n", "1").stdout.splitlines()
    assert [line.split(" | ")[0].strip() for line in every] == [
        "zookeeper",
        "broker 1",
        "broker 2",
        "broker 3",
    ]


def test_add_a_broker(dev_cluster) -> None:
    directory, _state = dev_cluster
    added = json.loads(dev(directory, "add", "--format", "json").stdout)
    (b4,) = [n for n in added["nodes"] if n["node"] == "broker 4"]
    assert b4["running"] and b4["registered"]
    assert all(n["registered"] for n in added["nodes"][1:])
    info = Cli(added["bootstrap_servers"]).json("cluster", "info")
    assert sorted(b["id"] for b in info["brokers"]) == [1, 2, 3, 4]


def test_down_finds_a_broker_started_by_hand_and_up_keeps_the_ports(dev_cluster) -> None:
    directory, _state = dev_cluster
    saved = json.loads((directory / "cluster.json").read_text())
    dev(directory, "stop", "4")
    # Broker 4 again, by hand: its command line, not the CLI's record, says where it lives.
    (b4,) = [b for b in saved["brokers"] if b["id"] == 4]
    settings = {
        "broker.id": "4",
        "listeners": f"PLAINTEXT://127.0.0.1:{b4['port']}",
        "log.dirs": str(directory / "b4" / "data"),
        "zookeeper.connect": f"127.0.0.1:{saved['zookeeper']['port']}",
        **saved["config"],
    }
    command = [sys.executable, "-m", "broker_py"]
    for k, v in settings.items():
        command += ["--override", f"{k}={v}"]
    hand = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=repo_env(),
        start_new_session=True,
    )
    try:
        assert wait_for_output(hand, timeout=60)[0]
        wait_until(
            lambda: status(directory)["broker 4"]["registered"],
            timeout=60,
            message="broker 4 (started by hand) registered",
        )
        assert status(directory)["broker 4"]["pid"] == hand.pid
        addresses = {n: s["address"] for n, s in status(directory).items()}

        down = json.loads(dev(directory, "down", "--format", "json").stdout)
        rows = {s["node"]: s for s in down["stopped"]}
        assert list(rows) == ["broker 1", "broker 2", "broker 3", "broker 4", "zookeeper"]
        assert rows["broker 4"]["pid"] == hand.pid and all(s["clean"] for s in rows.values())
        assert hand.wait(timeout=30) == 0
    finally:
        if hand.poll() is None:
            hand.kill()
            hand.wait()
    assert _naming(directory) == {}
    assert not any(n["running"] for n in status(directory).values())

    up = json.loads(dev(directory, "up", "--format", "json").stdout)
    assert {n["node"]: n["address"] for n in up["nodes"]} == addresses
    assert all(n["registered"] for n in up["nodes"][1:])


def test_a_broker_without_zookeeper_stops_within_its_budget(dev_cluster) -> None:
    directory, _state = dev_cluster
    nodes = status(directory)
    broker1 = nodes["broker 1"]["pid"]
    brokers = [int(name.split()[1]) for name in nodes if name.startswith("broker ")]
    logs = {n: directory / f"b{n}" / "broker.log" for n in brokers}
    starts = {n: len(path.read_bytes()) for n, path in logs.items()}
    log, start = logs[1], starts[1]
    os.kill(nodes["zookeeper"]["pid"], signal.SIGKILL)
    wait_until(lambda: not _alive(nodes["zookeeper"]["pid"]), timeout=30, message="ZK gone")

    def every_broker_lost_zookeeper() -> bool:
        return all(
            b"ZooKeeper connection lost" in path.read_bytes()[starts[n] :]
            for n, path in logs.items()
        )

    # The controller (possibly broker 1 itself) answers ControlledShutdown from memory
    # until it sees its ZooKeeper connection go; the budget under test is a broker's
    # once no controller is left.
    wait_until(every_broker_lost_zookeeper, timeout=60, message="every broker saw ZK go")
    os.kill(broker1, signal.SIGTERM)
    # Budget: 2 attempts (each at most request.timeout.ms, 30 s) 0.5 s apart; bounded
    # generously, not timed.
    wait_until(lambda: not _alive(broker1), timeout=120, message="broker 1 stopped")
    text = log.read_bytes()[start:].decode(errors="replace")
    for line in (
        "starting controlled shutdown (at most 2 attempts, 500 ms apart)",
        "controlled shutdown attempt 1 of 2 failed",
        "retrying controlled shutdown in 500 ms (1 retries remaining)",
        "controlled shutdown attempt 2 of 2 failed",
        "controlled shutdown failed after 2 attempts; shutting down uncleanly",
        "broker 1 stopped: every log closed",
    ):
        assert line in text, text[-3000:]

    down = json.loads(dev(directory, "down", "--purge", "--format", "json").stdout)
    assert [(s["node"], s["clean"]) for s in down["stopped"]] == [
        ("broker 2", True),
        ("broker 3", True),
        ("broker 4", True),
    ]
    assert _naming(directory) == {}
    assert not (directory / "cluster.json").exists() and not (directory / "b1").exists()
    missing = dev(directory, "down", check=False)
    assert missing.returncode == 2 and "no dev cluster" in missing.stderr
