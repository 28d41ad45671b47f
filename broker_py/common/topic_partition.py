"""Kafka's ``TopicPartition``: one partition of one topic, the key of most broker state."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int
