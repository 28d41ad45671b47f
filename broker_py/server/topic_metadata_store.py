"""The topic file of data dirs written before the controller store
(:mod:`broker_py.server.local_support` takes its topics over once): names, ids, partition
counts and topic config overrides, as ``<first log dir>/__logstore_metadata/topics.json``::

    {"version": 1, "topics": {"<name>": {"topic_id": "<uuid hex>",
                                         "partitions": <int>,
                                         "configs": {"<topic config key>": "<value>"}}}}

Every change replaces the file whole (``metadata_file``).
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from typing import Any

from broker_py.common.topic import TopicInfo
from broker_py.utils import metadata_file
from broker_py.utils.metadata_file import METADATA_DIR


def _positive(value: object) -> int:
    if type(value) is not int or value <= 0:
        raise ValueError(f"partition count {value!r} is not a positive integer")
    return value


class TopicMetadataStore:
    """The topics of this broker, persisted on every change."""

    def __init__(self, log_dir: str) -> None:
        self._dir = os.path.join(log_dir, METADATA_DIR)
        self._path = os.path.join(self._dir, "topics.json")
        self.topics: dict[str, TopicInfo] = {}
        self._load()

    def _load(self) -> None:
        def parse(doc: dict[str, Any]) -> dict[str, TopicInfo]:
            return {
                name: TopicInfo(
                    name,
                    uuid.UUID(hex=t["topic_id"]),
                    _positive(t["partitions"]),
                    dict(t.get("configs", {})),
                )
                for name, t in doc.get("topics", {}).items()
            }

        self.topics = metadata_file.load(self._path, parse) or {}

    def _save(self, topics: dict[str, TopicInfo]) -> None:
        """Persists ``topics`` as the whole set; callers change ``self.topics`` only after
        this returns, so a write the disk refuses (KafkaStorageError) changes nothing."""
        doc = {
            "version": 1,
            "topics": {
                t.name: {
                    "topic_id": t.topic_id.hex,
                    "partitions": t.partitions,
                    "configs": t.configs,
                }
                for t in topics.values()
            },
        }
        metadata_file.write(self._path, doc)

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None

    def create(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(configs))
        self._save({**self.topics, name: info})
        self.topics[name] = info
        return info

    def delete(self, name: str) -> TopicInfo | None:
        if name not in self.topics:
            return None
        self._save({n: t for n, t in self.topics.items() if n != name})
        return self.topics.pop(name)

    def set_partitions(self, name: str, partitions: int) -> None:
        info = self.topics[name]
        self._save({**self.topics, name: dataclasses.replace(info, partitions=partitions)})
        info.partitions = partitions

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        info = self.topics[name]
        self._save({**self.topics, name: dataclasses.replace(info, configs=dict(configs))})
        info.configs = dict(configs)
