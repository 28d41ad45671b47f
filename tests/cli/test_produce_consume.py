"""``logstore produce`` and ``logstore consume`` against a real broker: keys, headers,
input and output formats, -o positions, -n, -e, and consuming in a group."""

from __future__ import annotations

import time

from tests.cli.conftest import Cli, unique


def test_produce_keys_headers_and_consume_formats(logstore: Cli) -> None:
    topic = unique("pc")
    logstore("topic", "create", topic, "-p", "1")
    result = logstore(
        "produce", topic, "-f", "%k:%v", "-H", "src=cli", "-H", "n=1", input="a:1\nb:2:x\nc:3\n"
    )
    assert result.stdout.splitlines() == [
        f"Produced to partition 0 at offset {i}." for i in range(3)
    ]
    acks = logstore.lines_json("produce", topic, "--value", "plain", "-k", "k4")
    assert acks == [{"topic": topic, "partition": 0, "offset": 3}]

    text = logstore("consume", topic, "-e", "-f", "%o %k=%v %h\\n").stdout
    assert text.splitlines() == [
        "0 a=1 src=cli,n=1",
        "1 b=2:x src=cli,n=1",
        "2 c=3 src=cli,n=1",
        "3 k4=plain ",
    ]
    records = logstore.lines_json("consume", topic, "-e")
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (0, "a", "1"),
        (1, "b", "2:x"),
        (2, "c", "3"),
        (3, "k4", "plain"),
    ]
    assert records[0]["headers"] == [["src", "cli"], ["n", "1"]] and records[0]["topic"] == topic
    assert all(isinstance(r["timestamp"], int) and r["timestamp"] > 0 for r in records)
    # The default output is the value, one per line.
    assert logstore("consume", topic, "-n", "2").stdout == "1\n2:x\n"

    bad = logstore("produce", topic, "-f", "%k:%v", input="no separator\n", check=False)
    assert bad.returncode == 1 and "does not match" in bad.stderr


def test_offsets(logstore: Cli) -> None:
    topic = unique("positions")
    logstore("topic", "create", topic, "-p", "1")
    logstore("produce", topic, input="".join(f"v{i}\n" for i in range(5)))
    time.sleep(0.05)
    mark = int(time.time() * 1000)
    time.sleep(0.05)
    logstore("produce", topic, input="late0\nlate1\n")

    def values(*args: str) -> list[str]:
        return logstore("consume", topic, "-e", *args).stdout.splitlines()

    assert values("-o", "start") == [f"v{i}" for i in range(5)] + ["late0", "late1"]
    assert values("-o", "3") == ["v3", "v4", "late0", "late1"]
    assert values("-o", "-2") == ["late0", "late1"]
    assert values("-o", f"@{mark}") == ["late0", "late1"]
    assert values("-o", "end") == []
    assert values("-o", "3", "-n", "1") == ["v3"]
    bad = logstore("consume", topic, "-o", "sometime", check=False)
    assert bad.returncode == 2 and "-o" in bad.stderr


def test_consume_in_a_group_commits(logstore: Cli) -> None:
    topic, group = unique("grouped"), unique("g")
    logstore("topic", "create", topic, "-p", "2")
    logstore("produce", topic, "-p", "0", input="a\nb\nc\n")
    logstore("produce", topic, "-p", "1", input="d\n")
    got = logstore("consume", topic, "-g", group, "-e").stdout.splitlines()
    assert sorted(got) == ["a", "b", "c", "d"]
    (described,) = logstore.json("group", "describe", group)
    assert {p["partition"]: (p["current_offset"], p["lag"]) for p in described["partitions"]} == {
        0: (3, 0),
        1: (1, 0),
    }
    # The next member of the group starts where the group left off.
    logstore("produce", topic, "-p", "1", input="e\n")
    assert logstore("consume", topic, "-g", group, "-e").stdout.splitlines() == ["e"]
    bad = logstore("consume", topic, "-g", group, "-o", "5", check=False)
    assert bad.returncode == 2 and "group seek" in bad.stderr

    # -n commits the records printed, not the rest of what was fetched.
    partial = unique("g")
    printed: dict[int, int] = {}
    text = logstore("consume", topic, "-g", partial, "-n", "2", "-f", "%p %o\\n").stdout
    for line in text.splitlines():
        partition, offset = map(int, line.split())
        printed[partition] = offset + 1
    (described,) = logstore.json("group", "describe", partial)
    assert {
        p["partition"]: p["current_offset"]
        for p in described["partitions"]
        if p["current_offset"] is not None
    } == printed
    assert sum(printed.values()) == 2 and described["total_lag"] == 5 - 2
