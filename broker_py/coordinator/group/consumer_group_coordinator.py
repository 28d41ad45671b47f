"""The live coordinator of consumer groups on the consumer protocol (KIP-848): the
sans-IO :class:`~broker_py.coordinator.group.modern.manager.ConsumerGroupManager` on the
event loop, its records in ``__consumer_offsets``.

Held by the classic :class:`~broker_py.coordinator.group.group_coordinator.GroupCoordinator`
(one group-id namespace, as Kafka 4's GroupMetadataManager): a group id names either a
classic group or a consumer group. The committed offsets of a consumer group are kept
where a classic group's are, in a classic group without protocol or members that only
holds them (:meth:`offsets_holder`); its records are the offset commit records of any
group.

Invariants:

- A group is this coordinator's while this broker leads its ``__consumer_offsets``
  partition (the classic manager's ``coordinator_error``); on resignation its groups go.
- The records a heartbeat (or a timer) returns are appended to the group's partition
  with acks=-1 before the heartbeat is answered; what was persisted is the replay of
  the records whose append succeeded, in order. When an append fails, the group is
  rebuilt from it once none of its appends is in flight
  (:mod:`~broker_py.coordinator.group.group_record_writes`), and the heartbeat gets the
  append's error as Kafka maps it (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...).
- Topics come from the broker's metadata (names, topic ids, partition counts), read
  again whenever the metadata's topics object changes; regexes are google-re2 patterns
  matched against whole names (RE2/J's ``matches()``), and match only topics the client
  whose heartbeat resolves them may DESCRIBE (Kafka resolves with that member's
  context too).
- Regexes are resolved off the heartbeat path: a heartbeat that makes a group's regexes
  due for resolution is answered first; the resolution runs on a later turn of the
  event loop with the describe rights of that heartbeat's client, and its records are
  appended like a heartbeat's (at most one resolution per group is queued).
- One event-loop timer stands for the manager's earliest deadline (sessions, rebalance
  timeouts), on the injected :class:`~broker_py.utils.time.Time`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

import re2

from broker_py.coordinator.group.group_metadata import Group, GroupState
from broker_py.coordinator.group.group_metadata_records import encode_group_metadata_key
from broker_py.coordinator.group.group_record_writes import KeyValue
from broker_py.coordinator.group.modern.config import ConsumerGroupConfig
from broker_py.coordinator.group.modern.group import ConsumerGroup
from broker_py.coordinator.group.modern.heartbeat import HeartbeatRequest, HeartbeatResponse
from broker_py.coordinator.group.modern.manager import ConsumerGroupManager
from broker_py.coordinator.group.modern.migration import GroupMigration
from broker_py.coordinator.group.modern.record_serde import serialize
from broker_py.coordinator.group.modern.records import Record
from broker_py.coordinator.group.modern_group_coordinator import (
    ModernGroupCoordinator,
    TopicSource,
)
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError

if TYPE_CHECKING:
    from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager
    from broker_py.coordinator.group.protocol_migration import ProtocolMigration

log = logging.getLogger(__name__)

_T = TypeVar("_T")


def compile_regex(pattern: str) -> Callable[[str], bool]:
    """A full-match predicate of an RE2 pattern (RE2/J's ``Pattern.matches``);
    ValueError for a pattern RE2 refuses."""
    try:
        compiled = re2.compile(pattern)
    except re2.error as e:
        raise ValueError(str(e)) from None
    return lambda name: compiled.fullmatch(name) is not None


class ConsumerGroupCoordinator(ModernGroupCoordinator[Record, ConsumerGroup]):
    def __init__(
        self,
        config: ConsumerGroupConfig,
        groups: GroupMetadataManager,
        time: Time = SYSTEM_TIME,
        topics: TopicSource | None = None,
    ) -> None:
        self.config = config
        self.manager = ConsumerGroupManager(config, time, self._compile_regex)
        super().__init__("consumer group", groups, time, self.manager, serialize, ConsumerGroup)
        # The topics the heartbeat being handled may see (None: all).
        self._describable: Callable[[str], bool] | None = None
        self._topic_source = topics
        self._group_timeouts: Callable[[str], tuple[int, int]] | None = None
        # Groups whose regex resolution is queued on the event loop.
        self._regex_refresh_queued: set[str] = set()
        # The heartbeat, leave and timer rules with the downgrade (a group whose last
        # consumer-protocol member goes becomes classic again), and the live side of
        # moving between the protocols (set by the classic coordinator).
        self.rules = GroupMigration(self.manager)
        self.migration: ProtocolMigration | None = None

    # ---- lifecycle ----

    def set_group_timeouts(self, timeouts: Callable[[str], tuple[int, int]]) -> None:
        """The consumer.session.timeout.ms and consumer.heartbeat.interval.ms in force for
        a group (its GROUP config resource over the broker's defaults)."""
        self._group_timeouts = timeouts

    def _with_group_timeouts(self, group_id: str, response: HeartbeatResponse) -> HeartbeatResponse:
        """A member of a group with its own timeouts: its session restarts with the
        group's session timeout, and the response carries the group's interval."""
        if (
            self._group_timeouts is None
            or response.error_code != ErrorCode.NONE
            or response.member_id is None
            or response.member_epoch < 0
        ):
            return response
        session_ms, interval_ms = self._group_timeouts(group_id)
        if session_ms != self.config.session_timeout_ms:
            self.manager.schedule_timer("session", group_id, response.member_id, session_ms)
        if interval_ms != response.heartbeat_interval_ms:
            response = dataclasses.replace(response, heartbeat_interval_ms=interval_ms)
        return response

    def load_records(self, offsets_partition: int, records: list[Record]) -> None:
        """The consumer-group records read back from an offsets partition, in log order
        (the load path hands them over): replayed, then each group's timers start (every
        member gets a full session: the group's own consumer.session.timeout.ms for
        consumer-protocol members, a classic member's own timeout)."""
        loaded: list[str] = []
        for record in records:
            if record.group_id not in loaded:
                loaded.append(record.group_id)
                self._writes.loading(record.group_id)
            self.manager.replay(record)
            self._writes.replayed(record)
        for group_id in loaded:
            self.manager.on_loaded(group_id)
            self._loaded_with_group_timeout(group_id)
        self._arm()

    def _loaded_with_group_timeout(self, group_id: str) -> None:
        group = self.manager.groups.get(group_id)
        if group is None or self._group_timeouts is None:
            return
        session_ms = self._group_timeouts(group_id)[0]
        if session_ms == self.config.session_timeout_ms:
            return
        for member in group.members.values():
            if member.classic_member_metadata is None and member.member_epoch >= 0:
                self.manager.schedule_timer("session", group_id, member.member_id, session_ms)

    # ---- lookups ----

    def group(self, group_id: str) -> ConsumerGroup | None:
        group = self.manager.groups.get(group_id)
        return None if group is None or group.deleted else group

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        self.refresh_topics()
        for t in self.manager.topics.values():
            if t.topic_id == topic_id:
                return t.name
        return None

    # ---- heartbeat ----

    def _compile_regex(self, pattern: str) -> Callable[[str], bool]:
        matches = compile_regex(pattern)

        def visible(name: str) -> bool:
            describable = self._describable
            return matches(name) and (describable is None or describable(name))

        return visible

    def heartbeat(
        self,
        request: HeartbeatRequest,
        api_version: int,
        describable: Callable[[str], bool] | None = None,
    ) -> HeartbeatResponse | asyncio.Future[HeartbeatResponse]:
        """ConsumerGroupHeartbeat for a group this broker coordinates (the caller checked
        the coordinator): the response, or a future of it while the group's records are
        written. ``describable``: the topics the client may DESCRIBE, which are all a
        regex it makes the group resolve can match (None: every topic)."""
        classic = self._groups.get_group(request.group_id)
        if classic is not None and self.group(request.group_id) is None:
            if self.migration is not None and classic.members:
                self._describable = describable
                try:
                    return self.migration.upgrade(classic, request, api_version)
                finally:
                    self._describable = None
                    self._queue_regex_refresh(request.group_id, describable)
            refusal = self.classic_group_refusal(classic)
            if refusal is not None:
                return refusal
        self.refresh_topics()
        self._describable = describable
        try:
            result = self.rules.heartbeat(request, api_version)
        finally:
            self._describable = None
        self._queue_regex_refresh(request.group_id, describable)
        response = self._with_group_timeouts(request.group_id, result.response)
        if response.error_code != ErrorCode.NONE or not result.records:
            self._arm()
            return response
        extra: list[tuple[bytes, bytes | None]] = []
        if classic is not None and classic.generation_id > 0:
            # An empty classic group became a consumer group: its metadata is deleted,
            # its offsets stay with it, now a group that only holds them.
            extra.append((encode_group_metadata_key(classic.group_id), None))
            classic.generation_id = 0
            classic.protocol_type = classic.protocol_name = classic.leader_id = None
            classic.current_state_timestamp = None
        done: asyncio.Future[HeartbeatResponse] = asyncio.get_running_loop().create_future()

        def written(error: ErrorCode) -> None:
            if done.done():
                return
            if error == ErrorCode.NONE:
                done.set_result(response)
            else:
                done.set_result(
                    HeartbeatResponse(error_code=error, error_message=error.description)
                )

        records, tail = result.records, []
        if result.downgrade is not None and self.migration is not None:
            # The last consumer-protocol member left: the group is classic again.
            records = records + result.downgrade.records
            tail = self.migration.install_downgrade(result.downgrade)
        self._persist(request.group_id, records, written, extra, tail)
        self._arm()
        return done

    def _queue_regex_refresh(
        self, group_id: str, describable: Callable[[str], bool] | None
    ) -> None:
        """Queues the resolution of the group's regexes when a heartbeat made it due."""
        if group_id in self._regex_refresh_queued or not self.manager.regex_refresh_due(group_id):
            return
        self._regex_refresh_queued.add(group_id)
        asyncio.get_running_loop().call_soon(self._refresh_regexes, group_id, describable)

    def _refresh_regexes(self, group_id: str, describable: Callable[[str], bool] | None) -> None:
        """Resolves the group's regexes and appends the records (nobody waits for them)."""
        self._regex_refresh_queued.discard(group_id)
        if not self.active or self._groups.coordinator_error(group_id) is not None:
            return
        self.refresh_topics()
        self._describable = describable
        try:
            records = self.manager.resolve_pending_regexes(group_id)
        finally:
            self._describable = None
        if records:
            self._persist(group_id, records, lambda _error: None)
            self._arm()

    def classic_group_refusal(self, classic: Group) -> HeartbeatResponse | None:
        """The answer to a ConsumerGroupHeartbeat naming a classic group: a group with
        members (or rebalancing) is not a consumer group; an empty one is replaced."""
        if classic.is_(GroupState.EMPTY) or classic.is_(GroupState.DEAD):
            return None
        return HeartbeatResponse(
            error_code=ErrorCode.GROUP_ID_NOT_FOUND,
            error_message=f"Group {classic.group_id} is not a consumer group",
        )

    def classic_join_refusal(self, group_id: str) -> ErrorCode | None:
        """What a classic JoinGroup to a consumer group gets: INCONSISTENT_GROUP_PROTOCOL
        while it has members (classic members inside a consumer group are not served);
        an empty consumer group is deleted so that a classic group takes its id."""
        group = self.group(group_id)
        if group is None:
            return None
        if group.members:
            # Served as classic members inside the consumer group (protocol_migration),
            # or refused when nothing serves them.
            return None if self.migration is not None else ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        self.delete_group(group_id)
        return None

    # ---- administration ----

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a consumer group: NON_EMPTY_GROUP while it has members, else
        its records are tombstoned (and its offsets, by the caller)."""
        try:
            records = self.manager.delete_group(group_id)
        except KafkaError as e:
            return e.errno
        self._persist(group_id, records, lambda _error: None)
        return ErrorCode.NONE

    def offsets_holder(self, group_id: str) -> Group:
        """The classic group without members that holds the consumer group's offsets."""
        holder = self._groups.get_group(group_id)
        if holder is None:
            holder = self._groups.add_group(Group(group_id, self.time.milliseconds()))
        return holder

    # ---- persistence ----

    def persist(self, group_id: str, records: list[Record]) -> None:
        """Appends records already applied (nobody waits for them)."""
        self._persist(group_id, records, lambda _error: None)
        self._arm()

    def persist_for_response(
        self,
        group_id: str,
        records: list[Record],
        response: _T,
        failed: Callable[[ErrorCode], _T],
        head: Iterable[tuple[bytes, bytes | None]] = (),
        tail: Iterable[tuple[bytes, bytes | None]] = (),
    ) -> asyncio.Future[_T]:
        """Appends ``head``, the records, then ``tail``; the future gets ``response`` once
        they are written, else ``failed(error)``."""
        done: asyncio.Future[_T] = asyncio.get_running_loop().create_future()

        def written(error: ErrorCode) -> None:
            if not done.done():
                done.set_result(response if error == ErrorCode.NONE else failed(error))

        self._persist(group_id, records, written, head, tail)
        self._arm()
        return done

    def arm(self) -> None:
        """Re-arms the timer after a step outside the heartbeat changed the deadlines."""
        self._arm()

    def _persist(
        self,
        group_id: str,
        records: list[Record],
        callback: Callable[[ErrorCode], None],
        extra: Iterable[KeyValue] = (),
        tail: Iterable[KeyValue] = (),
    ) -> None:
        """Appends ``extra`` (classic group records), the records, then ``tail`` (the
        classic group a downgrade installs), as one batch."""
        self._writes.append(group_id, records, callback, extra, tail)

    def _loaded(self, group_id: str) -> None:
        self.manager.on_loaded(group_id)

    # ---- timers ----

    def _expire(self) -> None:
        expired = self.rules.expire()
        for fired in expired.timers:
            log.info(
                "consumer group %s: member %s removed (%s timeout)",
                fired.group_id,
                fired.member_id,
                fired.kind,
            )
            self._persist(fired.group_id, fired.records, lambda _error: None)
        for down in expired.downgrades:
            tail = [] if self.migration is None else self.migration.install_downgrade(down)
            self._persist(down.group.group_id, down.records, lambda _error: None, tail=tail)
