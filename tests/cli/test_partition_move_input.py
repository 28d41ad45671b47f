"""What ``logstore cluster partitions`` and ``elect-leaders`` take from the command line
and from a ``--plan`` file, refused with a one-line error (exit status 2) before any
broker is asked: Kafka's reassignment JSON, ``TOPIC:PARTITION``, throttle rates."""

from __future__ import annotations

import json

import pytest

from logstore.balance.planner import Move
from logstore.cli.app import main
from logstore.cli.common import CliError
from logstore.cli.partition_moves import parse_partition, parse_plan, parse_rate, plan_json

NOBODY = ["-b", "127.0.0.1:1", "--timeout", "1"]


def test_kafka_reassignment_json_round_trips():
    moves = [Move("orders", 0, (1, 2), (2, 4), 10), Move("orders", 3, (3,), (1,), 5)]
    doc = plan_json(moves)
    assert doc == {
        "version": 1,
        "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [2, 4], "log_dirs": ["any", "any"]},
            {"topic": "orders", "partition": 3, "replicas": [1], "log_dirs": ["any"]},
        ],
    }
    assert parse_plan(json.dumps(doc), "f") == {("orders", 0): [2, 4], ("orders", 3): [1]}
    no_dirs = {"version": 1, "partitions": [{"topic": "t", "partition": 1, "replicas": [3]}]}
    assert parse_plan(json.dumps(no_dirs), "f") == {("t", 1): [3]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ('{"version": 2, "partitions": []}', '"version": 1'),
        ('{"version": 1, "partitions": []}', "non-empty list"),
        ('{"version": 1, "partitions": [1]}', "expected an object"),
        ('{"version": 1, "partitions": [{"partition": 0, "replicas": [1]}]}', "'topic'"),
        (
            '{"version": 1, "partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}',
            "'partition'",
        ),
        (
            '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": []}]}',
            "'replicas'",
        ),
        (
            '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [true]}]}',
            "'replicas'",
        ),
        (
            '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}',
            "twice",
        ),
        (
            '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1],'
            ' "log_dirs": ["/data"]}]}',
            "log_dirs",
        ),
        (
            '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
            ' {"topic": "t", "partition": 0, "replicas": [2]}]}',
            "listed twice",
        ),
    ],
)
def test_bad_plans_are_refused(text, message):
    with pytest.raises(CliError, match=message):
        parse_plan(text, "plan.json")


def test_partitions_and_rates():
    assert parse_partition("orders:3") == ("orders", 3)
    assert parse_partition("orders/3") == ("orders", 3)
    for bad in ("orders", "orders:", ":1", "orders:x", "orders:-1"):
        with pytest.raises(CliError):
            parse_partition(bad)
    assert parse_rate("1048576") == 1 << 20
    assert parse_rate("10MiB") == 10 << 20
    assert parse_rate("10MB") == 10_000_000
    assert parse_rate("500k") == 500_000
    assert parse_rate("2GiB/s") == 2 << 30
    for bad in ("0", "-5", "fast", "10TB", ""):
        with pytest.raises(CliError):
            parse_rate(bad)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["cluster", "partitions", "move"], "TOPIC:PARTITION --to IDS, or --plan FILE"),
        (["cluster", "partitions", "move", "t:0"], "--to IDS is needed"),
        (["cluster", "partitions", "move", "t:0", "--to", "1,x"], "expected broker ids"),
        (["cluster", "partitions", "move", "t:0", "--to", "1,1"], "names a broker twice"),
        (["cluster", "partitions", "move", "t", "--to", "1"], "expected TOPIC:PARTITION"),
        (
            ["cluster", "partitions", "move", "t:0", "--to", "1", "--throttle", "1MB", "--no-wait"],
            "--throttle needs the command to wait",
        ),
        (["cluster", "partitions", "move", "--plan", "/nonexistent/plan.json"], "--plan"),
        (["cluster", "partitions", "balance", "--throttle", "fast"], "throttle 'fast'"),
        (["cluster", "elect-leaders"], "--preferred or --unclean"),
    ],
)
def test_usage_errors_name_the_problem(argv, message, capsys):
    assert main([*argv, *NOBODY]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
