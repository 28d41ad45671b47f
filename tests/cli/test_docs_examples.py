"""Every ``logstore ...`` line of docs/cli.md runs: the lines of its code blocks and the
first column of its command table, each against a real broker (``cli_broker``) with
what it needs made first, checked for exit status 0 and no traceback.

How a documented line becomes a command line (:func:`runnable`):

- the table's ``A / B`` cells are two lines, and ``B`` takes ``A``'s command group
  (``cluster config get [K]`` / ``set K V``); ``create/list/delete`` is three;
  ``(asks; ...)``-style notes after a cell's code are not part of it;
- ``[...]`` optional parts are kept (brackets dropped), ``A|B`` takes ``A``, ``X...``
  is ``X``, a ``# comment`` is dropped;
- placeholders (``T``, ``G``, ``K=V``, ``DIR`` ...) are replaced by :data:`PLACEHOLDERS`
  (per command where the value depends on it); an unknown one fails the test;
- a deleting command gets ``--no-confirm`` (stdin is not a terminal here; the
  confirmation itself: tests/cli/test_confirm.py), ``consume`` without ``-n``/``-e``
  gets ``-e`` (it would run until Ctrl-C), ``produce`` reads one line of stdin;
- a synopsis that names no runnable command (``acl create/list/delete``) is given
  concrete command lines in :data:`CONCRETE`.

Lines that need what this module does not set up are in :data:`ELSEWHERE` (by
prefix) with the reason and the test that runs them; they are still parsed against
the command tree (every subcommand and option exists, every value is valid). A new
line in docs/cli.md is picked up without changing this file, and fails here if it
does not run.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from logstore.cli.app import cli
from tests.cli.conftest import Cli, unique
from tests.support.processes import repo_env

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"

# Line prefix -> why it is not run here, and where it is run.
ELSEWHERE = {
    "logstore dev-cluster": "starts ZooKeeper and brokers: tests/cli/test_dev_cluster.py",
    "logstore export": "needs pyspark and Java 17: tests/spark/test_export.py",
    "logstore cluster partitions move": "brokers 1, 2, 4: tests/cluster/test_partition_moves.py",
    "logstore cluster decommission": "several brokers: tests/cluster/test_partition_moves.py",
    "logstore mirror": "two clusters, runs until stopped: tests/integration/test_mirror.py",
    "logstore registry": "needs a schema registry: tests/schema_registry/test_registry_broker.py",
    "logstore schema-registry": "serves: tests/schema_registry/test_registry_broker.py",
    "logstore console": "serves until stopped: tests/console/test_browser.py",
}

# A synopsis that is not a command line -> the command lines that show it works.
CONCRETE = {
    "logstore COMMAND ...": [["--help"]],
    "logstore acl create": [
        ["acl", "create", "--allow-principal", "User:docs", "--operation", "read", "--topic", "T"]
    ],
    "logstore acl list": [["acl", "list"]],
    "logstore acl delete": [
        ["acl", "delete", "--allow-principal", "User:docs", "--topic", "T", "--no-confirm"]
    ],
    "logstore user create": [["user", "create", "NAME", "--new-password", "PW"]],
    "logstore user delete": [
        ["user", "create", "NAME", "--new-password", "PW"],
        ["user", "delete", "NAME", "--no-confirm"],
    ],
    "logstore user list": [["user", "list"]],
    "logstore profile use": [["profile", "create", "NAME", "-b", "B"], ["profile", "use", "NAME"]],
    "logstore profile show": [
        ["profile", "create", "NAME", "-b", "B"],
        ["profile", "show", "NAME"],
    ],
    "logstore profile delete": [
        ["profile", "create", "NAME", "-b", "B"],
        ["profile", "delete", "NAME"],
    ],
}

# Placeholder -> value; "{topic}" and the like are filled per line.
PLACEHOLDERS = {
    "T": "{topic}",
    "G": "{group}",
    "NAME": "{name}",
    "PW": "docs-password",
    "B": "{bootstrap}",
    "N": "1",
    "ID": "0",
    "DIR": "{tmp}/out",
    "FILE": "data/orders-0/00000000000000000000.log",
    "LOG_DIR": "data",
    "OFFSET": "0",
    "TIME": "2024-05-01T00:00:00Z",
    "REGEX": "{topic}",
    "KEY": "retention.ms",
    "K": "retention.ms",
    "V": "3600000",
    "K=V": "retention.ms=1h",
    "PORT": "9404",
    "URL": "http://127.0.0.1:8081",
    "P": "docs",
    "SUBJECT": "docs-value",
    "LEVEL": "BACKWARD",
    "MODE": "READWRITE",
}
# Per command (its path under logstore): placeholders whose value depends on it.
PLACEHOLDERS_FOR = {
    "cluster config": {"K": "log.retention.ms", "KEY": "log.retention.ms", "V": "7200000"},
    "dev-cluster": {"K=V": "num.partitions=1"},
    "demo": {"DIR": "{tmp}/demo"},
    "topic create": {"T": "{new_topic}"},
    "registry schema": {"AVRO": "AVRO"},  # a schema type, not a placeholder
}

DELETING = {
    ("topic", "delete"),
    ("topic", "trim-prefix"),
    ("group", "delete"),
    ("acl", "delete"),
    ("user", "delete"),
}
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*(=[A-Z][A-Z0-9_]*)?")


def _code_lines(text: str) -> list[str]:
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        s = line.strip().removeprefix("$ ")
        if fenced and s.split(" ", 1)[0] == "logstore":
            out.append(s)
    return out


def _group_path(words: list[str]) -> list[str]:
    """The command groups ``words`` starts with (``cluster config get`` -> cluster config)."""
    cmd: click.Command = cli
    path: list[str] = []
    for w in words:
        sub = cmd.commands.get(w) if isinstance(cmd, click.Group) else None
        if not isinstance(sub, click.Group):
            break
        path.append(w)
        cmd = sub
    return path


def _table_lines(text: str) -> list[str]:
    out: list[str] = []
    rows = text.split("| logstore | rpk |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    for row in rows:
        cell = row.split("|")[1]
        pieces = re.findall(r"`([^`]+)`", re.sub(r"\([^)]*\)", "", cell))
        first = pieces[0].split()
        group = _group_path(first)
        for i, piece in enumerate(pieces):
            words = piece.split()
            if i and words[0] not in cli.commands:
                words = [*group, *words]
            # acl create/list/delete: one line per command.
            if "/" in words[len(group)] and len(group) == 1:
                out += [" ".join(["logstore", *group, w, *words[2:]]) for w in words[1].split("/")]
            else:
                out.append(" ".join(["logstore", *words]))
    return out


def documented_lines() -> list[str]:
    text = DOC.read_text()
    seen: dict[str, None] = {}
    for line in _code_lines(text) + _table_lines(text):
        seen.setdefault(re.sub(r"\s+#.*$", "", line).strip())
    return list(seen)


def _command_path(words: list[str]) -> list[str]:
    cmd: click.Command = cli
    path: list[str] = []
    for w in words:
        sub = cmd.commands.get(w) if isinstance(cmd, click.Group) else None
        if sub is None:
            break
        path.append(w)
        cmd = sub
    return path


def runnable(line: str, values: dict[str, str]) -> list[list[str]]:
    """The command lines (argv after ``logstore``) that run documented ``line``."""
    if line in CONCRETE:
        lines = [list(argv) for argv in CONCRETE[line]]
    else:
        words = []
        for w in shlex.split(line)[1:]:
            w = w.replace("[", "").replace("]", "")
            if not w or w == "...":
                continue
            w = w.removesuffix("...").split("|", 1)[0]
            words.append(w)
        lines = [words]
    out = []
    for words in lines:
        path = _command_path(words)
        local = {**PLACEHOLDERS}
        for prefix, extra in PLACEHOLDERS_FOR.items():
            if " ".join(path).startswith(prefix):
                local.update(extra)
        argv = []
        for w in words:
            if PLACEHOLDER.fullmatch(w) and w not in local and w != "COMMAND":
                pytest.fail(f"docs/cli.md: {line!r}: unknown placeholder {w}: add it here")
            argv.append(local[w].format(**values) if w in local else w)
        if tuple(path[:2]) in DELETING and "--no-confirm" not in argv:
            argv.append("--no-confirm")
        if path[:1] == ["consume"] and not {"-n", "-e"} & set(argv):
            argv.append("-e")
        out.append(argv)
    return out


def parses(argv: list[str]) -> None:
    """Parses ``argv`` against the command tree without running it (click's usage
    errors raise)."""
    cmd: click.Command = cli
    name, parent = "logstore", None
    while True:
        ctx = cmd.make_context(name, list(argv), parent=parent)
        if not isinstance(cmd, click.Group):
            return
        rest = [*ctx._protected_args, *ctx.args]
        if not rest and cmd.invoke_without_command:  # ``logstore mirror --source ...``
            return
        sub_name, sub, argv = cmd.resolve_command(ctx, rest)
        assert sub is not None and sub_name is not None
        cmd, name, parent = sub, sub_name, ctx


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory, logstore: Cli) -> Path:
    """A directory with ``data/orders-0``, a stopped partition (``logstore demo``), for
    the offline examples' relative paths."""
    work = tmp_path_factory.mktemp("docs-examples")
    demo = subprocess.run(
        [sys.executable, "-m", "logstore", "demo", "data/orders-0"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        env=repo_env(),
    )
    assert demo.returncode == 0, demo.stderr
    return work


def _setup(logstore: Cli) -> dict[str, str]:
    """A topic with 120 records in its one partition and a group that committed on it
    (no members), for the line about to run."""
    topic, group = unique("docs"), unique("docs-g")
    logstore("topic", "create", topic, "-p", "1")
    p = Producer({"bootstrap.servers": logstore.bootstrap})
    for i in range(120):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": logstore.bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 60)], asynchronous=False)
    c.close()
    return {
        "topic": topic,
        "group": group,
        "name": unique("docs-name"),
        "new_topic": unique("docs-new"),
    }


def test_docs_name_commands() -> None:
    lines = documented_lines()
    assert "logstore topic create T -p 3 -c retention.ms=1h" in lines
    assert "logstore cluster config set K V" in lines and "logstore acl delete" in lines
    for key in CONCRETE:
        assert key in lines, f"{key!r} is no longer in docs/cli.md: drop it from CONCRETE"


@pytest.mark.parametrize("line", documented_lines())
def test_example_runs(line: str, logstore: Cli, workdir: Path, tmp_path: Path) -> None:
    values = {"tmp": str(tmp_path), "bootstrap": logstore.bootstrap}
    skip = next((why for prefix, why in ELSEWHERE.items() if line.startswith(prefix)), None)
    if skip is not None:
        values.update(topic="t", group="g", name="n", new_topic="t2")
        for argv in runnable(line, values):
            parses(argv)
        return
    values.update(_setup(logstore))
    for argv in runnable(line, values):
        result = subprocess.run(
            [sys.executable, "-m", "logstore", *argv],
            input="docs example\n",
            capture_output=True,
            text=True,
            timeout=120,
            cwd=workdir,
            env=repo_env(
                LOGSTORE_BROKERS=logstore.bootstrap,
                XDG_CONFIG_HOME=str(tmp_path / "config"),
                HOME=str(tmp_path),
            ),
        )
        assert result.returncode == 0, (line, argv, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
