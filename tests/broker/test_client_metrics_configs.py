"""CLIENT_METRICS resource configs (KIP-714): Kafka's parsing, bounds, codes and texts."""

from __future__ import annotations

import pytest

from broker_py.server.telemetry import client_metrics_configs as cmc
from logstore.protocol.errors import InvalidConfigError, InvalidRequestError


def test_defaults_and_lists():
    sub = cmc.validate("s", {})
    assert (sub.metrics, sub.interval_ms, dict(sub.match)) == ((), 300_000, {})
    sub = cmc.validate(
        "s",
        {
            "metrics": " org.apache.kafka.producer. , org.apache.kafka.consumer.",
            "interval.ms": " 1000 ",
            "match": "client_id = app-.* ,client_software_name=librdkafka",
        },
    )
    assert sub.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer.")
    assert sub.interval_ms == 1000
    assert set(sub.match) == {"client_id", "client_software_name"}
    assert sub.match["client_id"].fullmatch("app-1")
    assert not sub.match["client_id"].fullmatch("xapp-1")
    assert cmc.split_list("") == [] and cmc.split_list("  ") == []
    assert cmc.split_list("a,,b") == ["a", "", "b"]


@pytest.mark.parametrize(
    "name,configs,error,text",
    [
        ("", {}, InvalidRequestError, "Subscription name can't be empty"),
        ("s", {"bogus": "1"}, InvalidRequestError, "Unknown client metrics configuration: bogus"),
        (
            "s",
            {"interval_ms": "1"},
            InvalidRequestError,
            "Unknown client metrics configuration: interval_ms",
        ),
        (
            "s",
            {"interval.ms": "abc"},
            InvalidConfigError,
            "Invalid value abc for configuration interval.ms: Not a number of type INT",
        ),
        (
            "s",
            {"interval.ms": "2147483648"},
            InvalidConfigError,
            "Invalid value 2147483648 for configuration interval.ms: Not a number of type INT",
        ),
        (
            "s",
            {"interval.ms": "99"},
            InvalidRequestError,
            "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        ),
        (
            "s",
            {"interval.ms": "3600001"},
            InvalidRequestError,
            "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 "
            "(1 hour)",
        ),
        ("s", {"match": "client_id"}, InvalidConfigError, "Illegal client matching pattern: "),
        ("s", {"match": "client_id="}, InvalidConfigError, "Illegal client matching pattern: "),
        ("s", {"match": "a=b=c"}, InvalidConfigError, "Illegal client matching pattern: a=b=c"),
        ("s", {"match": "host=x"}, InvalidConfigError, "Illegal client matching pattern: host=x"),
        (
            "s",
            {"match": "client_id=("},
            InvalidConfigError,
            "Illegal client matching pattern: client_id=(",
        ),
    ],
)
def test_refused_as_kafka(name, configs, error, text):
    with pytest.raises(error) as e:
        cmc.validate(name, configs)
    assert str(e.value).startswith(text)


def test_bounds_accepted():
    assert cmc.validate("s", {"interval.ms": "100"}).interval_ms == 100
    assert cmc.validate("s", {"interval.ms": "3600000"}).interval_ms == 3_600_000
    # Java's split drops trailing empty parts: "client_id=x=" is two parts
    assert cmc.validate("s", {"match": "client_id=x="}).match["client_id"].fullmatch("x")
