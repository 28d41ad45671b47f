"""Topics as a client and the log layer see them (:class:`TopicInfo`), Kafka's topic name
rules, and ``partition.metadata``; and the topic file of data dirs written before the
controller store (:mod:`broker_py.server.local_support` takes its topics over once):
names, ids, partition counts and topic config overrides, as
``<first log dir>/__logstore_metadata/topics.json``::

    {"version": 1, "topics": {"<name>": {"topic_id": "<uuid hex>",
                                         "partitions": <int>,
                                         "configs": {"<topic config key>": "<value>"}}}}

Every change replaces the file whole (``metadata_file``). Each partition directory also gets Kafka's
``partition.metadata`` file (``version: 0`` / ``topic_id: <base64 uuid>``).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import uuid

from broker_py.coordinator.internal_topics import is_internal_topic
from broker_py.utils import metadata_file
from broker_py.utils.metadata_file import METADATA_DIR
from logstore.protocol.errors import InvalidTopicError

MAX_TOPIC_NAME = 249
# Kafka's Topic.LEGAL_CHARS, matched against the whole name (``$`` would let a name end
# in a newline).
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: not empty, not ``.`` or ``..``, at most 249 characters,
    all of them ASCII alphanumerics, ``.``, ``_`` or ``-``. Raises InvalidTopicError with
    Kafka's message for the rule broken."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, topic name: {name}"
        )
    if not _LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )


def unify_collision_chars(name: str) -> str:
    """Kafka's ``Topic.unifyCollisionChars``: metric names do not tell '.' from '_'."""
    return name.replace(".", "_")


def colliding_topics(name: str, existing) -> list[str]:
    """The topics of ``existing`` other than ``name`` whose metric names would clash with
    ``name``'s (Kafka's ``Topic.hasCollision``), sorted."""
    if "." not in name and "_" not in name:
        return []
    unified = unify_collision_chars(name)
    return sorted(t for t in existing if t != name and unify_collision_chars(t) == unified)


def check_collision(name: str, existing) -> None:
    """As Kafka's ``AdminZkClient.validateTopicCreate``: InvalidTopicError naming the
    existing topics ``name`` collides with."""
    clash = colliding_topics(name, existing)
    if clash:
        raise InvalidTopicError(f"Topic '{name}' collides with existing topics: {', '.join(clash)}")


@dataclasses.dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return is_internal_topic(self.name)


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
        def parse(doc: dict) -> dict[str, TopicInfo]:
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
