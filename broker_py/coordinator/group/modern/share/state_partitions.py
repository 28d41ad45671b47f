"""Which partitions of a share group have share-partition state (KIP-932), as Kafka 4.1's
GroupMetadataManager keeps them in the ShareGroupStatePartitionMetadata record (type 15).

- A heartbeat that finds partitions of the members' subscribed topics in none of the
  record's sets puts them in ``initializing`` (the record written with the heartbeat's),
  then the coordinator initializes their state through the persister at the group epoch
  with start offset -1 (the share-partition leader then starts at
  ``share.auto.offset.reset``). Initialized partitions move to ``initialized``; failed
  ones leave ``initializing`` and are tried at a later heartbeat. A partition left in
  ``initializing`` (its coordinator failed over mid-way) is tried again once ``retry``
  says so.
- AlterShareGroupOffsets puts the partitions it set in ``initialized``.
- DeleteShareGroupOffsets moves whole topics to ``deleting``, then out once their state
  is deleted; DeleteGroups deletes the state of ``initializing`` and ``initialized``.
- A deleted topic leaves every set.

Pure functions from a group's current record to the next one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

from broker_py.coordinator.group.modern.records import TopicMetadata
from broker_py.coordinator.group.modern.share.group import ShareGroup
from broker_py.coordinator.group.modern.share.records import (
    ShareStatePartitionsRecord,
    TopicPartitionsInfo,
)

Partition = tuple[uuid.UUID, int]


def _empty(group_id: str) -> ShareStatePartitionsRecord:
    return ShareStatePartitionsRecord(group_id, {}, {}, {})


def _flat(info: TopicPartitionsInfo) -> set[Partition]:
    return {(t, p) for t, (_, partitions) in info.items() for p in partitions}


def _merge(
    info: TopicPartitionsInfo, add: Iterable[Partition], names: Mapping[uuid.UUID, str]
) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
    out = dict(info)
    for t, p in add:
        name, partitions = out.get(t, (names.get(t, ""), frozenset()))
        out[t] = (name, partitions | {p})
    return out


def _without(
    info: TopicPartitionsInfo, drop: set[Partition]
) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
    out: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
    for t, (name, partitions) in info.items():
        kept = frozenset(p for p in partitions if (t, p) not in drop)
        if kept:
            out[t] = (name, kept)
    return out


def to_initialize(
    group: ShareGroup,
    topics: Mapping[str, TopicMetadata],
    retry: Callable[[Partition], bool],
) -> set[Partition]:
    """Partitions of the topics the members subscribe to that have no state yet: in no
    set of the record, or initializing and due for a retry."""
    current = group.state_partitions or _empty(group.group_id)
    wanted = {
        (meta.topic_id, p)
        for name in group.subscribed_topic_names()
        if (meta := topics.get(name)) is not None
        for p in range(meta.num_partitions)
    }
    done = _flat(current.initialized)
    initializing = _flat(current.initializing)
    return {
        tp
        for tp in wanted - done
        if tp[0] not in current.deleting and (tp not in initializing or retry(tp))
    }


def with_initializing(
    group: ShareGroup, add: set[Partition], names: Mapping[uuid.UUID, str]
) -> ShareStatePartitionsRecord:
    current = group.state_partitions or _empty(group.group_id)
    return ShareStatePartitionsRecord(
        group.group_id,
        _merge(current.initializing, add, names),
        current.initialized,
        current.deleting,
    )


def after_initialize(
    group: ShareGroup, done: set[Partition], failed: set[Partition], names: Mapping[uuid.UUID, str]
) -> ShareStatePartitionsRecord:
    """``done`` move to initialized (from initializing, or added), ``failed`` leave
    initializing."""
    current = group.state_partitions or _empty(group.group_id)
    return ShareStatePartitionsRecord(
        group.group_id,
        _without(current.initializing, done | failed),
        _merge(current.initialized, done, names),
        {t: n for t, n in current.deleting.items() if t not in {tp[0] for tp in done}},
    )


def with_deleting(group: ShareGroup, topics: Mapping[uuid.UUID, str]) -> ShareStatePartitionsRecord:
    """Whole topics moved to deleting."""
    current = group.state_partitions or _empty(group.group_id)
    return ShareStatePartitionsRecord(
        group.group_id,
        {t: v for t, v in current.initializing.items() if t not in topics},
        {t: v for t, v in current.initialized.items() if t not in topics},
        {**current.deleting, **topics},
    )


def after_delete(group: ShareGroup, deleted: set[uuid.UUID]) -> ShareStatePartitionsRecord:
    current = group.state_partitions or _empty(group.group_id)
    return ShareStatePartitionsRecord(
        group.group_id,
        current.initializing,
        current.initialized,
        {t: n for t, n in current.deleting.items() if t not in deleted},
    )


def with_state(group: ShareGroup) -> dict[uuid.UUID, tuple[str, frozenset[int]]]:
    """Every partition that may have state: initializing or initialized."""
    current = group.state_partitions or _empty(group.group_id)
    names = {t: n for t, (n, _) in current.initializing.items()}
    names.update({t: n for t, (n, _) in current.initialized.items()})
    return _merge(current.initialized, _flat(current.initializing), names)


def initialized(group: ShareGroup) -> TopicPartitionsInfo:
    return (group.state_partitions or _empty(group.group_id)).initialized


def gone_topics(group: ShareGroup, existing: set[uuid.UUID]) -> set[uuid.UUID]:
    """Topic ids the group's record names that the metadata no longer has."""
    current = group.state_partitions
    if current is None:
        return set()
    named = {*current.initializing, *current.initialized, *current.deleting}
    return named - existing


def without_topics(group: ShareGroup, gone: set[uuid.UUID]) -> ShareStatePartitionsRecord:
    """Deleted topics out of every set (Kafka's maybeCleanupShareGroupState; the share
    coordinator drops their state on its own)."""
    current = group.state_partitions or _empty(group.group_id)
    return ShareStatePartitionsRecord(
        group.group_id,
        {t: v for t, v in current.initializing.items() if t not in gone},
        {t: v for t, v in current.initialized.items() if t not in gone},
        {t: n for t, n in current.deleting.items() if t not in gone},
    )
