"""What the live coordinators of the modern group protocols share (consumer groups,
KIP-848: :mod:`.consumer_group_coordinator`; share groups, KIP-932:
:mod:`.share_group_coordinator`): a sans-IO manager of groups on the event loop, its
records appended to ``__consumer_offsets`` through
:class:`~broker_py.coordinator.group.group_record_writes.GroupRecordWrites`, the topics
of the broker's metadata, and one timer.

Invariants:

- A group is the coordinator's while this broker leads its ``__consumer_offsets``
  partition; on resignation the groups of that partition are forgotten, with what was
  persisted of them.
- A group whose append failed is rebuilt from what was persisted of it (the replay of
  its records whose append succeeded), once none of its appends is in flight, and only
  while this broker still coordinates it; its members' sessions restart (``_loaded``).
- The manager's topics are those of the metadata's topics object (topics without an id
  left out), handed over again whenever that object changes.
- One event-loop timer, on the injected :class:`~broker_py.utils.time.Time`, stands for
  the manager's earliest deadline while the coordinator is active; when it fires the
  coordinator's ``_expire`` runs and the timer is armed again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from broker_py.coordinator.group.group_metadata_records import partition_for
from broker_py.coordinator.group.group_record_writes import (
    GroupRecord,
    GroupRecordWrites,
    KeyValue,
    ReplayedGroup,
)
from broker_py.coordinator.group.modern.records import TopicMetadata
from broker_py.utils.time import Time, Timer

if TYPE_CHECKING:
    from broker_py.common.topic import TopicInfo
    from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager


class PersistedGroup(ReplayedGroup, Protocol):
    """A group replayed from its persisted records, which it gives back as a snapshot."""

    def snapshot_records(self) -> Iterable[Any]: ...


R = TypeVar("R", bound=GroupRecord)
G = TypeVar("G", bound=PersistedGroup)
R_contra = TypeVar("R_contra", bound=GroupRecord, contravariant=True)
G_co = TypeVar("G_co", bound=PersistedGroup, covariant=True)

TopicSource = Callable[[], Mapping[str, "TopicInfo"]]


class ModernGroupManager(Protocol[R_contra, G_co]):
    """What the coordinator uses of its sans-IO manager."""

    @property
    def groups(self) -> Mapping[str, G_co]: ...

    @property
    def topics(self) -> Mapping[str, TopicMetadata]: ...

    def update_topics(self, topics: Iterable[TopicMetadata]) -> None: ...

    def replay(self, record: R_contra) -> None: ...

    def forget_group(self, group_id: str) -> None: ...

    def next_deadline(self) -> float | None: ...


class ModernGroupCoordinator(Generic[R, G]):
    def __init__(
        self,
        kind: str,
        groups: GroupMetadataManager,
        time: Time,
        manager: ModernGroupManager[R, G],
        serialize: Callable[[R], KeyValue],
        new_group: Callable[[str], G],
    ) -> None:
        """``kind`` names the groups in logs ("consumer group"); ``serialize`` makes a
        record a (key, value) of ``__consumer_offsets``; ``new_group(group_id)`` is an
        empty group to replay persisted records into."""
        self.time = time
        self._groups = groups
        self._manager = manager
        self._topic_source: TopicSource | None = None
        self._topics_seen: object = None
        self._writes: GroupRecordWrites[R, G] = GroupRecordWrites(
            kind, groups, serialize, new_group, self._reload
        )
        self._timer: Timer | None = None
        self._timer_deadline: float | None = None
        self.active = False

    # ---- what each coordinator adds ----

    def _loaded(self, group_id: str) -> None:
        """The group was rebuilt from its records: its members' sessions start."""
        raise NotImplementedError

    def _expire(self) -> None:
        """The timer fired: the manager's expired deadlines are acted on."""
        raise NotImplementedError

    # ---- lifecycle ----

    def set_topic_source(self, topics: TopicSource) -> None:
        self._topic_source = topics
        self._topics_seen = None

    def start(self) -> None:
        self.active = True
        self._arm()

    def stop(self) -> None:
        self.active = False
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_deadline = None

    def on_resignation(self, offsets_partition: int) -> None:
        """This broker no longer leads the partition: its groups go."""
        partitions = self._groups.num_partitions()
        for group_id in [
            g for g in self._manager.groups if partition_for(g, partitions) == offsets_partition
        ]:
            self._manager.forget_group(group_id)
            self._writes.forget(group_id)
        self._arm()

    # ---- lookups ----

    def groups(self) -> list[G]:
        return [g for g in self._manager.groups.values() if not g.deleted]

    def refresh_topics(self) -> bool:
        """Hands the manager the broker's topics when they changed since last time;
        whether they did."""
        if self._topic_source is None:
            return False
        current = self._topic_source()
        if current is self._topics_seen:
            return False
        self._topics_seen = current
        self._manager.update_topics(
            TopicMetadata(t.topic_id, t.name, t.partitions)
            for t in current.values()
            if t.topic_id.int != 0
        )
        return True

    def topic_names(self) -> dict[uuid.UUID, str]:
        self.refresh_topics()
        return {t.topic_id: t.name for t in self._manager.topics.values()}

    # ---- persistence ----

    def _reload(self, group_id: str) -> None:
        """Rebuilds the group from what was persisted of it."""
        self._manager.forget_group(group_id)
        persisted = self._writes.persisted.get(group_id)
        if persisted is not None and self._groups.coordinator_error(group_id) is None:
            for record in list(persisted.snapshot_records()):
                self._manager.replay(record)
            self._loaded(group_id)
        self._arm()

    # ---- the timer ----

    def _arm(self) -> None:
        if not self.active:
            return
        deadline = self._manager.next_deadline()
        if deadline == self._timer_deadline and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = deadline
        if deadline is not None:
            delay = max(0.0, deadline - self.time.monotonic())
            self._timer = self.time.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_deadline = None
        if not self.active:
            return
        self._expire()
        self._arm()
