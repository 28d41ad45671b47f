"""The configs of a GROUP resource (KIP-848, KIP-932), checked as Kafka 4's ``GroupConfig``.

A group's configs override the broker's defaults for that group alone:

==============================  ======  ==========================================  ========
key                             type    default (the broker key)                    at least
==============================  ======  ==========================================  ========
consumer.session.timeout.ms     INT     group.consumer.session.timeout.ms           1
consumer.heartbeat.interval.ms  INT     group.consumer.heartbeat.interval.ms        1
share.session.timeout.ms        INT     group.share.session.timeout.ms              1
share.heartbeat.interval.ms     INT     group.share.heartbeat.interval.ms           1
share.record.lock.duration.ms   INT     group.share.record.lock.duration.ms         1000
share.auto.offset.reset         STRING  ``latest`` (``latest`` or ``earliest``)
share.isolation.level           STRING  ``read_uncommitted`` (or ``read_committed``)
==============================  ======  ==========================================  ========

A change is checked whole (the resource's configs after it), in Kafka's order, each failure
INVALID_CONFIG with Kafka's text:

1. a null value: ``Null value not supported for group configs: <keys>``;
2. an unknown key: ``Unknown group config name: <key>``;
3. each value against its type and range (``ConfigDef``'s messages);
4. each timeout and interval within the broker's ``group.<kind>.min.*`` and ``max.*``
   (``<key> must be greater than or equal to <broker key>``, ``... less than or equal to``),
   the record lock duration within ``group.share.min/max.record.lock.duration.ms``;
5. a session timeout above its heartbeat interval (``<key> must be greater than <key>``).

Keys a change leaves out take Kafka's ``ConfigDef`` defaults during the check (as Kafka's
``GroupConfig.validate`` parses them), except the two consumer keys, which take the
broker's values. An empty group name is INVALID_REQUEST (``Default group resources are not
allowed.``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from broker_py.config.config_def import ConfigError, choice_type, int_type
from logstore.protocol.errors import InvalidConfigError, InvalidRequestError

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"


class BrokerValues(Protocol):
    """The broker's config values by key (a BrokerConfig)."""

    def __getitem__(self, key: str) -> Any: ...


@dataclass(frozen=True)
class _Key:
    parse: Callable[[str, str], Any]
    kafka_default: str
    broker_key: str | None  # the broker config giving the default, if any
    is_int: bool = True


KEYS: dict[str, _Key] = {
    CONSUMER_SESSION_TIMEOUT_MS: _Key(int_type(1), "45000", "group.consumer.session.timeout.ms"),
    CONSUMER_HEARTBEAT_INTERVAL_MS: _Key(
        int_type(1), "5000", "group.consumer.heartbeat.interval.ms"
    ),
    SHARE_SESSION_TIMEOUT_MS: _Key(int_type(1), "45000", "group.share.session.timeout.ms"),
    SHARE_HEARTBEAT_INTERVAL_MS: _Key(int_type(1), "5000", "group.share.heartbeat.interval.ms"),
    SHARE_RECORD_LOCK_DURATION_MS: _Key(
        int_type(1000), "30000", "group.share.record.lock.duration.ms"
    ),
    SHARE_AUTO_OFFSET_RESET: _Key(choice_type("latest", "earliest"), "latest", None, False),
    SHARE_ISOLATION_LEVEL: _Key(
        choice_type("read_committed", "read_uncommitted"), "read_uncommitted", None, False
    ),
}

# (group key, the broker keys bounding it: min, max)
_BOUNDS = (
    (
        CONSUMER_HEARTBEAT_INTERVAL_MS,
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    (
        CONSUMER_SESSION_TIMEOUT_MS,
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    (
        SHARE_HEARTBEAT_INTERVAL_MS,
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    (
        SHARE_SESSION_TIMEOUT_MS,
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
    (
        SHARE_RECORD_LOCK_DURATION_MS,
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
)


def is_int(key: str) -> bool:
    return KEYS[key].is_int


def defaults(broker: BrokerValues) -> dict[str, str]:
    """Every key's value for a group that sets none: the broker's, else Kafka's default."""
    return {
        key: str(broker[k.broker_key]) if k.broker_key is not None else k.kafka_default
        for key, k in KEYS.items()
    }


def check_name(name: str) -> None:
    if not name:
        raise InvalidRequestError("Default group resources are not allowed.")


def validate(name: str, configs: Mapping[str, str | None], broker: BrokerValues) -> None:
    """Raises InvalidRequestError / InvalidConfigError (Kafka's texts) unless ``configs``
    may be the whole of group ``name``'s configs on a broker configured as ``broker``."""
    check_name(name)
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise InvalidConfigError("Null value not supported for group configs: " + ",".join(nulls))
    for key in configs:
        if key not in KEYS:
            raise InvalidConfigError(f"Unknown group config name: {key}")
    combined: dict[str, str] = {k: v.kafka_default for k, v in KEYS.items()}
    combined[CONSUMER_SESSION_TIMEOUT_MS] = str(broker["group.consumer.session.timeout.ms"])
    combined[CONSUMER_HEARTBEAT_INTERVAL_MS] = str(broker["group.consumer.heartbeat.interval.ms"])
    combined.update({k: v for k, v in configs.items() if v is not None})
    values: dict[str, Any] = {}
    for key, raw in combined.items():
        try:
            values[key] = KEYS[key].parse(key, raw)
        except ConfigError as e:
            raise InvalidConfigError(str(e)) from None
    for key, lo, hi in _BOUNDS:
        if values[key] < broker[lo]:
            raise InvalidConfigError(f"{key} must be greater than or equal to {lo}")
        if values[key] > broker[hi]:
            raise InvalidConfigError(f"{key} must be less than or equal to {hi}")
    for session, interval in (
        (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
        (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
    ):
        if values[session] <= values[interval]:
            raise InvalidConfigError(f"{session} must be greater than {interval}")


def effective(configs: Mapping[str, str], broker: BrokerValues) -> dict[str, Any]:
    """The group's values: its own (already validated), else the broker's defaults."""
    merged = {**defaults(broker), **configs}
    return {key: KEYS[key].parse(key, merged[key]) for key in KEYS}
