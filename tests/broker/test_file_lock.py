"""The ``.lock`` file of each log dir: one broker per dir, in this process or another."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from broker_py.config.kafka_config import BrokerConfig
from broker_py.log.file_lock import LOCK_FILE, FileLock, LogDirInUseError, lock_log_dirs
from broker_py.server.kafka_server import KafkaServer

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
if sys.argv[2] == "posix":
    fcntl.lockf(fd, fcntl.LOCK_EX)   # the kind Java's FileChannel.tryLock takes
else:
    fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def _hold(path: str, kind: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, path, kind], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_second_lock_in_the_same_process_is_refused_until_the_first_is_released(tmp_path):
    first = lock_log_dirs([str(tmp_path)])
    with pytest.raises(LogDirInUseError) as e:
        lock_log_dirs([str(tmp_path)])
    assert e.value.log_dir == str(tmp_path)
    assert os.path.join(str(tmp_path), LOCK_FILE) in str(e.value)
    for lock in first:
        lock.unlock()
    for lock in lock_log_dirs([str(tmp_path)]):
        lock.unlock()


@pytest.mark.parametrize("kind", ["posix", "flock"])
def test_a_lock_held_by_another_process_is_refused_and_goes_with_it(tmp_path, kind):
    path = str(tmp_path / LOCK_FILE)
    holder = _hold(path, kind)
    try:
        lock = FileLock(path)
        assert not lock.try_lock()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert lock.try_lock()  # a killed holder leaves no stale lock
    lock.unlock()
    lock.unlock()  # idempotent


def test_a_refused_dir_releases_the_dirs_locked_before_it(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    held = lock_log_dirs([b])
    with pytest.raises(LogDirInUseError) as e:
        lock_log_dirs([a, b])
    assert e.value.log_dir == b
    for lock in lock_log_dirs([a]):  # a was released
        lock.unlock()
    for lock in held:
        lock.unlock()


def test_a_second_broker_on_the_same_dirs_stops_before_touching_them(tmp_path):
    dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    broker = KafkaServer(BrokerConfig({"log.dirs": dirs}))
    broker.apis.topic_admin_manager.create_topic("t", 2)
    before = {p: os.stat(p).st_mtime_ns for p in _files(tmp_path)}
    with pytest.raises(LogDirInUseError):
        KafkaServer(BrokerConfig({"log.dirs": dirs, "broker.id": "7"}))
    assert {p: os.stat(p).st_mtime_ns for p in _files(tmp_path)} == before
    broker.log_manager.shutdown()
    again = KafkaServer(BrokerConfig({"log.dirs": dirs}))  # the lock went with the shutdown
    assert again.cluster_id == broker.cluster_id
    again.log_manager.shutdown()


def test_a_broker_that_fails_to_load_releases_its_dirs(tmp_path):
    from broker_py.config.kafka_config import ConfigError

    d = str(tmp_path)
    KafkaServer(BrokerConfig({"log.dirs": d, "broker.id": "1"})).log_manager.shutdown()
    with pytest.raises(ConfigError):
        KafkaServer(BrokerConfig({"log.dirs": d, "broker.id": "2"}))
    KafkaServer(BrokerConfig({"log.dirs": d, "broker.id": "1"})).log_manager.shutdown()


def _files(root) -> list[str]:
    return sorted(os.path.join(d, n) for d, _, names in os.walk(root) for n in names)
