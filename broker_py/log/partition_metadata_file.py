"""Kafka's ``partition.metadata`` file in each partition directory (its
PartitionMetadataFile): the topic id the partition's log belongs to::

    version: 0
    topic_id: <the topic id in URL-safe base64, unpadded>
"""

from __future__ import annotations

import base64
import uuid


def partition_metadata_text(topic_id: uuid.UUID) -> str:
    """Kafka's ``partition.metadata`` content (topic id in URL-safe base64, unpadded)."""
    encoded = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    return f"version: 0\ntopic_id: {encoded}\n"


def partition_metadata_topic_id(text: str) -> uuid.UUID | None:
    """The topic id a ``partition.metadata`` file names (None when it names none)."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            value = value.strip()
            try:
                return uuid.UUID(bytes=base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
            except ValueError:
                return None
    return None
