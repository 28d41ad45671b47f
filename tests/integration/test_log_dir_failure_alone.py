"""A broker alone (no ZooKeeper) whose log dir fills up (KIP-112): the partitions in the
failed dir go offline (no leader, KAFKA_STORAGE_ERROR from the broker), those in its
other dir keep taking writes; with its only dir failed the broker halts. The disk is a
small tmpfs the test mounts (root)."""

from __future__ import annotations

import contextlib
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient

from tests.support import tmpfs
from tests.support.waiting import wait_until

KAFKA_STORAGE_ERROR = 56

pytestmark = pytest.mark.timeout(120)


def _produce(bootstrap: str, topic: str, partition: int, n: int, timeout: float) -> int:
    """Sends ``n`` records with acks=all; how many were acknowledged within ``timeout``."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": int(timeout * 1000)}
    )
    acked = []
    for i in range(n):
        producer.produce(
            topic,
            b"v%d-" % i + b"x" * 2000,
            partition=partition,
            on_delivery=lambda err, msg: acked.append(err is None),
        )
    producer.flush(timeout + 5)
    return sum(acked)


def test_alone_a_failed_dir_takes_its_partitions_offline(broker_factory, tmp_path):
    disk, other = tmp_path / "small", tmp_path / "other"
    other.mkdir()
    with tmpfs.mounted_tmpfs(disk, 16):
        # The first dir holds a broker alone's metadata: the small disk is the second.
        b = broker_factory({"log.dirs": f"{other},{disk}"})
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("alone", 2, 1)])["alone"].result(10)
        on_disk = 0 if (disk / "alone-0").is_dir() else 1
        assert (other / f"alone-{1 - on_disk}").is_dir()
        assert _produce(b.bootstrap, "alone", on_disk, 100, 10) == 100

        tmpfs.fill(disk)
        # At most what fits in the last page the segment already has (tmpfs pages).
        assert _produce(b.bootstrap, "alone", on_disk, 50, 5) <= 2

        def leaderless() -> bool:
            md = admin.list_topics("alone", timeout=5).topics["alone"]
            return md.partitions[on_disk].leader == -1

        wait_until(leaderless, 15, 0.1, "the failed dir's partition without a leader")
        assert _produce(b.bootstrap, "alone", 1 - on_disk, 100, 10) == 100
        kafka_admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            (described,) = kafka_admin.describe_log_dirs()
        finally:
            kafka_admin.close()
        errors = {d["log_dir"]: d["error_code"] for d in described["log_dirs"]}
        assert errors == {str(other): 0, str(disk): KAFKA_STORAGE_ERROR}
        assert b.alive()
        # Back only through a restart, with room again: every record is still there.
        tmpfs.free(disk)
        b.restart()
        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics("alone", timeout=10)
        assert md.topics["alone"].partitions[on_disk].leader == 0
        assert _produce(b.bootstrap, "alone", on_disk, 10, 10) == 10


def test_alone_with_its_only_dir_failed_the_broker_halts(broker_factory, tmp_path):
    disk = tmp_path / "only"
    with tmpfs.mounted_tmpfs(disk, 16):
        b = broker_factory({"log.dirs": str(disk)})
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("solo", 1, 1)])["solo"].result(10)
        assert _produce(b.bootstrap, "solo", 0, 10, 10) == 10
        tmpfs.fill(disk)
        started = time.monotonic()
        try:
            _produce(b.bootstrap, "solo", 0, 10, 3)
        except KafkaException:
            pass
        wait_until(lambda: not b.alive(), 15, 0.1, "the broker halted")
        assert b.proc.wait(5) == 1
        assert time.monotonic() - started < 15
        assert "because all log dirs" in b.log_text()


def test_alone_a_failed_metadata_dir_halts_the_broker(broker_factory, tmp_path):
    disk, other = tmp_path / "meta", tmp_path / "other"
    other.mkdir()
    with tmpfs.mounted_tmpfs(disk, 16):
        b = broker_factory({"log.dirs": f"{disk},{other}"})
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("m", 2, 1)])["m"].result(10)
        on_disk = 0 if (disk / "m-0").is_dir() else 1
        tmpfs.fill(disk)
        with contextlib.suppress(KafkaException):
            _produce(b.bootstrap, "m", on_disk, 10, 3)
        wait_until(lambda: not b.alive(), 15, 0.1, "the broker halted")
        assert b.proc.wait(5) == 1
        assert "because its metadata log dir" in b.log_text()
