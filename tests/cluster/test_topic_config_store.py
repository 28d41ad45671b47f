"""Topic configs in a ZooKeeper cluster, checked as Kafka checks them: CreateTopics and
AlterConfigs through the cluster refuse a ``_`` spelling with Kafka's text and store
nothing, and a stray key already in ``/config/topics/<topic>`` (written before keys were
checked), or a value Kafka refuses, is not applied when its change notification arrives:
the broker warns and DescribeConfigs shows the stray key as stored, beside the real key's
default."""

from __future__ import annotations

import json

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kazoo.client import KazooClient

from tests.cluster.harness.cluster import Cluster
from tests.support.waiting import wait_until


def error_of(future):
    try:
        future.result(timeout=20)
    except Exception as e:  # confluent-kafka raises KafkaException(KafkaError)
        return e.args[0]
    return None


def describe(a: AdminClient, topic: str) -> dict:
    resource = ConfigResource("topic", topic)
    return a.describe_configs([resource])[resource].result(timeout=20)


def test_underscore_keys_are_refused_and_stray_stored_keys_ignored(tmp_path):
    with Cluster(tmp_path, n_brokers=1) as c:
        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(lambda: len(a.list_topics(timeout=5).brokers) == 1, 20, message="broker up")
        err = error_of(
            a.create_topics([NewTopic("typo", 1, 1, config={"cleanup_policy": "compact"})])["typo"]
        )
        assert err is not None and err.code() == KafkaError.INVALID_CONFIG, err
        assert err.str() == "Unknown topic config name: cleanup_policy"
        assert "typo" not in a.list_topics(timeout=5).topics

        assert error_of(a.create_topics([NewTopic("t", 1, 1)])["t"]) is None
        wait_until(lambda: "t" in a.list_topics(timeout=5).topics, 20, message="t created")
        bad = ConfigResource("topic", "t", set_config={"cleanup_policy": "compact"})
        err = error_of(a.alter_configs([bad])[bad])
        assert err is not None and err.code() == KafkaError.INVALID_CONFIG, err
        assert err.str() == "Unknown topic config name: cleanup_policy"

        zk = KazooClient(hosts=c.zk_connect)
        zk.start(timeout=10)
        try:
            stored, _ = zk.get("/config/topics/t")
            assert json.loads(stored)["config"] == {}  # the refused change stored nothing
            config = {
                "cleanup_policy": "compact",
                "retention.ms": "3600000",
                "segment.bytes": "3000000000",
            }
            zk.set("/config/topics/t", json.dumps({"version": 1, "config": config}).encode())
            zk.create(
                "/config/changes/config_change_",
                b'{"version":2,"entity_path":"topics/t"}',
                sequence=True,
            )
        finally:
            zk.stop()
            zk.close()
        wait_until(
            lambda: describe(a, "t")["retention.ms"].value == "3600000", 20, message="applied"
        )
        configs = describe(a, "t")
        assert configs["cleanup_policy"].value == "compact"
        assert configs["cleanup.policy"].value == "delete"  # the stray key is not applied
        warning = (
            "stored configs ignored: cleanup_policy=compact (Unknown topic config name: "
            "cleanup_policy); segment.bytes=3000000000 (Invalid value 3000000000 for "
            "configuration segment.bytes: Not a number of type INT)"
        )
        assert warning in c.broker(1).log_text()
        assert configs["segment.bytes"].value == "1073741824"  # the bad stored value neither
