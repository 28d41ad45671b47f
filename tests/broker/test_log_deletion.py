"""Deleting a log as Kafka's ``asyncDelete`` does: renamed ``-delete`` at once, its
directory removed ``log.segment.delete.delay.ms`` later, never loaded again."""

from __future__ import annotations

import asyncio
import os
import re

import pytest

import logstore
from broker_py.config.kafka_config import BrokerConfig
from broker_py.log import log_manager as log_manager_module
from broker_py.log.log_dir_mover import recover
from broker_py.log.log_manager import log_delete_dir_name
from broker_py.server.kafka_server import KafkaServer
from broker_py.utils.time import MockTime
from logstore.protocol.errors import NotLeaderOrFollowerError

DELETE_DIR = re.compile(r"^t-0\.[0-9a-f]{32}-delete$")
DELAY_MS = 60_000


def _broker(data_dir: str, time: MockTime | None = None, **configs: str) -> KafkaServer:
    config = BrokerConfig({"log.dirs": data_dir, **configs})
    return KafkaServer(config) if time is None else KafkaServer(config, time)


def _append(broker: KafkaServer, n: int) -> None:
    plog = broker.apis.replica_manager.partitions[("t", 0)].log.local_log
    for i in range(n):
        plog.append(logstore.encode_batch([(None, b"v%d" % i)]))


def _delete_dirs(data_dir: str) -> list[str]:
    return [n for n in os.listdir(data_dir) if n.endswith("-delete")]


def test_a_deleted_log_is_renamed_at_once_and_removed_after_the_delay(tmp_path):
    d = str(tmp_path)
    clock = MockTime()
    broker = _broker(d, clock)
    lm = broker.log_manager
    broker.apis.topic_admin_manager.create_topic("t", 1)
    _append(broker, 20)
    in_flight = broker.apis.replica_manager.partitions[("t", 0)].log

    broker.support.store.mark_topic_for_deletion("t")  # StopReplica with delete, here
    assert not os.path.exists(os.path.join(d, "t-0")) and lm.get("t", 0) is None
    (renamed,) = _delete_dirs(d)
    assert DELETE_DIR.match(renamed)
    assert lm.pending_deletions() == [os.path.join(d, renamed)]
    # A read that still holds the old log gets an error, and the dir stays online.
    with pytest.raises(NotLeaderOrFollowerError):
        in_flight.read(0, 1 << 20, 20, True)
    assert lm.live_log_dirs == [d]

    # The topic made again gets a fresh directory while the old one waits.
    broker.apis.topic_admin_manager.create_topic("t", 1)
    assert broker.apis.replica_manager.get_partition("t", 0).log_end_offset == 0
    _append(broker, 3)
    assert broker.apis.replica_manager.get_partition("t", 0).log_end_offset == 3

    clock.advance((DELAY_MS - 1) / 1000)
    assert lm.next_deletion_in_ms(DELAY_MS) == 1
    assert asyncio.run(lm.delete_logs_due(DELAY_MS)) == 0
    assert _delete_dirs(d) == [renamed]
    clock.advance(0.001)
    assert asyncio.run(lm.delete_logs_due(DELAY_MS)) == 1
    assert _delete_dirs(d) == [] and lm.pending_deletions() == []
    assert lm.next_deletion_in_ms(DELAY_MS) is None
    assert broker.apis.replica_manager.get_partition("t", 0).log_end_offset == 3
    lm.shutdown()


def test_a_restarted_broker_does_not_load_a_delete_dir_and_removes_it(tmp_path):
    d = str(tmp_path)
    broker = _broker(d)
    broker.apis.topic_admin_manager.create_topic("t", 1)
    _append(broker, 20)
    broker.log_manager.shutdown()
    # A crash right after the rename: the partition is still assigned here.
    renamed = log_delete_dir_name("t", 0)
    os.rename(os.path.join(d, "t-0"), os.path.join(d, renamed))

    clock = MockTime()
    again = _broker(d, clock)
    clock.advance(DELAY_MS / 1000)  # what is found at startup waits a delay from then
    assert again.log_manager.pending_deletions() == [os.path.join(d, renamed)]
    assert again.apis.replica_manager.get_partition("t", 0).log_end_offset == 0
    assert again.log_manager.set_aside_stray_logs(again.apis.metadata_cache.topics) == []
    assert asyncio.run(again.log_manager.delete_logs_due(DELAY_MS)) == 1
    assert _delete_dirs(d) == []
    again.log_manager.shutdown()


def test_the_log_tasks_remove_deleted_logs_and_retry_a_failure(tmp_path, monkeypatch):
    d = str(tmp_path)
    broker = _broker(d, **{"log.segment.delete.delay.ms": "0"})
    lm = broker.log_manager
    broker.apis.topic_admin_manager.create_topic("t", 1)
    broker.support.store.mark_topic_for_deletion("t")
    (renamed,) = _delete_dirs(d)

    real = log_manager_module.shutil.rmtree
    calls = []

    def failing_once(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:
            raise PermissionError(13, "Permission denied", path)
        real(path, *args, **kwargs)

    monkeypatch.setattr(log_manager_module.shutil, "rmtree", failing_once)
    monkeypatch.setattr("broker_py.server.log_tasks.LOG_DELETION_MIN_WAIT_S", 0.05)

    async def scenario() -> None:
        task = asyncio.create_task(broker.log_tasks._log_deletion_loop())
        try:
            for _ in range(200):
                if not lm.pending_deletions():
                    break
                await asyncio.sleep(0.05)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert calls == [os.path.join(d, renamed)] * 2
    assert _delete_dirs(d) == [] and lm.pending_deletions() == []
    assert lm.live_log_dirs == [d]
    lm.shutdown()


def test_a_delete_dir_name_fits_in_255_characters():
    topic = "x" * 249
    name = log_delete_dir_name(topic, 123456)
    assert len(name) == 255 and name.endswith("-delete")
    assert re.match(r"^x+-123456\.[0-9a-f]{32}-delete$", name)
    assert log_delete_dir_name("t", 0) != log_delete_dir_name("t", 0)


def test_a_move_is_finished_only_from_its_own_delete_dir(tmp_path):
    """A log deleted during a move, then a crash: its -delete dir and the move's -future
    dir have different ids, so the deleted log does not come back."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    plog = logstore.Log.open(str(a / "t-0"))
    plog.append(logstore.encode_batch([(None, b"v")]))
    plog.close()
    (b / f"t-0.{'1' * 32}-future").mkdir()
    os.rename(a / "t-0", a / f"t-0.{'2' * 32}-delete")
    recover([str(a), str(b)])
    assert os.listdir(a) == [f"t-0.{'2' * 32}-delete"] and os.listdir(b) == []
