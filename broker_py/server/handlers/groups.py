"""Consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups, DeleteGroups.

Each handler turns the request of its version into a call on the broker's
:class:`~broker_py.coordinator.group.group_coordinator.GroupCoordinator` and the result into the
response of that version; the coordinator holds all the rules.

With an authorizer, each checks what Kafka's KafkaApis checks: FindCoordinator DESCRIBE
on the group or transactional id; JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
OffsetCommit READ on the group (and OffsetCommit READ on each topic); OffsetFetch and
DescribeGroups DESCRIBE on the group (OffsetFetch DESCRIBE on each topic, and leaves out
those it may not see when asked for every topic); DeleteGroups and OffsetDelete DELETE
on the group (OffsetDelete READ on each topic); ListGroups lists every group to DESCRIBE
on the cluster and otherwise the groups the connection may DESCRIBE.

In a cluster, OffsetCommit v0 and OffsetFetch v0 keep their offsets in ZooKeeper, at
``/consumers/<group>/offsets/<topic>/<partition>``, as Kafka's ZooKeeper mode does: they
neither see nor change what later versions commit. A broker alone keeps them in
``__consumer_offsets`` with every other commit.
"""

from __future__ import annotations

import asyncio
import logging

import logstore
from broker_py.common.internal_topics import (
    OFFSETS_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
)
from broker_py.coordinator.group.group_metadata import JoinGroupResult, OffsetAndMetadata
from broker_py.coordinator.group.group_metadata_records import partition_for
from broker_py.coordinator.group.join_group import JoinGroupParams
from broker_py.coordinator.group.sync_group import SyncGroupParams
from broker_py.coordinator.share.share_coordinator_records import parse_coordinator_key
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.utils.in_steps import for_each
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError, KafkaException
from logstore.protocol.messages.find_coordinator import FindCoordinatorResponse
from logstore.protocol.messages.group import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)
from logstore.protocol.messages.group_admin import (
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
)
from logstore.protocol.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetFetchResponse,
)
from logstore.protocol.messages.offset_delete import OffsetDeleteResponse

COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1
COORDINATOR_KEY_SHARE = 2  # "group:topicId:partition" (FindCoordinator v6+, KIP-932)

log = logging.getLogger(__name__)


def _group_allowed(apis, connection, operation: AclOperation, group_id: str) -> bool:
    return auth_helper.authorize(apis, connection, operation, ResourceType.GROUP, group_id)


def _client_id(request) -> str:
    return request.header.client_id or ""


def _client_host(connection) -> str:
    """Kafka shows a member's host as Java's ``InetAddress.toString()``: ``/1.2.3.4``."""
    peer = getattr(connection, "peer", None) or ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


# ---- FindCoordinator ----


def _find_coordinator(
    apis, key: str, key_type: int, connection=None, version: int = 6
) -> tuple[ErrorCode, int, str, int]:
    """(error, node id, host, port) of the coordinator of ``key``."""
    if key_type == COORDINATOR_KEY_SHARE:
        return _find_share_coordinator(apis, key, connection, version)
    if key_type == COORDINATOR_KEY_GROUP and not _group_allowed(
        apis, connection, AclOperation.DESCRIBE, key
    ):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, -1, "", -1
    if key_type == COORDINATOR_KEY_TRANSACTION and not auth_helper.authorize(
        apis, connection, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, "", -1
    if key_type == COORDINATOR_KEY_GROUP:
        coordinator = apis.group_coordinator
        if coordinator is None or not coordinator.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        try:
            coordinator.ensure_offsets_topic()
        except (KafkaError, logstore.LogStoreError, OSError):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    elif key_type == COORDINATOR_KEY_TRANSACTION:
        coordinator = apis.transaction_coordinator
        if coordinator is None or not coordinator.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        try:
            coordinator.ensure_topic()
        except (KafkaError, logstore.LogStoreError, OSError):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    else:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    listener = apis.advertised_listener(connection)
    if apis.zk_support is not None:
        return _partition_leader(
            apis,
            OFFSETS_TOPIC if key_type == COORDINATOR_KEY_GROUP else TRANSACTION_STATE_TOPIC,
            key,
            listener,
        )
    return ErrorCode.NONE, apis.broker_id, listener.host, listener.port


def _find_share_coordinator(apis, key: str, connection, version: int):
    """The share coordinator of a ``group:topicId:partition`` key, as Kafka answers it:
    INVALID_REQUEST before v6 and for a key that is not one, CLUSTER_AUTHORIZATION_FAILED
    without CLUSTER_ACTION on the cluster."""
    if version < 6:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    if not auth_helper.authorize_cluster(apis, connection, AclOperation.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1, "", -1
    coordinator = apis.share_coordinator
    try:
        parse_coordinator_key(key)
    except ValueError:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    if coordinator is None or not coordinator.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    try:
        coordinator.ensure_topic()
    except (KafkaError, logstore.LogStoreError, OSError):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    listener = apis.advertised_listener(connection)
    if apis.zk_support is not None:
        return _partition_leader(apis, SHARE_GROUP_STATE_TOPIC, key, listener)
    return ErrorCode.NONE, apis.broker_id, listener.host, listener.port


def _partition_leader(apis, topic: str, key: str, listener) -> tuple[ErrorCode, int, str, int]:
    """In a cluster, the coordinator of ``key`` is the leader of its partition of the
    internal topic (Java's String.hashCode, as Kafka): COORDINATOR_NOT_AVAILABLE while
    the partition has no leader."""
    info = apis.metadata_cache.get(topic)
    if info is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    state = apis.metadata_cache.partition_state(topic, partition_for(key, info.partitions))
    node = (
        None
        if state is None
        else next(
            (n for n in apis.metadata_cache.alive_nodes(listener) if n.id == state.leader), None
        )
    )
    if node is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return ErrorCode.NONE, node.id, node.host, node.port


def _error_message(error: ErrorCode) -> str | None:
    return None if error == ErrorCode.NONE else error.description


def handle_find_coordinator(apis, request, connection):
    body = request.body
    version = request.api_version
    key_type = body.key_type if version >= 1 else COORDINATOR_KEY_GROUP
    if version >= 4:
        coordinators = []
        for key in body.coordinator_keys:
            error, node_id, host, port = _find_coordinator(apis, key, key_type, connection, version)
            coordinators.append(
                FindCoordinatorResponse.Coordinator(
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=int(error),
                    error_message=_error_message(error),
                )
            )
        return FindCoordinatorResponse(coordinators=coordinators)
    error, node_id, host, port = _find_coordinator(apis, body.key, key_type, connection, version)
    return FindCoordinatorResponse(
        error_code=int(error),
        error_message=_error_message(error),
        node_id=node_id,
        host=host,
        port=port,
    )


# ---- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ----


def _join_response(version: int, result: JoinGroupResult) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return JoinGroupResponse(
        error_code=int(result.error),
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=m, group_instance_id=instance, metadata=metadata
            )
            for m, instance, metadata in result.members
        ],
    )


async def handle_join_group(apis, request, connection):
    body = request.body
    version = request.api_version
    group_instance_id = body.group_instance_id if version >= 5 else None
    if not _group_allowed(apis, connection, AclOperation.READ, body.group_id):
        return JoinGroupResponse(
            error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
            generation_id=-1,
            protocol_type=None,
            protocol_name="" if version < 7 else None,
            leader="",
            member_id=body.member_id,
            members=[],
        )
    # A consumer group (KIP-848) with members does not take classic members.
    refusal = apis.group_coordinator.consumer_groups.classic_join_refusal(body.group_id)
    if apis.group_coordinator.share_groups.group(body.group_id) is not None:
        # Kafka: "Group X is not a classic group."
        refusal = ErrorCode.GROUP_ID_NOT_FOUND
    if refusal is not None:
        return JoinGroupResponse(
            error_code=int(refusal),
            generation_id=-1,
            protocol_type=None,
            protocol_name="" if version < 7 else None,
            leader="",
            member_id=body.member_id,
            members=[],
        )
    # JoinGroup v0 has no rebalance timeout: the session timeout is used for both.
    rebalance_timeout_ms = body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
    params = JoinGroupParams(
        group_id=body.group_id,
        member_id=body.member_id,
        group_instance_id=group_instance_id,
        require_known_member_id=version >= 4 and group_instance_id is None,
        support_skipping_assignment=version >= 9,
        client_id=_client_id(request),
        client_host=_client_host(connection),
        rebalance_timeout_ms=rebalance_timeout_ms,
        session_timeout_ms=body.session_timeout_ms,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        reason=body.reason if version >= 8 else None,
    )
    result = await apis.group_coordinator.join_group(params)
    return _join_response(version, result)


async def handle_sync_group(apis, request, connection):
    body = request.body
    version = request.api_version
    if not _group_allowed(apis, connection, AclOperation.READ, body.group_id):
        return SyncGroupResponse(
            error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), assignment=b""
        )
    params = SyncGroupParams(
        group_id=body.group_id,
        generation_id=body.generation_id,
        member_id=body.member_id,
        protocol_type=body.protocol_type if version >= 5 else None,
        protocol_name=body.protocol_name if version >= 5 else None,
        group_instance_id=body.group_instance_id if version >= 3 else None,
        assignments={a.member_id: bytes(a.assignment) for a in body.assignments},
    )
    result = await apis.group_coordinator.sync_group(params)
    return SyncGroupResponse(
        error_code=int(result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def handle_heartbeat(apis, request, connection):
    body = request.body
    if not _group_allowed(apis, connection, AclOperation.READ, body.group_id):
        return HeartbeatResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    error = apis.group_coordinator.heartbeat(
        body.group_id,
        body.member_id,
        body.group_instance_id if request.api_version >= 3 else None,
        body.generation_id,
    )
    return HeartbeatResponse(error_code=int(error))


def handle_leave_group(apis, request, connection):
    body = request.body
    version = request.api_version
    if not _group_allowed(apis, connection, AclOperation.READ, body.group_id):
        return LeaveGroupResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), members=[])
    if version >= 3:
        members = [
            (m.member_id, m.group_instance_id, m.reason if version >= 5 else None)
            for m in body.members
        ]
    else:
        members = [(body.member_id, None, None)]
    error, member_errors = apis.group_coordinator.leave_group(body.group_id, members)
    if version < 3:
        # One member: its error is the response's error.
        if error == ErrorCode.NONE:
            error = next((e for e in member_errors if e != ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(error_code=int(error))
    return LeaveGroupResponse(
        error_code=int(error),
        members=[
            LeaveGroupResponse.MemberResponse(
                member_id=m[0], group_instance_id=m[1], error_code=int(e)
            )
            for m, e in zip(members, member_errors)
        ],
    )


# ---- OffsetCommit / OffsetFetch ----


def topic_denied(apis, connection, topics, operation: AclOperation = AclOperation.READ) -> set[str]:
    """The names of the request's topics the connection may not perform ``operation`` on."""
    return auth_helper.denied(
        apis, connection, operation, ResourceType.TOPIC, (t.name for t in topics)
    )


def requested_offsets(
    apis, topics, with_leader_epoch: bool, denied: set[str], with_commit_timestamp: bool = False
) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], OffsetAndMetadata]]:
    """The offsets an OffsetCommit or TxnOffsetCommit request commits, stamped now, or,
    with ``with_commit_timestamp`` (OffsetCommit v1), at each partition's
    ``commit_timestamp`` unless it is -1: (TOPIC_AUTHORIZATION_FAILED for each partition
    of a ``denied`` topic and UNKNOWN_TOPIC_OR_PARTITION for each that does not exist,
    the rest)."""
    now = apis.time.milliseconds()
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for topic in topics:
        info = apis.metadata_cache.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name in denied:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = OffsetAndMetadata(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if with_leader_epoch else -1,
                    metadata=p.committed_metadata or "",
                    commit_timestamp=p.commit_timestamp
                    if with_commit_timestamp and p.commit_timestamp != -1
                    else now,
                )
    return errors, offsets


def handle_offset_commit(apis, request, connection):
    body = request.body
    version = request.api_version
    if not _group_allowed(apis, connection, AclOperation.READ, body.group_id):
        errors = {
            (t.name, p.partition_index): ErrorCode.GROUP_AUTHORIZATION_FAILED
            for t in body.topics
            for p in t.partitions
        }
        offsets = {}
    else:
        errors, offsets = requested_offsets(
            apis,
            body.topics,
            version >= 6,
            topic_denied(apis, connection, body.topics),
            version == 1,
        )
    if not offsets:
        return _offset_commit_response(body, errors)
    if version == 0 and apis.zk_support is not None:
        return _commit_to_zookeeper(apis, body, errors, offsets)
    committed = apis.group_coordinator.commit_offsets(
        body.group_id,
        body.member_id,
        body.group_instance_id if version >= 7 else None,
        body.generation_id_or_member_epoch,
        offsets,
        version,
    )
    if isinstance(committed, asyncio.Future):
        return _when_committed(committed, body, errors, _offset_commit_response)
    errors.update(committed)
    return _offset_commit_response(body, errors)


async def _commit_to_zookeeper(apis, body, errors, offsets) -> OffsetCommitResponse:
    """OffsetCommit v0 in a cluster: each offset to its ZooKeeper node (Kafka's
    ``setOrCreateConsumerOffset``), one error per partition."""
    zk = apis.zk_support.zk
    max_metadata = apis.config["offset.metadata.max.bytes"]

    def write() -> dict[tuple[str, int], ErrorCode]:
        out = {}
        for (topic, partition), o in offsets.items():
            if len(o.metadata) > max_metadata:
                out[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            out[(topic, partition)] = _zookeeper_error(
                zk.set_or_create_consumer_offset, body.group_id, topic, partition, o.offset
            )[0]
        return out

    errors.update(await asyncio.to_thread(write))
    return _offset_commit_response(body, errors)


def _zookeeper_error(call, *args) -> tuple[ErrorCode, object]:
    """(NONE, the result) of a ZooKeeper call, or (the error, None) as Kafka answers its
    exception: UNKNOWN_SERVER_ERROR for ZooKeeper failures, bad stored data and paths
    ZooKeeper refuses."""
    try:
        return ErrorCode.NONE, call(*args)
    except (KafkaException, ValueError) as e:
        log.warning("OffsetCommit/OffsetFetch v0 in ZooKeeper: %s", e)
        return ErrorCode.UNKNOWN_SERVER_ERROR, None


async def _when_committed(pending, body, errors, respond):
    errors.update(await pending)
    return respond(body, errors)


def _offset_commit_response(body, errors) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponse.OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=int(errors[(topic.name, p.partition_index)]),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in body.topics
        ]
    )


def _fetch_group_offsets(
    apis,
    connection,
    group_id: str,
    topics,
    require_stable: bool = False,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> tuple[ErrorCode, list[tuple[str, list]]]:
    """(error, [(topic, [(partition, OffsetAndMetadata | None, error)])]) in request
    order; ``topics`` None means every committed offset of the group. With
    ``require_stable`` (v7+), a partition with a transactional commit not yet ended
    gets UNSTABLE_OFFSET_COMMIT and no offset. ``member_id`` and ``member_epoch`` (v9)
    fence a consumer group's member."""
    if not _group_allowed(apis, connection, AclOperation.DESCRIBE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    partitions = (
        None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    )
    error, offsets = apis.group_coordinator.fetch_offsets(
        group_id, partitions, member_id, member_epoch
    )
    if apis.authorizer is not None and error == ErrorCode.NONE:
        names = {tp[0] for tp in offsets} | {t.name for t in topics or ()}
        denied = auth_helper.denied(
            apis, connection, AclOperation.DESCRIBE, ResourceType.TOPIC, names
        )
        if topics is None:
            offsets = {tp: o for tp, o in offsets.items() if tp[0] not in denied}
        else:
            hidden = {tp for tp in offsets if tp[0] in denied}
            for tp in hidden:
                offsets[tp] = _DENIED
    unstable = apis.group_coordinator.unstable_offsets(group_id) if require_stable else set()
    by_topic: dict[str, list] = {}
    if topics is not None and error == ErrorCode.NONE:
        for t in topics:
            by_topic.setdefault(t.name, [])
    for tp, o in offsets.items():
        if o is _DENIED:
            by_topic.setdefault(tp[0], []).append(
                (tp[1], None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            )
        elif tp in unstable:
            by_topic.setdefault(tp[0], []).append((tp[1], None, ErrorCode.UNSTABLE_OFFSET_COMMIT))
        else:
            by_topic.setdefault(tp[0], []).append((tp[1], o, ErrorCode.NONE))
    return error, list(by_topic.items())


# The offset of a partition whose topic the connection may not DESCRIBE.
_DENIED = OffsetAndMetadata(offset=-1, leader_epoch=-1, metadata="", commit_timestamp=-1)


def _partition_fields(
    partition: int, o: OffsetAndMetadata | None, error: ErrorCode = ErrorCode.NONE
) -> dict:
    if o is None:
        return {
            "partition_index": partition,
            "committed_offset": -1,
            "committed_leader_epoch": -1,
            "metadata": "",
            "error_code": int(error),
        }
    return {
        "partition_index": partition,
        "committed_offset": o.offset,
        "committed_leader_epoch": o.leader_epoch,
        "metadata": o.metadata,
        "error_code": int(error),
    }


def handle_offset_fetch(apis, request, connection):
    body = request.body
    version = request.api_version
    if version >= 8:
        groups = []
        for g in body.groups:
            error, topics = _fetch_group_offsets(
                apis,
                connection,
                g.group_id,
                g.topics,
                body.require_stable,
                g.member_id if version >= 9 else None,
                g.member_epoch if version >= 9 else -1,
            )
            groups.append(
                OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=int(error),
                    topics=[
                        OffsetFetchResponse.OffsetFetchResponseTopics(
                            name=name,
                            partitions=[
                                OffsetFetchResponse.OffsetFetchResponsePartitions(
                                    **_partition_fields(p, o, e)
                                )
                                for p, o, e in parts
                            ],
                        )
                        for name, parts in topics
                    ],
                )
            )
        return OffsetFetchResponse(groups=groups)
    topics_requested = body.topics
    if version < 2 and topics_requested is None:
        topics_requested = []
    if version == 0 and apis.zk_support is not None:
        return _fetch_from_zookeeper(apis, connection, body.group_id, topics_requested)
    error, topics = _fetch_group_offsets(
        apis, connection, body.group_id, topics_requested, version >= 7 and body.require_stable
    )
    return _offset_fetch_response(version, error, topics, topics_requested)


async def _fetch_from_zookeeper(
    apis, connection, group_id: str, topics_requested
) -> OffsetFetchResponse:
    """OffsetFetch v0 in a cluster (Kafka's ZooKeeper mode): each partition's offset from
    its ZooKeeper node; -1 where there is none or the topic does not exist,
    TOPIC_AUTHORIZATION_FAILED for a topic the connection may not DESCRIBE."""
    if not _group_allowed(apis, connection, AclOperation.DESCRIBE, group_id):
        return _offset_fetch_response(0, ErrorCode.GROUP_AUTHORIZATION_FAILED, [], topics_requested)
    denied = topic_denied(apis, connection, topics_requested, AclOperation.DESCRIBE)
    zk = apis.zk_support.zk

    def read() -> list[tuple[str, list]]:
        out = []
        for t in topics_requested:
            info = apis.metadata_cache.get(t.name)
            parts = []
            for p in t.partition_indexes:
                if t.name in denied:
                    parts.append((p, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                elif info is None or not 0 <= p < info.partitions:
                    parts.append((p, None, ErrorCode.NONE))
                else:
                    error, offset = _zookeeper_error(zk.get_consumer_offset, group_id, t.name, p)
                    found = (
                        None
                        if offset is None
                        else OffsetAndMetadata(offset=offset, leader_epoch=-1, metadata="")
                    )
                    parts.append((p, found, error))
            out.append((t.name, parts))
        return out

    return _offset_fetch_response(
        0, ErrorCode.NONE, await asyncio.to_thread(read), topics_requested
    )


def _offset_fetch_response(
    version: int, error: ErrorCode, topics, topics_requested
) -> OffsetFetchResponse:
    """OffsetFetch v0-v7: ``topics`` as (name, [(partition, offset or None, error)])."""
    if error != ErrorCode.NONE and version < 2:
        # No top-level error before v2: every requested partition carries it.
        topics = [
            (t.name, [(p, None, ErrorCode.NONE) for p in t.partition_indexes])
            for t in topics_requested
        ]
    partition_error = error if version < 2 else ErrorCode.NONE
    return OffsetFetchResponse(
        error_code=int(error),
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(
                name=name,
                partitions=[
                    OffsetFetchResponse.OffsetFetchResponsePartition(
                        **_partition_fields(p, o, e or partition_error)
                    )
                    for p, o, e in parts
                ],
            )
            for name, parts in topics
        ],
    )


# ---- DescribeGroups / ListGroups / DeleteGroups ----


def handle_describe_groups(apis, request, connection):
    body = request.body
    include_operations = request.api_version >= 3 and body.include_authorized_operations
    out = []
    # A group named twice is described once and its entry repeated: the work and the
    # objects of a request follow its distinct groups, not its length.
    described: dict[str, DescribeGroupsResponse.DescribedGroup] = {}

    def describe(group_id: str) -> None:
        entry = described.get(group_id)
        if entry is None:
            entry = described[group_id] = _describe_group(
                apis, connection, group_id, include_operations
            )
        out.append(entry)

    return for_each(body.groups, describe, lambda: DescribeGroupsResponse(groups=out))


def _describe_group(
    apis, connection, group_id: str, include_operations: bool
) -> DescribeGroupsResponse.DescribedGroup:
    if not _group_allowed(apis, connection, AclOperation.DESCRIBE, group_id):
        return DescribeGroupsResponse.DescribedGroup(
            error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=[],
        )
    error, summary = apis.group_coordinator.describe_group(group_id)
    return DescribeGroupsResponse.DescribedGroup(
        error_code=int(error),
        group_id=group_id,
        group_state=summary.state,
        protocol_type=summary.protocol_type,
        protocol_data=summary.protocol,
        members=[
            DescribeGroupsResponse.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in summary.members
        ],
        authorized_operations=auth_helper.authorized_operations(
            apis, connection, ResourceType.GROUP, group_id, include_operations
        ),
    )


def handle_list_groups(apis, request, connection):
    body = request.body
    version = request.api_version
    states = (body.states_filter or []) if version >= 4 else []
    types = (body.types_filter or []) if version >= 5 else []
    error, groups = apis.group_coordinator.list_groups(states, types)
    if not auth_helper.authorize_cluster(apis, connection, AclOperation.DESCRIBE):
        groups = [
            g for g in groups if _group_allowed(apis, connection, AclOperation.DESCRIBE, g.group_id)
        ]
    return ListGroupsResponse(
        error_code=int(error),
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in groups
        ],
    )


def handle_delete_groups(apis, request, connection):
    names = list(request.body.groups_names)
    refused = {n for n in names if not _group_allowed(apis, connection, AclOperation.DELETE, n)}
    errors = apis.group_coordinator.delete_groups([n for n in names if n not in refused])
    errors.update(dict.fromkeys(refused, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    seen = set()
    results = []
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        results.append(
            DeleteGroupsResponse.DeletableGroupResult(group_id=name, error_code=int(errors[name]))
        )
    return DeleteGroupsResponse(results=results)


def handle_offset_delete(apis, request, connection):
    body = request.body
    if not _group_allowed(apis, connection, AclOperation.DELETE, body.group_id):
        return OffsetDeleteResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    denied = topic_denied(apis, connection, body.topics)
    known: list[tuple[str, int]] = []
    unknown: set[tuple[str, int]] = set()
    for t in body.topics:
        topic = apis.metadata_cache.get(t.name)
        for p in t.partitions:
            exists = topic is not None and 0 <= p.partition_index < topic.partitions
            if t.name in denied:
                pass
            elif exists:
                known.append((t.name, p.partition_index))
            else:
                unknown.add((t.name, p.partition_index))
    error, errors = apis.group_coordinator.delete_offsets(body.group_id, known)
    if error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=int(error))
    return OffsetDeleteResponse(
        error_code=0,
        topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponse.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=int(
                            ErrorCode.TOPIC_AUTHORIZATION_FAILED
                            if t.name in denied
                            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                            if (t.name, p.partition_index) in unknown
                            else errors.get((t.name, p.partition_index), ErrorCode.NONE)
                        ),
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ],
    )


HANDLERS = {
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
}
