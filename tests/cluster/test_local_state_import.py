"""A broker that ran alone joins a cluster with its topics (their data and the groups'
committed offsets with them), SCRAM users, ACLs, dynamic broker configs, CLIENT_METRICS
resources and client quotas: on its first start with ``zookeeper.connect`` they are
written to ZooKeeper (where ZooKeeper lacks them) and the local files are renamed
``*.imported``. Real broker processes and a real ZooKeeper."""

from __future__ import annotations

import json
import os

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from logstore.protocol.messages.client_quotas import AlterClientQuotasRequest
from logstore.protocol.messages.configs import IncrementalAlterConfigsRequest
from tests.integration.clients import create_topic, wire_call
from tests.integration.conftest import BrokerProcess
from tests.support.ports import free_port
from tests.support.waiting import wait_until

METADATA = "__logstore_metadata"


def _zk_json(zk_connect: str, path: str):
    zk = KazooClient(hosts=zk_connect)
    zk.start()
    try:
        if zk.exists(path) is None:
            return None
        return json.loads(zk.get(path)[0])
    finally:
        zk.stop()
        zk.close()


def _produce_as(b: BrokerProcess, sasl_port: int, user: str, password: str, topic: str) -> None:
    p = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": password,
            "message.timeout.ms": 15000,
        }
    )
    errors: list = []
    p.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    p.flush(20)
    assert errors == [None]


def _read_from_start(c: Consumer, topic: str, partitions: int, n: int) -> list[bytes]:
    """The values of the first ``n`` records of ``topic``'s partitions, sorted."""
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    wait_until(
        lambda: got.extend(m.value() for m in c.consume(10, 0.5) if not m.error()) or len(got) >= n,
        30,
        0.1,
        "the data",
    )
    return sorted(got)


def _committed(c: Consumer, topic: str) -> dict[int, int] | None:
    try:
        got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=5)
    except Exception:  # noqa: BLE001 - the coordinator is still loading: ask again
        return None
    offsets = {tp.partition: tp.offset for tp in got}
    return offsets if all(o >= 0 for o in offsets.values()) else None


def test_topics_users_acls_and_broker_configs_of_a_single_node_move_into_zookeeper(
    tmp_path, zk_connect
) -> None:
    b = BrokerProcess(str(tmp_path))
    sasl_port = free_port()
    b.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener administers
        }
    )
    topic = "imported-acl-topic"
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        create_topic(b.bootstrap, topic)
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret"
        )
        for f in admin.alter_user_scram_credentials([upsert]).values():
            assert f.result(15) is None
        grant = AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        )
        assert admin.create_acls([grant])[grant].result(15) is None
        broker = ConfigResource(
            ResourceType.BROKER,
            "0",
            incremental_configs=[
                ConfigEntry(
                    "log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET
                ),
            ],
        )
        admin.incremental_alter_configs([broker])[broker].result(15)
        subscription = IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=16,  # CLIENT_METRICS (KIP-714): no AdminClient type for it
            resource_name="imported-subs",
            configs=[
                IncrementalAlterConfigsRequest.AlterableConfig(
                    name="metrics", config_operation=0, value="*"
                )
            ],
        )
        altered = wire_call(
            b.bootstrap,
            IncrementalAlterConfigsRequest(resources=[subscription], validate_only=False),
            1,
        )
        assert altered.responses[0].error_code == 0
        Q = AlterClientQuotasRequest
        quota = Q.EntryData(
            entity=[Q.EntityData(entity_type="user", entity_name="alice")],
            ops=[Q.OpData(key="producer_byte_rate", value=1048576, remove=False)],
        )
        set_quota = wire_call(b.bootstrap, Q(entries=[quota], validate_only=False), 1)
        assert set_quota.entries[0].error_code == 0
        _produce_as(b, sasl_port, "alice", "alice-secret", topic)
        data = "imported-data"
        create_topic(b.bootstrap, data, 2)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(10):
            p.produce(data, b"v%d" % i, partition=i % 2)
        assert p.flush(15) == 0
        group = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "imported-group"})
        group.commit(
            offsets=[TopicPartition(data, 0, 3), TopicPartition(data, 1, 4)], asynchronous=False
        )
        group.close()
        assert b.stop() == 0

        # The same broker (its id from meta.properties), now in a cluster.
        b.overrides.update(
            {
                "zookeeper.connect": zk_connect,
                "zookeeper.session.timeout.ms": "6000",
                "offsets.topic.replication.factor": "1",
            }
        )
        b.start()
        user = _zk_json(zk_connect, "/config/users/alice")
        assert user is not None and "SCRAM-SHA-256" in user["config"]
        assert user["config"]["producer_byte_rate"] == "1048576"  # beside the credential
        acl = _zk_json(zk_connect, f"/kafka-acl/Topic/{topic}")
        assert acl is not None and {a["principal"] for a in acl["acls"]} == {"User:alice"}
        assert _zk_json(zk_connect, "/config/brokers/0")["config"] == {
            "log.retention.ms": "3600000"
        }
        meta = os.path.join(b.data_dir, METADATA)
        assert _zk_json(zk_connect, "/config/client-metrics/imported-subs")["config"] == {
            "metrics": "*"
        }
        imported = ("scram-credentials.json", "acls.json", "broker-configs.json")
        for name in (*imported, "client-metrics.json", "client-quotas.json"):
            assert not os.path.exists(os.path.join(meta, name)), name
            assert os.path.exists(os.path.join(meta, name + ".imported")), name

        assert _zk_json(zk_connect, f"/brokers/topics/{data}")["partitions"] == {"0": [0], "1": [0]}
        assert not os.path.exists(os.path.join(meta, "cluster-metadata.json"))

        # Served from ZooKeeper: the topics keep their data and the group its offsets, the
        # user logs in, its ACL holds, the config applies.
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "imported-group"})
        try:
            committed = wait_until(
                lambda: _committed(c, data), 30, 0.5, "the group's committed offsets"
            )
            assert committed == {0: 3, 1: 4}
            assert _read_from_start(c, data, 2, 10) == [b"v%d" % i for i in range(10)]
        finally:
            c.close()
        _produce_as(b, sasl_port, "alice", "alice-secret", topic)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        found = admin.describe_acls(
            AclBindingFilter(
                ResourceType.TOPIC,
                topic,
                ResourcePatternType.LITERAL,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ).result(15)
        assert [a.principal for a in found] == ["User:alice"]
        described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
        entries = next(iter(described.values())).result(15)
        assert entries["log.retention.ms"].value == "3600000"

        # A second start finds nothing left to import, and ZooKeeper keeps it all.
        b.restart()
        assert b.log_text().count("into ZooKeeper; the file is now") == 6
        assert _zk_json(zk_connect, "/config/users/alice") is not None
        wait_until(
            lambda: admin.list_topics(timeout=5).brokers, message="the broker back in the cluster"
        )
    finally:
        b.kill()


def test_a_data_dir_with_only_the_old_topics_file_joins_a_cluster_with_its_topics(
    tmp_path, zk_connect
) -> None:
    """A data dir from before ``cluster-metadata.json`` (its topics in ``topics.json``)
    started straight in a cluster: its topics are imported with their ids, so their
    data is served; both files are renamed, and a second start imports nothing."""
    from broker_py.zk.zk_data import uuid_from_base64

    b = BrokerProcess(str(tmp_path))
    data = "old-format-topic"
    b.start()
    try:
        create_topic(b.bootstrap, data, 2, {"retention.ms": "86400000"})
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(6):
            p.produce(data, b"o%d" % i, partition=i % 2)
        assert p.flush(15) == 0
        assert b.stop() == 0
        # What an older logstore left: topics.json, and no cluster-metadata.json.
        meta = os.path.join(b.data_dir, METADATA)
        with open(os.path.join(b.data_dir, f"{data}-0", "partition.metadata")) as f:
            topic_id = uuid_from_base64(
                dict(line.split(": ", 1) for line in f.read().splitlines())["topic_id"]
            )
        os.remove(os.path.join(meta, "cluster-metadata.json"))
        with open(os.path.join(meta, "topics.json"), "w") as f:
            json.dump(
                {
                    "version": 1,
                    "topics": {
                        data: {
                            "topic_id": topic_id.hex,
                            "partitions": 2,
                            "configs": {"retention.ms": "86400000"},
                        }
                    },
                },
                f,
            )

        b.overrides.update(
            {
                "zookeeper.connect": zk_connect,
                "zookeeper.session.timeout.ms": "6000",
                "offsets.topic.replication.factor": "1",
            }
        )
        b.start()
        znode = _zk_json(zk_connect, f"/brokers/topics/{data}")
        assert znode["partitions"] == {"0": [0], "1": [0]}
        assert uuid_from_base64(znode["topic_id"]) == topic_id
        assert _zk_json(zk_connect, f"/config/topics/{data}")["config"] == {
            "retention.ms": "86400000"
        }
        for name in ("topics.json", "cluster-metadata.json"):
            assert not os.path.exists(os.path.join(meta, name)), name
            assert os.path.exists(os.path.join(meta, name + ".imported")), name
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "old-format-reader"})
        try:
            assert _read_from_start(c, data, 2, 6) == [b"o%d" % i for i in range(6)]
        finally:
            c.close()

        b.restart()
        assert b.log_text().count("into ZooKeeper; the file is now") == 2
    finally:
        b.kill()
