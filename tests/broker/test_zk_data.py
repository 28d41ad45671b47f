"""The ZooKeeper znode formats are Kafka 3.9's, byte for byte.

Golden bytes are what Kafka's own ``ZkData`` encoders produce: literals from Kafka's test
suite where it has them (KafkaZkClientTest, ReassignPartitionsZNodeTest,
ZkConfigMigrationClientTest, BrokerEndPointTest), the rest obtained by running
``ZkData.scala``'s encode expressions under Scala 2.13 with Jackson (Kafka 3.9's build).
"""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.broker_info import BrokerInfo, EndPoint
from broker_py.controller.leader_and_isr import (
    RECOVERED,
    RECOVERING,
    LeaderIsrAndControllerEpoch,
)
from broker_py.controller.topic_assignment import TopicAssignment
from broker_py.zk import zk_data as z
from broker_py.zk.zk_data import (
    BrokerIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerRegistration,
    ControllerZNode,
    IsrChangeNotificationSequenceZNode,
    PreferredReplicaElectionZNode,
    ProducerIdBlockZNode,
    ProducerIdsBlock,
    ReassignPartitionsZNode,
    TopicPartitionStateZNode,
    TopicZNode,
    ZkDataError,
)

TS = 1700000000000
TOPIC_ID = uuid.UUID(int=1)  # "AAAAAAAAAAAAAAAAAAAAAQ"
TP = TopicPartition


# ---- paths ----


def test_paths_are_kafkas():
    assert ControllerZNode.PATH == ControllerZNode.path() == "/controller"
    assert ControllerEpochZNode.PATH == "/controller_epoch"
    assert z.BrokersZNode.path() == "/brokers"
    assert z.BrokerIdsZNode.PATH == "/brokers/ids"
    assert BrokerIdZNode.path(3) == "/brokers/ids/3"
    assert z.BrokerSequenceIdZNode.PATH == "/brokers/seqid"
    assert z.TopicsZNode.PATH == "/brokers/topics"
    assert TopicZNode.path("t") == "/brokers/topics/t"
    assert z.TopicPartitionsZNode.path("t") == "/brokers/topics/t/partitions"
    assert z.TopicPartitionZNode.path("t", 2) == "/brokers/topics/t/partitions/2"
    assert TopicPartitionStateZNode.path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert z.ConfigZNode.PATH == "/config"
    assert z.ConfigEntityTypeZNode.path("topics") == "/config/topics"
    assert ConfigEntityZNode.path("brokers", z.DEFAULT_ENTITY) == "/config/brokers/<default>"
    assert z.ConfigEntityChangeNotificationZNode.PATH == "/config/changes"
    assert (
        ConfigEntityChangeNotificationSequenceZNode.create_path()
        == "/config/changes/config_change_"
    )
    assert ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX == "config_change_"
    assert z.IsrChangeNotificationZNode.PATH == "/isr_change_notification"
    assert IsrChangeNotificationSequenceZNode.path() == "/isr_change_notification/isr_change_"
    assert (
        IsrChangeNotificationSequenceZNode.path("0000000007")
        == "/isr_change_notification/isr_change_0000000007"
    )
    assert (
        IsrChangeNotificationSequenceZNode.sequence_number(
            "/isr_change_notification/isr_change_0000000007"
        )
        == "0000000007"
    )
    assert z.AdminZNode.PATH == "/admin"
    assert z.DeleteTopicsZNode.PATH == "/admin/delete_topics"
    assert z.DeleteTopicsTopicZNode.path("t") == "/admin/delete_topics/t"
    assert ReassignPartitionsZNode.PATH == "/admin/reassign_partitions"
    assert PreferredReplicaElectionZNode.PATH == "/admin/preferred_replica_election"
    assert z.ClusterZNode.PATH == "/cluster"
    assert ClusterIdZNode.PATH == "/cluster/id"
    assert ProducerIdBlockZNode.PATH == "/latest_producer_id_block"
    assert z.ConsumerOffsetZNode.path("g", "t", 3) == "/consumers/g/offsets/t/3"


@pytest.mark.parametrize(
    ("connect", "expected"),
    [
        ("zk1:2181", ("zk1:2181", "")),
        ("zk1:2181,zk2:2181/kafka", ("zk1:2181,zk2:2181", "/kafka")),
        ("zk1:2181/a/b/", ("zk1:2181", "/a/b")),
        ("zk1:2181/", ("zk1:2181", "")),
    ],
)
def test_split_chroot(connect, expected):
    assert z.split_chroot(connect) == expected


# ---- golden bytes ----

BROKER_3_LISTENERS = BrokerInfo(
    1,
    [
        EndPoint("CLIENT", "b1", 9093, "SSL"),
        EndPoint("PLAINTEXT", "b1", 9092, "PLAINTEXT"),
        EndPoint("INTERNAL", "::1", 9094, "SASL_PLAINTEXT"),
    ],
    rack="rack-a",
    features={"metadata.version": (1, 21), "group.version": (0, 1)},
    jmx_port=9999,
    timestamp_ms=TS,
)
BROKER_5_LISTENERS = BrokerInfo(
    2,
    [
        EndPoint("PLAINTEXT", "h", 9092, "PLAINTEXT"),
        EndPoint("SSL", "h", 9093, "SSL"),
        EndPoint("SASL_SSL", "h", 9094, "SASL_SSL"),
        EndPoint("REPLICATION", "h", 9095, "PLAINTEXT"),
        EndPoint("CONTROLLER", "h", 9096, "SASL_PLAINTEXT"),
    ],
    rack="r",
    timestamp_ms=1,
)
TOPIC_CONFIG = {
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "cleanup.policy": "compact",
    "min.insync.replicas": "2",
    "max.message.bytes": "1048588",
    "compression.type": "producer",
    "segment.ms": "604800000",
    "retention.bytes": "-1",
    "unclean.leader.election.enable": "false",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
}

GOLDEN = [
    (
        ControllerZNode.encode(1, TS),
        b'{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}',
    ),
    (ControllerEpochZNode.encode(7), b"7"),
    (
        BrokerIdZNode.encode(
            BrokerInfo(0, [EndPoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")], timestamp_ms=TS)
        ),
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://localhost:9092"],'
        b'"jmx_port":-1,"port":9092,"host":"localhost","version":5,"timestamp":"1700000000000"}',
    ),
    (
        BrokerIdZNode.encode(BROKER_3_LISTENERS),
        b'{"features":{"group.version":{"min_version":0,"max_version":1},"metadata.version":{"min_version":1,"max_version":21}},'
        b'"listener_security_protocol_map":{"CLIENT":"SSL","PLAINTEXT":"PLAINTEXT","INTERNAL":"SASL_PLAINTEXT"},'
        b'"endpoints":["CLIENT://b1:9093","PLAINTEXT://b1:9092","INTERNAL://[::1]:9094"],"rack":"rack-a","jmx_port":9999,'
        b'"port":9092,"host":"b1","version":5,"timestamp":"1700000000000"}',
    ),
    (  # no PLAINTEXT endpoint: the top-level host is null and the port -1; a wildcard host is empty
        BrokerIdZNode.encode(BrokerInfo(0, [EndPoint("SSL", None, 9093, "SSL")], timestamp_ms=TS)),
        b'{"features":{},"listener_security_protocol_map":{"SSL":"SSL"},"endpoints":["SSL://:9093"],"jmx_port":-1,'
        b'"port":-1,"host":null,"version":5,"timestamp":"1700000000000"}',
    ),
    (  # more than four listeners: Scala's HashMap order
        BrokerIdZNode.encode(BROKER_5_LISTENERS),
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","REPLICATION":"PLAINTEXT","SSL":"SSL",'
        b'"SASL_SSL":"SASL_SSL","CONTROLLER":"SASL_PLAINTEXT"},"endpoints":["PLAINTEXT://h:9092","SSL://h:9093",'
        b'"SASL_SSL://h:9094","REPLICATION://h:9095","CONTROLLER://h:9096"],"rack":"r","jmx_port":-1,"port":9092,"host":"h",'
        b'"version":5,"timestamp":"1"}',
    ),
    (
        TopicZNode.encode(TopicAssignment(TOPIC_ID, {0: [1, 2, 3]})),
        b'{"partitions":{"0":[1,2,3]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","adding_replicas":{},"removing_replicas":{},"version":3}',
    ),
    (
        TopicZNode.encode(TopicAssignment(None, {0: [1]})),
        b'{"partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{},"version":3}',
    ),
    (  # twenty partitions: Scala's mutable.HashMap, grown to 32 buckets
        TopicZNode.encode(
            TopicAssignment(
                TOPIC_ID,
                {p: [p % 3, (p + 1) % 3] for p in range(20)},
                adding={3: [7]},
                removing={4: [8, 9]},
            )
        ),
        b'{"partitions":{"11":[2,0],"12":[0,1],"13":[1,2],"14":[2,0],"15":[0,1],"16":[1,2],"17":[2,0],"18":[0,1],"19":[1,2],'
        b'"0":[0,1],"1":[1,2],"2":[2,0],"3":[0,1],"4":[1,2],"5":[2,0],"6":[0,1],"7":[1,2],"8":[2,0],"9":[0,1],"10":[1,2]},'
        b'"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","adding_replicas":{"3":[7]},"removing_replicas":{"4":[8,9]},"version":3}',
    ),
    (
        TopicPartitionStateZNode.encode(LeaderIsrAndControllerEpoch(1, 0, [1, 2, 3], 1)),
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}',
    ),
    (
        TopicPartitionStateZNode.encode(LeaderIsrAndControllerEpoch(1, 5, [1], 2, RECOVERING)),
        b'{"controller_epoch":2,"leader":1,"version":1,"leader_recovery_state":1,"leader_epoch":5,"isr":[1]}',
    ),
    (
        ConfigEntityZNode.encode(
            {"cleanup.policy": "compact", "retention.ms": "1000", "min.insync.replicas": "2"}
        ),
        b'{"version":1,"config":{"cleanup.policy":"compact","min.insync.replicas":"2","retention.ms":"1000"}}',
    ),
    (  # fourteen entries: a Properties grown to 32 bins
        ConfigEntityZNode.encode(TOPIC_CONFIG),
        b'{"version":1,"config":{"compression.type":"producer","file.delete.delay.ms":"60000","max.message.bytes":"1048588",'
        b'"message.timestamp.type":"CreateTime","min.insync.replicas":"2","min.cleanable.dirty.ratio":"0.5",'
        b'"unclean.leader.election.enable":"false","retention.bytes":"-1","delete.retention.ms":"86400000",'
        b'"cleanup.policy":"compact","retention.ms":"604800000","segment.bytes":"1073741824","segment.ms":"604800000",'
        b'"flush.messages":"9223372036854775807"}}',
    ),
    (  # Jackson's escapes: short forms, \\u00XX, surrogate pairs; the rest of the BMP as UTF-8
        ConfigEntityZNode.encode({'k\x01\n"\\/': "v\u00e9\u2028\U0001f600"}),
        b'{"version":1,"config":{"k\\u0001\\n\\"\\\\/":"v\xc3\xa9\xe2\x80\xa8\\uD83D\\uDE00"}}',
    ),
    (
        ConfigEntityChangeNotificationSequenceZNode.encode("brokers/1"),
        b'{"version":2,"entity_path":"brokers/1"}',
    ),
    (
        IsrChangeNotificationSequenceZNode.encode([TP("topic-a", 0), TP("topic-b", 0)]),
        b'{"version":1,"partitions":[{"topic":"topic-a","partition":0},{"topic":"topic-b","partition":0}]}',
    ),
    (
        ReassignPartitionsZNode.encode({TP("foo", 0): [1, 2]}),
        b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}',
    ),
    (
        PreferredReplicaElectionZNode.encode([TP("t", 0), TP("t", 1)]),
        b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":1}]}',
    ),
    (
        ClusterIdZNode.encode("AAAAAAAAAAAAAAAAAAAAAQ"),
        b'{"version":"1","id":"AAAAAAAAAAAAAAAAAAAAAQ"}',
    ),
    (
        ProducerIdBlockZNode.encode(ProducerIdsBlock(1, 0, 1000)),
        b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}',
    ),
]


@pytest.mark.parametrize(("encoded", "golden"), GOLDEN, ids=[str(i) for i in range(len(GOLDEN))])
def test_encoding_is_kafkas_byte_for_byte(encoded, golden):
    assert encoded == golden


def test_golden_bytes_decode_back():
    assert ControllerZNode.decode(GOLDEN[0][1]) == 1
    assert ControllerZNode.decode_controller(GOLDEN[0][1]) == ControllerRegistration(1, TS, -1)
    assert BrokerIdZNode.decode(1, GOLDEN[3][1]) == BROKER_3_LISTENERS
    assert BrokerIdZNode.decode(2, GOLDEN[5][1]) == BROKER_5_LISTENERS
    assert TopicZNode.decode(GOLDEN[8][1]) == TopicAssignment(
        TOPIC_ID,
        {p: [p % 3, (p + 1) % 3] for p in range(20)},
        adding={3: [7]},
        removing={4: [8, 9]},
    )
    assert ConfigEntityZNode.decode(GOLDEN[12][1]) == TOPIC_CONFIG
    assert ConfigEntityZNode.decode(GOLDEN[13][1]) == {'k\x01\n"\\/': "v\u00e9\u2028\U0001f600"}
    assert ProducerIdBlockZNode.decode(GOLDEN[-1][1]).last_producer_id == 999


# ---- what older and other Kafka versions wrote ----


def test_controller_v1_and_the_bare_broker_id_of_kafka_0_8():
    assert ControllerZNode.decode_controller(
        b'{"version":1,"brokerid":3,"timestamp":"1416974968782"}'
    ) == ControllerRegistration(3, 1416974968782)
    assert ControllerZNode.decode(b"5") == 5
    assert ControllerZNode.decode_controller(b"5") == ControllerRegistration(5)


# BrokerEndPointTest's registrations, one per version
def test_broker_v1():
    info = BrokerIdZNode.decode(
        1,
        b'{"jmx_port":-1,"timestamp":"1420485325400","host":"172.16.8.243","version":1,"port":9091}',
    )
    assert info.endpoints == [EndPoint("PLAINTEXT", "172.16.8.243", 9091, "PLAINTEXT")]
    assert (info.version, info.jmx_port, info.timestamp_ms, info.rack) == (
        1,
        -1,
        1420485325400,
        None,
    )


def test_broker_v2_and_v3_without_a_listener_map_use_protocol_names():
    v3 = b"""{"version":3, "host":"localhost", "port":9092, "jmx_port":9999,
             "timestamp":"2233345666",
             "endpoints":["PLAINTEXT://host1:9092", "SSL://host1:9093"], "rack":"dc1"}"""
    info = BrokerIdZNode.decode(1, v3)
    assert info.endpoints == [
        EndPoint("PLAINTEXT", "host1", 9092, "PLAINTEXT"),
        EndPoint("SSL", "host1", 9093, "SSL"),
    ]
    assert info.rack == "dc1"


@pytest.mark.parametrize("rack", [', "rack":null', ""])
def test_broker_v4_with_a_null_or_no_rack(rack):
    v4 = (
        '{"version":4, "host":"localhost", "port":9092, "jmx_port":9999, "timestamp":"2233345666",'
        '"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
        '"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"}' + rack + "}"
    )
    info = BrokerIdZNode.decode(1, v4.encode())
    assert info.endpoints == [
        EndPoint("CLIENT", "host1", 9092, "SSL"),
        EndPoint("REPLICATION", "host1", 9093, "PLAINTEXT"),
    ]
    assert info.rack is None and info.features == {}


def test_broker_v5_features():
    v5 = b"""{"version":5, "host":"localhost", "port":9092, "jmx_port":9999,
             "timestamp":"2233345666",
             "endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],
             "listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},
             "rack":"dc1",
             "features": {"feature1": {"min_version": 1, "max_version": 2},
                          "feature2": {"min_version": 2, "max_version": 4}}}"""
    assert BrokerIdZNode.decode(1, v5).features == {"feature1": (1, 2), "feature2": (2, 4)}


def test_broker_future_version_is_read():
    future = b"""{"foo":"bar", "version":100, "host":"localhost", "port":9092, "jmx_port":9999,
                 "timestamp":"1416974968782", "endpoints":["SSL://localhost:9093"]}"""
    assert BrokerIdZNode.decode(1, future).endpoints == [EndPoint("SSL", "localhost", 9093, "SSL")]


def test_broker_endpoint_parsing_follows_kafkas_listeners_parser():
    data = json.dumps(
        {
            "version": 5,
            "jmx_port": -1,
            "endpoints": ["client://[::1]:1", " , ", "SSL://:2"],
            "listener_security_protocol_map": {"CLIENT": "sasl_ssl", "SSL": "SSL"},
        }
    ).encode()
    assert BrokerIdZNode.decode(1, data).endpoints == [
        EndPoint("CLIENT", "::1", 1, "SASL_SSL"),
        EndPoint("SSL", None, 2, "SSL"),
    ]


def test_topic_v1_and_v2_have_no_topic_id():
    assert TopicZNode.decode(
        b'{"version":1,"partitions":{"0":[0,1],"1":[1,0]}}'
    ) == TopicAssignment(None, {0: [0, 1], 1: [1, 0]})
    v2 = (
        b'{"version":2,"partitions":{"0":[0,1]},'
        b'"adding_replicas":{"0":[1],"9":[2]},"removing_replicas":{}}'
    )
    assert TopicZNode.decode(v2) == TopicAssignment(
        None, {0: [0, 1]}, adding={0: [1]}
    )  # 9 is not assigned


def test_partition_state_without_recovery_state_is_recovered():
    state = TopicPartitionStateZNode.decode(
        b'{"version":1,"leader":1,"leader_epoch":6,"controller_epoch":10,"isr":[1]}', 5
    )
    assert state == LeaderIsrAndControllerEpoch(1, 6, [1], 10, RECOVERED, partition_epoch=5)


def test_config_change_notification_versions():
    decode = ConfigEntityChangeNotificationSequenceZNode.decode
    assert (
        decode(b'{"version":2,"entity_path":"users/alice/clients/c1"}') == "users/alice/clients/c1"
    )
    assert decode(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "topics/t"
    for bad in (
        b'{"version":1,"entity_type":"brokers","entity_name":"1"}',
        b'{"version":2,"entity_path":"topics"}',
        b'{"version":3,"entity_path":"topics/t"}',
    ):
        with pytest.raises(ZkDataError):
            decode(bad)


def test_uuids_are_kafkas_base64():
    assert z.uuid_to_base64(TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert z.uuid_from_base64("AAAAAAAAAAAAAAAAAAAAAQ==") == TOPIC_ID
    u = uuid.UUID("f1e2d3c4-b5a6-9788-6950-413223140506")
    assert z.uuid_from_base64(z.uuid_to_base64(u)) == u and len(z.uuid_to_base64(u)) == 22
    for _ in range(200):
        r = z.random_uuid()
        assert r.int > 1 and not z.uuid_to_base64(r).startswith("-")
    for bad in ("", "AAAA", "AAAAAAAAAAAAAAAAAAAAA+", "AAAAAAAAAAAAAAAAAAAAAQ="):
        with pytest.raises(ValueError):
            z.uuid_from_base64(bad)


# ---- round trips ----

ints = st.integers(-(2**31), 2**31 - 1)
ids = st.integers(0, 2**31 - 1)
names = st.text(min_size=1, max_size=20)
listeners = st.from_regex(r"[A-Z][A-Z_]{0,11}", fullmatch=True)
hosts = st.one_of(
    st.none(),
    st.from_regex(r"[a-z0-9.-]{1,20}|[0-9a-f:]{2,20}", fullmatch=True).filter(
        lambda h: ":" in h or h
    ),
)
endpoints = st.builds(
    EndPoint, listeners, hosts, st.integers(0, 65535), st.sampled_from(z.SECURITY_PROTOCOLS)
)
SETTINGS = settings(max_examples=200, deadline=None, database=None)


@SETTINGS
@given(
    ids,
    st.lists(endpoints, max_size=6, unique_by=lambda e: e.listener_name),
    st.none() | names,
    st.dictionaries(names, st.tuples(st.integers(0, 10), st.integers(10, 32767)), max_size=4),
    ints,
    st.integers(0, 2**63 - 1),
)
def test_broker_round_trip(broker_id, eps, rack, features, jmx_port, ts):
    info = BrokerInfo(broker_id, eps, rack, features, jmx_port, ts)
    assert BrokerIdZNode.decode(broker_id, BrokerIdZNode.encode(info)) == info


@SETTINGS
@given(
    st.none() | st.uuids(),
    st.dictionaries(st.integers(0, 2**31 - 1), st.lists(ids, max_size=5), max_size=40),
    st.data(),
)
def test_topic_round_trip(topic_id, partitions, data):
    reassigning = st.dictionaries(
        st.sampled_from(sorted(partitions)), st.lists(ids, min_size=1, max_size=3), max_size=3
    )
    adding, removing = (data.draw(reassigning), data.draw(reassigning)) if partitions else ({}, {})
    assignment = TopicAssignment(topic_id, partitions, adding, removing)
    assert TopicZNode.decode(TopicZNode.encode(assignment)) == assignment


@SETTINGS
@given(ints, ints, st.lists(ints, max_size=5), ints, st.sampled_from([RECOVERED, RECOVERING]), ints)
def test_partition_state_round_trip(
    leader, leader_epoch, isr, controller_epoch, recovery, zk_version
):
    state = LeaderIsrAndControllerEpoch(
        leader, leader_epoch, isr, controller_epoch, recovery, zk_version
    )
    assert (
        TopicPartitionStateZNode.decode(TopicPartitionStateZNode.encode(state), zk_version) == state
    )


@SETTINGS
@given(st.dictionaries(st.text(), st.text(), max_size=60))
def test_config_round_trip(config):
    decoded = ConfigEntityZNode.decode(ConfigEntityZNode.encode(config))
    assert decoded == config and json.loads(ConfigEntityZNode.encode(config))["config"] == config


@SETTINGS
@given(
    st.dictionaries(st.builds(TP, names, ids), st.lists(ids, max_size=4), max_size=5),
    st.lists(st.builds(TP, names, ids), max_size=5),
    ids,
    ints,
    st.integers(0, 2**62),
    st.integers(1, 2**31 - 1),
    ints,
    names,
)
def test_the_others_round_trip(reassignment, partitions, broker_id, epoch, first, size, ts, entity):
    assert (
        ReassignPartitionsZNode.decode(ReassignPartitionsZNode.encode(reassignment)) == reassignment
    )
    assert PreferredReplicaElectionZNode.decode(
        PreferredReplicaElectionZNode.encode(partitions)
    ) == set(partitions)
    assert IsrChangeNotificationSequenceZNode.decode(
        IsrChangeNotificationSequenceZNode.encode(partitions)
    ) == set(partitions)
    assert ControllerZNode.decode_controller(
        ControllerZNode.encode(broker_id, abs(ts))
    ) == ControllerRegistration(broker_id, abs(ts), -1)
    assert ControllerEpochZNode.decode(ControllerEpochZNode.encode(epoch)) == epoch
    assert ProducerIdBlockZNode.decode(
        ProducerIdBlockZNode.encode(ProducerIdsBlock(broker_id, first, size))
    ) == ProducerIdsBlock(broker_id, first, size)
    assert ClusterIdZNode.decode(ClusterIdZNode.encode(entity)) == entity
    assert z.ConsumerOffsetZNode.decode(z.ConsumerOffsetZNode.encode(first)) == first
    path = "topics/" + entity
    assert (
        ConfigEntityChangeNotificationSequenceZNode.decode(
            ConfigEntityChangeNotificationSequenceZNode.encode(path)
        )
        == path
    )


# ---- malformed data ----

DECODERS = [
    ControllerZNode.decode,
    ControllerZNode.decode_controller,
    ControllerEpochZNode.decode,
    lambda d: BrokerIdZNode.decode(1, d),
    TopicZNode.decode,
    TopicPartitionStateZNode.decode,
    ConfigEntityZNode.decode,
    ConfigEntityChangeNotificationSequenceZNode.decode,
    IsrChangeNotificationSequenceZNode.decode,
    ReassignPartitionsZNode.decode,
    PreferredReplicaElectionZNode.decode,
    ClusterIdZNode.decode,
    ProducerIdBlockZNode.decode,
    z.ConsumerOffsetZNode.decode,
]


def _decodes_or_raises_zk_data_error(data: bytes) -> None:
    for decode in DECODERS:
        try:
            decode(data)
        except ZkDataError:
            pass


@settings(max_examples=500, deadline=None, database=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_zk_data_error(data):
    _decodes_or_raises_zk_data_error(data)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(
        [
            "1",
            "-1",
            "0",
            "99999999999999999999",
            "PLAINTEXT://h:1",
            "AAAAAAAAAAAAAAAAAAAAAQ",
            "topics/t",
        ]
    ),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "version",
                    "brokerid",
                    "timestamp",
                    "kraftControllerEpoch",
                    "host",
                    "port",
                    "jmx_port",
                    "endpoints",
                    "listener_security_protocol_map",
                    "rack",
                    "features",
                    "min_version",
                    "max_version",
                    "partitions",
                    "adding_replicas",
                    "removing_replicas",
                    "topic_id",
                    "leader",
                    "leader_epoch",
                    "controller_epoch",
                    "isr",
                    "leader_recovery_state",
                    "config",
                    "entity_path",
                    "entity_type",
                    "entity_name",
                    "topic",
                    "partition",
                    "replicas",
                    "id",
                    "broker",
                    "block_start",
                    "block_end",
                    "0",
                    "PLAINTEXT",
                ]
            ),
            children,
            max_size=8,
        )
    ),
    max_leaves=20,
)
versions = st.sampled_from([1, 2, 3, 5, 100, "1", 0, -1, None, True, 1.0])


@settings(max_examples=1500, deadline=None, database=None)
@given(json_values, versions)
def test_json_of_any_shape_raises_only_zk_data_error(value, version):
    if isinstance(value, dict) and version is not None:
        value = {**value, "version": version}
    _decodes_or_raises_zk_data_error(json.dumps(value).encode())


@pytest.mark.parametrize(
    ("decode", "data", "problem"),
    [
        (ControllerZNode.decode, b'{"version":3,"brokerid":1}', "unknown version"),
        (ControllerZNode.decode, b'{"version":2,"brokerid":"1"}', "brokerid"),
        (ControllerZNode.decode, b'{"version":2,"brokerid":true}', "brokerid"),
        (ControllerZNode.decode, b'{"version":2}', "missing 'brokerid'"),
        (ControllerEpochZNode.decode, b"2147483648", "epoch"),
        (ControllerEpochZNode.decode, b" 1", "epoch"),
        (lambda d: BrokerIdZNode.decode(7, d), b'{"version":0,"jmx_port":-1}', "unknown version"),
        (
            lambda d: BrokerIdZNode.decode(7, d),
            b'{"version":5,"jmx_port":-1,"endpoints":["h:1"]}',
            "LISTENER://host:port",
        ),
        (
            lambda d: BrokerIdZNode.decode(7, d),
            b'{"version":5,"jmx_port":-1,"endpoints":["X://h:1"]}',
            "no security protocol",
        ),
        (
            lambda d: BrokerIdZNode.decode(7, d),
            b'{"version":5,"jmx_port":-1,"endpoints":["SSL://h:99999999999"]}',
            "port",
        ),
        (
            lambda d: BrokerIdZNode.decode(7, d),
            b'{"version":5,"jmx_port":-1,"endpoints":[],"listener_security_protocol_map":{"A":"TLS"}}',
            "unknown security protocol",
        ),
        (
            lambda d: BrokerIdZNode.decode(7, d),
            b'{"version":5,"jmx_port":-1,"endpoints":[],"features":{"f":{"min_version":3,"max_version":2}}}',
            "bad version range",
        ),
        (TopicZNode.decode, b'{"version":4,"partitions":{}}', "unknown version"),
        (TopicZNode.decode, b'{"version":3,"partitions":{"x":[1]}}', "bad partition"),
        (TopicZNode.decode, b'{"version":3,"partitions":{"0":[1.0]}}', "partitions[0]"),
        (TopicZNode.decode, b'{"version":3,"partitions":{},"topic_id":"not-a-uuid"}', "topic_id"),
        (
            TopicPartitionStateZNode.decode,
            b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[1],'
            b'"leader_recovery_state":2}',
            "leader_recovery_state",
        ),
        (
            TopicPartitionStateZNode.decode,
            b'{"version":1,"leader":NaN,"leader_epoch":0,"controller_epoch":1,"isr":[1]}',
            "not JSON",
        ),
        (ConfigEntityZNode.decode, b'{"version":1,"config":{"a":1}}', "config 'a'"),
        (ConfigEntityZNode.decode, b'{"version":2,"config":{}}', "unknown version"),
        (ClusterIdZNode.decode, b'{"version":1,"id":"x"}', "unknown version"),
        (
            ProducerIdBlockZNode.decode,
            b'{"version":1,"broker":1,"block_start":0,"block_end":"999"}',
            "block_start",
        ),
        (
            ProducerIdBlockZNode.decode,
            b'{"version":1,"broker":1,"block_start":"10","block_end":"9"}',
            "a block of 0 ids",
        ),
        (ProducerIdBlockZNode.decode, b"", "not JSON"),
        (
            ReassignPartitionsZNode.decode,
            b'{"version":1,"partitions":[{"topic":"t","partition":0}]}',
            "missing 'replicas'",
        ),
        (PreferredReplicaElectionZNode.decode, b'{"version":1,"partitions":{}}', "partitions"),
        (IsrChangeNotificationSequenceZNode.decode, b"[1]", "expected an object"),
    ],
)
def test_malformed_data_names_the_node_and_the_problem(decode, data, problem):
    with pytest.raises(ZkDataError) as raised:
        decode(data)
    assert problem in str(raised.value)
    assert str(raised.value).startswith("/")
