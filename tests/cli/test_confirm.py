"""Every destructive ``logstore`` command follows one rule (logstore.cli.confirm): it asks
on a terminal, deletes without asking with ``--no-confirm``, and refuses (exit 2) when
stdin is not a terminal. The terminal is a real pseudo-terminal (os.openpty)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cli.conftest import Cli, unique
from tests.support.processes import repo_env


def on_terminal(cli: Cli, args: list[str], answer: str) -> subprocess.CompletedProcess[str]:
    """Runs ``logstore ARGS`` with stdin a pseudo-terminal on which ``answer`` is typed."""
    master, slave = os.openpty()
    try:
        os.write(master, answer.encode())
        return subprocess.run(
            [sys.executable, "-m", "logstore", *args],
            stdin=slave,
            capture_output=True,
            text=True,
            timeout=120,
            env=repo_env(LOGSTORE_BROKERS=cli.bootstrap),
        )
    finally:
        os.close(slave)
        os.close(master)


def _topic(cli: Cli) -> tuple[list[str], Callable[[], bool]]:
    topic = unique("doomed")
    cli("topic", "create", topic)
    return [
        "topic",
        "delete",
        topic,
    ], lambda: topic in {t["name"] for t in cli.json("topic", "list")}


def _trim(cli: Cli) -> tuple[list[str], Callable[[], bool]]:
    topic = unique("trimmed")
    cli("topic", "create", topic)
    p = Producer({"bootstrap.servers": cli.bootstrap})
    for i in range(3):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0

    def kept() -> bool:
        return (
            cli.json("topic", "describe", topic, "-p")[0]["partitions"][0]["log_start_offset"] == 0
        )

    return ["topic", "trim-prefix", topic, "-o", "end"], kept


def _group(cli: Cli) -> tuple[list[str], Callable[[], bool]]:
    topic, group = unique("grouped"), unique("g")
    cli("topic", "create", topic)
    c = Consumer({"bootstrap.servers": cli.bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()
    return [
        "group",
        "delete",
        group,
    ], lambda: group in {g["group"] for g in cli.json("group", "list")}


def _acl(cli: Cli) -> tuple[list[str], Callable[[], bool]]:
    topic = unique("guarded")
    flags = ["--allow-principal", "User:dave", "--operation", "read", "--topic", topic]
    cli("acl", "create", *flags)
    return ["acl", "delete", *flags], lambda: bool(cli.json("acl", "list", "--topic", topic))


def _user(cli: Cli) -> tuple[list[str], Callable[[], bool]]:
    name = unique("erin")
    cli("user", "create", name, "--new-password", "pw")
    return ["user", "delete", name], lambda: name in {u["user"] for u in cli.json("user", "list")}


SETUPS = {"topic": _topic, "trim-prefix": _trim, "group": _group, "acl": _acl, "user": _user}


@pytest.mark.parametrize("kind", list(SETUPS))
def test_one_rule_for_every_deletion(logstore: Cli, kind: str) -> None:
    args, still_there = SETUPS[kind](logstore)

    # No terminal, no --no-confirm: refused, nothing deleted (even with "y" on stdin).
    piped = logstore(*args, input="y\n", check=False)
    assert piped.returncode == 2, piped.stderr
    assert "refusing to delete without --no-confirm (stdin is not a terminal)" in piped.stderr
    assert still_there()

    # A terminal: the question names what goes; "n" deletes nothing.
    declined = on_terminal(logstore, args, "n\n")
    assert declined.returncode == 1, declined.stderr
    assert "[y/N]" in declined.stderr and "nothing deleted (not confirmed)" in declined.stderr
    assert still_there()

    # "y" on the terminal deletes.
    accepted = on_terminal(logstore, args, "y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert "Traceback" not in accepted.stderr
    assert not still_there()


def test_acl_question_lists_what_matches(logstore: Cli) -> None:
    topic = unique("listed")
    flags = ["--allow-principal", "User:frank", "--topic", topic]
    logstore("acl", "create", *flags, "--operation", "read", "--operation", "write")
    declined = on_terminal(logstore, ["acl", "delete", *flags], "\n")
    assert declined.returncode == 1
    assert "Delete these 2 ACL(s)?" in declined.stderr
    assert f"User:frank * TOPIC {topic} READ ALLOW" in declined.stderr
    assert f"User:frank * TOPIC {topic} WRITE ALLOW" in declined.stderr
    deleted = logstore.json("acl", "delete", *flags, "--no-confirm")
    assert sorted(r["operation"] for r in deleted) == ["READ", "WRITE"]
