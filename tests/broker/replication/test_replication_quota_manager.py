"""The replication throttle's decision logic (``ReplicationQuotaManager``, KIP-73) with an
injected clock: which partitions a throttled-replicas topic config lists for a broker, and
a sender that waits while the quota is exceeded is held to the bound."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.config.config_def import ConfigError
from broker_py.config.kafka_config import BrokerConfig
from broker_py.replication.replication_quota_manager import (
    ALL,
    FOLLOWER,
    LEADER,
    NONE,
    UNBOUNDED,
    ReplicationQuotaManager,
    from_config,
    parse_throttled_replicas,
)
from broker_py.utils.sampled_rate import RateConfig


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_the_list_format_and_the_wildcard() -> None:
    assert parse_throttled_replicas("*", 1) == ALL
    assert parse_throttled_replicas(" * ", 7) == ALL
    assert parse_throttled_replicas("", 1) == NONE
    listed = parse_throttled_replicas("0:1, 2:1 ,3:2", 1)
    assert 0 in listed and 2 in listed and 3 not in listed and 1 not in listed
    assert parse_throttled_replicas("0:2,1:3", 1) == NONE


@given(
    pairs=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5)), max_size=20),
    broker=st.integers(0, 5),
    blanks=st.sampled_from(["", " ", "\t"]),
)
def test_a_list_throttles_exactly_the_partitions_listed_with_this_broker(
    pairs: list[tuple[int, int]], broker: int, blanks: str
) -> None:
    value = ",".join(f"{blanks}{p}:{b}{blanks}" for p, b in pairs)
    parsed = parse_throttled_replicas(value, broker)
    expected = {p for p, b in pairs if b == broker}
    assert not parsed.every
    assert parsed.partitions == frozenset(expected)


def test_the_topic_config_is_read_at_each_use() -> None:
    configs = {"t": "0:1"}
    quota = ReplicationQuotaManager(
        LEADER, 1, Clock(), throttled_replicas=lambda topic: configs.get(topic, "")
    )
    assert quota.is_throttled(("t", 0)) and not quota.is_throttled(("t", 1))
    assert not quota.is_throttled(("u", 0))
    configs["t"] = "*"
    assert quota.is_throttled(("t", 1))
    del configs["t"]
    assert not quota.is_throttled(("t", 0))


def test_the_rates_are_dynamic_broker_configs_read_at_each_use() -> None:
    config = BrokerConfig({"broker.id": "2", "replication.quota.window.num": "3"})
    topics = {"t": {"follower.replication.throttled.replicas": "0:2,1:3"}}
    clock = Clock()
    quota = from_config(FOLLOWER, config, clock, topics)
    assert quota.upper_bound == UNBOUNDED
    assert quota.is_throttled(("t", 0)) and not quota.is_throttled(("t", 1))
    # Kafka describes them only where set (they are not KafkaConfig keys).
    assert "follower.replication.throttled.rate" not in config.describe()
    assert config.describe()["replication.quota.window.num"] == "3"
    config.set_dynamic({"follower.replication.throttled.rate": "1000"}, {})
    assert quota.upper_bound == 1000.0
    assert config.describe()["follower.replication.throttled.rate"] == "1000"
    quota.record(5000)  # over 2 windows of 1 s (the span's floor): 2,500 bytes/s
    assert quota.is_quota_exceeded()
    with pytest.raises(ConfigError, match="Value must be at least 0"):
        config.set_dynamic({}, {"leader.replication.throttled.rate": "-1"})
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically"):
        config.set_dynamic({"replication.quota.window.num": "5"}, {})


def test_the_default_bound_never_throttles() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(LEADER, 1, clock)
    assert quota.upper_bound == UNBOUNDED
    quota.record(1 << 40)
    assert not quota.is_quota_exceeded()
    assert quota.byte_rate() > 0


def test_a_bound_of_zero_holds_back_once_anything_was_sent() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(LEADER, 1, clock, bound=lambda: 0.0)
    assert not quota.is_quota_exceeded()
    quota.record(1)
    assert quota.is_quota_exceeded()


@settings(deadline=None, max_examples=25)
@given(
    samples=st.integers(2, 11),
    window_ms=st.sampled_from([500, 1000]),
    bound=st.integers(1_000, 10_000_000),
    speed=st.floats(1.1, 4.0),
    tick_ms=st.sampled_from([20, 50]),
)
def test_a_sender_that_waits_while_exceeded_is_held_to_the_bound(
    samples: int, window_ms: int, bound: int, speed: float, tick_ms: int
) -> None:
    """Each tick (at most a tenth of a window) the sender sends one chunk, ``speed`` times
    the bound, unless the quota is exceeded. Over a long run its average is the bound
    within 6% (12% with 2 windows, whose span swings between one and two windows), past
    the start-up allowance of ``samples - 1`` windows and one chunk."""
    clock = Clock()
    quota = ReplicationQuotaManager(
        LEADER, 1, clock, bound=lambda: float(bound), config=RateConfig(samples, window_ms)
    )
    chunk = max(1, int(bound * tick_ms / 1000 * speed))
    duration_ms = 20 * samples * window_ms
    sent = 0
    for clock.now in range(0, duration_ms, tick_ms):
        if not quota.is_quota_exceeded():
            quota.record(chunk)
            sent += chunk
    seconds = duration_ms / 1000
    allowance = bound * (samples - 1) * window_ms / 1000
    slack = 0.06 if samples > 2 else 0.12
    assert sent <= (1 + slack) * bound * seconds + allowance + chunk
    assert sent >= (1 - slack) * bound * seconds
