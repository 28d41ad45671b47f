"""The processes of a dev cluster's directory: starting ZooKeeper and brokers, finding
them again however they were started, asking ZooKeeper which brokers are registered, and
stopping them (SIGTERM, then SIGKILL once their budget is spent).

A process belongs to the directory ``root`` when:

- it holds the lock of ``root/b<i>/data/.lock`` (the broker's log dir lock, a ``flock``
  and a POSIX lock, both listed in ``/proc/locks`` with the holder's pid): broker ``i``;
- or its argv runs the broker (an argument ``broker_py``, as ``python -m broker_py``
  has, or a path ending in ``broker_py/__main__.py``) and an argument names a path under
  ``root/b<i>/`` (its ``log.dirs``, or a properties file there): broker ``i``; under
  ``root`` but no ``b<i>``: a broker of unknown id, still the directory's;
- or its argv runs ``ZooKeeperServerMain`` with ``root/zookeeper/zoo.cfg``: ZooKeeper.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from logstore.cli.common import CliError
from logstore.cli.dev_cluster.state import HOST

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
ZOOKEEPER_CLASSPATH = f"/etc/zookeeper/conf:{ZOOKEEPER_JAR}"
ZOOKEEPER = "zookeeper"


def alive(pid: int | None) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not reaped, counts as gone)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _runs_broker(argv: list[str]) -> bool:
    return any(a == "broker_py" or a.endswith("broker_py/__main__.py") for a in argv)


def _locks_by_inode() -> dict[tuple[int, int, int], set[int]]:
    """``/proc/locks`` as (major, minor, inode) -> holders' pids. A line reads
    ``1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF`` (device in hex, inode decimal)."""
    held: dict[tuple[int, int, int], set[int]] = {}
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return held
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":
            continue
        try:
            pid = int(fields[4])
            major, minor, inode = fields[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
        except ValueError:
            continue
        if pid > 0:
            held.setdefault(key, set()).add(pid)
    return held


def find(root: Path) -> dict[str, set[int]]:
    """The running processes of directory ``root`` by node: ``"zookeeper"``, ``"1"``,
    ``"2"``, ... (a broker's id) and ``"?"`` (brokers whose id is not known)."""
    found: dict[str, set[int]] = {}
    me = os.getpid()
    held = _locks_by_inode()
    for lock in root.glob("b*/data/.lock"):
        node = lock.parent.parent.name[1:]
        try:
            st = lock.stat()
        except OSError:
            continue
        for pid in held.get((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino), ()):
            if pid != me and alive(pid):
                found.setdefault(node, set()).add(pid)
    prefix = str(root) + os.sep
    in_broker = re.compile(re.escape(prefix) + r"b(\d+)(?:/|$)")
    zoo_cfg = str(root / ZOOKEEPER / "zoo.cfg")
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        argv = _argv(pid)
        if not argv:
            continue
        if "org.apache.zookeeper.server.ZooKeeperServerMain" in argv and zoo_cfg in argv:
            node = ZOOKEEPER
        elif _runs_broker(argv) and any(prefix in a for a in argv):
            ids = {m.group(1) for a in argv for m in in_broker.finditer(a)}
            node = ids.pop() if len(ids) == 1 else "?"
        else:
            continue
        if alive(pid):
            found.setdefault(node, set()).add(pid)
    return found


def stop(pids: set[int], budget: float) -> bool:
    """SIGTERM to ``pids``, then SIGKILL to those still running after ``budget`` seconds.
    True when all stopped on SIGTERM."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + budget
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while any(alive(p) for p in left) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not left


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    log: Path,
    proc: subprocess.Popen[bytes],
) -> None:
    """Polls ``predicate`` until true; CliError when ``proc`` exits or ``timeout`` passes,
    with the end of ``log``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise CliError(
                f"{what} exited with status {proc.returncode}; the end of {log}:\n{tail(log)}"
            )
        if time.monotonic() > deadline:
            raise CliError(f"{what} not ready after {timeout:g}s; the end of {log}:\n{tail(log)}")
        time.sleep(0.1)


def zk_ok(port: int) -> bool:
    import socket

    try:
        with socket.create_connection((HOST, port), timeout=1) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


def start_zookeeper(root: Path, port: int, timeout: float) -> subprocess.Popen[bytes]:
    java = shutil.which("java")
    if not os.path.exists(ZOOKEEPER_JAR) or java is None:
        raise CliError(
            "ZooKeeper is not installed: apt-get install zookeeper (it brings a Java runtime)"
        )
    zk_dir = root / ZOOKEEPER
    (zk_dir / "data").mkdir(parents=True, exist_ok=True)
    config = zk_dir / "zoo.cfg"
    config.write_text(
        "tickTime=500\n"
        f"dataDir={zk_dir / 'data'}\n"
        f"clientPort={port}\n"
        f"clientPortAddress={HOST}\n"
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
    wait(lambda: zk_ok(port), timeout, "ZooKeeper", log_path, proc)
    return proc


def broker_env() -> dict[str, str]:
    """The environment of a broker process: this one, with broker_py's location on
    PYTHONPATH (it is found without being imported: this package never imports it)."""
    spec = importlib.util.find_spec("broker_py")
    if spec is None or not spec.submodule_search_locations:
        raise CliError("the broker (package broker_py) is not installed next to this logstore")
    root = str(Path(next(iter(spec.submodule_search_locations))).parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, path]))}


def broker_command(settings: dict[str, str]) -> list[str]:
    args = [sys.executable, "-m", "broker_py"]
    for k, v in settings.items():
        args += ["--override", f"{k}={v}"]
    return args


def start_broker(
    root: Path, broker_id: int, settings: dict[str, str], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """Starts broker ``broker_id`` in its own session: stdout to ``b<i>/broker.out``
    (rewritten: it holds this run's "listening on" banner), stderr (its log) appended to
    ``b<i>/broker.log``."""
    b_dir = root / f"b{broker_id}"
    b_dir.mkdir(parents=True, exist_ok=True)
    with open(b_dir / "broker.out", "wb") as out, open(b_dir / "broker.log", "ab") as log:
        return subprocess.Popen(
            broker_command(settings),
            stdout=out,
            stderr=log,
            stdin=subprocess.DEVNULL,
            cwd=b_dir,
            env=env,
            start_new_session=True,
        )


def wait_listening(root: Path, broker_id: int, proc: subprocess.Popen[bytes], t: float) -> None:
    banner = root / f"b{broker_id}" / "broker.out"
    wait(
        lambda: b"listening on" in banner.read_bytes(),
        t,
        f"broker {broker_id}",
        root / f"b{broker_id}" / "broker.log",
        proc,
    )


def registered(zk_port: int) -> set[int] | None:
    """The ids under ZooKeeper's ``/brokers/ids`` (the brokers registered now), or None
    when ZooKeeper does not answer within a few seconds."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException, NoNodeError

    quiet = logging.getLogger("kazoo")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    client = KazooClient(hosts=f"{HOST}:{zk_port}", timeout=3, connection_retry=None)
    try:
        client.start(timeout=3)
    except Exception:
        client.stop()
        client.close()
        return None
    try:
        return {int(c) for c in client.get_children("/brokers/ids") if c.isdigit()}
    except NoNodeError:
        return set()
    except KazooException:
        return None
    finally:
        client.stop()
        client.close()


def metadata_ids(bootstrap: str) -> set[int]:
    """The broker ids the cluster's Metadata lists (empty when it does not answer)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from logstore.cli.connection import ClientOptions

    try:
        md = AdminClient(ClientOptions(brokers=bootstrap).config()).list_topics(timeout=2)
    except KafkaException:
        return set()
    return set(md.brokers)


def wait_joined(
    bootstrap: str,
    zk_port: int,
    ids: set[int],
    timeout: float,
    log: Path,
    proc: subprocess.Popen[bytes],
) -> None:
    """Until every broker of ``ids`` is registered in ZooKeeper and in the Metadata that
    ``bootstrap`` answers."""

    def joined() -> bool:
        return ids <= (registered(zk_port) or set()) and ids <= metadata_ids(bootstrap)

    wait(joined, timeout, "the cluster", log, proc)
