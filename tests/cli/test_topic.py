"""``logstore topic ...`` against a real broker: tables, --format json, error names and
exit statuses."""

from __future__ import annotations

from confluent_kafka import Producer

from tests.cli.conftest import Cli, table_rows, unique
from tests.integration.conftest import consume_values


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for partition, count in per_partition.items():
        for i in range(count):
            p.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def test_create_list_describe(logstore: Cli) -> None:
    topic = unique("orders")
    result = logstore(
        "topic",
        "create",
        topic,
        "-p",
        "3",
        "-c",
        "retention.ms=3600000",
        "-c",
        "cleanup.policy=compact",
    )
    assert table_rows(result.stdout) == [["TOPIC", "STATUS"], [topic, "OK"]]

    listed = logstore.json("topic", "list")
    assert {"name": topic, "partitions": 3, "replicas": 1, "internal": False} in listed
    assert all(not t["internal"] for t in listed)
    with_internal = logstore.json("topic", "list", "-i")
    assert {t["name"] for t in listed} <= {t["name"] for t in with_internal}
    assert [r[0] for r in table_rows(logstore("topic", "list", f"^{topic}$").stdout)] == [
        "NAME",
        topic,
    ]

    (described,) = logstore.json("topic", "describe", topic)
    assert described["name"] == topic and described["partition_count"] == 3
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    for p in described["partitions"]:
        assert p["replicas"] == [0] and p["isr"] == [0] and p["leader"] == 0
        assert p["offline_replicas"] == []
        assert p["log_start_offset"] == 0 and p["high_watermark"] == 0
    configs = {c["key"]: c for c in described["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["segment.bytes"]["source"] == "DEFAULT_CONFIG"

    text = logstore("topic", "describe", topic).stdout
    assert "PARTITIONS" in text and "CONFIGS" in text and "DYNAMIC_TOPIC_CONFIG" in text
    rows = table_rows(text)
    assert [
        "PARTITION",
        "LEADER",
        "REPLICAS",
        "ISR",
        "OFFLINE",
        "LOG-START-OFFSET",
        "HIGH-WATERMARK",
        "ERROR",
    ] in rows
    # partition, leader, replicas, ISR, offline (none), log start, high watermark, error
    assert ["0", "0", "0", "0", "-", "0", "0", "-"] in rows
    assert ["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"] in rows


def test_describe_shows_offsets(logstore: Cli, cli_broker) -> None:
    topic = unique("offsets")
    logstore("topic", "create", topic, "-p", "2")
    produce(cli_broker.bootstrap, topic, {0: 5, 1: 3})
    (described,) = logstore.json("topic", "describe", topic, "-p")
    assert [(p["log_start_offset"], p["high_watermark"]) for p in described["partitions"]] == [
        (0, 5),
        (0, 3),
    ]


def test_errors_are_named_and_set_the_exit_status(logstore: Cli) -> None:
    topic = unique("dup")
    logstore("topic", "create", topic)
    again = logstore("topic", "create", topic, check=False)
    assert again.returncode == 1
    assert "TOPIC_ALREADY_EXISTS (36)" in again.stdout
    as_json = logstore("topic", "create", topic, "--format", "json", check=False)
    assert as_json.returncode == 1 and "TOPIC_ALREADY_EXISTS" in as_json.stdout

    missing = logstore("topic", "describe", unique("missing"), check=False)
    assert missing.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PART (3)" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1 and "Traceback" not in missing.stderr

    bad = logstore("topic", "create", unique("bad"), "-c", "retention.ms=soon", check=False)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stdout

    usage = logstore("topic", "create", check=False)
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_unreachable_broker_exits_2(tmp_path) -> None:
    from tests.support.ports import free_port

    cli = Cli(f"127.0.0.1:{free_port()}")
    result = cli("topic", "list", "--timeout", "1", check=False)
    assert result.returncode == 2
    assert any(
        cause in result.stderr for cause in ("connection refused", "TRANSPORT", "TIMED_OUT")
    ), result.stderr
    assert "Traceback" not in result.stderr


def test_alter_config_add_partitions_delete(logstore: Cli) -> None:
    topic = unique("alter")
    logstore("topic", "create", topic, "-p", "1", "-c", "retention.ms=1000")
    logstore(
        "topic", "alter-config", topic, "--set", "segment.bytes=1048576", "--delete", "retention.ms"
    )
    configs = {c["key"]: c for c in logstore.json("topic", "describe", topic, "-c")[0]["configs"]}
    assert (
        configs["segment.bytes"]["value"] == "1048576"
        and configs["segment.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    )
    assert configs["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"

    bad = logstore("topic", "alter-config", topic, "--set", "min.insync.replicas=zero", check=False)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stdout

    result = logstore.json("topic", "add-partitions", topic, "-n", "2")
    assert result == [{"topic": topic, "partitions": 3, "error": None}]
    assert logstore.json("topic", "describe", topic)[0]["partition_count"] == 3

    assert logstore.json("topic", "delete", topic, "--no-confirm") == [
        {"topic": topic, "error": None}
    ]
    assert topic not in {t["name"] for t in logstore.json("topic", "list")}
    gone = logstore("topic", "delete", topic, "--no-confirm", check=False)
    assert gone.returncode == 1 and "UNKNOWN_TOPIC_OR_PART" in gone.stdout


def test_trim_prefix(logstore: Cli, cli_broker) -> None:
    topic = unique("trim")
    logstore("topic", "create", topic, "-p", "2")
    produce(cli_broker.bootstrap, topic, {0: 10, 1: 10})
    result = logstore.json("topic", "trim-prefix", topic, "-o", "4", "-p", "0", "--no-confirm")
    assert result == [{"topic": topic, "partition": 0, "new_start_offset": 4, "error": None}]
    parts = logstore.json("topic", "describe", topic, "-p")[0]["partitions"]
    assert [(p["log_start_offset"], p["high_watermark"]) for p in parts] == [(4, 10), (0, 10)]
    # A consumer from the start now begins at offset 4 on partition 0.
    values = consume_values(cli_broker.bootstrap, topic, 16)
    assert sorted(v for v in values if v.startswith(b"0-")) == sorted(
        f"0-{i}".encode() for i in range(4, 10)
    )

    past = logstore("topic", "trim-prefix", topic, "-o", "11", "--no-confirm", check=False)
    assert past.returncode == 1 and "OFFSET_OUT_OF_RANGE" in past.stderr
    # Without --no-confirm and no terminal to ask on, nothing is deleted.
    refused = logstore("topic", "trim-prefix", topic, "-o", "end", input="y\n", check=False)
    assert refused.returncode == 2 and "--no-confirm" in refused.stderr
    assert (
        logstore.json("topic", "describe", topic, "-p")[0]["partitions"][1]["log_start_offset"] == 0
    )
    logstore("topic", "trim-prefix", topic, "-o", "end", "--no-confirm")
    parts = logstore.json("topic", "describe", topic, "-p")[0]["partitions"]
    assert [p["log_start_offset"] for p in parts] == [10, 10]


def test_durations_for_ms_configs(logstore: Cli) -> None:
    topic = unique("durations")
    logstore("topic", "create", topic, "-c", "retention.ms=1h", "-c", "segment.ms=7d")
    logstore("topic", "alter-config", topic, "--set", "delete.retention.ms=1h30m")
    configs = {c["key"]: c for c in logstore.json("topic", "describe", topic, "-c")[0]["configs"]}
    assert configs["retention.ms"]["value"] == str(3600 * 1000)
    assert configs["segment.ms"]["value"] == str(7 * 24 * 3600 * 1000)
    assert configs["delete.retention.ms"]["value"] == str(90 * 60 * 1000)
    # Only *.ms configs take durations; anything else is the broker's to judge.
    bad = logstore("topic", "alter-config", topic, "--set", "segment.bytes=1h", check=False)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stdout
    bad = logstore("topic", "alter-config", topic, "--set", "retention.ms=1y", check=False)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stdout
