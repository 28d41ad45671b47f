"""The share coordinator's broker keys (Kafka's ``ShareCoordinatorConfig``), merged into
:mod:`broker_py.config.kafka_config`'s key table.

key                                                        default     at least
share.coordinator.state.topic.num.partitions               50          1
share.coordinator.state.topic.replication.factor           3           1
share.coordinator.state.topic.min.isr                      2           1
share.coordinator.state.topic.segment.bytes                104857600   1
share.coordinator.snapshot.update.records.per.snapshot     500         0
share.coordinator.write.timeout.ms                         5000        1
share.coordinator.load.buffer.size                         5242880     1
share.coordinator.state.topic.prune.interval.ms            300000      1

``__share_group_state`` is created with the first four; a share-partition's state gets a
snapshot record after that many update records; an append of state waits for the
in-sync replicas at most the write timeout; a load reads the log that many bytes at a
time. Every prune interval, a partition of ``__share_group_state`` written to since the
last prune gets a snapshot of each of its states, and the records before them are
deleted (the topic keeps records until then: ``cleanup.policy=delete``,
``retention.ms=-1``, as Kafka creates it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker_py.config.config_def import int_type, short_type

SHARE_COORDINATOR_KEYS: dict[str, tuple[Callable[[str, str], Any], str | None]] = {
    "share.coordinator.state.topic.num.partitions": (int_type(1), "50"),
    "share.coordinator.state.topic.replication.factor": (short_type(1), "3"),
    "share.coordinator.state.topic.min.isr": (short_type(1), "2"),
    "share.coordinator.state.topic.segment.bytes": (int_type(1), "104857600"),
    "share.coordinator.snapshot.update.records.per.snapshot": (int_type(0), "500"),
    "share.coordinator.write.timeout.ms": (int_type(1), "5000"),
    "share.coordinator.load.buffer.size": (int_type(1), "5242880"),
    "share.coordinator.state.topic.prune.interval.ms": (int_type(1), "300000"),
}
