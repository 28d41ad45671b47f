"""Chaos scenarios: long, seeded fault runs against a real cluster, run by
``scripts/chaos.sh [--seed N] [--minutes M]`` (not part of the quick suite's budget).

How a scenario uses the harness (tests/cluster/harness/):

1. Start a cluster: ``with Cluster(tmp_path, n_brokers=3, zookeeper=True,
   zk_session_timeout_ms=6000, overrides={...}) as c:`` -- one ZooKeeper, three brokers,
   every link through a proxy; the ``with`` kills everything on the way out and
   prints the logs' tails if the scenario failed.
2. Create the topic (replication factor 3, ``min.insync.replicas`` 2) with
   ``c.create_topic``.
3. Draw the fault schedule from the seed: ``faults = schedule(chaos_seed,
   chaos_seconds, c.node_names, kinds=...)`` -- kills, SIGTERMs, pauses, partitions,
   one-way partitions, isolation and delays, one at a time, each undone before the
   next, all within the run.
4. Run the workload with the nemesis alongside: ``Workload(c.bootstrap_servers, topic,
   partitions=3, count=..., seconds=chaos_seconds).run(during=lambda stop:
   Nemesis(c).run(faults, stop))``. Producers of all three clients send unique values
   with acks=all and idempotence; consumers poll throughout and then read to the end.
5. Check: ``history.check()`` must be ``ok`` (no lost, duplicated, inconsistent,
   non-monotonic or skipped records); stop the brokers and compare the replicas'
   segment files up to the high watermark with ``compare_replicas`` (and feed
   ``replica_reads`` to the checker); report ``history.longest_ack_gap()`` as the
   unavailability window.
6. On failure, print the seed, the nemesis log and the checker's summary, so that the
   run can be repeated with ``--seed``.

Every scenario is bounded: the nemesis schedule ends by ``chaos_seconds``, every client
loop has a count and a time limit, and chaos.sh puts a hard timeout around pytest.
Scenarios: test_replication_matrix.py (Kafka's replication_test), test_nemesis.py
(isolated leader, paused follower, ZooKeeper restart, rolling restart, random faults)
and test_disk_full.py (KIP-112: a full log dir on the leader, on a follower, every log
dir of the leader; log dirs on tmpfs mounts, root only); each skips without CHAOS_SEED.
Kafka's transactions_test runs in the quick suite (tests/cluster/test_exactly_once_copy.py).
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def chaos_seed() -> int:
    """``CHAOS_SEED`` (set by scripts/chaos.sh), 0 by default."""
    return int(os.environ.get("CHAOS_SEED", "0"))


@pytest.fixture
def chaos_seconds() -> float:
    """The fault phase's length: ``CHAOS_MINUTES`` (default 1) in seconds."""
    return float(os.environ.get("CHAOS_MINUTES", "1")) * 60.0
