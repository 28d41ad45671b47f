"""``cluster.json``, the state of a dev cluster's directory, and the ports it keeps.

Format (JSON, written whole on every change)::

    {
      "dir": "/abs/dir",
      "zookeeper": {"pid": 123 | null, "port": 2181, "log": "/abs/dir/zookeeper/zookeeper.log"},
      "brokers": [{"id": 1, "pid": 124 | null, "port": 9092, "log": "/abs/dir/b1/broker.log"}],
      "config": {"default.replication.factor": "3", ...},
      "bootstrap_servers": "127.0.0.1:9092,..."
    }

``pid`` is the process the CLI last started (null once stopped); the processes of the
directory are found again by :mod:`logstore.cli.dev_cluster.processes` however they were
started. ``port`` is picked by the first ``up`` (or ``add``) and never changes while the
file exists: every later start of that node listens there, so saved client configs keep
working. ``config`` is every broker's config apart from its own keys (``broker.id``,
``listeners``, ``log.dirs``, ``zookeeper.connect``): the defaults below and ``up
--override``. Older files without ``config`` get the defaults for their broker count.
``down`` keeps the file (pids null); ``down --purge`` deletes it with the data.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from logstore.cli.common import CliError

DEFAULT_DIR = "logstore-dev-cluster"
STATE_FILE = "cluster.json"
HOST = "127.0.0.1"


def load(directory: Path) -> dict[str, Any] | None:
    """The directory's state, or None when it has no ``cluster.json``."""
    try:
        state: dict[str, Any] = json.loads((directory / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CliError(f"{directory / STATE_FILE}: unreadable ({exc})") from None
    state.setdefault("config", default_config(len(state.get("brokers", [])), {}))
    return state


def require(directory: Path) -> dict[str, Any]:
    state = load(directory)
    if state is None:
        raise CliError(f"no dev cluster in {directory}: `logstore dev-cluster up --dir` first")
    return state


def save(directory: Path, state: dict[str, Any]) -> None:
    """Writes ``cluster.json`` through a temporary file and a rename (never half written)."""
    state["bootstrap_servers"] = bootstrap(state)
    tmp = directory / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, directory / STATE_FILE)


def bootstrap(state: dict[str, Any]) -> str:
    return ",".join(f"{HOST}:{b['port']}" for b in state["brokers"])


def broker(state: dict[str, Any], broker_id: int) -> dict[str, Any]:
    for b in state["brokers"]:
        if b["id"] == broker_id:
            found: dict[str, Any] = b
            return found
    known = ", ".join(str(b["id"]) for b in state["brokers"])
    raise CliError(f"no broker {broker_id} in this dev cluster (brokers: {known})")


def default_config(n: int, overrides: dict[str, str]) -> dict[str, str]:
    """The config every broker of an ``n``-broker cluster shares: no rebalance delay, and
    replication factors of min(3, n) for new and internal topics; then ``overrides``."""
    rf = str(max(1, min(3, n)))
    return {
        "group.initial.rebalance.delay.ms": "0",
        "default.replication.factor": rf,
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": str(max(1, min(2, n))),
        **overrides,
    }


def broker_settings(directory: Path, state: dict[str, Any], b: dict[str, Any]) -> dict[str, str]:
    """Broker ``b``'s full config: its own keys, then the cluster's ``config``."""
    return {
        "broker.id": str(b["id"]),
        "listeners": f"PLAINTEXT://{HOST}:{b['port']}",
        "log.dirs": str(directory / f"b{b['id']}" / "data"),
        "zookeeper.connect": f"{HOST}:{state['zookeeper']['port']}",
        **state["config"],
    }


def stop_budget(config: dict[str, str]) -> float:
    """Seconds a broker has to stop after SIGTERM: its controlled-shutdown budget when no
    controller answers (``controlled.shutdown.max.retries`` attempts answered at once,
    ``controlled.shutdown.retry.backoff.ms`` apart; Kafka's defaults 3 and 5000) and 15 s
    to close its logs."""
    if config.get("controlled.shutdown.enable", "true").lower() == "false":
        return 15.0
    retries = int(config.get("controlled.shutdown.max.retries", "3"))
    backoff_ms = int(config.get("controlled.shutdown.retry.backoff.ms", "5000"))
    return max(0, retries - 1) * backoff_ms / 1000 + 15.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def check_ports(nodes: list[tuple[str, int]]) -> None:
    """CliError (exit 2) naming every ``(node, port)`` whose port something else holds."""
    busy = [f"{port} ({node})" for node, port in nodes if not port_free(port)]
    if busy:
        raise CliError(
            f"port{'s' if len(busy) > 1 else ''} {', '.join(busy)} in use by another process; "
            f"this directory keeps its ports in {STATE_FILE} (stop that process, or "
            "`dev-cluster down --purge` to start afresh with new ports)"
        )
