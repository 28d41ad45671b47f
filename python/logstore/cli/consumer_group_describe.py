"""What ``logstore group describe`` shows of a group on the consumer protocol (KIP-848)
beyond confluent-kafka's description: the group epoch, the target assignment epoch, the
server assignor and, per member, its member epoch, its current assignment and its target.

confluent-kafka 2.16 (librdkafka 2.16) describes such a group with ConsumerGroupDescribe
when the broker serves it, and returns its type, each member's assignment and target
assignment, but no epoch. So the command sends ConsumerGroupDescribe itself, through
logstore's protocol codec, to the group's coordinator as confluent-kafka found it, over
the connection settings of the command's other requests (:func:`metadata_probe.connect`:
TLS, SASL, ``--timeout``), at the highest version both sides serve.

Per member: ``assigned`` is what it owns now, ``target`` what the assignor gave it,
``pending`` the target partitions it does not own yet (target minus assigned), and
``revoking`` those it still owns outside its target (assigned minus target). Partitions
are ``topic-partition`` strings, sorted.
"""

from __future__ import annotations

from typing import Any

from logstore.cli.common import EXIT_FAILED, CliError
from logstore.cli.connection import ClientOptions
from logstore.cli.metadata_probe import connect, negotiated_version
from logstore.protocol import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from logstore.spark.kafka_client.errors import KafkaClientError

# ConsumerGroupDescribe v1's member_type.
MEMBER_TYPES = {0: "classic", 1: "consumer"}


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


def _partitions(assignment: Any) -> set[tuple[str, int]]:
    return {(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions}


def _names(partitions: set[tuple[str, int]]) -> list[str]:
    return [f"{t}-{p}" for t, p in sorted(partitions)]


def describe_consumer_group(
    options: ClientOptions, host: str, port: int, group_id: str
) -> dict[str, Any]:
    """The group's epochs, assignor and members as its coordinator at ``host:port``
    answers ConsumerGroupDescribe; CliError (exit status 1) when it refuses, 2 when it
    cannot be reached."""
    conf = options.config()
    what = f"ConsumerGroupDescribe of group {group_id} to {host}:{port}"
    try:
        connection = connect(conf, host, port, options.timeout)
    except KafkaClientError as exc:
        raise CliError(f"{what}: {exc}") from None
    try:
        version = negotiated_version(connection, ApiKey.CONSUMER_GROUP_DESCRIBE)
        if version < 0:
            raise CliError(f"{what}: the broker does not serve ConsumerGroupDescribe", EXIT_FAILED)
        request = ConsumerGroupDescribeRequest(
            group_ids=[group_id], include_authorized_operations=False
        )
        response = connection.request(ApiKey.CONSUMER_GROUP_DESCRIBE, request, version=version)
    except KafkaClientError as exc:
        raise CliError(f"{what}: {exc}") from None
    finally:
        connection.close()
    assert isinstance(response, ConsumerGroupDescribeResponse)
    (described,) = [g for g in response.groups if g.group_id == group_id] or [None]
    if described is None:
        raise CliError(f"{what}: the answer does not name the group", EXIT_FAILED)
    if described.error_code:
        detail = f": {described.error_message}" if described.error_message else ""
        raise CliError(
            f"{what}: {_error_name(described.error_code)} ({described.error_code}){detail}",
            EXIT_FAILED,
        )
    members = []
    for m in sorted(described.members, key=lambda m: m.member_id):
        assigned, target = _partitions(m.assignment), _partitions(m.target_assignment)
        members.append(
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "member_type": MEMBER_TYPES.get(m.member_type),
                "member_epoch": m.member_epoch,
                "subscribed_topics": sorted(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assigned": _names(assigned),
                # As a classic group's members show their assignment.
                "partitions": _names(assigned),
                "target": _names(target),
                "pending": _names(target - assigned),
                "revoking": _names(assigned - target),
            }
        )
    return {
        "state": described.group_state,
        "group_epoch": described.group_epoch,
        "assignment_epoch": described.assignment_epoch,
        "assignor": described.assignor_name,
        "members": members,
    }
