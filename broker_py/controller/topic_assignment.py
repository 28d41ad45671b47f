"""A topic's replica assignment (Kafka's ``ReplicaAssignment`` per partition): its id and
each partition's replicas in preference order, the head the preferred leader; and while a
reassignment runs, the replicas it adds and removes. ``zk_data`` reads and writes it as
``/brokers/topics/<T>``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TopicAssignment:
    topic_id: uuid.UUID | None  # None on topics created before Kafka 2.8
    partitions: dict[int, list[int]]  # partition -> replicas in preference order
    adding: dict[int, list[int]] = field(default_factory=dict)  # partitions being reassigned only
    removing: dict[int, list[int]] = field(default_factory=dict)
