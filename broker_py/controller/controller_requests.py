"""The controller's requests on the wire: the plain request data of
:mod:`~broker_py.controller.controller_request_batch` to and from Kafka 3.9's
LeaderAndIsr (4), StopReplica (5) and UpdateMetadata (6) messages, and their responses.

A message built here carries both the grouped form (by topic, LeaderAndIsr v2+,
StopReplica v3+, UpdateMetadata v5+) and the ungrouped one of older versions, so the
network client may send it at whichever version the broker takes; a decoder reads the
form its version has. UpdateMetadata endpoints carry Kafka's security protocol ids
(PLAINTEXT 0, SSL 1, SASL_PLAINTEXT 2, SASL_SSL 3).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TypeVar

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.broker_info import BrokerInfo, EndPoint
from broker_py.controller.controller_request_batch import (
    ControllerRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequestData,
    StopReplicaPartitionState,
    StopReplicaRequestData,
    UpdateMetadataPartitionState,
    UpdateMetadataRequestData,
)
from broker_py.controller.controller_store import BrokerRegistration
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.controller import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from logstore.protocol.schema import Message, StructValue

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}
NULL_UUID = uuid.UUID(int=0)
TYPE_INCREMENTAL, TYPE_FULL = 1, 2

_T = TypeVar("_T")


def _by_topic(items: Iterable[_T], key: Callable[[_T], TopicPartition]) -> dict[str, list[_T]]:
    grouped: dict[str, list[_T]] = defaultdict(list)
    for item in items:
        grouped[key(item).topic].append(item)
    return grouped


# ---- to the wire ----


def to_wire(request: ControllerRequest, listener_name: str | None = None) -> tuple[ApiKey, Message]:
    """The request as Kafka's message; LeaderAndIsr's live leaders are given at
    ``listener_name`` (the inter-broker listener), as Kafka does."""
    if isinstance(request, LeaderAndIsrRequestData):
        return ApiKey.LEADER_AND_ISR, _leader_and_isr(request, listener_name)
    if isinstance(request, UpdateMetadataRequestData):
        return ApiKey.UPDATE_METADATA, _update_metadata(request)
    return ApiKey.STOP_REPLICA, _stop_replica(request)


def _leader_and_isr(r: LeaderAndIsrRequestData, listener_name: str | None = None) -> Message:
    def state(s: LeaderAndIsrPartitionState, with_topic: bool) -> StructValue:
        return LeaderAndIsrRequest.LeaderAndIsrPartitionState(
            topic_name=s.partition.topic if with_topic else "",
            partition_index=s.partition.partition,
            controller_epoch=s.controller_epoch,
            leader=s.leader,
            leader_epoch=s.leader_epoch,
            isr=list(s.isr),
            partition_epoch=s.partition_epoch,
            replicas=list(s.replicas),
            adding_replicas=list(s.adding),
            removing_replicas=list(s.removing),
            is_new=s.is_new,
            leader_recovery_state=s.leader_recovery_state,
        )

    topics = [
        LeaderAndIsrRequest.LeaderAndIsrTopicState(
            topic_name=topic,
            topic_id=r.topic_ids.get(topic, NULL_UUID),
            partition_states=[state(s, False) for s in states],
        )
        for topic, states in sorted(_by_topic(r.partitions, lambda s: s.partition).items())
    ]
    return LeaderAndIsrRequest(
        controller_id=r.controller_id,
        is_kraft_controller=False,
        controller_epoch=r.controller_epoch,
        broker_epoch=r.broker_epoch,
        type=TYPE_FULL if r.full else 0,
        ungrouped_partition_states=[state(s, True) for s in r.partitions],
        topic_states=topics,
        live_leaders=[_live_leader(b, listener_name) for b in r.live_leaders],
    )


def _live_leader(b: BrokerRegistration, listener_name: str | None) -> StructValue:
    endpoint = next((e for e in b.info.endpoints if e.listener_name == listener_name), None)
    if endpoint is None:
        endpoint = b.info.endpoints[0] if b.info.endpoints else EndPoint("", "", -1, "PLAINTEXT")
    return LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
        broker_id=b.id, host_name=endpoint.host or "", port=endpoint.port
    )


def _update_metadata(r: UpdateMetadataRequestData) -> Message:
    def state(s: UpdateMetadataPartitionState, with_topic: bool) -> StructValue:
        return UpdateMetadataRequest.UpdateMetadataPartitionState(
            topic_name=s.partition.topic if with_topic else "",
            partition_index=s.partition.partition,
            controller_epoch=s.controller_epoch,
            leader=s.leader,
            leader_epoch=s.leader_epoch,
            isr=list(s.isr),
            zk_version=s.partition_epoch,
            replicas=list(s.replicas),
            offline_replicas=list(s.offline_replicas),
        )

    def broker(b: BrokerRegistration) -> StructValue:
        plain = next((e for e in b.info.endpoints if e.security_protocol == "PLAINTEXT"), None)
        return UpdateMetadataRequest.UpdateMetadataBroker(
            id=b.id,
            v0_host=plain.host if plain else "",
            v0_port=plain.port if plain else -1,
            endpoints=[
                UpdateMetadataRequest.UpdateMetadataEndpoint(
                    port=e.port,
                    host=e.host or "",
                    listener=e.listener_name,
                    security_protocol=SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0),
                )
                for e in b.info.endpoints
            ],
            rack=b.info.rack,
        )

    topics = [
        UpdateMetadataRequest.UpdateMetadataTopicState(
            topic_name=topic,
            topic_id=r.topic_ids.get(topic, NULL_UUID),
            partition_states=[state(s, False) for s in states],
        )
        for topic, states in sorted(_by_topic(r.partitions, lambda s: s.partition).items())
    ]
    return UpdateMetadataRequest(
        controller_id=r.controller_id,
        is_kraft_controller=False,
        type=0,
        controller_epoch=r.controller_epoch,
        broker_epoch=r.broker_epoch,
        ungrouped_partition_states=[state(s, True) for s in r.partitions],
        topic_states=topics,
        live_brokers=[broker(b) for b in r.live_brokers],
    )


def _stop_replica(r: StopReplicaRequestData) -> Message:
    deletes = {s.delete for s in r.partitions}
    grouped = _by_topic(r.partitions, lambda s: s.partition)
    return StopReplicaRequest(
        controller_id=r.controller_id,
        is_kraft_controller=False,
        controller_epoch=r.controller_epoch,
        broker_epoch=r.broker_epoch,
        delete_partitions=deletes == {True},
        ungrouped_partitions=[
            StopReplicaRequest.StopReplicaPartitionV0(
                topic_name=s.partition.topic, partition_index=s.partition.partition
            )
            for s in r.partitions
        ],
        topics=[
            StopReplicaRequest.StopReplicaTopicV1(
                name=t, partition_indexes=[s.partition.partition for s in states]
            )
            for t, states in sorted(grouped.items())
        ],
        topic_states=[
            StopReplicaRequest.StopReplicaTopicState(
                topic_name=t,
                partition_states=[
                    StopReplicaRequest.StopReplicaPartitionState(
                        partition_index=s.partition.partition,
                        leader_epoch=s.leader_epoch,
                        delete_partition=s.delete,
                    )
                    for s in states
                ],
            )
            for t, states in sorted(grouped.items())
        ],
    )


# ---- from the wire ----


def leader_and_isr_from_wire(m: Message, version: int) -> LeaderAndIsrRequestData:
    topic_ids: dict[str, uuid.UUID] = {}
    pairs: list[tuple[str, StructValue]] = []
    if version >= 2:
        for t in m.topic_states:
            if version >= 5 and t.topic_id != NULL_UUID:
                topic_ids[t.topic_name] = t.topic_id
            pairs.extend((t.topic_name, s) for s in t.partition_states)
    else:
        pairs = [(s.topic_name, s) for s in m.ungrouped_partition_states]
    states = tuple(
        LeaderAndIsrPartitionState(
            TopicPartition(topic, s.partition_index),
            s.controller_epoch,
            s.leader,
            s.leader_epoch,
            tuple(s.isr),
            s.partition_epoch,
            tuple(s.replicas),
            tuple(s.adding_replicas or ()),
            tuple(s.removing_replicas or ()),
            bool(s.is_new),
            s.leader_recovery_state,
        )
        for topic, s in pairs
    )
    leaders = tuple(
        BrokerRegistration(
            BrokerInfo(b.broker_id, [EndPoint("", b.host_name, b.port, "PLAINTEXT")]), -1
        )
        for b in m.live_leaders
    )
    return LeaderAndIsrRequestData(
        m.controller_id,
        m.controller_epoch,
        m.broker_epoch,
        states,
        topic_ids,
        leaders,
        m.type == TYPE_FULL,
    )


def update_metadata_from_wire(m: Message, version: int) -> UpdateMetadataRequestData:
    topic_ids: dict[str, uuid.UUID] = {}
    pairs: list[tuple[str, StructValue]] = []
    if version >= 5:
        for t in m.topic_states:
            if version >= 7 and t.topic_id != NULL_UUID:
                topic_ids[t.topic_name] = t.topic_id
            pairs.extend((t.topic_name, s) for s in t.partition_states)
    else:
        pairs = [(s.topic_name, s) for s in m.ungrouped_partition_states]
    states = tuple(
        UpdateMetadataPartitionState(
            TopicPartition(topic, s.partition_index),
            s.controller_epoch,
            s.leader,
            s.leader_epoch,
            tuple(s.isr),
            s.zk_version,
            tuple(s.replicas),
            tuple(s.offline_replicas or ()),
        )
        for topic, s in pairs
    )
    brokers = []
    for b in m.live_brokers:
        if version == 0:
            endpoints = [EndPoint("PLAINTEXT", b.v0_host, b.v0_port, "PLAINTEXT")]
        else:
            endpoints = []
            for e in b.endpoints:
                protocol = SECURITY_PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT")
                endpoints.append(
                    EndPoint(
                        e.listener if version >= 3 and e.listener else protocol,
                        e.host,
                        e.port,
                        protocol,
                    )
                )
        brokers.append(BrokerRegistration(BrokerInfo(b.id, endpoints, b.rack or None), -1))
    return UpdateMetadataRequestData(
        m.controller_id, m.controller_epoch, m.broker_epoch, states, topic_ids, tuple(brokers)
    )


def stop_replica_from_wire(m: Message, version: int) -> StopReplicaRequestData:
    if version >= 3:
        states = tuple(
            StopReplicaPartitionState(
                TopicPartition(t.topic_name, p.partition_index),
                p.leader_epoch,
                bool(p.delete_partition),
            )
            for t in m.topic_states
            for p in t.partition_states
        )
    elif version >= 1:
        states = tuple(
            StopReplicaPartitionState(TopicPartition(t.name, p), -1, bool(m.delete_partitions))
            for t in m.topics
            for p in t.partition_indexes
        )
    else:
        states = tuple(
            StopReplicaPartitionState(
                TopicPartition(p.topic_name, p.partition_index), -1, bool(m.delete_partitions)
            )
            for p in m.ungrouped_partitions
        )
    return StopReplicaRequestData(m.controller_id, m.controller_epoch, m.broker_epoch, states)


# ---- responses ----


def leader_and_isr_response(
    error: int, errors: dict[TopicPartition, int], topic_ids: dict[str, uuid.UUID]
) -> Message:
    def partition_error(tp: TopicPartition, code: int) -> StructValue:
        return LeaderAndIsrResponse.LeaderAndIsrPartitionError(
            topic_name=tp.topic, partition_index=tp.partition, error_code=int(code)
        )

    return LeaderAndIsrResponse(
        error_code=int(error),
        partition_errors=[partition_error(tp, c) for tp, c in sorted(errors.items())],
        topics=[
            LeaderAndIsrResponse.LeaderAndIsrTopicError(
                topic_id=topic_ids.get(topic, NULL_UUID),
                partition_errors=[partition_error(tp, errors[tp]) for tp in tps],
            )
            for topic, tps in sorted(_by_topic(sorted(errors), lambda tp: tp).items())
        ],
    )


def stop_replica_response(error: int, errors: dict[TopicPartition, int]) -> Message:
    return StopReplicaResponse(
        error_code=int(error),
        partition_errors=[
            StopReplicaResponse.StopReplicaPartitionError(
                topic_name=tp.topic, partition_index=tp.partition, error_code=int(c)
            )
            for tp, c in sorted(errors.items())
        ],
    )


def update_metadata_response(error: int) -> Message:
    return UpdateMetadataResponse(error_code=int(error))


def response_errors(api_key: ApiKey, response: Message, request: ControllerRequest) -> object:
    """What the controller's ``on_response`` gets: per-partition error codes (a top-level
    error applied to every partition of the request) or UpdateMetadata's error code."""
    if api_key is ApiKey.UPDATE_METADATA:
        return response.error_code
    partitions = [s.partition for s in request.partitions]
    if response.error_code:
        return {tp: response.error_code for tp in partitions}
    out: dict[TopicPartition, int] = {}
    if api_key is ApiKey.STOP_REPLICA:
        for e in response.partition_errors:
            out[TopicPartition(e.topic_name, e.partition_index)] = e.error_code
        return out
    names = {v: k for k, v in getattr(request, "topic_ids", {}).items()}
    for e in response.partition_errors or ():
        out[TopicPartition(e.topic_name, e.partition_index)] = e.error_code
    for t in response.topics or ():
        name = names.get(t.topic_id)
        for e in t.partition_errors:
            if name is not None:
                out[TopicPartition(name, e.partition_index)] = e.error_code
    return out
