"""What ``logstore group describe`` shows of a share group (KIP-932): its state, group
and assignment epochs, members and their assignments, and per partition the
share-partition start offset and the records in flight.

confluent-kafka 2.16 cannot describe share groups, so the command finds the group's
coordinator (FindCoordinator v4) through the first bootstrap server that answers, then
sends ShareGroupDescribe (v1) and DescribeShareGroupOffsets (v0, every partition with
state) to it through logstore's protocol codec, over the command's connection settings
(:func:`metadata_probe.connect`: TLS, SASL, ``--timeout``).

:func:`share_group_at` answers ``None`` for a group that is not a share group
(GROUP_ID_NOT_FOUND), a broker that does not serve share groups, or one with them off.

Per partition: ``start_offset`` is the share-partition start offset (-1: not known yet,
the leader applies ``share.auto.offset.reset`` at the first fetch); ``in_flight`` is the
log end offset minus the start offset (or minus the log start offset when that is
higher): the records not yet delivered or delivered and not yet all acknowledged. The
broker's summary does not tell which records above the start offset are already
acknowledged, so it is an upper bound of what is left to process.
"""

from __future__ import annotations

from typing import Any

from logstore.cli.common import EXIT_FAILED, CliError
from logstore.cli.connection import ClientOptions
from logstore.cli.metadata_probe import (
    answered_metadata,
    connect,
    first_answer,
    negotiated_version,
)
from logstore.protocol import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from logstore.protocol.messages.group_admin import ListGroupsRequest, ListGroupsResponse
from logstore.protocol.messages.share_group import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from logstore.protocol.messages.share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from logstore.spark.kafka_client.errors import KafkaClientError

_NOT_SHARE = (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


def _coordinator(options: ClientOptions, group_id: str) -> tuple[int, str, int] | None:
    """The group coordinator's node id, host and port; None when the broker is too old."""

    def exchange(connection: Any) -> tuple[int, str, int] | None:
        version = negotiated_version(connection, ApiKey.FIND_COORDINATOR)
        if version < 4:
            return None
        response = connection.request(
            ApiKey.FIND_COORDINATOR,
            FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id]),
            version=version,
        )
        assert isinstance(response, FindCoordinatorResponse)
        (found,) = response.coordinators
        if found.error_code:
            raise CliError(
                f"FindCoordinator of group {group_id}: {_error_name(found.error_code)}",
                EXIT_FAILED,
            )
        return found.node_id, found.host, found.port

    return first_answer(options, f"FindCoordinator of group {group_id}", exchange, None)


def share_group_ids(options: ClientOptions) -> list[str]:
    """The share groups every broker coordinates (see :func:`share_groups`)."""
    return sorted(share_groups(options))


def share_groups(options: ClientOptions) -> dict[str, str]:
    """Every share group the brokers coordinate and its state as ListGroups names it
    (``Empty``, ``Stable``): ListGroups v5 filtered on type share, of each broker
    (confluent-kafka's list leaves share groups out). A broker that cannot be reached or
    does not serve ListGroups v5 lists none."""

    def brokers(connection: Any) -> list[tuple[str, int]]:
        return [(b.host, b.port) for b in answered_metadata(connection, []).brokers]

    found: dict[str, str] = {}
    conf = options.config()
    for host, port in first_answer(options, "share groups", brokers, []):
        try:
            connection = connect(conf, host, port, options.timeout)
        except KafkaClientError:
            continue
        try:
            version = negotiated_version(connection, ApiKey.LIST_GROUPS)
            if version < 5:
                continue
            response = connection.request(
                ApiKey.LIST_GROUPS,
                ListGroupsRequest(states_filter=[], types_filter=["share"]),
                version=version,
            )
            assert isinstance(response, ListGroupsResponse)
            found.update(
                (g.group_id, g.group_state) for g in response.groups if g.group_type == "share"
            )
        except KafkaClientError:
            continue
        finally:
            connection.close()
    return found


def share_group_at(options: ClientOptions, group_id: str) -> dict[str, Any] | None:
    """The share group's description and start offsets from its coordinator, or None
    when ``group_id`` is not a share group there."""
    found = _coordinator(options, group_id)
    if found is None:
        return None
    node_id, host, port = found
    what = f"ShareGroupDescribe of group {group_id} to {host}:{port}"
    try:
        connection = connect(options.config(), host, port, options.timeout)
    except KafkaClientError as exc:
        raise CliError(f"{what}: {exc}") from None
    try:
        if negotiated_version(connection, ApiKey.SHARE_GROUP_DESCRIBE) < 1:
            return None
        response = connection.request(
            ApiKey.SHARE_GROUP_DESCRIBE,
            ShareGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False),
            version=1,
        )
        assert isinstance(response, ShareGroupDescribeResponse)
        (described,) = [g for g in response.groups if g.group_id == group_id] or [None]
        if described is None:
            raise CliError(f"{what}: the answer does not name the group", EXIT_FAILED)
        if described.error_code in _NOT_SHARE:
            return None
        if described.error_code:
            detail = f": {described.error_message}" if described.error_message else ""
            raise CliError(
                f"{what}: {_error_name(described.error_code)} ({described.error_code}){detail}",
                EXIT_FAILED,
            )
        starts = _start_offsets(connection, group_id, what)
    except KafkaClientError as exc:
        raise CliError(f"{what}: {exc}") from None
    finally:
        connection.close()
    members = []
    for m in sorted(described.members, key=lambda m: m.member_id):
        assigned = sorted(
            (t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions
        )
        members.append(
            {
                "member_id": m.member_id,
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "member_epoch": m.member_epoch,
                "subscribed_topics": sorted(m.subscribed_topic_names),
                "partitions": [f"{t}-{p}" for t, p in assigned],
            }
        )
    return {
        "coordinator": node_id,
        "state": described.group_state,
        "group_epoch": described.group_epoch,
        "assignment_epoch": described.assignment_epoch,
        "assignor": described.assignor_name,
        "members": members,
        "start_offsets": starts,
    }


def _start_offsets(connection: Any, group_id: str, what: str) -> dict[tuple[str, int], int]:
    """Every partition with share-partition state: its start offset."""
    if negotiated_version(connection, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS) < 0:
        return {}
    R = DescribeShareGroupOffsetsRequest
    response = connection.request(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        R(groups=[R.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]),
        version=0,
    )
    assert isinstance(response, DescribeShareGroupOffsetsResponse)
    (group,) = [g for g in response.groups if g.group_id == group_id] or [None]
    if group is None:
        raise CliError(f"{what}: DescribeShareGroupOffsets does not name the group", EXIT_FAILED)
    if group.error_code:
        raise CliError(
            f"{what}: DescribeShareGroupOffsets: {_error_name(group.error_code)}", EXIT_FAILED
        )
    return {
        (t.topic_name, p.partition_index): p.start_offset
        for t in group.topics
        for p in t.partitions
        if not p.error_code
    }


def in_flight(start: int | None, log_start: object, log_end: object) -> int | None:
    """Records from the start offset (or the log start when higher) to the log end; None
    when an offset is unknown."""
    if start is None or start < 0 or not isinstance(log_end, int):
        return None
    first = max(start, log_start) if isinstance(log_start, int) else start
    return max(0, log_end - first)
