"""``logstore dev-cluster up --brokers 3`` / ``down``, and the broker commands against
the three-broker cluster it starts (Debian's ZooKeeper, as scripts/test.sh installs)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, unique


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture(scope="module")
def dev_cluster(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("dev-cluster")
    local = Cli("127.0.0.1:1")  # dev-cluster itself needs no broker
    up = local(
        "dev-cluster",
        "up",
        "--brokers",
        "3",
        "--dir",
        directory,
        "--override",
        "offsets.topic.num.partitions=3",
        "--format",
        "json",
        timeout=240,
        check=False,
    )
    state = (
        json.loads((directory / "cluster.json").read_text())
        if (directory / "cluster.json").exists()
        else None
    )
    try:
        assert up.returncode == 0, up.stderr
        yield directory, json.loads(up.stdout)
    finally:
        down = local("dev-cluster", "down", "--dir", directory, timeout=300, check=False)
        if state is not None:
            for pid in [state["zookeeper"]["pid"], *(b["pid"] for b in state["brokers"])]:
                if _alive(pid):
                    os.kill(pid, 9)
        assert down.returncode == 0, down.stderr


def test_up_prints_the_bootstrap_servers(dev_cluster) -> None:
    directory, state = dev_cluster
    assert len(state["brokers"]) == 3
    assert state["bootstrap_servers"] == ",".join(
        f"127.0.0.1:{b['port']}" for b in state["brokers"]
    )
    assert all(n["alive"] for n in state["nodes"])
    status = Cli("127.0.0.1:1")("dev-cluster", "status", "--dir", directory)
    assert f"Bootstrap servers: {state['bootstrap_servers']}" in status.stdout
    again = Cli("127.0.0.1:1")("dev-cluster", "up", "--dir", directory, check=False)
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
    assert sum(p["current_offset"] for p in g["partitions"]) == 20
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


def test_down_stops_everything(tmp_path: Path) -> None:
    local = Cli("127.0.0.1:1")
    directory = tmp_path / "one"
    local("dev-cluster", "up", "--brokers", "1", "--dir", directory, timeout=240)
    state = json.loads((directory / "cluster.json").read_text())
    pids = [state["zookeeper"]["pid"], state["brokers"][0]["pid"]]
    try:
        down = local(
            "dev-cluster", "down", "--dir", directory, "--purge", "--format", "json", timeout=180
        )
        stopped = json.loads(down.stdout)["stopped"]
        assert [s["node"] for s in stopped] == ["broker 1", "zookeeper"] and all(
            s["clean"] for s in stopped
        )
        assert not any(_alive(pid) for pid in pids)
        assert not (directory / "cluster.json").exists() and not (directory / "b1").exists()
        missing = local("dev-cluster", "down", "--dir", directory, check=False)
        assert missing.returncode == 2 and "no dev cluster" in missing.stderr
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, 9)
