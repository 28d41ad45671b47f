"""The appends of a modern group coordinator (consumer groups, share groups) to
``__consumer_offsets`` and what they leave persisted.

Invariants:

- ``persisted[group_id]`` is the replay of the group's records whose append succeeded
  while this broker coordinated the group (a group this broker no longer coordinates is
  reloaded from the log if it ever comes back, so an append answered after resigning is
  not kept). A group whose records tombstone it leaves ``persisted``.
- Appends of one group may be in flight together; each is counted until its callback.
  When one fails, the group is marked and, once none of its appends is in flight, the
  coordinator's ``reload(group_id)`` rebuilds it from ``persisted``.
- Records that cannot be serialized fail as an append answered UNKNOWN_SERVER_ERROR.
- Every append's callback gets the append's error code, after the bookkeeping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from broker_py.coordinator.group.modern.group import IllegalStateError
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError

if TYPE_CHECKING:
    from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager

log = logging.getLogger(__name__)

KeyValue = tuple[bytes, bytes | None]


class GroupRecord(Protocol):
    @property
    def group_id(self) -> str: ...


R = TypeVar("R", bound=GroupRecord)


class ReplayedGroup(Protocol):
    """A group rebuilt by replaying its records (``deleted`` once tombstoned)."""

    deleted: bool

    def replay(self, record: Any) -> None: ...


G = TypeVar("G", bound=ReplayedGroup)


class GroupRecordWrites(Generic[R, G]):
    def __init__(
        self,
        kind: str,
        groups: GroupMetadataManager,
        serialize: Callable[[R], KeyValue],
        new_group: Callable[[str], G],
        reload: Callable[[str], None],
    ) -> None:
        """``kind`` names the groups in logs ("consumer group"); ``new_group(group_id)``
        is an empty group to replay into; ``reload(group_id)`` rebuilds a group whose
        append failed from ``persisted``."""
        self._kind = kind
        self._groups = groups
        self._serialize = serialize
        self._new_group = new_group
        self._reload = reload
        self.persisted: dict[str, G] = {}
        self._in_flight: dict[str, int] = {}
        self._failed: set[str] = set()

    def forget(self, group_id: str) -> None:
        """The group is no longer this broker's (resignation)."""
        self.persisted.pop(group_id, None)
        self._failed.discard(group_id)

    def loading(self, group_id: str) -> None:
        """The group is about to be replayed from the log: what an append answered after
        an earlier resignation left of it is stale."""
        self.persisted.pop(group_id, None)

    def replayed(self, record: R) -> None:
        """A record of the group is in the log (loaded, or appended)."""
        group = self.persisted.get(record.group_id)
        if group is None:
            group = self.persisted[record.group_id] = self._new_group(record.group_id)
        try:
            group.replay(record)
        except IllegalStateError as e:
            log.error("%s %s: persisted state: %s", self._kind, record.group_id, e)
        if group.deleted:
            del self.persisted[record.group_id]

    def append(
        self,
        group_id: str,
        records: list[R],
        callback: Callable[[ErrorCode], None],
        head: Iterable[KeyValue] = (),
        tail: Iterable[KeyValue] = (),
    ) -> None:
        """Appends ``head``, the records, then ``tail`` (already serialized records of
        another kind, e.g. a classic group's) as one batch to the group's partition."""
        self._in_flight[group_id] = self._in_flight.get(group_id, 0) + 1
        try:
            data = list(head) + [self._serialize(r) for r in records] + list(tail)
        except (ValueError, KafkaError) as e:
            log.error("%s %s: records not serializable: %s", self._kind, group_id, e)
            self._written(group_id, records, ErrorCode.UNKNOWN_SERVER_ERROR, callback)
            return
        self._groups.store_records(
            group_id, data, lambda error: self._written(group_id, records, error, callback)
        )

    def _written(
        self,
        group_id: str,
        records: list[R],
        error: ErrorCode,
        callback: Callable[[ErrorCode], None],
    ) -> None:
        left = self._in_flight.get(group_id, 1) - 1
        if left:
            self._in_flight[group_id] = left
        else:
            self._in_flight.pop(group_id, None)
        if error == ErrorCode.NONE:
            if self._groups.coordinator_error(group_id) is None:
                for record in records:
                    self.replayed(record)
        else:
            log.warning(
                "%s %s: %d records not written (%s); reloading it",
                self._kind,
                group_id,
                len(records),
                error.name,
            )
            self._failed.add(group_id)
        if not left and group_id in self._failed:
            self._failed.discard(group_id)
            self._reload(group_id)
        callback(error)
