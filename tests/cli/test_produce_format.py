"""``logstore produce -f`` (rpk's input format: fields, escapes, the trailing delimiter)
and the note on a topic the broker auto-created, against a real broker."""

from __future__ import annotations

from tests.cli.conftest import Cli, unique


def test_trailing_text_is_the_record_delimiter(logstore: Cli) -> None:
    topic = unique("fmt")
    logstore("topic", "create", topic, "-p", "1")
    result = logstore("produce", topic, "-f", r"%k:%v\n", input="a:1\nb:2:x\n")
    assert len(result.stdout.splitlines()) == 2
    # A NUL-ended format: the newline inside the record is part of the value.
    logstore("produce", topic, "-f", r"<%k> %v\0", input="<c> line one\nline two\0")
    records = logstore.lines_json("consume", topic, "-e")
    assert [(r["key"], r["value"]) for r in records] == [
        ("a", "1"),
        ("b", "2:x"),
        ("c", "line one\nline two"),
    ]


def test_topic_partition_and_header_fields(logstore: Cli) -> None:
    first, second = unique("to-a"), unique("to-b")
    logstore("topic", "create", first, "-p", "2")
    logstore("topic", "create", second, "-p", "2")
    # No TOPIC argument: each record names its own; the second has no headers.
    lines = f"{first} 1 src=x,n=1 k1 v1\n{second} 0  k2 v2\n"
    acks = logstore.lines_json("produce", "-f", r"%t %p %h %k %v\n", input=lines)
    # delivery reports of two partitions come in either order
    assert sorted((a["topic"], a["partition"]) for a in acks) == [(first, 1), (second, 0)]
    (a,) = logstore.lines_json("consume", first, "-e")
    assert (a["partition"], a["key"], a["value"], a["headers"]) == (
        1,
        "k1",
        "v1",
        [["src", "x"], ["n", "1"]],
    )
    (b,) = logstore.lines_json("consume", second, "-e")
    assert (b["partition"], b["key"], b["value"], b["headers"]) == (0, "k2", "v2", [])


def test_bad_formats_are_shown_as_typed(logstore: Cli) -> None:
    topic = unique("badfmt")
    logstore("topic", "create", topic)
    adjacent = logstore("produce", topic, "-f", r"%k%v\n", input="x\n", check=False)
    assert adjacent.returncode == 2
    assert adjacent.stderr.count(r"'%k%v\n'") == 1 and r"\\n" not in adjacent.stderr
    assert "need text between them" in adjacent.stderr

    unknown = logstore("produce", topic, "-f", "%q %v", input="x\n", check=False)
    assert unknown.returncode == 2 and "unknown field %q" in unknown.stderr

    mismatch = logstore("produce", topic, "-f", r"%k:%v\n", input="a:1\nno colon\n", check=False)
    assert mismatch.returncode == 1
    assert r"input record 2 ('no colon') does not match --input-format '%k:%v\n'" in (
        mismatch.stderr
    )
    assert r"\\n" not in mismatch.stderr and "Traceback" not in mismatch.stderr

    both = logstore("produce", topic, "-f", r"%v\n", "--delimiter", ";", input="x;y", check=False)
    assert both.returncode == 2 and "give one of them" in both.stderr
    no_topic = logstore("produce", "-f", "%v", input="x\n", check=False)
    assert no_topic.returncode == 2 and "%t" in no_topic.stderr


def test_auto_created_topic_is_named(logstore: Cli) -> None:
    topic = unique("typo")
    first = logstore("produce", topic, input="hello\n")
    assert f"logstore produce: created topic {topic} (auto.create.topics.enable)" in (first.stderr)
    assert topic in {t["name"] for t in logstore.json("topic", "list")}
    again = logstore("produce", topic, input="again\n")
    assert "created topic" not in again.stderr
