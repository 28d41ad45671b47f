"""The classic group coordinator: membership, rebalances and committed offsets.

This follows Kafka's ``GroupCoordinator`` (the classic protocol, before KIP-848) rule
for rule; the method names are Kafka's. Everything runs on the event loop, so each
request handler sees and changes the group state without interleaving; only
JoinGroup and SyncGroup wait, on a future the coordinator completes later.

Rebalance, in short:

1. A join (new member, changed metadata, the leader rejoining) or a member leaving
   or expiring moves the group to PreparingRebalance. The first rebalance of an
   Empty group waits ``group.initial.rebalance.delay.ms``, extended while new
   members keep arriving, up to the rebalance timeout (InitialDelayedJoin); others
   complete once every member has rejoined, or when the rebalance timeout expires,
   dropping the (dynamic) members that did not rejoin (DelayedJoin).
2. Completion bumps the generation, selects the protocol and answers every pending
   JoinGroup: the leader gets all members' metadata. The group is now
   CompletingRebalance, and every member must send SyncGroup within the rebalance
   timeout or be removed (DelayedSync).
3. The leader's SyncGroup carries the assignments: they are written to
   ``__consumer_offsets`` and handed to every member that waits; the group is Stable.

Members are expected to heartbeat within ``session.timeout.ms``; one that does not is
removed and the group rebalances. Timers come from the injected
:class:`~broker_py.utils.time.Time` (the real clock in the broker, a ``MockTime`` that
tests advance) and are kept on the group and its members;
:meth:`GroupCoordinator.stop` cancels them all and answers every waiting request with
NOT_COORDINATOR.

:class:`GroupCoordinator` is assembled from one mixin per concern, each in its module:

- :mod:`.join_group`: JoinGroup;
- :mod:`.rebalance`: PreparingRebalance to the next generation (DelayedJoin,
  InitialDelayedJoin);
- :mod:`.sync_group`: SyncGroup and the pending-sync expiry;
- :mod:`.heartbeat`: Heartbeat, session expiry and pending-member expiry;
- :mod:`.leave_group`: LeaveGroup;
- :mod:`.offsets`: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete.

This module is the shell: construction, start/stop, lookups, request validation, the
member removal they all share, and DescribeGroups, ListGroups and DeleteGroups.

Invariants (of every module):

- Clocks, timers and the offset expiration loop's sleep all go through ``self.time``;
  only the futures of waiting requests come from the running loop.
- Group state is read and changed without an ``await`` in between.
- A timer callback first checks that what it was set for is still current (the
  group's op, the member, the generation) and otherwise does nothing; removing a
  member cancels its timers.
- The group's state only moves along Kafka's transitions
  (:class:`~broker_py.coordinator.group.group_metadata.Group` enforces them).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.coordinator.group.consumer_group_coordinator import ConsumerGroupCoordinator
from broker_py.coordinator.group.group_metadata import (
    COMPLETING,
    CONSUMER_PROTOCOL_TYPE,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Group,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)
from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker_py.coordinator.group.heartbeat import HeartbeatMixin
from broker_py.coordinator.group.join_group import JoinGroupMixin
from broker_py.coordinator.group.leave_group import LeaveGroupMixin
from broker_py.coordinator.group.modern.config import DEFAULTS as CONSUMER_GROUP_DEFAULTS
from broker_py.coordinator.group.modern.config import ConsumerGroupConfig
from broker_py.coordinator.group.modern.migration_policy import MigrationPolicy
from broker_py.coordinator.group.modern.share.group import SHARE_GROUP_TYPE, SHARE_PROTOCOL_TYPE
from broker_py.coordinator.group.modern.share.records import SHARE_RECORD_CLASSES, ShareRecord
from broker_py.coordinator.group.offsets import OffsetsMixin
from broker_py.coordinator.group.protocol_migration import ProtocolMigration
from broker_py.coordinator.group.rebalance import RebalanceMixin
from broker_py.coordinator.group.share_group_coordinator import ShareGroupCoordinator
from broker_py.coordinator.group.sync_group import SyncGroupMixin
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode

if TYPE_CHECKING:
    from broker_py.config.kafka_config import BrokerConfig
    from broker_py.coordinator.partition_writer import PartitionWriter

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "GroupOverview", "GroupSummary", "MemberSummary"]

# The coordinator's one logger, whichever of its modules logs: its level is set by
# this name (DescribeConfigs/IncrementalAlterConfigs BROKER_LOGGER).
log = logging.getLogger(__name__)


class MemberSummary:
    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "group_instance_id",
        "member_id",
        "metadata",
    )

    def __init__(
        self, member: MemberMetadata, metadata: bytes = b"", assignment: bytes = b""
    ) -> None:
        self.member_id = member.member_id
        self.group_instance_id = member.group_instance_id
        self.client_id = member.client_id
        self.client_host = member.client_host
        self.metadata = metadata
        self.assignment = assignment


class GroupSummary:
    __slots__ = ("members", "protocol", "protocol_type", "state")

    def __init__(
        self, state: str, protocol_type: str, protocol: str, members: list[MemberSummary]
    ) -> None:
        self.state = state
        self.protocol_type = protocol_type
        self.protocol = protocol
        self.members = members


class GroupOverview:
    __slots__ = ("group_id", "group_type", "protocol_type", "state")

    def __init__(
        self, group_id: str, protocol_type: str, state: str, group_type: str = "classic"
    ) -> None:
        self.group_id = group_id
        self.protocol_type = protocol_type
        self.state = state
        self.group_type = group_type


DEAD_GROUP = GroupSummary(str(DEAD), "", "", [])
NO_GROUP = GroupSummary("", "", "", [])


class GroupCoordinator(
    JoinGroupMixin, RebalanceMixin, SyncGroupMixin, HeartbeatMixin, LeaveGroupMixin, OffsetsMixin
):
    def __init__(
        self,
        config: BrokerConfig,
        writer: PartitionWriter,
        *,
        cluster: bool,
        verify_transaction: Callable[[int, int, str, int], ErrorCode] | None = None,
        time: Time = SYSTEM_TIME,
    ) -> None:
        """``writer``: the partitions of ``__consumer_offsets``; ``cluster``: this broker
        is one of a cluster (a group whose offsets partition does not exist yet is
        nobody's); ``verify_transaction(producer id, epoch, topic, partition)``: this
        broker's transaction coordinator's answer whether a transactional offset commit
        may go to that partition (None: INVALID_TXN_STATE, no transaction is known)."""
        self.config = config
        self.time = time
        self.writer = writer
        self.verify_transaction = verify_transaction
        self.manager = GroupMetadataManager(config, writer, cluster=cluster, time=time)
        self.manager.on_group_loaded = self._on_group_loaded
        # Groups on the consumer protocol (KIP-848), in the same group-id namespace.
        self.consumer_groups = ConsumerGroupCoordinator(
            ConsumerGroupConfig.from_values(
                {k: _config_or(config, k, v) for k, v in CONSUMER_GROUP_DEFAULTS.items()}
            ),
            self.manager,
            time,
        )
        # Share groups (KIP-932), in the same namespace too.
        self.share_groups = ShareGroupCoordinator(
            self.manager,
            time,
            max_size=_config_or(config, "group.share.max.size", 200),
            session_timeout_ms=_config_or(config, "group.share.session.timeout.ms", 45000),
            heartbeat_interval_ms=_config_or(config, "group.share.heartbeat.interval.ms", 5000),
            enabled=bool(_config_or(config, "group.share.enable", True)),
            initialize_retry_ms=_config_or(
                config, "group.share.initialize.retry.interval.ms", 30000
            ),
        )
        # A load hands the consumer-group and share-group records it reads to those
        # coordinators.
        self.manager.consumer_group_loader = self._load_modern_records
        # Groups moving between the protocols; classic requests for consumer groups.
        self.migration = ProtocolMigration(
            self,
            self.consumer_groups,
            MigrationPolicy.parse(
                _config_or(config, "group.consumer.migration.policy", "bidirectional")
            ),
            _config_or(config, "group.max.size", (1 << 31) - 1),
        )
        self.active = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._expiration_task: asyncio.Task[None] | None = None

    # ---- lifecycle ----

    async def start(self) -> None:
        """Loads the groups of the ``__consumer_offsets`` partitions this broker leads
        (others load as it is elected their leader) and starts the offset expiration
        task. The topic is created on first use."""
        self._loop = asyncio.get_running_loop()
        self.writer.add_leadership_listener(self._leadership_changed)
        await self.manager.load()
        self.active = True
        self.consumer_groups.start()
        self.share_groups.start()
        self._expiration_task = asyncio.create_task(
            self._expiration_loop(), name="group-offset-expiration"
        )

    async def stop(self) -> None:
        self.active = False
        self.consumer_groups.stop()
        self.share_groups.stop()
        self.writer.remove_leadership_listener(self._leadership_changed)
        self.manager.loads.cancel()
        if self._expiration_task is not None:
            self._expiration_task.cancel()
            await asyncio.gather(self._expiration_task, return_exceptions=True)
            self._expiration_task = None
        for group in self.manager.current_groups():
            self._cancel_timers(group)
            for member in group.members.values():
                member.complete_join(JoinGroupResult(member.member_id, ErrorCode.NOT_COORDINATOR))
                member.complete_sync(SyncGroupResult(ErrorCode.NOT_COORDINATOR))

    @property
    def groups(self) -> dict[str, Group]:
        return self.manager.groups

    def _load_modern_records(self, offsets_partition: int, records: list) -> None:
        """A load's consumer-group records go to the consumer-group coordinator, its
        share-group records to the share-group coordinator, each in log order."""
        share: list[ShareRecord] = [r for r in records if isinstance(r, SHARE_RECORD_CLASSES)]
        consumer = [r for r in records if not isinstance(r, SHARE_RECORD_CLASSES)]
        self.consumer_groups.load_records(offsets_partition, consumer)
        self.share_groups.load_records(share)

    def group_type_of(self, group_id: str) -> str | None:
        """``classic``, ``consumer`` or ``share`` for a group this coordinator holds."""
        if self.share_groups.group(group_id) is not None:
            return SHARE_GROUP_TYPE
        if self.consumer_groups.group(group_id) is not None:
            return "consumer"
        classic = self.manager.get_group(group_id)
        if classic is not None and not classic.is_(DEAD):
            return "classic"
        return None

    def _leadership_changed(
        self, leaders: list[tuple[str, int]], followers: list[tuple[str, int]]
    ) -> None:
        """Kafka's ``onLeadershipChange`` for the offsets topic's partitions."""
        for topic, index in leaders:
            if topic == OFFSETS_TOPIC:
                self.on_election(index)
        for topic, index in followers:
            if topic == OFFSETS_TOPIC:
                self.on_resignation(index)

    def _on_group_loaded(self, group: Group) -> None:
        """Kafka's ``onGroupLoaded``: a loaded group's members have one session timeout
        from now to heartbeat (which finds the group Stable in the generation they
        know), and a group over ``group.max.size`` rebalances."""
        if group.size > self.config["group.max.size"]:
            self._prepare_rebalance(
                group, f"freshly-loaded group is over capacity ({group.size} members)"
            )
        for member in group.members.values():
            self._schedule_heartbeat_expiration(group, member)

    def on_election(self, offsets_partition: int) -> None:
        """This broker became the leader of an offsets partition: its groups load."""
        self.manager.on_election(offsets_partition)

    def on_resignation(self, offsets_partition: int) -> None:
        """This broker no longer leads an offsets partition: its groups go, their timers
        stop and their waiting JoinGroup / SyncGroup requests get NOT_COORDINATOR."""
        self.consumer_groups.on_resignation(offsets_partition)
        self.share_groups.on_resignation(offsets_partition)
        for group in self.manager.on_resignation(offsets_partition):
            self._cancel_timers(group)
            for member in group.members.values():
                member.complete_join(JoinGroupResult(member.member_id, ErrorCode.NOT_COORDINATOR))
                member.complete_sync(SyncGroupResult(ErrorCode.NOT_COORDINATOR))

    def ensure_offsets_topic(self) -> None:
        self.manager.ensure_offsets_topic()

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    async def _expiration_loop(self) -> None:
        interval_ms = _config_or(self.config, "offsets.retention.check.interval.ms", 600_000)
        while True:
            await self.time.sleep(interval_ms / 1000)
            try:
                self.expire_offsets()
            except Exception:
                log.exception("offset expiration")

    def expire_offsets(self, now: int | None = None) -> int:
        """Removes the offsets due for expiry (GroupMetadataManager.expire_offsets), except
        a consumer group's offsets of topics it subscribes to, which do not expire (Kafka's
        OffsetMetadataManager); a consumer group without members left without offsets is
        deleted. Returns how many offsets were removed."""
        now = self.time.milliseconds() if now is None else now
        retention_ms = self.config["offsets.retention.minutes"] * 60_000

        def expired(group: Group) -> list[tuple[str, int]]:
            due = group.expired_offsets(now, retention_ms)
            consumer = self.consumer_groups.group(group.group_id)
            if consumer is None:
                return due
            subscribed = consumer.subscribed_topic_names()
            return [tp for tp in due if tp[0] not in subscribed]

        removed = self.manager.cleanup_group_metadata(self.manager.current_groups(), expired)
        for consumer in self.consumer_groups.groups():
            if not consumer.members and self.manager.get_group(consumer.group_id) is None:
                self.consumer_groups.delete_group(consumer.group_id)
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    def _cancel_timers(self, group: Group) -> None:
        if group.delayed_join is not None:
            group.delayed_join.cancel()
            group.delayed_join = None
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        for timer in group.pending_member_timers.values():
            timer.cancel()
        group.pending_member_timers.clear()
        for member in group.members.values():
            member.cancel_heartbeat()

    # ---- validation ----

    def validate_group_status(self, group_id: str | None, api: ApiKey) -> ErrorCode | None:
        if group_id is None:
            return ErrorCode.INVALID_GROUP_ID
        if (
            api
            not in (
                ApiKey.OFFSET_COMMIT,
                ApiKey.OFFSET_FETCH,
                ApiKey.DESCRIBE_GROUPS,
                ApiKey.DELETE_GROUPS,
            )
            and not group_id
        ):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self.manager.coordinator_error(group_id)

    @staticmethod
    def _validate_current_member(
        group: Group, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # ---- member removal (join, rebalance, sync, expiry and leave share it) ----

    def _remove_member(self, group: Group, member_id: str) -> None:
        """Removes a member (or pending member) and its timers; no rebalance."""
        member = group.remove(member_id)
        if member is not None:
            member.cancel_heartbeat()
            # Nobody answers a removed member's SyncGroup any more.
            member.complete_sync(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        timer = group.pending_member_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()

    def _remove_member_and_update_group(
        self, group: Group, member: MemberMetadata, reason: str
    ) -> None:
        # A new member may time out while its JoinGroup is pending: answer it, so a
        # client still there rejoins.
        member.complete_join(JoinGroupResult("", ErrorCode.UNKNOWN_MEMBER_ID))
        self._remove_member(group, member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: Group, member_id: str) -> None:
        self._remove_member(group, member_id)
        if group.is_(PREPARING):
            self._try_complete_join(group)

    # ---- administration ----

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error = self.validate_group_status(group_id, ApiKey.DESCRIBE_GROUPS)
        if error is not None:
            return error, NO_GROUP
        group = self.manager.get_group(group_id)
        if (
            group is None
            or self.consumer_groups.group(group_id) is not None
            or self.share_groups.group(group_id) is not None
        ):
            # DescribeGroups (up to v5) shows a consumer or share group as Kafka 4 does:
            # Dead.
            return ErrorCode.NONE, DEAD_GROUP
        if group.is_(STABLE):
            protocol = group.protocol_name or ""
            members = [
                MemberSummary(m, m.metadata(protocol), m.assignment) for m in group.members.values()
            ]
            return ErrorCode.NONE, GroupSummary(
                str(group.state), group.protocol_type or "", protocol, members
            )
        members = [MemberSummary(m) for m in group.members.values()]
        return ErrorCode.NONE, GroupSummary(
            str(group.state), group.protocol_type or "", "", members
        )

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        wanted_states = {s.lower().strip() for s in states}
        wanted_types = {t.lower().strip() for t in types}
        out: list[GroupOverview] = []
        consumer = {g.group_id: g for g in self.consumer_groups.groups()}
        if not wanted_types or "classic" in wanted_types:
            out.extend(
                GroupOverview(g.group_id, g.protocol_type or "", str(g.state))
                for g in self.manager.current_groups()
                if g.group_id not in consumer
                and (not wanted_states or str(g.state).lower() in wanted_states)
            )
        if not wanted_types or "consumer" in wanted_types:
            out.extend(
                GroupOverview(g.group_id, CONSUMER_PROTOCOL_TYPE, g.state.value, "consumer")
                for g in consumer.values()
                if not wanted_states or g.state.value.lower() in wanted_states
            )
        if not wanted_types or SHARE_GROUP_TYPE in wanted_types:
            out.extend(
                GroupOverview(g.group_id, SHARE_PROTOCOL_TYPE, g.state.value, SHARE_GROUP_TYPE)
                for g in self.share_groups.groups()
                if not wanted_states or g.state.value.lower() in wanted_states
            )
        return ErrorCode.NONE, out

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        eligible: list[Group] = []
        for group_id in group_ids:
            if group_id in errors or any(g.group_id == group_id for g in eligible):
                continue
            error = self.validate_group_status(group_id, ApiKey.DELETE_GROUPS)
            if error is not None:
                errors[group_id] = error
                continue
            if self.share_groups.group(group_id) is not None:
                errors[group_id] = self.share_groups.delete_group(group_id)
                continue
            if self.consumer_groups.group(group_id) is not None:
                errors[group_id] = self.consumer_groups.delete_group(group_id)
                holder = self.manager.get_group(group_id)
                if errors[group_id] == ErrorCode.NONE and holder is not None:
                    eligible.append(holder)
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_(DEAD):
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_(EMPTY):
                self._cancel_timers(group)
                group.transition_to(DEAD)
                eligible.append(group)
            else:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
        if eligible:
            removed = self.manager.cleanup_group_metadata(eligible, lambda g: list(g.offsets))
            for group in eligible:
                errors[group.group_id] = ErrorCode.NONE
            log.info("deleted groups %s with %d offsets", [g.group_id for g in eligible], removed)
        return errors


def _config_or(config, key: str, default: int) -> int:
    try:
        value = config[key]
    except KeyError:
        return default
    return default if value is None else value
