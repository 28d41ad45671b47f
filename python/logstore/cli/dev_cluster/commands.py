"""The ``logstore dev-cluster`` commands: ``up``, ``status``, ``start``, ``stop``,
``restart``, ``add``, ``logs`` and ``down`` (see the package's docstring)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import click

from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_INTERRUPTED, EXIT_OK, CliError
from logstore.cli.dev_cluster import logs as log_files
from logstore.cli.dev_cluster import processes as procs
from logstore.cli.dev_cluster import state as st
from logstore.cli.output import Output, format_option

ZK_STOP_BUDGET = 15.0


@cli_group("dev-cluster", short_help="ZooKeeper and N brokers on loopback, in one command.")
def group() -> None:
    """Run ZooKeeper and brokers on this machine for trying a cluster."""


dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=st.DEFAULT_DIR,
    show_default=True,
    help="where the cluster keeps its data, logs, ports and state",
)
timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=90.0,
    show_default=True,
    help="seconds to wait for the brokers to start and register",
)
broker_argument = click.argument("broker_id", metavar="BROKER", type=click.IntRange(min=0))


def _note(text: str) -> None:
    click.echo(text, err=True)


# ---- what runs --------------------------------------------------------------------------


def _nodes(root: Path, state: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per node: its pids now (found however it was started), address, whether
    it runs, and for a broker whether ZooKeeper lists it (None: ZooKeeper does not
    answer)."""
    found = procs.find(root)
    zk = state["zookeeper"]
    zk_pids = found.get(procs.ZOOKEEPER, set())
    ids = procs.registered(zk["port"]) if zk_pids else None
    rows = [
        {
            "node": "zookeeper",
            "id": None,
            "pid": min(zk_pids) if zk_pids else None,
            "address": f"{st.HOST}:{zk['port']}",
            "running": bool(zk_pids),
            "registered": None,
            "log": zk["log"],
        }
    ]
    for b in state["brokers"]:
        pids = found.get(str(b["id"]), set())
        rows.append(
            {
                "node": f"broker {b['id']}",
                "id": b["id"],
                "pid": min(pids) if pids else None,
                "address": f"{st.HOST}:{b['port']}",
                "running": bool(pids),
                "registered": None if ids is None else b["id"] in ids,
                "log": b["log"],
            }
        )
    for pid in sorted(found.get("?", set())):
        rows.append(
            {
                "node": "broker ?",
                "id": None,
                "pid": pid,
                "address": None,
                "running": True,
                "registered": None,
                "log": None,
            }
        )
    return rows


def _draw_state(o: Output, data: dict[str, Any]) -> None:
    o.table(
        ["node", "pid", "address", "running", "registered", "log"],
        (
            [
                n["node"],
                n["pid"],
                n["address"],
                n["running"],
                "-" if n["node"] == "zookeeper" else n["registered"],
                n["log"],
            ]
            for n in data["nodes"]
        ),
    )
    o.line(f"Bootstrap servers: {data['bootstrap_servers']}")
    o.line(f"  export LOGSTORE_BROKERS={data['bootstrap_servers']}")


def _emit_state(fmt: str, root: Path, state: dict[str, Any]) -> None:
    Output(fmt).emit({**state, "nodes": _nodes(root, state)}, _draw_state)


def _zookeeper_running(root: Path, state: dict[str, Any]) -> None:
    if not procs.find(root).get(procs.ZOOKEEPER):
        raise CliError(
            f"this cluster's ZooKeeper (port {state['zookeeper']['port']}) is not running: "
            "`logstore dev-cluster up` starts it with every broker"
        )


def _stop_broker(
    root: Path, state: dict[str, Any], b: dict[str, Any], budget: float | None
) -> dict[str, Any] | None:
    """Stops broker ``b`` (every process of its directory); its row for the output, or
    None when it was not running."""
    pids = procs.find(root).get(str(b["id"]), set())
    if procs.alive(b.get("pid")):
        pids.add(b["pid"])
    b["pid"] = None
    if not pids:
        return None
    seconds = st.stop_budget(state["config"]) if budget is None else budget
    clean = procs.stop(pids, seconds)
    if not clean:
        _note(
            f"broker {b['id']} (pid {', '.join(map(str, sorted(pids)))}) did not stop within "
            f"{seconds:g}s of SIGTERM: killed (SIGKILL)"
        )
    return {"node": f"broker {b['id']}", "pid": min(pids), "pids": sorted(pids), "clean": clean}


def _start_broker(root: Path, state: dict[str, Any], b: dict[str, Any], timeout: float) -> None:
    """Starts broker ``b`` on its recorded port and returns once ZooKeeper and the
    cluster's Metadata list it; stops it again when it does not get there."""
    running = procs.find(root).get(str(b["id"]))
    if running:
        raise CliError(f"broker {b['id']} already runs (pid {min(running)})")
    _zookeeper_running(root, state)
    st.check_ports([(f"broker {b['id']}", b["port"])])
    proc = procs.start_broker(root, b["id"], st.broker_settings(root, state, b), procs.broker_env())
    b["pid"] = proc.pid
    st.save(root, state)
    try:
        procs.wait_listening(root, b["id"], proc, timeout)
        procs.wait_joined(
            st.bootstrap(state),
            state["zookeeper"]["port"],
            {b["id"]},
            timeout,
            Path(b["log"]),
            proc,
        )
    except BaseException:
        _stop_broker(root, state, b, 10)
        st.save(root, state)
        raise


def _draw_stopped(o: Output, data: dict[str, Any]) -> None:
    o.table(
        ["node", "pid", "stopped"],
        ([s["node"], s["pid"], "cleanly" if s["clean"] else "killed"] for s in data["stopped"]),
    )


# ---- commands ---------------------------------------------------------------------------


@group.command("up")
@click.option(
    "--brokers",
    "n",
    type=click.IntRange(1, 9),
    default=None,
    help="how many brokers  [default: 3, or the directory's]",
)
@dir_option
@click.option(
    "--base-port",
    type=click.IntRange(0, 65000),
    default=0,
    help="brokers listen on BASE+1..BASE+N and ZooKeeper on BASE (default: free ports, "
    "then the directory's)",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="a config of every broker, kept for later starts; repeatable",
)
@timeout_option
@format_option
def up(
    n: int | None,
    directory: str,
    base_port: int,
    overrides: tuple[str, ...],
    timeout: float,
    fmt: str,
) -> int:
    """Start ZooKeeper and N brokers on 127.0.0.1 and print the bootstrap servers.

    The first ``up`` of a directory picks the ports and records them in cluster.json;
    every later ``up`` uses them again."""
    from logstore.cli.topic import parse_pairs

    root = Path(directory).resolve()
    extra = parse_pairs(overrides, "--override")
    state = st.load(root)
    found = procs.find(root)
    if found:
        nodes = ", ".join(k if k == procs.ZOOKEEPER else f"broker {k}" for k in sorted(found))
        raise CliError(
            f"a dev cluster already runs from {root} ({nodes}): "
            "`logstore dev-cluster down` first (or `start BROKER` for one that is stopped)"
        )
    env = procs.broker_env()
    if state is None:
        n = n or 3
        if base_port:
            ports = [base_port + k for k in range(n + 1)]
        else:
            ports = [st.free_port() for _ in range(n + 1)]
        state = {
            "dir": str(root),
            "zookeeper": {
                "pid": None,
                "port": ports[0],
                "log": str(root / procs.ZOOKEEPER / "zookeeper.log"),
            },
            "brokers": [
                {"id": i, "pid": None, "port": port, "log": str(root / f"b{i}" / "broker.log")}
                for i, port in enumerate(ports[1:], start=1)
            ],
            "config": st.default_config(n, extra),
        }
    else:
        if n is not None and n != len(state["brokers"]):
            raise CliError(
                f"the cluster in {root} has {len(state['brokers'])} brokers: "
                "`dev-cluster add` adds one; `dev-cluster down --purge` starts afresh"
            )
        if base_port and base_port != state["zookeeper"]["port"]:
            raise CliError(
                f"the cluster in {root} keeps its ports (ZooKeeper on "
                f"{state['zookeeper']['port']}): `dev-cluster down --purge` to pick new ones"
            )
        state["config"].update(extra)
    st.check_ports(
        [("zookeeper", state["zookeeper"]["port"])]
        + [(f"broker {b['id']}", b["port"]) for b in state["brokers"]]
    )
    root.mkdir(parents=True, exist_ok=True)
    st.save(root, state)
    try:
        zk = procs.start_zookeeper(root, state["zookeeper"]["port"], timeout)
        state["zookeeper"]["pid"] = zk.pid
        started: list[subprocess.Popen[bytes]] = []
        for b in state["brokers"]:
            settings = st.broker_settings(root, state, b)
            started.append(procs.start_broker(root, b["id"], settings, env))
            b["pid"] = started[-1].pid
        st.save(root, state)
        for b, proc in zip(state["brokers"], started, strict=True):
            procs.wait_listening(root, b["id"], proc, timeout)
        procs.wait_joined(
            st.bootstrap(state),
            state["zookeeper"]["port"],
            {b["id"] for b in state["brokers"]},
            timeout,
            Path(state["brokers"][0]["log"]),
            started[0],
        )
    except BaseException:
        _down(root, state, 10)
        st.save(root, state)
        raise
    _emit_state(fmt, root, state)
    return EXIT_OK


@group.command("status")
@dir_option
@format_option
def status(directory: str, fmt: str) -> int:
    """Show each node's pid, port, whether it runs and is registered in ZooKeeper."""
    root = Path(directory).resolve()
    _emit_state(fmt, root, st.require(root))
    return EXIT_OK


@group.command("start")
@broker_argument
@dir_option
@timeout_option
@format_option
def start(broker_id: int, directory: str, timeout: float, fmt: str) -> int:
    """Start one stopped broker on its port; returns once it is registered."""
    root = Path(directory).resolve()
    state = st.require(root)
    _start_broker(root, state, st.broker(state, broker_id), timeout)
    _emit_state(fmt, root, state)
    return EXIT_OK


stop_timeout_option = click.option(
    "--timeout",
    "budget",
    type=click.FloatRange(min=1),
    default=None,
    help="seconds a broker has after SIGTERM before SIGKILL [default: its controlled-"
    "shutdown budget, controlled.shutdown.max.retries x retry.backoff.ms, plus 15]",
)


@group.command("stop")
@broker_argument
@dir_option
@stop_timeout_option
@format_option
def stop(broker_id: int, directory: str, budget: float | None, fmt: str) -> int:
    """Stop one broker (SIGTERM: a controlled shutdown), however it was started."""
    root = Path(directory).resolve()
    state = st.require(root)
    b = st.broker(state, broker_id)
    row = _stop_broker(root, state, b, budget)
    st.save(root, state)
    if row is None:
        _note(f"broker {broker_id} is not running")
    Output(fmt).emit({"stopped": [row] if row else []}, _draw_stopped)
    return EXIT_OK


@group.command("restart")
@broker_argument
@dir_option
@stop_timeout_option
@click.option(
    "--start-timeout",
    "timeout",
    type=click.FloatRange(min=1),
    default=90.0,
    show_default=True,
    help="seconds to wait for it to start and register",
)
@format_option
def restart(broker_id: int, directory: str, budget: float | None, timeout: float, fmt: str) -> int:
    """Stop one broker (if it runs) and start it again on its port."""
    root = Path(directory).resolve()
    state = st.require(root)
    b = st.broker(state, broker_id)
    _zookeeper_running(root, state)
    _stop_broker(root, state, b, budget)
    st.save(root, state)
    _start_broker(root, state, b, timeout)
    _emit_state(fmt, root, state)
    return EXIT_OK


@group.command("add")
@dir_option
@timeout_option
@format_option
def add(directory: str, timeout: float, fmt: str) -> int:
    """Start one more broker (the next id) that joins the running cluster."""
    root = Path(directory).resolve()
    state = st.require(root)
    _zookeeper_running(root, state)
    broker_id = max((b["id"] for b in state["brokers"]), default=0) + 1
    b = {
        "id": broker_id,
        "pid": None,
        "port": st.free_port(),
        "log": str(root / f"b{broker_id}" / "broker.log"),
    }
    state["brokers"].append(b)
    try:
        _start_broker(root, state, b, timeout)
    except BaseException:
        state["brokers"].remove(b)
        st.save(root, state)
        raise
    _emit_state(fmt, root, state)
    return EXIT_OK


@group.command("logs")
@click.argument("broker_id", metavar="[BROKER]", type=click.IntRange(min=0), required=False)
@dir_option
@click.option("-f", "--follow", is_flag=True, help="keep printing new lines (Ctrl-C ends)")
@click.option(
    "-n",
    "--tail",
    "last",
    type=click.IntRange(min=0),
    default=None,
    help="only the last N lines of each log [default: all]",
)
def logs(broker_id: int | None, directory: str, follow: bool, last: int | None) -> int:
    """Print a broker's log, or ZooKeeper's and every broker's, each line prefixed."""
    root = Path(directory).resolve()
    state = st.require(root)
    if broker_id is not None:
        sources = [(f"broker {broker_id}", Path(st.broker(state, broker_id)["log"]))]
    else:
        sources = [("zookeeper", Path(state["zookeeper"]["log"]))] + [
            (f"broker {b['id']}", Path(b["log"])) for b in state["brokers"]
        ]

    def write(line: str) -> None:
        click.echo(line)

    try:
        log_files.show(sources, last, follow, write)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def _down(root: Path, state: dict[str, Any], budget: float | None) -> list[dict[str, Any]]:
    """Stops every process of the directory: the brokers one by one (recorded, found by
    their log dir lock or command line, ids unknown to cluster.json too), then
    ZooKeeper. Clears the recorded pids."""
    stopped = []
    known = {str(b["id"]) for b in state["brokers"]}
    for b in sorted(state["brokers"], key=lambda b: b["id"]):
        row = _stop_broker(root, state, b, budget)
        if row is not None:
            stopped.append(row)
    found = procs.find(root)
    for node in sorted(k for k in found if k not in known and k != procs.ZOOKEEPER):
        pids = found[node]
        seconds = st.stop_budget(state["config"]) if budget is None else budget
        clean = procs.stop(pids, seconds)
        stopped.append(
            {"node": f"broker {node}", "pid": min(pids), "pids": sorted(pids), "clean": clean}
        )
    zk = state["zookeeper"]
    zk_pids = found.get(procs.ZOOKEEPER, set())
    if procs.alive(zk.get("pid")):
        zk_pids.add(zk["pid"])
    zk["pid"] = None
    if zk_pids:
        clean = procs.stop(zk_pids, ZK_STOP_BUDGET)
        if not clean:
            _note(f"ZooKeeper did not stop within {ZK_STOP_BUDGET:g}s of SIGTERM: killed")
        stopped.append(
            {"node": "zookeeper", "pid": min(zk_pids), "pids": sorted(zk_pids), "clean": clean}
        )
    return stopped


@group.command("down")
@dir_option
@click.option("--purge", is_flag=True, help="also delete the cluster's data, logs and ports")
@stop_timeout_option
@format_option
def down(directory: str, purge: bool, budget: float | None, fmt: str) -> int:
    """Stop every broker of the directory however it was started (controlled shutdown,
    SIGKILL after its budget), then ZooKeeper. Ports and data stay for the next up."""
    root = Path(directory).resolve()
    state = st.require(root)
    stopped = _down(root, state, budget)
    if purge:
        for child in [root / procs.ZOOKEEPER, *root.glob("b[0-9]*")]:
            shutil.rmtree(child, ignore_errors=True)
        (root / st.STATE_FILE).unlink(missing_ok=True)
    else:
        st.save(root, state)
    Output(fmt).emit({"stopped": stopped, "purged": purge}, _draw_stopped)
    return EXIT_OK
