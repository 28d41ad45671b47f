"""The controller APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown,
AlterPartition): every version round-trips realistic values, and golden bytes
written out field by field from Kafka 3.9's message JSON pin the layouts."""

from __future__ import annotations

import uuid

import pytest

from logstore.protocol import (
    ApiKey,
    Request,
    RequestDecoder,
    RequestHeader,
    decode_response,
    encode_request,
    encode_response,
)
from logstore.protocol.messages.controller import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from logstore.protocol.schema import Message, StructValue

from . import fixtures as fx
from .fixtures import NO_TAGS, i8, i16, i32, i64

ORDERS_ID = uuid.UUID("6f1c1c53-7a54-4d2c-9a3e-0b5f2e4c8d11")
PAYMENTS_ID = uuid.UUID("0a9e3b7c-2f41-4e6a-8c5d-93b1d0f7e264")
BROKER_EPOCH = 4294967340  # a ZooKeeper czxid, as Kafka uses for broker epochs


# --------------------------------------------------------------------------
# Realistic messages with every field of every version set


def _lai_state(
    topic: str, index: int, leader: int, **kw
) -> LeaderAndIsrRequest.LeaderAndIsrPartitionState:
    follower = 2 if leader != 2 else 3
    return LeaderAndIsrRequest.LeaderAndIsrPartitionState(
        topic_name=topic,
        partition_index=index,
        controller_epoch=5,
        leader=leader,
        leader_epoch=12,
        isr=[leader, follower],
        partition_epoch=31,
        replicas=[leader, follower, 4],
        **kw,
    )


def leader_and_isr_request() -> LeaderAndIsrRequest:
    orders = [
        _lai_state("orders", 0, 1, adding_replicas=[4], removing_replicas=[3], is_new=True),
        _lai_state("orders", 1, 2, leader_recovery_state=1),
    ]
    payments = [_lai_state("payments", 0, 3)]
    S = LeaderAndIsrRequest
    return S(
        controller_id=1,
        is_kraft_controller=True,
        controller_epoch=5,
        broker_epoch=BROKER_EPOCH,
        type=1,
        ungrouped_partition_states=orders + payments,
        topic_states=[
            S.LeaderAndIsrTopicState(
                topic_name="orders", topic_id=ORDERS_ID, partition_states=orders
            ),
            S.LeaderAndIsrTopicState(
                topic_name="payments", topic_id=PAYMENTS_ID, partition_states=payments
            ),
        ],
        live_leaders=[
            S.LeaderAndIsrLiveLeader(broker_id=b, host_name=f"broker-{b}.example", port=9092)
            for b in (1, 2, 3)
        ],
    )


def leader_and_isr_response() -> LeaderAndIsrResponse:
    R = LeaderAndIsrResponse
    orders = [
        R.LeaderAndIsrPartitionError(topic_name="orders", partition_index=0, error_code=0),
        R.LeaderAndIsrPartitionError(
            topic_name="orders", partition_index=1, error_code=56
        ),  # KAFKA_STORAGE_ERROR
    ]
    return R(
        error_code=0,
        partition_errors=orders,
        topics=[R.LeaderAndIsrTopicError(topic_id=ORDERS_ID, partition_errors=orders)],
    )


def stop_replica_request() -> StopReplicaRequest:
    S = StopReplicaRequest
    return S(
        controller_id=1,
        is_kraft_controller=True,
        controller_epoch=5,
        broker_epoch=BROKER_EPOCH,
        delete_partitions=True,
        ungrouped_partitions=[
            S.StopReplicaPartitionV0(topic_name="orders", partition_index=0),
            S.StopReplicaPartitionV0(topic_name="orders", partition_index=2),
        ],
        topics=[S.StopReplicaTopicV1(name="orders", partition_indexes=[0, 2])],
        topic_states=[
            S.StopReplicaTopicState(
                topic_name="orders",
                partition_states=[
                    S.StopReplicaPartitionState(
                        partition_index=0, leader_epoch=12, delete_partition=True
                    ),
                    S.StopReplicaPartitionState(
                        partition_index=2, leader_epoch=-1, delete_partition=False
                    ),
                ],
            ),
        ],
    )


def stop_replica_response() -> StopReplicaResponse:
    R = StopReplicaResponse
    return R(
        error_code=0,
        partition_errors=[
            R.StopReplicaPartitionError(topic_name="orders", partition_index=0, error_code=0),
            R.StopReplicaPartitionError(
                topic_name="orders", partition_index=2, error_code=74
            ),  # FENCED_LEADER_EPOCH
        ],
    )


def _um_state(
    topic: str, index: int, leader: int
) -> UpdateMetadataRequest.UpdateMetadataPartitionState:
    return UpdateMetadataRequest.UpdateMetadataPartitionState(
        topic_name=topic,
        partition_index=index,
        controller_epoch=5,
        leader=leader,
        leader_epoch=7,
        isr=[leader],
        zk_version=18,
        replicas=[leader, 3],
        offline_replicas=[3],
    )


def update_metadata_request() -> UpdateMetadataRequest:
    S = UpdateMetadataRequest
    orders = [_um_state("orders", 0, 1), _um_state("orders", 1, 2)]

    def broker(b: int, rack: str | None) -> UpdateMetadataRequest.UpdateMetadataBroker:
        return S.UpdateMetadataBroker(
            id=b,
            v0_host=f"broker-{b}.example",
            v0_port=9092,
            endpoints=[
                S.UpdateMetadataEndpoint(
                    port=9092, host=f"broker-{b}.example", listener="PLAINTEXT", security_protocol=0
                ),
                S.UpdateMetadataEndpoint(
                    port=9093,
                    host=f"broker-{b}.example",
                    listener="REPLICATION",
                    security_protocol=1,
                ),
            ],
            rack=rack,
        )

    return S(
        controller_id=1,
        is_kraft_controller=True,
        type=2,
        controller_epoch=5,
        broker_epoch=BROKER_EPOCH,
        ungrouped_partition_states=orders,
        topic_states=[
            S.UpdateMetadataTopicState(
                topic_name="orders", topic_id=ORDERS_ID, partition_states=orders
            )
        ],
        live_brokers=[broker(1, "rack-a"), broker(2, None)],
    )


def update_metadata_response() -> UpdateMetadataResponse:
    return UpdateMetadataResponse(error_code=11)  # STALE_CONTROLLER_EPOCH


def controlled_shutdown_request() -> ControlledShutdownRequest:
    return ControlledShutdownRequest(broker_id=2, broker_epoch=BROKER_EPOCH)


def controlled_shutdown_response() -> ControlledShutdownResponse:
    R = ControlledShutdownResponse
    return R(
        error_code=0,
        remaining_partitions=[
            R.RemainingPartition(topic_name="orders", partition_index=1),
            R.RemainingPartition(topic_name="payments", partition_index=0),
        ],
    )


def alter_partition_request() -> AlterPartitionRequest:
    S = AlterPartitionRequest
    return S(
        broker_id=1,
        broker_epoch=BROKER_EPOCH,
        topics=[
            S.TopicData(
                topic_name="orders",
                topic_id=ORDERS_ID,
                partitions=[
                    S.PartitionData(
                        partition_index=0,
                        leader_epoch=12,
                        new_isr=[1, 2],
                        new_isr_with_epochs=[
                            S.BrokerState(broker_id=1, broker_epoch=BROKER_EPOCH),
                            S.BrokerState(broker_id=2, broker_epoch=-1),
                        ],
                        leader_recovery_state=1,
                        partition_epoch=31,
                    ),
                ],
            ),
        ],
    )


def alter_partition_response() -> AlterPartitionResponse:
    R = AlterPartitionResponse
    return R(
        throttle_time_ms=0,
        error_code=0,
        topics=[
            R.TopicData(
                topic_name="orders",
                topic_id=ORDERS_ID,
                partitions=[
                    R.PartitionData(
                        partition_index=0,
                        error_code=0,
                        leader_id=1,
                        leader_epoch=12,
                        isr=[1, 2],
                        leader_recovery_state=1,
                        partition_epoch=32,
                    ),
                    R.PartitionData(
                        partition_index=1,
                        error_code=108,
                        leader_id=2,
                        leader_epoch=3,
                        isr=[2],
                        partition_epoch=9,
                    ),  # NEW_LEADER_ELECTED
                ],
            ),
        ],
    )


BUILDERS = [
    leader_and_isr_request,
    leader_and_isr_response,
    stop_replica_request,
    stop_replica_response,
    update_metadata_request,
    update_metadata_response,
    controlled_shutdown_request,
    controlled_shutdown_response,
    alter_partition_request,
    alter_partition_response,
]


def at_version(value: StructValue, version: int) -> StructValue:
    """A copy of ``value`` with each field ``version`` does not carry set to its default."""
    kwargs = {}
    for f in value.SCHEMA.fields:
        v = getattr(value, f.name)
        if version not in f.versions:
            v = f.default
        elif isinstance(v, StructValue):
            v = at_version(v, version)
        elif isinstance(v, list):
            v = [at_version(x, version) if isinstance(x, StructValue) else x for x in v]
        kwargs[f.name] = v
    return type(value)(**kwargs)


CASES = [
    pytest.param(build, version, id=f"{build.__name__}-v{version}")
    for build in BUILDERS
    for key in [build().API_KEY]
    for version in range(key.min_version, key.max_version + 1)
]


@pytest.mark.parametrize(("build", "version"), CASES)
def test_round_trip(build, version: int) -> None:
    message = at_version(build(), version)
    cls = type(message)
    encoded = message.encode(version)
    assert cls.decode(encoded, version) == message
    assert cls.decode(encoded, version).encode(version) == encoded
    key = cls.API_KEY
    if cls.KIND == "request":
        # Request header v0 (ControlledShutdown v0 alone) has no client id.
        client_id = None if key.request_header_version(version) == 0 else "1"
        header = RequestHeader(
            api_key=key, api_version=version, correlation_id=40 + version, client_id=client_id
        )
        decoder = RequestDecoder()
        decoder.receive_data(encode_request(header, message))
        event = decoder.next_request()
        assert isinstance(event, Request)
        assert (event.header, event.body) == (header, message)
    else:
        frame = encode_response(40 + version, key, version, message)
        assert decode_response(frame[4:], key, version) == (40 + version, message)


def test_every_version_of_every_controller_api_is_covered() -> None:
    keys = {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.ALTER_PARTITION,
    }
    covered = {(build().API_KEY, build().KIND) for build in BUILDERS}
    assert covered == {(k, kind) for k in keys for kind in ("request", "response")}
    ranges = {k: (k.min_version, k.max_version, k.first_flexible) for k in keys}
    assert ranges == {
        ApiKey.LEADER_AND_ISR: (0, 7, 4),
        ApiKey.STOP_REPLICA: (0, 4, 2),
        ApiKey.UPDATE_METADATA: (0, 8, 6),
        ApiKey.CONTROLLED_SHUTDOWN: (0, 3, 3),  # v0 travels with request header v0
        ApiKey.ALTER_PARTITION: (0, 3, 0),
    }


def test_old_versions_leave_newer_fields_at_kafkas_defaults() -> None:
    body = LeaderAndIsrRequest.decode(leader_and_isr_request().encode(1), 1)
    assert (body.broker_epoch, body.type, body.is_kraft_controller, body.topic_states) == (
        -1,
        0,
        False,
        [],
    )
    state = body.ungrouped_partition_states[0]
    assert (state.topic_name, state.is_new, state.adding_replicas, state.leader_recovery_state) == (
        "orders",
        True,
        [],
        0,
    )
    body = UpdateMetadataRequest.decode(update_metadata_request().encode(1), 1)
    assert body.live_brokers[0].rack == ""  # Kafka's default for a string; null only when sent
    assert body.live_brokers[0].endpoints[0].listener == ""
    body = AlterPartitionRequest.decode(alter_partition_request().encode(2), 2)
    assert body.topics[0].topic_name == "" and body.topics[0].topic_id == ORDERS_ID
    assert body.topics[0].partitions[0].new_isr_with_epochs == []


# --------------------------------------------------------------------------
# Golden bytes, field by field in Kafka 3.9's JSON order.  Flexible versions:
# compact strings/arrays (unsigned varint length+1) and a tagged-field section
# (NO_TAGS, one 0x00 byte) closing every struct.


def test_leader_and_isr_v7_request_bytes() -> None:
    S = LeaderAndIsrRequest
    body = S(
        controller_id=1,
        is_kraft_controller=False,
        controller_epoch=5,
        broker_epoch=BROKER_EPOCH,
        type=1,
        topic_states=[
            S.LeaderAndIsrTopicState(
                topic_name="orders",
                topic_id=ORDERS_ID,
                partition_states=[
                    S.LeaderAndIsrPartitionState(
                        partition_index=0,
                        controller_epoch=5,
                        leader=1,
                        leader_epoch=12,
                        isr=[1, 2],
                        partition_epoch=31,
                        replicas=[1, 2, 3],
                        is_new=True,
                    ),
                ],
            )
        ],
        live_leaders=[S.LeaderAndIsrLiveLeader(broker_id=1, host_name="b1", port=9092)],
    )
    partition = (
        i32(0)  # PartitionIndex (TopicName is v0-1 only)
        + i32(5)  # ControllerEpoch
        + i32(1)  # Leader
        + i32(12)  # LeaderEpoch
        + b"\x03"
        + i32(1)
        + i32(2)  # Isr: 2 elements, compact count 3
        + i32(31)  # PartitionEpoch
        + b"\x04"
        + i32(1)
        + i32(2)
        + i32(3)  # Replicas
        + b"\x01"  # AddingReplicas: empty
        + b"\x01"  # RemovingReplicas: empty
        + b"\x01"  # IsNew: true
        + b"\x00"  # LeaderRecoveryState: 0
        + NO_TAGS
    )
    expected = (
        i32(1)  # ControllerId
        + b"\x00"  # isKRaftController: false
        + i32(5)  # ControllerEpoch
        + bytes.fromhex("000000010000002c")  # BrokerEpoch 4294967340
        + b"\x01"  # Type: 1 (incremental)
        # UngroupedPartitionStates: v0-1 only
        + b"\x02"  # TopicStates: 1 element
        + b"\x07orders"  # TopicName: compact length 6+1
        + ORDERS_ID.bytes  # TopicId: 16 bytes
        + b"\x02"
        + partition  # PartitionStates: 1 element
        + NO_TAGS  # (LeaderAndIsrTopicState)
        + b"\x02"  # LiveLeaders: 1 element
        + i32(1)
        + b"\x03b1"
        + i32(9092)
        + NO_TAGS  # BrokerId, HostName, Port
        + NO_TAGS  # (request)
    )
    assert body.encode(7) == expected
    assert S.decode(expected, 7) == body


def test_leader_and_isr_v7_response_bytes() -> None:
    R = LeaderAndIsrResponse
    body = R(
        error_code=0,
        topics=[
            R.LeaderAndIsrTopicError(
                topic_id=ORDERS_ID,
                partition_errors=[
                    R.LeaderAndIsrPartitionError(partition_index=0, error_code=0),
                    R.LeaderAndIsrPartitionError(partition_index=1, error_code=56),
                ],
            )
        ],
    )
    expected = (
        i16(0)  # ErrorCode
        # PartitionErrors: v0-4 only
        + b"\x02"  # Topics: 1 element
        + ORDERS_ID.bytes  # TopicId
        + b"\x03"  # PartitionErrors: 2 elements (TopicName is v0-4 only)
        + i32(0)
        + i16(0)
        + NO_TAGS  # PartitionIndex, ErrorCode
        + i32(1)
        + i16(56)
        + NO_TAGS  # KAFKA_STORAGE_ERROR
        + NO_TAGS  # (LeaderAndIsrTopicError)
        + NO_TAGS  # (response)
    )
    assert body.encode(7) == expected
    assert R.decode(expected, 7) == body


def test_leader_and_isr_v1_request_bytes() -> None:
    """Non-flexible, partitions ungrouped, each with its topic name."""
    S = LeaderAndIsrRequest
    body = S(
        controller_id=1,
        controller_epoch=5,
        ungrouped_partition_states=[
            S.LeaderAndIsrPartitionState(
                topic_name="orders",
                partition_index=0,
                controller_epoch=5,
                leader=1,
                leader_epoch=12,
                isr=[1],
                partition_epoch=31,
                replicas=[1],
            ),
        ],
    )
    expected = (
        i32(1)
        + i32(5)  # ControllerId, ControllerEpoch
        + i32(1)  # UngroupedPartitionStates: 1 element (int32 count)
        + i16(6)
        + b"orders"  # TopicName: int16 length
        + i32(0)
        + i32(5)
        + i32(1)
        + i32(12)  # PartitionIndex, ControllerEpoch, Leader, LeaderEpoch
        + i32(1)
        + i32(1)  # Isr
        + i32(31)  # PartitionEpoch
        + i32(1)
        + i32(1)  # Replicas
        + b"\x00"  # IsNew: false (v1+)
        + i32(0)  # LiveLeaders: empty
    )
    assert body.encode(1) == expected
    assert S.decode(expected, 1) == body


def test_update_metadata_v8_request_bytes() -> None:
    S = UpdateMetadataRequest
    body = S(
        controller_id=1,
        is_kraft_controller=True,
        type=2,
        controller_epoch=5,
        broker_epoch=BROKER_EPOCH,
        topic_states=[
            S.UpdateMetadataTopicState(
                topic_name="orders",
                topic_id=ORDERS_ID,
                partition_states=[
                    S.UpdateMetadataPartitionState(
                        partition_index=0,
                        controller_epoch=5,
                        leader=1,
                        leader_epoch=7,
                        isr=[1],
                        zk_version=18,
                        replicas=[1, 3],
                        offline_replicas=[3],
                    ),
                ],
            )
        ],
        live_brokers=[
            S.UpdateMetadataBroker(
                id=1,
                endpoints=[
                    S.UpdateMetadataEndpoint(
                        port=9092, host="b1", listener="PLAINTEXT", security_protocol=0
                    )
                ],
                rack="r1",
            ),
            S.UpdateMetadataBroker(id=2, endpoints=[], rack=None),
        ],
    )
    partition = (
        i32(0)  # PartitionIndex (TopicName is v0-4 only)
        + i32(5)  # ControllerEpoch
        + i32(1)  # Leader
        + i32(7)  # LeaderEpoch
        + b"\x02"
        + i32(1)  # Isr
        + i32(18)  # ZkVersion
        + b"\x03"
        + i32(1)
        + i32(3)  # Replicas
        + b"\x02"
        + i32(3)  # OfflineReplicas
        + NO_TAGS
    )
    expected = (
        i32(1)  # ControllerId
        + b"\x01"  # isKRaftController: true
        # Type: tagged (tag 0), written in the closing tagged section
        + i32(5)  # ControllerEpoch
        + i64(BROKER_EPOCH)  # BrokerEpoch
        # UngroupedPartitionStates: v0-4 only
        + b"\x02"  # TopicStates: 1 element
        + b"\x07orders"
        + ORDERS_ID.bytes  # TopicName, TopicId (v7+)
        + b"\x02"
        + partition
        + NO_TAGS  # PartitionStates
        + b"\x03"  # LiveBrokers: 2 elements
        + i32(1)  # Id (V0Host, V0Port: v0 only)
        + b"\x02"  # Endpoints: 1 element
        + i32(9092)
        + b"\x03b1"
        + b"\x0aPLAINTEXT"
        + i16(0)
        + NO_TAGS  # Port, Host, Listener, SecurityProtocol
        + b"\x03r1"  # Rack
        + NO_TAGS
        + i32(2)
        + b"\x01"
        + b"\x00"
        + NO_TAGS  # Id, Endpoints: empty, Rack: null
        + b"\x01"  # tagged fields: 1
        + b"\x00"
        + b"\x01"
        + b"\x02"  # tag 0 (Type), size 1, value 2 (full)
    )
    assert body.encode(8) == expected
    assert S.decode(expected, 8) == body
    # Type at its default (0) is left out of the tagged section.
    body.type = 0
    assert body.encode(8) == expected[:-4] + NO_TAGS


def test_update_metadata_v8_response_bytes() -> None:
    assert UpdateMetadataResponse(error_code=11).encode(8) == i16(11) + NO_TAGS
    assert UpdateMetadataResponse.decode(i16(0) + NO_TAGS, 8) == UpdateMetadataResponse()


def test_update_metadata_v0_request_bytes() -> None:
    """v0: one host and port per broker, no endpoints, no rack."""
    S = UpdateMetadataRequest
    body = S(
        controller_id=1,
        controller_epoch=5,
        live_brokers=[S.UpdateMetadataBroker(id=1, v0_host="b1", v0_port=9092)],
    )
    expected = (
        i32(1)
        + i32(5)  # ControllerId, ControllerEpoch
        + i32(0)  # UngroupedPartitionStates: empty
        + i32(1)
        + i32(1)
        + i16(2)
        + b"b1"
        + i32(9092)  # LiveBrokers: Id, V0Host, V0Port
    )
    assert body.encode(0) == expected
    assert S.decode(expected, 0) == body


def test_stop_replica_v4_request_bytes() -> None:
    S = StopReplicaRequest
    body = S(
        controller_id=1,
        is_kraft_controller=False,
        controller_epoch=5,
        broker_epoch=BROKER_EPOCH,
        topic_states=[
            S.StopReplicaTopicState(
                topic_name="orders",
                partition_states=[
                    S.StopReplicaPartitionState(
                        partition_index=0, leader_epoch=12, delete_partition=True
                    ),
                    S.StopReplicaPartitionState(
                        partition_index=2, leader_epoch=-1, delete_partition=False
                    ),
                ],
            ),
        ],
    )
    expected = (
        i32(1)  # ControllerId
        + b"\x00"  # isKRaftController
        + i32(5)  # ControllerEpoch
        + i64(BROKER_EPOCH)  # BrokerEpoch
        # DeletePartitions (0-2), UngroupedPartitions (0), Topics (1-2): absent
        + b"\x02"  # TopicStates: 1 element
        + b"\x07orders"  # TopicName
        + b"\x03"  # PartitionStates: 2 elements
        + i32(0)
        + i32(12)
        + b"\x01"
        + NO_TAGS  # PartitionIndex, LeaderEpoch, DeletePartition
        + i32(2)
        + i32(-1)
        + b"\x00"
        + NO_TAGS  # -1: no epoch check; keep the log
        + NO_TAGS  # (StopReplicaTopicState)
        + NO_TAGS  # (request)
    )
    assert body.encode(4) == expected
    assert S.decode(expected, 4) == body


def test_stop_replica_v4_response_bytes() -> None:
    body = stop_replica_response()
    expected = (
        i16(0)  # ErrorCode
        + b"\x03"  # PartitionErrors: 2 elements
        + b"\x07orders"
        + i32(0)
        + i16(0)
        + NO_TAGS  # TopicName, PartitionIndex, ErrorCode
        + b"\x07orders"
        + i32(2)
        + i16(74)
        + NO_TAGS  # FENCED_LEADER_EPOCH
        + NO_TAGS
    )
    assert body.encode(4) == expected
    assert StopReplicaResponse.decode(expected, 4) == body


def test_controlled_shutdown_v3_bytes() -> None:
    request = ControlledShutdownRequest(broker_id=2, broker_epoch=BROKER_EPOCH)
    expected = bytes.fromhex(
        "00000002"  # BrokerId 2
        "000000010000002c"  # BrokerEpoch 4294967340
        "00"  # no tagged fields
    )
    assert request.encode(3) == expected
    assert ControlledShutdownRequest.decode(expected, 3) == request

    response = controlled_shutdown_response()
    expected = (
        i16(0)  # ErrorCode
        + b"\x03"  # RemainingPartitions: 2 elements
        + b"\x07orders"
        + i32(1)
        + NO_TAGS  # TopicName, PartitionIndex
        + b"\x09payments"
        + i32(0)
        + NO_TAGS
        + NO_TAGS
    )
    assert response.encode(3) == expected
    assert ControlledShutdownResponse.decode(expected, 3) == response


def test_controlled_shutdown_v3_frames() -> None:
    """v3 requests use request header v2 (client id keeps its int16 length), responses header v1."""
    body = ControlledShutdownRequest(broker_id=2, broker_epoch=BROKER_EPOCH)
    header = RequestHeader(
        api_key=ApiKey.CONTROLLED_SHUTDOWN, api_version=3, correlation_id=9, client_id="2"
    )
    frame = fx.frame(
        i16(7)
        + i16(3)
        + i32(9)
        + i16(1)
        + b"2"
        + NO_TAGS  # header v2
        + i32(2)
        + i64(BROKER_EPOCH)
        + NO_TAGS  # body
    )
    assert encode_request(header, body) == frame
    response = ControlledShutdownResponse(error_code=0)
    encoded = encode_response(9, ApiKey.CONTROLLED_SHUTDOWN, 3, response)
    assert encoded == fx.frame(i32(9) + NO_TAGS + i16(0) + b"\x01" + NO_TAGS)


def test_controlled_shutdown_v0_travels_with_request_header_v0() -> None:
    """v0's header has no client id: api key, version and correlation id, then the body."""
    frame = fx.frame(i16(7) + i16(0) + i32(3) + i32(2))  # header v0, BrokerId 2
    decoder = RequestDecoder()
    decoder.receive_data(frame)
    event = decoder.next_request()
    assert isinstance(event, Request)
    assert (event.api_version, event.correlation_id, event.header.client_id) == (0, 3, None)
    assert event.body.broker_id == 2
    assert encode_request(event.header, event.body) == frame


def test_alter_partition_v3_request_bytes() -> None:
    S = AlterPartitionRequest
    body = S(
        broker_id=1,
        broker_epoch=BROKER_EPOCH,
        topics=[
            S.TopicData(
                topic_id=ORDERS_ID,
                partitions=[
                    S.PartitionData(
                        partition_index=0,
                        leader_epoch=12,
                        partition_epoch=31,
                        new_isr_with_epochs=[
                            S.BrokerState(broker_id=1, broker_epoch=BROKER_EPOCH),
                            S.BrokerState(broker_id=2, broker_epoch=-1),
                        ],
                    ),
                ],
            )
        ],
    )
    expected = (
        i32(1)  # BrokerId
        + i64(BROKER_EPOCH)  # BrokerEpoch
        + b"\x02"  # Topics: 1 element
        + ORDERS_ID.bytes  # TopicId (TopicName is v0-1 only)
        + b"\x02"  # Partitions: 1 element
        + i32(0)  # PartitionIndex
        + i32(12)  # LeaderEpoch
        # NewIsr: v0-2 only
        + b"\x03"  # NewIsrWithEpochs: 2 elements
        + i32(1)
        + i64(BROKER_EPOCH)
        + NO_TAGS  # BrokerId, BrokerEpoch
        + i32(2)
        + i64(-1)
        + NO_TAGS  # epoch unknown
        + i8(0)  # LeaderRecoveryState
        + i32(31)  # PartitionEpoch
        + NO_TAGS  # (PartitionData)
        + NO_TAGS  # (TopicData)
        + NO_TAGS  # (request)
    )
    assert body.encode(3) == expected
    assert S.decode(expected, 3) == body


def test_alter_partition_v3_response_bytes() -> None:
    R = AlterPartitionResponse
    body = R(
        throttle_time_ms=0,
        error_code=0,
        topics=[
            R.TopicData(
                topic_id=ORDERS_ID,
                partitions=[
                    R.PartitionData(
                        partition_index=0,
                        error_code=0,
                        leader_id=1,
                        leader_epoch=12,
                        isr=[1, 2],
                        leader_recovery_state=0,
                        partition_epoch=32,
                    ),
                ],
            )
        ],
    )
    expected = (
        i32(0)  # ThrottleTimeMs
        + i16(0)  # ErrorCode
        + b"\x02"  # Topics: 1 element
        + ORDERS_ID.bytes  # TopicId
        + b"\x02"  # Partitions: 1 element
        + i32(0)  # PartitionIndex
        + i16(0)  # ErrorCode
        + i32(1)  # LeaderId
        + i32(12)  # LeaderEpoch
        + b"\x03"
        + i32(1)
        + i32(2)  # Isr
        + i8(0)  # LeaderRecoveryState
        + i32(32)  # PartitionEpoch
        + NO_TAGS
        + NO_TAGS
        + NO_TAGS  # (PartitionData, TopicData, response)
    )
    assert body.encode(3) == expected
    assert R.decode(expected, 3) == body


def test_alter_partition_v0_is_flexible_with_names() -> None:
    """Flexible from v0: compact encodings, header v2; topics by name and NewIsr up to v1."""
    S = AlterPartitionRequest
    body = S(
        broker_id=1,
        broker_epoch=BROKER_EPOCH,
        topics=[
            S.TopicData(
                topic_name="orders",
                partitions=[
                    S.PartitionData(
                        partition_index=0, leader_epoch=12, new_isr=[1, 2], partition_epoch=31
                    ),
                ],
            )
        ],
    )
    expected = (
        i32(1)
        + i64(BROKER_EPOCH)  # BrokerId, BrokerEpoch
        + b"\x02"
        + b"\x07orders"  # Topics: 1 element; TopicName
        + b"\x02"
        + i32(0)
        + i32(12)  # Partitions: 1 element; PartitionIndex, LeaderEpoch
        + b"\x03"
        + i32(1)
        + i32(2)  # NewIsr
        + i32(31)  # PartitionEpoch (LeaderRecoveryState is v1+)
        + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )
    assert body.encode(0) == expected
    header = RequestHeader(
        api_key=ApiKey.ALTER_PARTITION, api_version=0, correlation_id=1, client_id="1"
    )
    assert encode_request(header, body) == fx.frame(fx.request_header_v2(56, 0, 1, "1") + expected)


def test_message_classes_are_registered() -> None:
    from logstore.protocol.messages import request_class, response_class

    for build in BUILDERS:
        cls = type(build())
        lookup = request_class if cls.KIND == "request" else response_class
        assert lookup(cls.API_KEY) is cls
        assert issubclass(cls, Message)
