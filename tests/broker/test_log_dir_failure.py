"""A failed log dir on one broker (KIP-112), in process: the failure channel, the log
manager and the replica manager over real logs in two log dirs. The cluster side (the
controller moving leadership, a broker halting) runs on real processes in
tests/cluster/test_log_dir_failure.py."""

from __future__ import annotations

import asyncio
import errno
import os
import uuid
from types import SimpleNamespace

import pytest

import logstore
from broker_py.common.topic import TopicInfo
from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.controller_request_batch import (
    StopReplicaPartitionState,
    StopReplicaRequestData,
)
from broker_py.log.log_dir_failure_channel import LogDirFailureChannel, is_log_dir_failure
from broker_py.log.log_manager import LogManager
from broker_py.replication.fetch_data import FetchParams
from broker_py.replication.replica_manager import ReplicaManager
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaStorageError

from .test_replica_manager import ME, _lai, batch

TOPIC = TopicInfo("t", uuid.uuid4(), 2)


def _fetch_info(partition: int) -> SimpleNamespace:
    return SimpleNamespace(
        topic="t",
        partition=partition,
        fetch_offset=0,
        max_bytes=1 << 20,
        current_leader_epoch=-1,
        last_fetched_epoch=-1,
        fetcher_log_start_offset=-1,
    )


def test_the_channel_takes_a_dir_offline_once_and_tells_its_listener():
    channel = LogDirFailureChannel()
    heard: list[str] = []
    assert channel.maybe_add_offline_log_dir("/d1", "write failed: ENOSPC")
    assert not channel.maybe_add_offline_log_dir("/d1/", "again")  # the same dir
    channel.set_listener(heard.append)
    assert heard == ["/d1"], "a dir offline before the listener was set is handed over"
    assert channel.maybe_add_offline_log_dir("/d2", "EIO")
    assert not channel.maybe_add_offline_log_dir("/d2", "EIO")
    assert heard == ["/d1", "/d2"]
    assert channel.has_offline_log_dir("/d1") and not channel.has_offline_log_dir("/d3")
    assert channel.offline_log_dirs() == {"/d1": "write failed: ENOSPC", "/d2": "EIO"}


def test_only_the_disks_errors_take_a_dir_offline():
    assert is_log_dir_failure(OSError(errno.ENOSPC, "No space left on device"))
    assert is_log_dir_failure(OSError(errno.EIO, "Input/output error"))
    assert is_log_dir_failure(OSError(errno.EROFS, "Read-only file system"))
    assert is_log_dir_failure(logstore.LogIOError("write segment: os error 28"))
    assert not is_log_dir_failure(OSError(errno.EMFILE, "Too many open files"))
    assert not is_log_dir_failure(OSError(errno.ENFILE, "Too many open files in system"))
    assert not is_log_dir_failure(OSError(errno.EFBIG, "File too large"))  # RLIMIT_FSIZE
    assert not is_log_dir_failure(logstore.CorruptRecordError("bad crc"))
    assert not is_log_dir_failure(ValueError("not I/O"))


@pytest.fixture
def two_dirs(tmp_path):
    """A replica manager over a log manager of two log dirs, leading t-0 (in the first
    dir, followers 2 and 3 in its ISR) and t-1 (in the second)."""
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    for d in dirs:
        os.makedirs(d)
    log_manager = LogManager(dirs)
    manager = ReplicaManager(ME, lambda topic: 2, MockTime(), log_manager=log_manager)
    changes: list[tuple[list, list]] = []
    manager.on_leadership_change.append(lambda led, followed: changes.append((led, followed)))
    error, errors = manager.become_leader_or_follower(
        _lai(1, ("t", 0, ME, 0, [ME, 2, 3], [ME, 2, 3], 0), ("t", 1, ME, 0, [ME], [ME], 0)),
        lambda topic, index: (TOPIC, {}),
    )
    assert error == ErrorCode.NONE and set(errors.values()) == {ErrorCode.NONE}
    assert log_manager.dir_of("t", 0) == dirs[0] and log_manager.dir_of("t", 1) == dirs[1]
    changes.clear()
    yield manager, log_manager, dirs, changes
    log_manager.shutdown()


def test_a_failed_dir_stops_serving_its_partitions_and_only_them(two_dirs):
    manager, log_manager, (a, b), changes = two_dirs
    answers: list = []
    manager.append_records(10_000, -1, [("t", [(0, batch(2), None)])], answers.append)
    assert answers == [], "acks=all waits for the followers"
    partition_dir = os.path.join(a, "t-0")

    # An append that meets an I/O error reports the dir; the broker's handler then
    # stops serving it (done here by hand: the handler runs on the event loop).
    log = manager.get_partition("t", 0).log
    failure = log.error(logstore.LogIOError("write segment: No space left on device"))
    assert isinstance(failure, KafkaStorageError)
    assert log_manager.failure_channel.has_offline_log_dir(a)
    assert manager.handle_log_dir_failure(a) == [("t", 0)]

    ((_, [waiting]),) = answers[0]
    assert (waiting.error_code, waiting.base_offset) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
    assert changes == [([], [("t", 0)])], "the coordinators hear it is no longer led here"
    assert log_manager.live_log_dirs == [b] and log_manager.get("t", 0) is None
    assert not os.path.exists(os.path.join(partition_dir, ".kafka_cleanshutdown")), (
        "an offline log is dropped unwritten: the next start recovers it"
    )

    answers.clear()
    manager.append_records(
        1000, 1, [("t", [(0, batch(), None), (1, batch(), None)])], answers.append
    )
    ((_, results),) = answers[0]
    assert [(r.error_code, r.base_offset) for r in results] == [
        (ErrorCode.KAFKA_STORAGE_ERROR, -1),
        (ErrorCode.NONE, 0),
    ]
    fetched = manager.read_from_local_log(
        FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20),
        [_fetch_info(0), _fetch_info(1)],
    )
    assert [p.error_code for p in fetched.reads] == [
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NONE,
    ]
    # The controller learns of it from the answers to its requests.
    error, errors = manager.become_leader_or_follower(
        _lai(1, ("t", 0, ME, 1, [ME], [ME, 2, 3], 1)), lambda topic, index: (TOPIC, {})
    )
    assert list(errors.values()) == [ErrorCode.KAFKA_STORAGE_ERROR]
    _, stopped = manager.stop_replicas(
        StopReplicaRequestData(
            1, 1, -1, (StopReplicaPartitionState(TopicPartition("t", 0), -2, True),)
        )
    )
    assert list(stopped.values()) == [ErrorCode.KAFKA_STORAGE_ERROR]
    assert os.path.isdir(partition_dir), "nothing in an offline dir is deleted"

    # Nor is its log made anew in the live dir (its records are in the failed one).
    assert (
        asyncio.run(
            manager.open_new_logs(
                _lai(1, ("t", 0, ME, 2, [ME], [ME, 2, 3], 2)), lambda topic, index: (TOPIC, {})
            )
        )
        == {}
    )
    with pytest.raises(KafkaStorageError, match="offline log dir"):
        log_manager.place("t", 0)
    assert not os.path.exists(os.path.join(b, "t-0"))

    described = {d.log_dir: d for d in manager.describe_log_dirs(None)}
    assert described[a].error == ErrorCode.KAFKA_STORAGE_ERROR and described[a].replicas == []
    assert described[b].error == ErrorCode.NONE
    assert [(r.topic, r.partition) for r in described[b].replicas] == [("t", 1)]
    # No new log goes to the offline dir.
    assert log_manager.place("t", 9) == (b, False)


def test_no_live_dir_left_refuses_new_logs(two_dirs):
    manager, log_manager, (a, b), _ = two_dirs
    manager.handle_log_dir_failure(a)
    manager.handle_log_dir_failure(b)
    assert log_manager.live_log_dirs == []
    with pytest.raises(KafkaStorageError, match="every log dir"):
        log_manager.place("t", 9)


def test_a_partition_in_two_log_dirs_stops_the_start(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        (d / "t-0").mkdir(parents=True)
    with pytest.raises(KafkaStorageError, match="duplicate log directories for t-0") as e:
        LogManager([str(d) for d in dirs])
    assert str(dirs[0]) in str(e.value) and str(dirs[1]) in str(e.value)
    (dirs[1] / "t-0").rmdir()
    LogManager([str(d) for d in dirs]).shutdown()  # the locks were let go
