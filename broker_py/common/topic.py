"""Topics as a client and the log layer see them (:class:`TopicInfo`), and Kafka's topic
name rules (its ``Topic``: ``validate``, ``hasCollision``, ``unifyCollisionChars``)."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterable

from broker_py.common.internal_topics import is_internal_topic
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
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )


def unify_collision_chars(name: str) -> str:
    """Kafka's ``Topic.unifyCollisionChars``: metric names do not tell '.' from '_'."""
    return name.replace(".", "_")


def colliding_topics(name: str, existing: Iterable[str]) -> list[str]:
    """The topics of ``existing`` other than ``name`` whose metric names would clash with
    ``name``'s (Kafka's ``Topic.hasCollision``), sorted."""
    if "." not in name and "_" not in name:
        return []
    unified = unify_collision_chars(name)
    return sorted(t for t in existing if t != name and unify_collision_chars(t) == unified)


def check_collision(name: str, existing: Iterable[str]) -> None:
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
