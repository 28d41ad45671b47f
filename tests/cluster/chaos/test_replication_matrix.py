"""Kafka's replication_test matrix (tests/kafkatest/tests/core/replication_test.py) on
three brokers and ZooKeeper: each fault of ``clean_shutdown``, ``hard_shutdown``,
``clean_bounce`` and ``hard_bounce`` (five bounces, each waiting for full ISRs) on the
leader of partition 0 or on the controller, while producers of confluent-kafka,
kafka-python and aiokafka (acks=all, idempotent) write to a topic of 6 partitions, RF 3,
``min.insync.replicas`` 2, and consumers of the three clients read it.

Each case writes for at least ``CHAOS_MINUTES`` (and :data:`~.scenario.TAIL` seconds
after the last bounce), then settles the cluster and checks: every acknowledged record
consumed, in order per partition, none twice; the replicas' segment files identical
below the high watermark. It reports the acknowledged count, the longest time a
producer went without an acknowledgement and the duration. Run by scripts/chaos.sh;
skipped without ``CHAOS_SEED``.
"""

from __future__ import annotations

import time

import pytest

from tests.cluster.chaos import scenario
from tests.cluster.harness import faults

BOUNCES = 5
# Five bounces that each wait up to 60 s for full ISRs, plus restarts.
FAULT_BOUND = BOUNCES * 100


@scenario.chaos_only
@pytest.mark.timeout(scenario.TIMEOUT + FAULT_BOUND)
@pytest.mark.parametrize("target", faults.TARGETS)
@pytest.mark.parametrize("fault", faults.FAULTS)
def test_replication(tmp_path, chaos_seed, chaos_seconds, fault, target):
    started = time.monotonic()
    topic = "matrix"
    notes: list[str] = []
    errors: list[BaseException] = []
    with scenario.chaos_cluster(tmp_path) as c:
        scenario.create_topic(c, topic)

        def body(_t0: float) -> None:
            faults.run_fault(c, fault, target, topic, bounces=BOUNCES, log=notes)
            notes.append(f"{time.strftime('%H:%M:%S')} {fault} done")

        wl = scenario.workload(c, topic, chaos_seconds + FAULT_BOUND)
        t = time.monotonic()
        history = wl.run(during=scenario.faults_then_tail(body, errors, chaos_seconds))
        scenario.finish(
            c,
            f"matrix/{fault}/{target}",
            chaos_seed,
            topic,
            wl,
            history,
            started,
            time.monotonic() - t,
            notes,
            errors,
        )
