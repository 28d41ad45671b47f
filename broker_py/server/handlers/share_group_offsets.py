"""A share group's start offsets (KIP-932): DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), at Kafka 4.1's version 0.

The start offsets live in the share coordinator (``__share_group_state``); these handlers
reach it through ``apis.share_state_persister`` (ReadShareGroupStateSummary,
InitializeShareGroupState, DeleteShareGroupState), as Kafka 4.1's GroupCoordinatorService.

- While share groups are not enabled (group.share.enable) every group, topic or
  partition answers UNSUPPORTED_VERSION.
- Describe needs DESCRIBE on the group (else the group's GROUP_AUTHORIZATION_FAILED) and
  DESCRIBE on each named topic (else its partitions' TOPIC_AUTHORIZATION_FAILED). It does
  not look at the group: a partition without state, or whose read fails, answers start
  offset -1 and leader epoch 0; a topic the metadata lacks answers topic id zero and -1.
  Without topics (null) it describes the group's initialized partitions (its
  ShareGroupStatePartitionMetadata record), skipping topics the client may not describe.
- Alter needs READ on the group and on each topic. The group must be a share group
  without members (NON_EMPTY_GROUP); a missing one is created empty, as Kafka does. Its
  group epoch is bumped and written, and each partition's start offset is initialized at
  that state epoch (or one above the state epoch the share coordinator holds, so the
  write is not fenced); those set become initialized in the group's record. Unknown
  topics and partitions answer UNKNOWN_TOPIC_OR_PARTITION.
- Delete needs DELETE on the group and READ on each topic. The group must exist and be
  empty; the named topics move to the record's deleting set, every partition of each
  has its state deleted (a topic answering the first error among its partitions), and
  the deleted topics leave the record.
- Coordinator errors (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
  NOT_COORDINATOR) and group errors are answered per group (Describe) or at the top
  level (Alter, Delete).
"""

from __future__ import annotations

import asyncio
import uuid

from broker_py.coordinator.group.modern.records import TopicMetadata
from broker_py.coordinator.share.share_coordinator_records import SharePartitionKey
from broker_py.coordinator.share.share_coordinator_shard import (
    UNINITIALIZED_START_OFFSET,
    Outcome,
)
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server.handlers.groups import _group_allowed
from broker_py.server.handlers.modern_groups import _coordinator_error
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.share_group_offsets import (
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponse,
)

ZERO_UUID = uuid.UUID(int=0)


def _enabled(apis) -> bool:
    coordinator = apis.group_coordinator
    return coordinator is not None and coordinator.share_groups.enabled


def _topics(apis) -> dict[str, TopicMetadata]:
    """Topic name -> id and partition count, as the metadata knows them now."""
    share_groups = apis.group_coordinator.share_groups
    share_groups.refresh_topics()
    return share_groups.manager.topics


def _group_error(apis, group_id: str, *, must_exist: bool) -> tuple[ErrorCode, str] | None:
    """The coordinator's and the group's errors for Alter and Delete, with messages."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, ErrorCode.INVALID_GROUP_ID.description
    error = _coordinator_error(apis, group_id)
    if error is not None:
        return error, error.description
    if apis.share_state_persister is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE.description
    kind = apis.group_coordinator.group_type_of(group_id)
    if kind not in (None, "share"):
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    error = apis.group_coordinator.share_groups.offsets_error(group_id, must_exist=must_exist)
    if error == ErrorCode.GROUP_ID_NOT_FOUND:
        return error, f"Group {group_id} not found."
    if error is not None:
        return error, error.description
    return None


# ---- DescribeShareGroupOffsets ----

_D = DescribeShareGroupOffsetsResponse


def _described_partition(index: int, outcome: Outcome) -> object:
    if outcome.error != ErrorCode.NONE:
        return _D.DescribeShareGroupOffsetsResponsePartition(
            partition_index=index,
            start_offset=UNINITIALIZED_START_OFFSET,
            leader_epoch=0,
            error_code=0,
        )
    return _D.DescribeShareGroupOffsetsResponsePartition(
        partition_index=index,
        start_offset=outcome.start_offset,
        leader_epoch=outcome.leader_epoch,
        error_code=0,
    )


def _error_partitions(partitions, error: ErrorCode) -> list:
    return [
        _D.DescribeShareGroupOffsetsResponsePartition(
            partition_index=p,
            start_offset=0,
            leader_epoch=0,
            error_code=int(error),
            error_message=error.description,
        )
        for p in partitions
    ]


def _group_failed(group_id: str, error: ErrorCode, message: str | None = None):
    return _D.DescribeShareGroupOffsetsResponseGroup(
        group_id=group_id,
        topics=[],
        error_code=int(error),
        error_message=message or error.description,
    )


async def _describe_topic(apis, group_id: str, meta: TopicMetadata, partitions: list[int]):
    """A partition the topic does not have answers -1 without asking the share
    coordinator (whose answer would be UNKNOWN_TOPIC_OR_PARTITION): the work stays
    bounded by the topic's partitions, however many the request names."""
    persister = apis.share_state_persister
    existing = sorted({p for p in partitions if 0 <= p < meta.num_partitions})
    outcomes = await asyncio.gather(
        *(
            persister.read_summary(SharePartitionKey(group_id, meta.topic_id, p), 0)
            for p in existing
        )
    )
    read = dict(zip(existing, outcomes, strict=True))
    missing = Outcome([], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return _D.DescribeShareGroupOffsetsResponseTopic(
        topic_name=meta.name,
        topic_id=meta.topic_id,
        partitions=[_described_partition(p, read.get(p, missing)) for p in partitions],
    )


async def _describe_group(apis, connection, group) -> object:
    group_id = group.group_id
    if not _group_allowed(apis, connection, AclOperation.DESCRIBE, group_id):
        return _group_failed(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return _group_failed(group_id, ErrorCode.INVALID_GROUP_ID)
    error = _coordinator_error(apis, group_id)
    if error is None and apis.share_state_persister is None:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error is not None:
        return _group_failed(group_id, error)
    known = _topics(apis)
    requested: list[tuple[str, list[int]]]
    if group.topics is None:
        by_id = {meta.topic_id: meta for meta in known.values()}
        initialized = apis.group_coordinator.share_groups.initialized_partitions(group_id)
        present = {by_id[t].name: sorted(p) for t, (_, p) in initialized.items() if t in by_id}
        refused = auth_helper.denied(
            apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, present
        )
        requested = [(n, p) for n, p in sorted(present.items()) if n not in refused]
    else:
        requested = [(t.topic_name, list(t.partitions)) for t in group.topics]
        refused = auth_helper.denied(
            apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, [n for n, _ in requested]
        )
    topics: list = []
    reads = []
    for name, partitions in requested:
        if name in refused:
            topics.append(
                _D.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name,
                    topic_id=ZERO_UUID,
                    partitions=_error_partitions(partitions, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                )
            )
        elif name not in known:
            topics.append(
                _D.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name,
                    topic_id=ZERO_UUID,
                    partitions=[
                        _D.DescribeShareGroupOffsetsResponsePartition(
                            partition_index=p,
                            start_offset=UNINITIALIZED_START_OFFSET,
                            leader_epoch=0,
                            error_code=0,
                        )
                        for p in partitions
                    ],
                )
            )
        else:
            reads.append(_describe_topic(apis, group_id, known[name], partitions))
    read = await asyncio.gather(*reads)
    return _D.DescribeShareGroupOffsetsResponseGroup(
        group_id=group_id, topics=[*read, *topics], error_code=0
    )


def handle_describe_share_group_offsets(apis, request, connection):
    body = request.body
    if not _enabled(apis):
        return _D(
            groups=[_group_failed(g.group_id, ErrorCode.UNSUPPORTED_VERSION) for g in body.groups]
        )
    return _describe_all(apis, connection, body.groups)


async def _describe_all(apis, connection, groups) -> object:
    described = await asyncio.gather(*(_describe_group(apis, connection, g) for g in groups))
    return _D(groups=list(described))


# ---- AlterShareGroupOffsets ----

_A = AlterShareGroupOffsetsResponse


def _altered(index: int, error: ErrorCode, message: str | None = None):
    return _A.AlterShareGroupOffsetsResponsePartition(
        partition_index=index,
        error_code=int(error),
        error_message=None if error == ErrorCode.NONE else (message or error.description),
    )


def _alter_failed_everywhere(body, error: ErrorCode):
    """Kafka's AlterShareGroupOffsetsRequest.getErrorResponse: the error on every
    partition asked about."""
    return _A(
        error_code=0,
        responses=[
            _A.AlterShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name,
                topic_id=ZERO_UUID,
                partitions=[_altered(p.partition_index, error) for p in t.partitions],
            )
            for t in body.topics
        ],
    )


def handle_alter_share_group_offsets(apis, request, connection):
    body = request.body
    if not _enabled(apis):
        return _alter_failed_everywhere(body, ErrorCode.UNSUPPORTED_VERSION)
    if not _group_allowed(apis, connection, AclOperation.READ, body.group_id):
        return _alter_failed_everywhere(body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    failed = _group_error(apis, body.group_id, must_exist=False)
    if failed is not None:
        return _A(error_code=int(failed[0]), error_message=failed[1], responses=[])
    return _alter(apis, connection, body)


async def _alter_partition(apis, key: SharePartitionKey, epoch: int, start_offset: int):
    persister = apis.share_state_persister
    held = await persister.read_summary(key, 0)
    state_epoch = epoch
    if held.error == ErrorCode.NONE and held.start_offset != UNINITIALIZED_START_OFFSET:
        state_epoch = max(epoch, held.state_epoch + 1)
    outcome = await persister.initialize(key, state_epoch, start_offset)
    return _altered(key.partition, outcome.error, outcome.message)


async def _alter(apis, connection, body) -> object:
    known = _topics(apis)
    refused = auth_helper.denied(
        apis, connection, AclOperation.READ, ResourceType.TOPIC, [t.topic_name for t in body.topics]
    )
    answers: dict[str, list] = {}
    ids: dict[str, uuid.UUID] = {}
    valid: list[tuple[str, SharePartitionKey, int]] = []
    for topic in body.topics:
        name = topic.topic_name
        rows = answers.setdefault(name, [])
        meta = known.get(name)
        ids[name] = meta.topic_id if meta is not None and name not in refused else ZERO_UUID
        for p in topic.partitions:
            if name in refused:
                rows.append(_altered(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif meta is None or not 0 <= p.partition_index < meta.num_partitions:
                rows.append(_altered(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                key = SharePartitionKey(body.group_id, meta.topic_id, p.partition_index)
                valid.append((name, key, p.start_offset))
    if valid:
        error, epoch = await apis.group_coordinator.share_groups.next_state_epoch(body.group_id)
        if error != ErrorCode.NONE:
            return _A(error_code=int(error), error_message=error.description, responses=[])
        # One initialize per partition (its last start offset in the request), however
        # often the request names it; every row is answered.
        offsets = {key: offset for _, key, offset in valid}
        keys = list(offsets)
        rows_of = await asyncio.gather(
            *(_alter_partition(apis, key, epoch, offsets[key]) for key in keys)
        )
        result = dict(zip(keys, rows_of, strict=True))
        for name, key, _ in valid:
            answers[name].append(result[key])
        await apis.group_coordinator.share_groups.mark_initialized(
            body.group_id,
            {(k.topic_id, k.partition) for k, row in result.items() if row.error_code == 0},
        )
    return _A(
        error_code=0,
        responses=[
            _A.AlterShareGroupOffsetsResponseTopic(
                topic_name=name,
                topic_id=ids[name],
                partitions=sorted(rows, key=lambda r: r.partition_index),
            )
            for name, rows in answers.items()
        ],
    )


# ---- DeleteShareGroupOffsets ----

_X = DeleteShareGroupOffsetsResponse


def _deleted(name: str, topic_id: uuid.UUID, error: ErrorCode, message: str | None = None):
    return _X.DeleteShareGroupOffsetsResponseTopic(
        topic_name=name,
        topic_id=topic_id,
        error_code=int(error),
        error_message=None if error == ErrorCode.NONE else (message or error.description),
    )


def handle_delete_share_group_offsets(apis, request, connection):
    body = request.body
    if not _enabled(apis):
        error = ErrorCode.UNSUPPORTED_VERSION
        return _X(error_code=int(error), error_message=error.description, responses=[])
    if not _group_allowed(apis, connection, AclOperation.DELETE, body.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return _X(error_code=int(error), error_message=error.description, responses=[])
    failed = _group_error(apis, body.group_id, must_exist=True)
    if failed is not None:
        return _X(error_code=int(failed[0]), error_message=failed[1], responses=[])
    return _delete(apis, connection, body)


async def _delete_topic(apis, group_id: str, meta: TopicMetadata):
    persister = apis.share_state_persister
    outcomes = await asyncio.gather(
        *(
            persister.delete(SharePartitionKey(group_id, meta.topic_id, p))
            for p in range(meta.num_partitions)
        )
    )
    for outcome in outcomes:
        if outcome.error != ErrorCode.NONE:
            return _deleted(meta.name, meta.topic_id, outcome.error, outcome.message)
    return _deleted(meta.name, meta.topic_id, ErrorCode.NONE)


async def _delete(apis, connection, body) -> object:
    known = _topics(apis)
    names = list(dict.fromkeys(t.topic_name for t in body.topics))
    refused = auth_helper.denied(apis, connection, AclOperation.READ, ResourceType.TOPIC, names)
    refusals = []
    deletions = []
    for name in names:
        if name in refused:
            refusals.append(_deleted(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        elif name not in known:
            refusals.append(_deleted(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            deletions.append(_delete_topic(apis, body.group_id, known[name]))
    share_groups = apis.group_coordinator.share_groups
    if deletions:
        deleting = {known[n].topic_id: n for n in names if n not in refused and n in known}
        error = await share_groups.start_deleting(body.group_id, deleting)
        if error != ErrorCode.NONE:
            return _X(error_code=int(error), error_message=error.description, responses=[])
    deleted = await asyncio.gather(*deletions)
    await share_groups.finish_deleting(
        body.group_id, {row.topic_id for row in deleted if row.error_code == 0}
    )
    return _X(error_code=0, responses=[*deleted, *refusals])


HANDLERS = {
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: handle_describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: handle_alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: handle_delete_share_group_offsets,
}
