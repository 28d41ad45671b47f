"""Kafka's admin rules and old request versions on the wire, against a real broker:

- DeleteTopics refuses only the coordinators' topics; ``__events`` is a user topic,
  created, flagged not internal by Metadata, and deleted;
- CreatePartitions needs exactly one assignment per added partition
  (INVALID_REPLICA_ASSIGNMENT with Kafka's message);
- Metadata that auto-creates a topic answers LEADER_NOT_AVAILABLE first, and creates the
  coordinators' topics as their coordinators do;
- a request at a version the broker does not serve gets UNSUPPORTED_VERSION and the
  connection stays open;
- ListOffsets v0, OffsetCommit v0/v1 with OffsetFetch v0, and what message formats
  v0/v1 cannot carry (transactional writes, zstd) answered with Kafka's codes.
"""

from __future__ import annotations

import socket
import struct

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, ResourceType

from logstore.protocol import ApiKey, RequestHeader, encode_request
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages import request_class
from tests.integration.clients import create_topic, read_response, topic_name, wire_call
from tests.support.waiting import wait_until

Produce = request_class(ApiKey.PRODUCE)
Fetch = request_class(ApiKey.FETCH)
Metadata = request_class(ApiKey.METADATA)
ListOffsets = request_class(ApiKey.LIST_OFFSETS)
OffsetCommit = request_class(ApiKey.OFFSET_COMMIT)
OffsetFetch = request_class(ApiKey.OFFSET_FETCH)
DeleteTopics = request_class(ApiKey.DELETE_TOPICS)
CreatePartitions = request_class(ApiKey.CREATE_PARTITIONS)


def _message_set_v0(values: list[bytes]) -> bytes:
    import zlib

    out = b""
    for i, v in enumerate(values):
        message = b"\x00\x00" + struct.pack(">i", -1) + struct.pack(">i", len(v)) + v
        message = struct.pack(">I", zlib.crc32(message)) + message
        out += struct.pack(">qi", i, len(message)) + message
    return out


def _produce(bootstrap: str, topic: str, records: bytes, version: int):
    body = Produce(
        acks=-1,
        timeout_ms=10000,
        topic_data=[
            Produce.TopicProduceData(
                name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=records)]
            ),
        ],
    )
    return wire_call(bootstrap, body, version).responses[0].partition_responses[0]


# --- the three admin rules ------------------------------------------------------------


def test_a_user_topic_starting_with_two_underscores_is_deleted(module_broker) -> None:
    name = topic_name("__events")
    create_topic(module_broker.bootstrap, name)
    md = wire_call(
        module_broker.bootstrap, Metadata(topics=[Metadata.MetadataRequestTopic(name=name)]), 1
    )
    assert (md.topics[0].error_code, md.topics[0].is_internal) == (0, False)
    result = wire_call(
        module_broker.bootstrap, DeleteTopics(topic_names=[name], timeout_ms=10000), 0
    ).responses[0]
    assert (result.name, result.error_code) == (name, 0)
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    wait_until(lambda: name not in admin.list_topics(timeout=5).topics, message=f"{name} deleted")


def test_the_coordinators_topics_are_internal_and_not_deleted(module_broker) -> None:
    # A group coordinator lookup creates the offsets topic.
    wait_until(lambda: _find_coordinator(module_broker.bootstrap), message="group coordinator")
    offsets = "__consumer_offsets"
    md = wire_call(
        module_broker.bootstrap,
        Metadata(
            topics=[Metadata.MetadataRequestTopic(name=offsets)], allow_auto_topic_creation=False
        ),
        4,
    )
    assert (md.topics[0].error_code, md.topics[0].is_internal) == (0, True)
    result = wire_call(
        module_broker.bootstrap, DeleteTopics(topic_names=[offsets], timeout_ms=5000), 0
    ).responses[0]
    assert result.error_code == ErrorCode.INVALID_REQUEST


def _find_coordinator(bootstrap: str) -> bool:
    FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
    return wire_call(bootstrap, FindCoordinator(key="g"), 0).error_code == 0


def test_create_partitions_needs_one_assignment_per_added_partition(module_broker) -> None:
    one, two = topic_name("cp1"), topic_name("cp2")
    create_topic(module_broker.bootstrap, one, 1)
    create_topic(module_broker.bootstrap, two, 2)
    T = CreatePartitions.CreatePartitionsTopic
    A = CreatePartitions.CreatePartitionsAssignment
    body = CreatePartitions(
        topics=[
            T(
                name=one, count=2, assignments=[A(broker_ids=[0]), A(broker_ids=[0])]
            ),  # 1 -> 2 with 2
            T(name=two, count=5, assignments=[A(broker_ids=[0])]),  # 2 -> 5 with 1
        ],
        timeout_ms=10000,
        validate_only=False,
    )
    results = {r.name: r for r in wire_call(module_broker.bootstrap, body, 1).results}
    assert (results[one].error_code, results[one].error_message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Attempted to add 1 additional partition(s), but only 2 assignment(s) were specified.",
    )
    assert (results[two].error_code, results[two].error_message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Attempted to add 3 additional partition(s), but only 1 assignment(s) were specified.",
    )
    # An empty list is 0 assignments, not "let the broker place them"; null is.
    body = CreatePartitions(
        topics=[T(name=one, count=2, assignments=[])], timeout_ms=10000, validate_only=False
    )
    assert (
        wire_call(module_broker.bootstrap, body, 1).results[0].error_code
        == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    )
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    admin.create_partitions([NewPartitions(one, 2)])[one].result(15)
    wait_until(
        lambda: len(admin.list_topics(one, timeout=5).topics[one].partitions) == 2, message="grown"
    )


def test_metadata_answers_an_auto_created_topic_leader_not_available_first(module_broker) -> None:
    name = topic_name("auto")
    request = Metadata(
        topics=[Metadata.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True
    )
    first = wire_call(module_broker.bootstrap, request, 9).topics[0]
    assert (first.name, first.error_code, first.partitions) == (
        name,
        ErrorCode.LEADER_NOT_AVAILABLE,
        [],
    )
    wait_until(
        lambda: wire_call(module_broker.bootstrap, request, 9).topics[0].error_code == 0,
        message="created",
    )
    again = wire_call(module_broker.bootstrap, request, 9).topics[0]
    assert [p.leader_id for p in again.partitions] == [0]
    # and a producer that relies on auto-creation still gets its record in
    p = Producer({"bootstrap.servers": module_broker.bootstrap})
    name2 = topic_name("auto-produce")
    p.produce(name2, b"x")
    assert p.flush(20) == 0


def test_metadata_auto_creates_the_coordinators_topics_as_theirs(broker_factory) -> None:
    """Named in a Metadata request that may create topics, __consumer_offsets and
    __transaction_state are created as their coordinators create them (Kafka's
    AutoTopicCreationManager), not as user topics with the broker's defaults."""
    broker = broker_factory(
        {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "2"}
    )
    names = {"__consumer_offsets": 3, "__transaction_state": 2}
    request = Metadata(
        topics=[Metadata.MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=True,
    )

    def created() -> dict[str, int]:
        topics = wire_call(broker.bootstrap, request, 9).topics
        return {t.name: len(t.partitions) for t in topics if t.error_code == 0}

    wait_until(lambda: created() == names, message="both created")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    for future in admin.describe_configs(resources).values():
        assert future.result(timeout=15)["cleanup.policy"].value == "compact"


# --- unsupported versions ------------------------------------------------------------------


def test_an_unsupported_version_is_answered_and_the_connection_kept(module_broker) -> None:
    topic = topic_name("unsup")
    create_topic(module_broker.bootstrap, topic)
    host, port = module_broker.bootstrap.rsplit(":", 1)
    body = Produce(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            Produce.TopicProduceData(
                name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=b"")]
            ),
        ],
    )
    frame = bytearray(
        encode_request(
            RequestHeader(api_key=0, api_version=11, correlation_id=1, client_id="new"), body
        )
    )
    frame[6:8] = struct.pack(
        ">h", 13
    )  # Produce v13 (Kafka 4.1): same shape as v11, topic ids aside
    with socket.create_connection((host, int(port)), timeout=15) as s:
        s.sendall(frame)
        correlation_id, response = read_response(s, ApiKey.PRODUCE, 11)
        assert correlation_id == 1
        assert (
            response.responses[0].partition_responses[0].error_code == ErrorCode.UNSUPPORTED_VERSION
        )
        # the same connection still serves
        versions = request_class(ApiKey.API_VERSIONS)()
        s.sendall(
            encode_request(
                RequestHeader(api_key=18, api_version=0, correlation_id=2, client_id="new"),
                versions,
            )
        )
        correlation_id, response = read_response(s, ApiKey.API_VERSIONS, 0)
        assert (correlation_id, response.error_code) == (2, 0)
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges[0] == (0, 11) and ranges[1] == (0, 17) and ranges[2] == (0, 9)


# --- old request versions --------------------------------------------------------------------


def test_list_offsets_v0_old_style_offsets(module_broker) -> None:
    topic = topic_name("lo0")
    create_topic(module_broker.bootstrap, topic)
    assert (
        _produce(module_broker.bootstrap, topic, _message_set_v0([b"a", b"b", b"c"]), 0).error_code
        == 0
    )
    P = ListOffsets.ListOffsetsPartition

    def ask(timestamp: int, n: int = 1):
        body = ListOffsets(
            replica_id=-1,
            topics=[
                ListOffsets.ListOffsetsTopic(
                    name=topic,
                    partitions=[P(partition_index=0, timestamp=timestamp, max_num_offsets=n)],
                )
            ],
        )
        return wire_call(module_broker.bootstrap, body, 0).topics[0].partitions[0]

    assert (ask(-1).error_code, ask(-1).old_style_offsets) == (0, [3])
    assert ask(-2).old_style_offsets == [0]
    assert ask(-1, 10).old_style_offsets == [3, 0]  # log end, then each segment's first offset
    assert ask(-3).error_code == ErrorCode.UNSUPPORTED_VERSION  # max timestamp needs v7


def test_offset_commit_v0_and_v1_read_back_by_offset_fetch_v0(module_broker) -> None:
    topic = topic_name("oc")
    create_topic(module_broker.bootstrap, topic, 2)
    T, Pt = OffsetCommit.OffsetCommitRequestTopic, OffsetCommit.OffsetCommitRequestPartition
    v0 = OffsetCommit(
        group_id="old-g",
        topics=[
            T(
                name=topic,
                partitions=[Pt(partition_index=0, committed_offset=7, committed_metadata="m0")],
            )
        ],
    )
    assert wire_call(module_broker.bootstrap, v0, 0).topics[0].partitions[0].error_code == 0
    v1 = OffsetCommit(
        group_id="old-g",
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            T(
                name=topic,
                partitions=[
                    Pt(
                        partition_index=1,
                        committed_offset=9,
                        commit_timestamp=1234,
                        committed_metadata=None,
                    )
                ],
            ),
        ],
    )
    assert wire_call(module_broker.bootstrap, v1, 1).topics[0].partitions[0].error_code == 0
    fetched = wire_call(
        module_broker.bootstrap,
        OffsetFetch(
            group_id="old-g",
            topics=[
                OffsetFetch.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1]),
            ],
        ),
        0,
    )
    got = {
        p.partition_index: (p.committed_offset, p.metadata, p.error_code)
        for p in fetched.topics[0].partitions
    }
    assert got == {0: (7, "m0", 0), 1: (9, "", 0)}


def test_what_message_formats_v0_v1_cannot_carry(module_broker) -> None:
    import logstore

    topic = topic_name("cannot")
    create_topic(module_broker.bootstrap, topic)
    # A transactional batch through Produce v0-v2 (no transactional id there)
    txn = logstore.encode_batch(
        [(None, b"t")], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True
    )
    assert (
        _produce(module_broker.bootstrap, topic, txn, 2).error_code == ErrorCode.UNSUPPORTED_VERSION
    )
    # A message with a bad CRC
    bad = bytearray(_message_set_v0([b"payload"]))
    bad[-1] ^= 1
    assert (
        _produce(module_broker.bootstrap, topic, bytes(bad), 0).error_code
        == ErrorCode.CORRUPT_MESSAGE
    )
    # zstd has no v0/v1 form: old fetches get UNSUPPORTED_COMPRESSION_TYPE
    zstd = logstore.encode_batch([(None, b"z")], compression="zstd")
    assert _produce(module_broker.bootstrap, topic, zstd, 7).error_code == 0
    for version in (0, 3):
        body = Fetch(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            topics=[
                Fetch.FetchTopic(
                    topic=topic,
                    partitions=[
                        Fetch.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                ),
            ],
        )
        p = wire_call(module_broker.bootstrap, body, version).responses[0].partitions[0]
        assert (p.error_code, bytes(p.records or b"")) == (
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            b"",
        )


def test_message_downconversion_enable_false_refuses_old_fetches(module_broker) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = topic_name("nodown")
    create_topic(module_broker.bootstrap, topic, config={"message.downconversion.enable": "false"})
    assert (
        _produce(module_broker.bootstrap, topic, _message_set_v0([b"a", b"b"]), 0).error_code == 0
    )

    def fetch(version: int):
        body = Fetch(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            topics=[
                Fetch.FetchTopic(
                    topic=topic,
                    partitions=[
                        Fetch.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                ),
            ],
        )
        return wire_call(module_broker.bootstrap, body, version).responses[0].partitions[0]

    for version in (0, 1, 2, 3):  # the versions that need message format v0/v1
        p = fetch(version)
        assert (p.error_code, p.high_watermark, bytes(p.records or b"")) == (
            ErrorCode.UNSUPPORTED_VERSION,
            -1,
            b"",
        )
    p = fetch(4)  # message format v2: served as stored
    assert (p.error_code, p.high_watermark) == (0, 2) and p.records
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    resource = ConfigResource("topic", topic, set_config={"message.downconversion.enable": "true"})
    admin.alter_configs([resource])[resource].result(15)
    wait_until(
        lambda: fetch(3).error_code == 0,
        message="old fetches served once down-conversion is enabled again",
    )
    assert fetch(3).high_watermark == 2 and fetch(3).records


def test_a_topic_or_group_named_many_times_is_worked_on_once(module_broker) -> None:
    """Kafka takes Metadata's topics as a set; DescribeGroups describes a repeated group
    once and repeats its entry (the work follows the distinct names, not the count)."""
    topic = topic_name("dup")
    create_topic(module_broker.bootstrap, topic)
    md = wire_call(
        module_broker.bootstrap,
        Metadata(topics=[Metadata.MetadataRequestTopic(name=topic)] * 1000),
        1,
    )
    assert [t.name for t in md.topics] == [topic]
    DescribeGroups = request_class(ApiKey.DESCRIBE_GROUPS)
    groups = wire_call(module_broker.bootstrap, DescribeGroups(groups=[""] * 100_000), 5).groups
    assert len(groups) == 100_000 and {(g.group_id, g.error_code) for g in groups} == {
        ("", groups[0].error_code)
    }
