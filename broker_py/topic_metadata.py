"""Topic metadata a single broker keeps as its own controller: names, ids, partition
counts and topic config overrides.

Stored as ``<first log dir>/__logstore_metadata/topics.json``::

    {"version": 1, "topics": {"<name>": {"topic_id": "<uuid hex>",
                                         "partitions": <int>,
                                         "configs": {"<topic config key>": "<value>"}}}}

Every change is written to a temporary file, fsynced and renamed over the old one, so
the file is always whole. Each partition directory also gets Kafka's
``partition.metadata`` file (``version: 0`` / ``topic_id: <base64 uuid>``).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import uuid

from broker_py.errors import InvalidTopicError

METADATA_DIR = "__logstore_metadata"
MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules; raises InvalidTopicError naming the rule broken."""
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'")


@dataclasses.dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


def partition_metadata_text(topic_id: uuid.UUID) -> str:
    """Kafka's ``partition.metadata`` content (topic id in URL-safe base64, unpadded)."""
    encoded = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    return f"version: 0\ntopic_id: {encoded}\n"


class TopicMetadataStore:
    """The topics of this broker, persisted on every change."""

    def __init__(self, log_dir: str) -> None:
        self._dir = os.path.join(log_dir, METADATA_DIR)
        self._path = os.path.join(self._dir, "topics.json")
        self.topics: dict[str, TopicInfo] = {}
        self._load()

    def _load(self) -> None:
        try:
            with open(self._path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return
        for name, t in doc.get("topics", {}).items():
            self.topics[name] = TopicInfo(name, uuid.UUID(hex=t["topic_id"]), int(t["partitions"]), dict(t.get("configs", {})))

    def _save(self) -> None:
        os.makedirs(self._dir, exist_ok=True)
        doc = {
            "version": 1,
            "topics": {
                t.name: {"topic_id": t.topic_id.hex, "partitions": t.partitions, "configs": t.configs}
                for t in self.topics.values()
            },
        }
        tmp = self._path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        fd = os.open(self._dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None

    def create(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(configs))
        self.topics[name] = info
        self._save()
        return info

    def delete(self, name: str) -> TopicInfo | None:
        info = self.topics.pop(name, None)
        if info is not None:
            self._save()
        return info

    def set_partitions(self, name: str, partitions: int) -> None:
        self.topics[name].partitions = partitions
        self._save()

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._save()
