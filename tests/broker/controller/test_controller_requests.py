"""The controller's requests through Kafka's wire format and back, at every version."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.broker_info import BrokerInfo, EndPoint
from broker_py.controller.controller_request_batch import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequestData,
    StopReplicaPartitionState,
    StopReplicaRequestData,
    UpdateMetadataPartitionState,
    UpdateMetadataRequestData,
)
from broker_py.controller.controller_requests import (
    leader_and_isr_from_wire,
    leader_and_isr_response,
    response_errors,
    stop_replica_from_wire,
    stop_replica_response,
    to_wire,
    update_metadata_from_wire,
)
from broker_py.controller.controller_store import BrokerRegistration
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.frame import decode_request, encode_request
from logstore.protocol.headers import RequestHeader
from logstore.protocol.messages.controller import LeaderAndIsrResponse, StopReplicaResponse

TP = TopicPartition
TID = uuid.UUID(int=7)
BROKERS = (
    BrokerRegistration(
        BrokerInfo(
            1,
            [
                EndPoint("CLIENT", "127.0.0.1", 9001, "PLAINTEXT"),
                EndPoint("INTERNAL", "127.0.0.1", 9101, "SSL"),
            ],
            "r1",
        ),
        10,
    ),
    BrokerRegistration(BrokerInfo(2, [EndPoint("PLAINTEXT", "127.0.0.1", 9002, "PLAINTEXT")]), 11),
)


def _wire(api_key: ApiKey, message, version: int):
    frame = encode_request(
        RequestHeader(
            api_key=api_key,
            api_version=version,
            correlation_id=5,
            client_id="broker-1-controller-to-broker-2",
        ),
        message,
    )
    return decode_request(frame[4:]).body


@pytest.mark.parametrize(
    "version", range(ApiKey.LEADER_AND_ISR.min_version, ApiKey.LEADER_AND_ISR.max_version + 1)
)
def test_leader_and_isr(version):
    states = (
        LeaderAndIsrPartitionState(TP("t", 0), 3, 1, 4, (1, 2), 9, (1, 2, 3), (3,), (), True, 0),
        LeaderAndIsrPartitionState(TP("u", 2), 3, 2, 0, (2,), 0, (2,), (), (), False, 0),
    )
    data = LeaderAndIsrRequestData(1, 3, 77, states, {"t": TID, "u": uuid.UUID(int=8)}, BROKERS[:1])
    api_key, message = to_wire(data)
    back = leader_and_isr_from_wire(_wire(api_key, message, version), version)
    assert back.controller_id == 1 and back.controller_epoch == 3
    assert back.broker_epoch == (77 if version >= 2 else -1)
    # adding/removing replicas exist from v3, is_new from v1
    expect = tuple(
        s
        if version >= 3
        else dataclasses.replace(s, adding=(), removing=(), is_new=s.is_new and version >= 1)
        for s in states
    )
    assert back.partitions == expect
    assert back.topic_ids == ({"t": TID, "u": uuid.UUID(int=8)} if version >= 5 else {})
    assert [b.id for b in back.live_leaders] == [1]


@pytest.mark.parametrize(
    "version", range(ApiKey.UPDATE_METADATA.min_version, ApiKey.UPDATE_METADATA.max_version + 1)
)
def test_update_metadata(version):
    states = (UpdateMetadataPartitionState(TP("t", 1), 3, 2, 5, (2, 1), 4, (1, 2), (1,)),)
    data = UpdateMetadataRequestData(2, 3, 12, states, {"t": TID}, BROKERS)
    api_key, message = to_wire(data)
    back = update_metadata_from_wire(_wire(api_key, message, version), version)
    assert (
        back.partitions[0].leader == 2
        and back.partitions[0].isr == (2, 1)
        and back.partitions[0].partition_epoch == 4
    )
    assert back.partitions[0].offline_replicas == ((1,) if version >= 4 else ())
    assert [b.id for b in back.live_brokers] == [1, 2]
    first = back.live_brokers[0].info
    if version >= 3:
        assert [(e.listener_name, e.port, e.security_protocol) for e in first.endpoints] == [
            ("CLIENT", 9001, "PLAINTEXT"),
            ("INTERNAL", 9101, "SSL"),
        ]
    if version >= 2:
        assert first.rack == "r1"
    assert back.topic_ids == ({"t": TID} if version >= 7 else {})


@pytest.mark.parametrize(
    "version", range(ApiKey.STOP_REPLICA.min_version, ApiKey.STOP_REPLICA.max_version + 1)
)
def test_stop_replica(version):
    states = (
        StopReplicaPartitionState(TP("t", 0), -2, True),
        StopReplicaPartitionState(TP("t", 1), -2, True),
    )
    data = StopReplicaRequestData(1, 3, 5, states)
    api_key, message = to_wire(data)
    back = stop_replica_from_wire(_wire(api_key, message, version), version)
    assert [(s.partition, s.delete) for s in back.partitions] == [
        (s.partition, s.delete) for s in states
    ]
    assert [s.leader_epoch for s in back.partitions] == ([-2, -2] if version >= 3 else [-1, -1])


def test_responses_map_back_to_partition_errors():
    request = LeaderAndIsrRequestData(
        1,
        3,
        5,
        (LeaderAndIsrPartitionState(TP("t", 0), 3, 1, 0, (1,), 0, (1,), (), (), True),),
        {"t": TID},
        (),
    )
    response = leader_and_isr_response(0, {TP("t", 0): 0}, {"t": TID})
    assert isinstance(response, LeaderAndIsrResponse)
    assert response_errors(ApiKey.LEADER_AND_ISR, response, request) == {TP("t", 0): 0}
    whole = leader_and_isr_response(11, {}, {})
    assert response_errors(ApiKey.LEADER_AND_ISR, whole, request) == {TP("t", 0): 11}
    stop = StopReplicaRequestData(1, 3, 5, (StopReplicaPartitionState(TP("t", 0), -2, True),))
    sr = stop_replica_response(0, {TP("t", 0): 56})
    assert isinstance(sr, StopReplicaResponse)
    assert response_errors(ApiKey.STOP_REPLICA, sr, stop) == {TP("t", 0): 56}


def test_live_leaders_are_given_at_the_inter_broker_listener():
    data = LeaderAndIsrRequestData(1, 3, 5, (), {}, BROKERS[:1])
    _, message = to_wire(data, "INTERNAL")
    assert [(b.broker_id, b.port) for b in message.live_leaders] == [(1, 9101)]
    _, message = to_wire(data)
    assert [(b.broker_id, b.port) for b in message.live_leaders] == [(1, 9001)]
