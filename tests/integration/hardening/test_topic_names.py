"""Finding 3: topic names Kafka refuses.

``"evil\\n"`` and the other names outside Kafka's rule are refused with
INVALID_TOPIC_EXCEPTION (CreateTopics and Metadata's auto-creation alike), and a name
whose metric name would clash with an existing topic's (``a.b`` beside ``a_b``) is
refused as Kafka's AdminZkClient refuses it. DeleteRecords on a legal topic survives a
restart. The broker stays responsive and loses nothing across a SIGKILL.
"""

from __future__ import annotations

import pytest

from tests.integration.clients import create_topic
from tests.integration.hardening.support import (
    WATCH_TOPIC,
    WellBehavedProducer,
    kill_restart_and_check,
)

INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36


def _create_error(admin, name: str, partitions: int = 1):
    from confluent_kafka.admin import NewTopic

    err = admin.create_topics([NewTopic(name, partitions, 1)])[name].exception(30)
    return None if err is None else err.args[0]


@pytest.mark.parametrize("name", ["evil\n", "a b", ".", "..", "x" * 250, "ünï", "t/../x", ""])
def test_names_outside_kafkas_rule_are_refused(module_broker, name):
    from logstore.protocol.messages.topic_admin import CreateTopicsRequest
    from tests.integration.clients import wire_call

    body = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[]
            )
        ],
        timeout_ms=10000,
        validate_only=False,
    )
    r = wire_call(module_broker.bootstrap, body, 5).topics[0]
    assert r.error_code == INVALID_TOPIC_EXCEPTION, (name, r)
    assert r.error_message


def test_colliding_names_and_names_that_survive_a_restart(broker_factory):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    b = broker_factory()
    create_topic(b.bootstrap, WATCH_TOPIC)
    well = WellBehavedProducer(b.bootstrap).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert _create_error(admin, "a_b") is None
    err = _create_error(admin, "a.b")
    assert (
        err.code() == INVALID_TOPIC_EXCEPTION and "collides with existing topics: a_b" in err.str()
    )
    assert _create_error(admin, "a_b").code() == TOPIC_ALREADY_EXISTS
    # Metadata's auto-creation applies the same rule (the topic is not created).
    meta = admin.list_topics("evil\n", timeout=10)
    assert "evil\n" not in meta.topics or meta.topics["evil\n"].error is not None
    # DeleteRecords on a legal topic is kept across a restart.
    create_topic(b.bootstrap, "kept.name")
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        p.produce("kept.name", str(i).encode())
    p.flush(30)
    res = admin.delete_records([TopicPartition("kept.name", 0, 4)])
    for f in res.values():
        f.result(30)
    well.stop()
    well.assert_responsive()
    b.restart()
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g"})
    low, high = c.get_watermark_offsets(TopicPartition("kept.name", 0), timeout=10)
    c.close()
    assert (low, high) == (4, 10)
    topics = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics
    assert "a.b" not in topics and "a_b" in topics
    kill_restart_and_check(b, well.acked)
