"""``logstore dev-cluster up|status|down``: a local cluster in one command, for trying
replication the way ``rpk container start -n 3`` does, without containers.

``up`` starts Debian's ZooKeeper (``/usr/share/java/zookeeper.jar``, package
``zookeeper``) and N brokers (``python -m broker_py``, ids 1..N) on 127.0.0.1, each in
its own session so they outlive the command, waits until every broker is registered,
and prints the bootstrap servers. ``down`` stops the brokers (SIGTERM: a controlled
shutdown), then ZooKeeper.

Layout of ``--dir`` (default ``./logstore-dev-cluster``)::

    cluster.json           the state: pids, ports, bootstrap servers (see ``State``)
    zookeeper/zoo.cfg      ZooKeeper's config; zookeeper/data its snapshots; zookeeper.log
    b<i>/data              broker i's log.dirs; b<i>/broker.log its log (stderr);
    b<i>/broker.out        its stdout (the "listening on" banner)

Data survives ``down`` and the next ``up`` reuses it (``down --purge`` deletes it). The
brokers run with ``group.initial.rebalance.delay.ms=0`` and replication factors of
min(3, N) for new topics and the internal topics; ``--override KEY=VALUE`` adds any
broker config.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_OK, CliError
from logstore.cli.output import Output, format_option

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
ZOOKEEPER_CLASSPATH = f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}"
DEFAULT_DIR = "logstore-dev-cluster"
STATE_FILE = "cluster.json"


@cli_group("dev-cluster", short_help="ZooKeeper and N brokers on loopback, in one command.")
def group() -> None:
    """Run ZooKeeper and brokers on this machine for trying a cluster."""


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not reaped by us) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _zk_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def load_state(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CliError(f"{directory / STATE_FILE}: unreadable ({exc})") from None


def _broker_env() -> dict[str, str]:
    """The environment of a broker process: this one, with broker_py's location on
    PYTHONPATH (it is found without being imported: this package never imports it)."""
    spec = importlib.util.find_spec("broker_py")
    if spec is None or not spec.submodule_search_locations:
        raise CliError("the broker (package broker_py) is not installed next to this logstore")
    root = str(Path(next(iter(spec.submodule_search_locations))).parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, path]))}


def _wait(
    predicate: Any, timeout: float, what: str, log: Path, proc: subprocess.Popen[bytes]
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise CliError(
                f"{what} exited with status {proc.returncode}; the end of {log}:\n{_tail(log)}"
            )
        if time.monotonic() > deadline:
            raise CliError(f"{what} not ready after {timeout:g}s; the end of {log}:\n{_tail(log)}")
        time.sleep(0.1)


def _start_zookeeper(directory: Path, port: int, timeout: float) -> subprocess.Popen[bytes]:
    java = shutil.which("java")
    if not os.path.exists(ZOOKEEPER_JAR) or java is None:
        raise CliError(
            "ZooKeeper is not installed: apt-get install zookeeper (it brings a Java runtime)"
        )
    zk_dir = directory / "zookeeper"
    (zk_dir / "data").mkdir(parents=True, exist_ok=True)
    config = zk_dir / "zoo.cfg"
    config.write_text(
        "tickTime=500\n"
        f"dataDir={zk_dir / 'data'}\n"
        f"clientPort={port}\n"
        "clientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=ruok,srvr\n"
        "maxClientCnxns=0\n"
    )
    log_path = zk_dir / "zookeeper.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [
                java,
                "-Xmx256m",
                "-cp",
                ZOOKEEPER_CLASSPATH,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(config),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=zk_dir,
            start_new_session=True,
        )
    _wait(lambda: _zk_ok(port), timeout, "ZooKeeper", log_path, proc)
    return proc


def _broker_settings(
    i: int, n: int, directory: Path, port: int, zk_port: int, overrides: dict[str, str]
) -> dict[str, str]:
    rf = str(min(3, n))
    return {
        "broker.id": str(i),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(directory / f"b{i}" / "data"),
        "zookeeper.connect": f"127.0.0.1:{zk_port}",
        "group.initial.rebalance.delay.ms": "0",
        "default.replication.factor": rf,
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": str(min(2, n)),
        **overrides,
    }


def _start_broker(
    directory: Path, i: int, settings: dict[str, str], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    b_dir = directory / f"b{i}"
    b_dir.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "broker_py"]
    for k, v in settings.items():
        args += ["--override", f"{k}={v}"]
    out_path = b_dir / "broker.out"
    with open(out_path, "wb") as out, open(b_dir / "broker.log", "ab") as log:
        return subprocess.Popen(
            args,
            stdout=out,
            stderr=log,
            stdin=subprocess.DEVNULL,
            cwd=b_dir,
            env=env,
            start_new_session=True,
        )


def _registered(bootstrap: str, n: int) -> bool:
    """Whether the cluster's metadata lists all ``n`` brokers."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from logstore.cli.connection import ClientOptions

    try:
        md = AdminClient(ClientOptions(brokers=bootstrap).config()).list_topics(timeout=2)
    except KafkaException:
        return False
    return len(md.brokers) >= n


def _stop(pid: int, timeout: float) -> bool:
    """SIGTERM, then SIGKILL after ``timeout``; True when it stopped on SIGTERM."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return False
    return True


def _stop_all(state: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
    stopped = []
    for b in state.get("brokers", []):
        if _alive(b.get("pid")):
            clean = _stop(b["pid"], timeout)
            stopped.append({"node": f"broker {b['id']}", "pid": b["pid"], "clean": clean})
    zk = state.get("zookeeper") or {}
    if _alive(zk.get("pid")):
        clean = _stop(zk["pid"], timeout)
        stopped.append({"node": "zookeeper", "pid": zk["pid"], "clean": clean})
    return stopped


def _nodes(state: dict[str, Any]) -> list[dict[str, Any]]:
    zk = state["zookeeper"]
    rows = [
        {
            "node": "zookeeper",
            "pid": zk["pid"],
            "address": f"127.0.0.1:{zk['port']}",
            "alive": _alive(zk["pid"]),
            "log": zk["log"],
        }
    ]
    rows += [
        {
            "node": f"broker {b['id']}",
            "pid": b["pid"],
            "address": f"127.0.0.1:{b['port']}",
            "alive": _alive(b["pid"]),
            "log": b["log"],
        }
        for b in state["brokers"]
    ]
    return rows


def _draw_state(o: Output, state: dict[str, Any]) -> None:
    o.table(
        ["node", "pid", "address", "alive", "log"],
        ([n["node"], n["pid"], n["address"], n["alive"], n["log"]] for n in state["nodes"]),
    )
    o.line(f"Bootstrap servers: {state['bootstrap_servers']}")
    o.line(f"  export LOGSTORE_BROKERS={state['bootstrap_servers']}")


dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=DEFAULT_DIR,
    show_default=True,
    help="where the cluster keeps its data, logs and state",
)


@group.command("up")
@click.option(
    "--brokers",
    "n",
    type=click.IntRange(1, 9),
    default=3,
    show_default=True,
    help="how many brokers",
)
@dir_option
@click.option(
    "--base-port",
    type=click.IntRange(0, 65000),
    default=0,
    help="brokers listen on BASE+1..BASE+N and ZooKeeper on BASE (default: free ports)",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="a config of every broker; repeatable",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=90.0,
    show_default=True,
    help="seconds to wait for the cluster",
)
@format_option
def up(
    n: int, directory: str, base_port: int, overrides: tuple[str, ...], timeout: float, fmt: str
) -> int:
    """Start ZooKeeper and N brokers on 127.0.0.1 and print the bootstrap servers."""
    from logstore.cli.topic import parse_pairs

    out = Output(fmt)
    root = Path(directory).resolve()
    extra = parse_pairs(overrides, "--override")
    previous = load_state(root)
    if previous is not None and any(n["alive"] for n in _nodes(previous)):
        raise CliError(
            f"a dev cluster already runs from {root} (bootstrap {previous['bootstrap_servers']}): "
            "`logstore dev-cluster down` first"
        )
    env = _broker_env()
    if base_port:
        ports = [base_port + k for k in range(n + 1)]
        busy = [p for p in ports if not _port_free(p)]
        if busy:
            raise CliError(f"ports in use: {', '.join(map(str, busy))} (pick another --base-port)")
    else:
        ports = [_free_port() for _ in range(n + 1)]
    zk_port, broker_ports = ports[0], ports[1:]
    root.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {"dir": str(root), "zookeeper": None, "brokers": []}
    try:
        zk = _start_zookeeper(root, zk_port, timeout)
        state["zookeeper"] = {
            "pid": zk.pid,
            "port": zk_port,
            "log": str(root / "zookeeper" / "zookeeper.log"),
        }
        procs = []
        for i, port in enumerate(broker_ports, start=1):
            proc = _start_broker(root, i, _broker_settings(i, n, root, port, zk_port, extra), env)
            procs.append(proc)
            state["brokers"].append(
                {"id": i, "pid": proc.pid, "port": port, "log": str(root / f"b{i}" / "broker.log")}
            )
        state["bootstrap_servers"] = ",".join(f"127.0.0.1:{p}" for p in broker_ports)
        (root / STATE_FILE).write_text(json.dumps(state, indent=2))
        for i, proc in enumerate(procs, start=1):
            banner = root / f"b{i}" / "broker.out"
            _wait(
                lambda b=banner: b"listening on" in b.read_bytes(),
                timeout,
                f"broker {i}",
                root / f"b{i}" / "broker.log",
                proc,
            )
        _wait(
            lambda: _registered(state["bootstrap_servers"], n),
            timeout,
            "the cluster",
            root / "b1" / "broker.log",
            procs[0],
        )
    except BaseException:
        _stop_all(state, 10)
        (root / STATE_FILE).unlink(missing_ok=True)
        raise
    out.emit({**state, "nodes": _nodes(state)}, _draw_state)
    return EXIT_OK


@group.command("status")
@dir_option
@format_option
def status(directory: str, fmt: str) -> int:
    """Show the cluster's processes and bootstrap servers."""
    root = Path(directory).resolve()
    state = load_state(root)
    if state is None:
        raise CliError(f"no dev cluster in {root}")
    Output(fmt).emit({**state, "nodes": _nodes(state)}, _draw_state)
    return EXIT_OK


@group.command("down")
@dir_option
@click.option("--purge", is_flag=True, help="also delete the cluster's data and logs")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="seconds each process has to stop before it is killed",
)
@format_option
def down(directory: str, purge: bool, timeout: float, fmt: str) -> int:
    """Stop the brokers (controlled shutdown), then ZooKeeper."""
    root = Path(directory).resolve()
    state = load_state(root)
    if state is None:
        raise CliError(f"no dev cluster in {root}")
    stopped = _stop_all(state, timeout)
    (root / STATE_FILE).unlink(missing_ok=True)
    if purge:
        for child in [root / "zookeeper", *(root / f"b{b['id']}" for b in state["brokers"])]:
            shutil.rmtree(child, ignore_errors=True)
    Output(fmt).emit(
        {"stopped": stopped, "purged": purge},
        lambda o, d: o.table(
            ["node", "pid", "stopped"],
            ([s["node"], s["pid"], "cleanly" if s["clean"] else "killed"] for s in d["stopped"]),
        ),
    )
    return EXIT_OK
