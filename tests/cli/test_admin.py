"""``logstore cluster``, ``acl``, ``user`` and ``version`` against a real broker."""

from __future__ import annotations

import subprocess
import sys

from tests.cli.conftest import Cli, table_rows, unique
from tests.support.processes import repo_env


def test_cluster_info(logstore: Cli, cli_broker) -> None:
    info = logstore.json("cluster", "info")
    assert info["controller"] == 0 and isinstance(info["cluster_id"], str) and info["cluster_id"]
    assert info["brokers"] == [
        {"id": 0, "host": "127.0.0.1", "port": cli_broker.port, "rack": None}
    ]
    rows = table_rows(logstore("cluster", "info").stdout)
    assert ["0*", "127.0.0.1", str(cli_broker.port), "-"] in rows


def test_cluster_config_get_set(logstore: Cli) -> None:
    (entry,) = logstore.json("cluster", "config", "get", "log.retention.ms")
    assert entry["source"] == "DEFAULT_CONFIG"
    assert ["num.partitions", "1", "STATIC_BROKER_CONFIG"] in table_rows(
        logstore("cluster", "config", "get", "num.partitions").stdout
    )

    assert logstore.json("cluster", "config", "set", "log.retention.ms", "7200000") == [
        {"broker": 0, "key": "log.retention.ms", "value": "7200000", "error": None}
    ]
    (entry,) = logstore.json("cluster", "config", "get", "log.retention.ms")
    assert entry["value"] == "7200000" and entry["source"] == "DYNAMIC_BROKER_CONFIG"
    # A new topic takes the broker's default.
    topic = unique("cfg")
    logstore("topic", "create", topic)
    configs = {c["key"]: c for c in logstore.json("topic", "describe", topic, "-c")[0]["configs"]}
    assert configs["retention.ms"]["value"] == "7200000"

    logstore("cluster", "config", "set", "--delete", "log.retention.ms")
    assert (
        logstore.json("cluster", "config", "get", "log.retention.ms")[0]["source"]
        == "DEFAULT_CONFIG"
    )

    bad = logstore("cluster", "config", "set", "log.retention.ms=forever", check=False)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stdout
    static = logstore("cluster", "config", "set", "broker.id=5", check=False)
    assert static.returncode == 1 and "INVALID_CONFIG" in static.stdout
    unknown = logstore("cluster", "config", "get", "no.such.key", check=False)
    assert unknown.returncode == 1 and "no.such.key" in unknown.stderr


def test_acl_create_list_delete(logstore: Cli) -> None:
    topic = unique("secured")
    created = logstore.json(
        "acl",
        "create",
        "--allow-principal",
        "User:alice",
        "--operation",
        "read",
        "--operation",
        "describe",
        "--topic",
        topic,
    )
    assert [(r["operation"], r["error"]) for r in created] == [("READ", None), ("DESCRIBE", None)]
    logstore(
        "acl",
        "create",
        "--deny-principal",
        "User:mallory",
        "--operation",
        "all",
        "--topic",
        "pay",
        "--resource-pattern-type",
        "prefixed",
        "--host",
        "10.0.0.1",
    )
    logstore(
        "acl",
        "create",
        "--allow-principal",
        "User:alice",
        "--operation",
        "read",
        "--group",
        "alice-",
    )

    listed = logstore.json("acl", "list", "--topic", topic)
    assert {
        (
            r["principal"],
            r["resource_type"],
            r["resource_name"],
            r["pattern"],
            r["operation"],
            r["permission"],
            r["host"],
        )
        for r in listed
    } == {
        ("User:alice", "TOPIC", topic, "LITERAL", "READ", "ALLOW", "*"),
        ("User:alice", "TOPIC", topic, "LITERAL", "DESCRIBE", "ALLOW", "*"),
    }
    every = logstore.json("acl", "list")
    assert ("User:mallory", "PREFIXED", "DENY", "10.0.0.1") in {
        (r["principal"], r["pattern"], r["permission"], r["host"]) for r in every
    }
    assert any(r["resource_type"] == "GROUP" for r in every)
    text = logstore("acl", "list", "--allow-principal", "User:alice").stdout
    assert "User:alice" in text and "mallory" not in text

    deleted = logstore.json(
        "acl", "delete", "--topic", topic, "--operation", "read", "--no-confirm"
    )
    assert [(r["resource_name"], r["operation"]) for r in deleted] == [(topic, "READ")]
    assert [r["operation"] for r in logstore.json("acl", "list", "--topic", topic)] == ["DESCRIBE"]

    refused = logstore("acl", "delete", "--no-confirm", check=False)
    assert refused.returncode == 2
    missing = logstore(
        "acl",
        "create",
        "--allow-principal",
        "alice",
        "--operation",
        "read",
        "--topic",
        "t",
        check=False,
    )
    assert missing.returncode == 2 and "Type:name" in missing.stderr


def test_user_create_list_delete(logstore: Cli) -> None:
    name = unique("carol")
    assert logstore.json("user", "create", name, "--new-password", "pw1") == [
        {"user": name, "mechanism": "SCRAM-SHA-256", "error": None}
    ]
    logstore(
        "user",
        "create",
        name,
        "--new-password",
        "pw2",
        "--mechanism",
        "SCRAM-SHA-512",
        "--iterations",
        "8192",
    )
    users = {u["user"]: u["mechanisms"] for u in logstore.json("user", "list")}
    assert sorted((m["mechanism"], m["iterations"]) for m in users[name]) == [
        ("SCRAM-SHA-256", 4096),
        ("SCRAM-SHA-512", 8192),
    ]
    assert name in logstore("user", "list").stdout

    assert [r["mechanism"] for r in logstore.json("user", "delete", name, "--no-confirm")] == [
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    ]
    assert name not in {u["user"] for u in logstore.json("user", "list")}
    again = logstore("user", "delete", name, check=False)
    assert again.returncode == 1 and name in again.stderr
    again = logstore(
        "user", "delete", name, "--mechanism", "SCRAM-SHA-256", "--no-confirm", check=False
    )
    assert again.returncode == 1 and "RESOURCE_NOT_FOUND" in again.stdout


def test_version_is_shared_with_the_broker(logstore: Cli) -> None:
    cli = logstore("version").stdout.splitlines()
    assert cli[0].startswith("logstore ") and any(line.startswith("librdkafka ") for line in cli)
    env = repo_env()
    broker = subprocess.run(
        [sys.executable, "-m", "broker_py", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert broker.returncode == 0, broker.stderr
    assert broker.stdout.strip() == cli[0]
    assert logstore("--version").stdout.strip() == cli[0]
    parts = logstore.json("version")
    assert cli[0].startswith(f"logstore {parts['logstore']} ")


def test_rpk_spellings_are_aliases(logstore: Cli) -> None:
    topic = unique("aliased")
    logstore("topic", "create", topic)
    produced = logstore.lines_json("topic", "produce", topic, "--value", "v1")
    assert [(p["topic"], p["offset"]) for p in produced] == [(topic, 0)]
    assert logstore("topic", "consume", topic, "-e").stdout == "v1\n"
    assert logstore.json("security", "acl", "list") == logstore.json("acl", "list")
    assert logstore.json("security", "user", "list") == logstore.json("user", "list")
    assert "(alias of logstore produce)" in logstore("topic", "produce", "--help").stdout
    assert "(alias of logstore acl)" in logstore("security", "--help").stdout
    # Aliases stay out of the lists of commands.
    assert "produce" not in logstore("topic", "--help").stdout
    assert "security" not in logstore("--help").stdout

    typo = logstore("topic", "produc", topic, check=False)
    assert typo.returncode == 2 and "Did you mean 'produce'?" in typo.stderr
    typo = logstore("securty", "acl", "list", check=False)
    assert typo.returncode == 2 and "Did you mean 'security'?" in typo.stderr
