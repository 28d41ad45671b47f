"""The share-partition leader's broker keys (KIP-932; Kafka 4.2's ``ShareGroupConfig``),
merged into the broker's table (:mod:`broker_py.config.kafka_config`)::

    key                                       default   range
    group.share.delivery.count.limit          5         2..10
    group.share.partition.max.record.locks    2000      100..10000
    group.share.max.share.sessions            2000      1..

A record is delivered at most ``group.share.delivery.count.limit`` times; a share-partition
holds at most ``group.share.partition.max.record.locks`` offsets in flight; a broker keeps
at most ``group.share.max.share.sessions`` share sessions (one per group and member that
fetches from it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker_py.config.config_def import int_type

SHARE_GROUP_KEYS: dict[str, tuple[Callable[[str, str], Any], str | None]] = {
    "group.share.delivery.count.limit": (int_type(2, 10), "5"),
    "group.share.partition.max.record.locks": (int_type(100, 10000), "2000"),
    "group.share.max.share.sessions": (int_type(1), "2000"),
}
