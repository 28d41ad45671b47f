"""Finding 1: one admin request freezing the broker, and a kill during it leaving a
broker that cannot start.

- CreatePartitions to 100,000 (and a CreatePartitions frame with a count near 2^31) is
  refused up front with POLICY_VIOLATION naming ``max.broker.partitions``; nothing is
  created and nothing stalls.
- A legitimate large CreateTopics runs in steps off the event loop: a well-behaved
  producer alongside sees no error and no stall over a second.
- SIGKILL at a random point during a large creation leaves a broker that starts, with
  every acknowledged message, and a topic whose partitions all have their logs.
"""

from __future__ import annotations

import os
import random
import threading
import time

from tests.integration.clients import create_topic, wire_call
from tests.integration.hardening.support import (
    WATCH_TOPIC,
    WellBehavedProducer,
    kill_restart_and_check,
    open_fds,
    rss_mb,
)

POLICY_VIOLATION = 44


def _create_partitions(bootstrap: str, topic: str, count: int):
    from logstore.protocol.messages.topic_admin import CreatePartitionsRequest

    body = CreatePartitionsRequest(
        topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=count, assignments=None)
        ],
        timeout_ms=30000,
        validate_only=False,
    )
    return wire_call(bootstrap, body, 1).results[0]


def test_partition_counts_past_the_limit_are_refused_up_front(broker_factory):
    b = broker_factory({"max.broker.partitions": "2000"})
    create_topic(b.bootstrap, WATCH_TOPIC)
    create_topic(b.bootstrap, "t")
    well = WellBehavedProducer(b.bootstrap).start()
    fds = open_fds(b.proc.pid)
    for count in (100_000, 2**31 - 1, 2001):
        r = _create_partitions(b.bootstrap, "t", count)
        assert r.error_code == POLICY_VIOLATION, (count, r)
        assert "max.broker.partitions=2000" in r.error_message
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    err = admin.create_topics([NewTopic("big", 5000, 1)])["big"].exception(30)
    assert (
        err is not None
        and err.args[0].code() == POLICY_VIOLATION
        and "max.broker.partitions" in err.args[0].str()
    )
    assert "big" not in admin.list_topics(timeout=10).topics
    well.stop()
    well.assert_responsive()
    assert open_fds(b.proc.pid) <= fds + 5
    assert not [d for d in os.listdir(b.data_dir) if d.startswith("big-")]
    kill_restart_and_check(b, well.acked)


def test_a_large_creation_does_not_stall_clients_and_survives_a_kill(broker_factory):
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    b = broker_factory()
    create_topic(b.bootstrap, WATCH_TOPIC)
    well = WellBehavedProducer(b.bootstrap).start()
    rss_before = rss_mb(b.proc.pid)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("large", 1500, 1)], operation_timeout=120, request_timeout=120)[
        "large"
    ].result(180)
    admin.create_partitions(
        [NewPartitions("large", 2500)], operation_timeout=120, request_timeout=120
    )["large"].result(180)
    assert len(admin.list_topics("large", timeout=10).topics["large"].partitions) == 2500
    assert rss_mb(b.proc.pid) < rss_before + 300
    # A kill at a random point of the next creation.
    creating = threading.Thread(
        target=lambda: admin.create_topics(
            [NewTopic("killed", 2000, 1)], operation_timeout=60, request_timeout=60
        ),
        daemon=True,
    )
    creating.start()
    time.sleep(random.uniform(0.2, 3.0))
    well.stop()
    well.assert_responsive()
    kill_restart_and_check(b, well.acked, within_s=0.5)
    topics = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics
    if "killed" in topics:  # the steps written before the kill: each with its log
        parts = len(topics["killed"].partitions)
        assert all(os.path.isdir(os.path.join(b.data_dir, f"killed-{p}")) for p in range(parts))
    assert len(topics["large"].partitions) == 2500
