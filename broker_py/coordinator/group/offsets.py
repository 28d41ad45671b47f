"""Committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete and
the offsets of deleted topics.

Kafka's ``handleCommitOffsets``, ``handleTxnCommitOffsets``, ``handleFetchOffsets``,
``handleDeleteOffsets`` and ``handleDeletedPartitions``, as a mixin of
:class:`~broker_py.coordinator.group.group_coordinator.GroupCoordinator`; the writes
themselves are the
:class:`~broker_py.coordinator.group.group_metadata_manager.GroupMetadataManager`'s.

Invariants:

- An offset is written to ``__consumer_offsets`` before the group's offsets change; a
  transactional one stays pending until its transaction's marker.
- A member commits with the group's current generation; generation -1 without a
  member id commits only to an Empty group (admin clients, consumers without group
  management). Such a commit to a group that does not exist creates it (Empty,
  without protocol type); a commit with a generation to one that does not exist is
  ILLEGAL_GENERATION.
- A member's commit during CompletingRebalance is REBALANCE_IN_PROGRESS (it has no
  assignment yet); during Stable or PreparingRebalance it counts as a heartbeat.
- A Dead group refuses commits (COORDINATOR_NOT_AVAILABLE) and has no offsets.
- Removed offsets get tombstones; an Empty group left without offsets is removed.
- A consumer group's (KIP-848) commits and fetches are fenced by member epoch
  (:meth:`ConsumerGroup.validate_offset_commit` / ``validate_offset_fetch``); its offsets
  live in the classic group that holds them (``consumer_groups.offsets_holder``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker_py.common.internal_topics import OFFSETS_TOPIC
from broker_py.coordinator.group.group_metadata import (
    COMPLETING,
    CONSUMER_PROTOCOL_TYPE,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Group,
    OffsetAndMetadata,
)
from broker_py.coordinator.group.group_metadata_manager import offset_commit_error
from broker_py.utils.completion import Completion
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError

if TYPE_CHECKING:
    from broker_py.coordinator.group.consumer_group_coordinator import ConsumerGroupCoordinator
    from broker_py.coordinator.group.group_metadata_manager import GroupMetadataManager
    from broker_py.coordinator.partition_writer import PartitionWriter
    from broker_py.utils.time import Time

# The coordinator's one logger (see group_coordinator): its level is set by that name.
log = logging.getLogger("broker_py.coordinator.group.group_coordinator")

TopicPartition = tuple[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class TxnOffsetCommitParams:
    """A TxnOffsetCommit as the coordinator takes it (the request's fields; before v3
    ``member_id`` "", ``group_instance_id`` None and ``generation_id`` -1)."""

    group_id: str
    producer_id: int
    producer_epoch: int
    member_id: str
    group_instance_id: str | None
    generation_id: int
    offsets: dict[TopicPartition, OffsetAndMetadata]
    transactional_id: str | None = None


class OffsetsMixin:
    """Offset commits, fetches and deletions; uses the shell's lookups and
    :mod:`.heartbeat`."""

    # The shell's (GroupCoordinator.__init__/start).
    manager: GroupMetadataManager
    time: Time
    writer: PartitionWriter
    verify_transaction: Callable[[int, int, str, int], ErrorCode] | None
    consumer_groups: ConsumerGroupCoordinator

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        api_version: int = 9,
    ) -> dict[TopicPartition, ErrorCode] | asyncio.Future:
        """OffsetCommit: each offset's error, or a future of them while the write waits
        for its acks. ``generation_id`` is a consumer group's member epoch."""
        error = self.validate_group_status(group_id, ApiKey.OFFSET_COMMIT)
        if error is not None:
            return dict.fromkeys(offsets, error)
        consumer = self.consumer_groups.group(group_id)
        if consumer is not None:
            try:
                consumer.validate_offset_commit(
                    member_id,
                    generation_id,
                    instance_id=group_instance_id,
                    api_version=api_version,
                )
            except KafkaError as e:
                return dict.fromkeys(offsets, e.errno)
            done = Completion()
            self.manager.store_offsets(self.consumer_groups.offsets_holder(group_id), offsets, done)
            return done.result()
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A request from an older generation of a group that is gone.
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
            # A group that uses Kafka only to store its offsets.
            log.info("creating simple consumer group %s via manual offset commit", group_id)
            group = self.manager.add_group(Group(group_id, self.time.milliseconds()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        if group.is_(COMPLETING):
            # The member has the new generation but no assignment yet.
            return dict.fromkeys(offsets, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state in (STABLE, PREPARING):
            self._schedule_heartbeat_expiration(group, group.get(member_id))
        done = Completion()
        self.manager.store_offsets(group, offsets, done)
        return done.result()

    @classmethod
    def _validate_offset_commit(
        cls, group: Group, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(EMPTY):
            return None  # admin client or a consumer without group management
        if generation_id >= 0 or member_id != "" or group_instance_id is not None:
            error = cls._validate_current_member(group, member_id, group_instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit for a non-empty group
        return None

    def commit_txn_offsets(
        self, params: TxnOffsetCommitParams
    ) -> dict[TopicPartition, ErrorCode] | asyncio.Future:
        """TxnOffsetCommit: the offsets are written to ``__consumer_offsets`` in the
        producer's transaction and take effect when its COMMIT marker is written. In a
        cluster the first commit of a transaction is verified with its coordinator
        first (KIP-890), as a transactional produce is."""
        tp = (OFFSETS_TOPIC, self.partition_for(params.group_id))
        verification = (
            self.writer.verify_transaction(
                tp, params.transactional_id, params.producer_id, params.producer_epoch
            )
            if params.transactional_id
            else None
        )
        if verification is None:
            # No verification here: this broker's transaction coordinator answers.
            return self._commit_txn_offsets(params, verify=True)
        if isinstance(verification, ErrorCode):
            return self._commit_txn_offsets(params)
        return asyncio.ensure_future(self._verify_then_commit_txn_offsets(verification, params))

    async def _verify_then_commit_txn_offsets(
        self, verification: Awaitable[ErrorCode], params: TxnOffsetCommitParams
    ) -> dict[TopicPartition, ErrorCode]:
        error = await verification
        if error != ErrorCode.NONE:
            return dict.fromkeys(params.offsets, offset_commit_error(error))
        done = self._commit_txn_offsets(params)
        return done if isinstance(done, dict) else await done

    def _commit_txn_offsets(
        self, params: TxnOffsetCommitParams, verify: bool = False
    ) -> dict[TopicPartition, ErrorCode] | asyncio.Future:
        group_id, offsets = params.group_id, params.offsets
        member_id, group_instance_id = params.member_id, params.group_instance_id
        error = self.validate_group_status(group_id, ApiKey.TXN_OFFSET_COMMIT)
        if error is not None:
            return dict.fromkeys(offsets, error)
        consumer = self.consumer_groups.group(group_id)
        if consumer is not None:
            try:
                consumer.validate_offset_commit(
                    member_id,
                    params.generation_id,
                    transactional=True,
                    instance_id=group_instance_id,
                )
            except KafkaError as e:
                return dict.fromkeys(offsets, e.errno)
        group = (
            self.manager.get_group(group_id)
            if consumer is None
            else self.consumer_groups.offsets_holder(group_id)
        )
        if group is None:
            group = self.manager.add_group(Group(group_id, self.time.milliseconds()))
        if group.is_(DEAD):
            return dict.fromkeys(offsets, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if consumer is None:
            # A consumer group's members were fenced by member epoch above.
            if group_instance_id is not None or member_id != "":
                error = self._validate_current_member(group, member_id, group_instance_id)
                if error is not None:
                    return dict.fromkeys(offsets, error)
            if params.generation_id >= 0 and params.generation_id != group.generation_id:
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
        if verify:
            tp = (OFFSETS_TOPIC, self.partition_for(group_id))
            error = (
                ErrorCode.INVALID_TXN_STATE
                if self.verify_transaction is None
                else self.verify_transaction(params.producer_id, params.producer_epoch, *tp)
            )
            if error != ErrorCode.NONE:
                return dict.fromkeys(offsets, error)
        done = Completion()
        self.manager.store_txn_offsets(
            group, params.producer_id, params.producer_epoch, offsets, done
        )
        return done.result()

    def complete_txn_offsets(self, producer_id: int, offsets_partition: int, commit: bool) -> None:
        """The producer's transaction ended in ``offsets_partition`` of ``__consumer_offsets``."""
        self.manager.complete_txn_offsets(producer_id, offsets_partition, commit)

    def unstable_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group with a transactional commit not yet ended."""
        group = self.manager.get_group(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (``None``: no commit) of ``partitions``, or of every
        partition the group has committed when ``partitions`` is None. A consumer
        group's fetch naming a member (OffsetFetch v9) is fenced by its epoch."""
        error = self.validate_group_status(group_id, ApiKey.OFFSET_FETCH)
        if error is not None:
            return error, {}
        consumer = self.consumer_groups.group(group_id)
        if consumer is not None:
            try:
                consumer.validate_offset_fetch(member_id, member_epoch)
            except KafkaError as e:
                return e.errno, {}
        group = self.manager.get_group(group_id)
        committed = group.offsets if group is not None and not group.is_(DEAD) else {}
        if partitions is None:
            return ErrorCode.NONE, {tp: committed[tp] for tp in sorted(committed)}
        return ErrorCode.NONE, {tp: committed.get(tp) for tp in partitions}

    def on_topic_deleted(self, topic: str) -> int:
        """Drops every group's committed offsets of a deleted topic, with tombstones
        (Kafka's ``handleDeletedPartitions``); returns how many were removed."""
        removed = self.manager.cleanup_group_metadata(
            self.manager.current_groups(), lambda g: [tp for tp in g.offsets if tp[0] == topic]
        )
        if removed:
            log.info("removed %d offsets of deleted topic %s", removed, topic)
        return removed

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: removes committed offsets (with tombstones). An Empty group
        loses any; a ``consumer`` group with members only those of topics no member
        subscribes to (the rest: GROUP_SUBSCRIBED_TO_TOPIC); a group of another
        protocol with members none (NON_EMPTY_GROUP)."""
        error = self.validate_group_status(group_id, ApiKey.OFFSET_DELETE)
        if error is not None:
            return error, {}
        consumer = self.consumer_groups.group(group_id)
        if consumer is not None:
            # A consumer group keeps the offsets of the topics it subscribes to.
            subscribed = consumer.subscribed_topic_names()
            errors = {
                tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp[0] in subscribed
            }
            wanted = {tp for tp in partitions if tp not in errors}
            holder = self.manager.get_group(group_id)
            if wanted and holder is not None:
                self.manager.cleanup_group_metadata(
                    [holder], lambda g: [tp for tp in g.offsets if tp in wanted]
                )
            errors.update(dict.fromkeys(wanted, ErrorCode.NONE))
            return ErrorCode.NONE, errors
        group = self.manager.get_group(group_id)
        if group is None or group.is_(DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = group.subscribed_topics()
            eligible = []
            for tp in partitions:
                if subscribed is None or tp[0] in subscribed:
                    errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            wanted = set(eligible)
            removed = self.manager.cleanup_group_metadata(
                [group], lambda g: [tp for tp in g.offsets if tp in wanted]
            )
            log.info("deleted %d offsets of group %s", removed, group_id)
            errors.update(dict.fromkeys(eligible, ErrorCode.NONE))
        return ErrorCode.NONE, errors
