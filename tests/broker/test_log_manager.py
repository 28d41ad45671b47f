"""LogManager: partitions spread over log.dirs, reopened where they are."""

from __future__ import annotations

import os
import shutil

import pytest

import logstore
from broker_py.config.kafka_config import BrokerConfig
from broker_py.server.kafka_server import KafkaServer


def _count(d):
    return sum(1 for n in os.listdir(d) if n.rsplit("-", 1)[-1].isdigit())


def test_new_partitions_go_to_the_dir_with_fewest(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")]
    broker = KafkaServer(BrokerConfig({"log.dirs": ",".join(dirs)}))
    broker.apis.topic_admin_manager.create_topic("t", 6)
    assert [_count(d) for d in dirs] == [2, 2, 2]
    broker.apis.topic_admin_manager.create_topic("u", 1)
    broker.apis.topic_admin_manager.create_topic("v", 2)
    assert sorted(_count(d) for d in dirs) == [3, 3, 3]
    placement = {key: broker.log_manager._dir_of[key] for key in broker.log_manager.logs}
    broker.log_manager.shutdown()

    # A restarted broker opens each partition in the directory that holds it.
    again = KafkaServer(BrokerConfig({"log.dirs": ",".join(dirs)}))
    for topic in again.apis.metadata_cache.topics.values():
        for p in range(topic.partitions):
            again.log_manager.open_log(
                topic, p, again.apis.log_config_manager.effective_config(topic)
            )
    assert {key: again.log_manager._dir_of[key] for key in again.log_manager.logs} == placement
    assert [_count(d) for d in dirs] == [3, 3, 3]
    again.log_manager.shutdown()


def test_meta_properties_guard_the_broker_id(tmp_path):
    d = str(tmp_path / "data")
    KafkaServer(BrokerConfig({"log.dirs": d, "broker.id": "1"})).log_manager.shutdown()
    with open(os.path.join(d, "meta.properties")) as f:
        text = f.read()
    assert "broker.id=1" in text and "cluster.id=" in text
    import pytest

    from broker_py.config.kafka_config import ConfigError

    with pytest.raises(ConfigError) as e:
        KafkaServer(BrokerConfig({"log.dirs": d, "broker.id": "2"}))
    assert e.value.key == "broker.id"


# --- moves between log dirs interrupted by a crash --------------------------------------

MOVE_ID = "0123456789abcdef0123456789abcdef"


def _partition(path: str, n: int = 50) -> None:
    """A real partition log of ``n`` records at ``path``, closed cleanly."""
    import logstore

    plog = logstore.Log.open(path, segment_bytes=4096)
    for i in range(n):
        plog.append(logstore.encode_batch([(b"k%d" % i, b"v%d" % i)]))
    plog.close()


def _values(path: str) -> list[bytes]:
    import logstore

    plog = logstore.Log.open(path)
    try:
        return [r.value for b in logstore.decode_batches(plog.read(0, 1 << 20)) for r in b.records]
    finally:
        plog.close()


def _dirs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    return str(a), str(b)


def test_a_crash_during_the_copy_drops_the_future_log(tmp_path):
    from broker_py.log.log_dir_mover import copy_files, recover

    a, b = _dirs(tmp_path)
    _partition(os.path.join(a, "t-0"))
    copy_files(os.path.join(a, "t-0"), os.path.join(b, f"t-0.{MOVE_ID}-future"))
    recover([a, b])
    assert os.listdir(a) == ["t-0"] and os.listdir(b) == []
    assert _values(os.path.join(a, "t-0")) == [b"v%d" % i for i in range(50)]


def test_a_crash_between_the_renames_finishes_the_move(tmp_path):
    from broker_py.log.log_dir_mover import copy_files, recover

    a, b = _dirs(tmp_path)
    _partition(os.path.join(a, "t-0"))
    copy_files(os.path.join(a, "t-0"), os.path.join(b, f"t-0.{MOVE_ID}-future"))
    os.rename(os.path.join(a, "t-0"), os.path.join(a, f"t-0.{MOVE_ID}-delete"))
    recover([a, b])
    # the old copy is left for the log manager to delete
    assert os.listdir(a) == [f"t-0.{MOVE_ID}-delete"] and os.listdir(b) == ["t-0"]
    assert _values(os.path.join(b, "t-0")) == [b"v%d" % i for i in range(50)]


def test_a_crash_after_the_renames_leaves_the_old_copy_for_deletion(tmp_path):
    from broker_py.log.log_dir_mover import copy_files, recover

    a, b = _dirs(tmp_path)
    _partition(os.path.join(a, "t-0"))
    copy_files(os.path.join(a, "t-0"), os.path.join(b, "t-0"))
    os.rename(os.path.join(a, "t-0"), os.path.join(a, f"t-0.{MOVE_ID}-delete"))
    recover([a, b])
    assert os.listdir(a) == [f"t-0.{MOVE_ID}-delete"] and os.listdir(b) == ["t-0"]
    assert _values(os.path.join(b, "t-0")) == [b"v%d" % i for i in range(50)]


def test_a_delete_dir_without_its_future_log_is_a_deleted_log(tmp_path):
    """A move fsyncs its future dir's name before renaming the old copy, so a -delete
    dir alone is a deleted log (LogManager.delete_log): never restored."""
    from broker_py.log.log_dir_mover import recover

    a, b = _dirs(tmp_path)
    _partition(os.path.join(a, "t-0"))
    os.rename(os.path.join(a, "t-0"), os.path.join(a, f"t-0.{MOVE_ID}-delete"))
    recover([a, b])
    assert os.listdir(a) == [f"t-0.{MOVE_ID}-delete"] and os.listdir(b) == []


def test_the_broker_settles_interrupted_moves_before_opening_partitions(tmp_path):
    from broker_py.log.log_dir_mover import copy_files

    a, b = _dirs(tmp_path)
    broker = KafkaServer(BrokerConfig({"log.dirs": f"{a},{b}"}))
    broker.apis.topic_admin_manager.create_topic("t", 1)
    src = broker.log_manager.dir_of("t", 0)
    other = b if src == a else a
    broker.log_manager.shutdown()
    copy_files(os.path.join(src, "t-0"), os.path.join(other, f"t-0.{MOVE_ID}-future"))
    os.rename(os.path.join(src, "t-0"), os.path.join(src, f"t-0.{MOVE_ID}-delete"))
    again = KafkaServer(BrokerConfig({"log.dirs": f"{a},{b}"}))
    topic = again.apis.metadata_cache.get("t")
    again.log_manager.open_log(topic, 0, again.apis.log_config_manager.effective_config(topic))
    assert again.log_manager.dir_of("t", 0) == other
    # the old copy awaits deletion under its -delete name
    old_copy = os.path.join(src, f"t-0.{MOVE_ID}-delete")
    assert [n for n in os.listdir(src) if n.startswith("t-0")] == [os.path.basename(old_copy)]
    assert again.log_manager.pending_deletions() == [old_copy]
    again.log_manager.shutdown()


def test_sync_files_makes_the_copy_exact(tmp_path):
    from broker_py.log.log_dir_mover import copy_files, sync_files

    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "a.log").write_bytes(b"1" * 100)
    (src / "b.index").write_bytes(b"2" * 10)
    (src / "c.log.deleted").write_bytes(b"old")
    (src / "recovery-point-offset-checkpoint.tmp").write_bytes(b"half")  # being written
    copy_files(str(src), str(dst))
    assert sorted(os.listdir(dst)) == ["a.log", "b.index"]
    (src / "a.log").write_bytes(b"1" * 150)  # grew
    (src / "b.index").unlink()  # went
    (src / "d.snapshot").write_bytes(b"3")  # appeared
    sync_files(str(src), str(dst))
    assert sorted(os.listdir(dst)) == ["a.log", "d.snapshot"]
    assert (dst / "a.log").read_bytes() == b"1" * 150


def test_copy_files_leaves_out_files_that_go_while_it_copies(tmp_path, monkeypatch):
    """A live log renames its checkpoints into place and rolls segments while the
    copy runs: a file listed but gone by the time it is copied is left out."""
    import shutil

    from broker_py.log import log_dir_mover

    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "a.log").write_bytes(b"1")
    (src / "b.log").write_bytes(b"2")
    real = shutil.copy2

    def copy_after_b_went(a, b):
        (src / "b.log").unlink(missing_ok=True)
        return real(a, b)

    monkeypatch.setattr(log_dir_mover.shutil, "copy2", copy_after_b_went)
    log_dir_mover.copy_files(str(src), str(dst))
    assert sorted(os.listdir(dst)) == ["a.log"]


def test_a_move_reports_the_bytes_its_future_log_holds(tmp_path):
    from broker_py.log.log_dir_mover import Move, copy_files

    a, b = _dirs(tmp_path)
    move = Move("t-0", a, b, copied_to=0)
    assert move.copied_bytes() == 0  # nothing copied yet
    os.makedirs(os.path.join(a, "t-0"))
    with open(os.path.join(a, "t-0", "00000000000000000000.log"), "wb") as f:
        f.write(b"x" * 1234)
    copy_files(os.path.join(a, "t-0"), move.future_path)
    assert move.copied_bytes() == 1234


def test_a_move_catches_up_off_the_event_loop_before_its_last_step(tmp_path, monkeypatch):
    """Writes made while the first copy runs are copied in a catch-up round after a
    roll, so the last step, which holds the partition, copies only a short tail."""
    import asyncio

    import logstore
    from broker_py.log import log_dir_mover

    a, b = _dirs(tmp_path)
    monkeypatch.setattr(log_dir_mover, "CATCH_UP_BYTES", 64 << 10)
    broker = KafkaServer(BrokerConfig({"log.dirs": f"{a},{b}"}))
    broker.apis.topic_admin_manager.create_topic("t", 1)
    src_dir = broker.log_manager.dir_of("t", 0)
    dest_dir = b if src_dir == a else a
    plog = broker.apis.replica_manager.partitions[("t", 0)].log.local_log
    batch = logstore.encode_batch([(None, os.urandom(1000)) for _ in range(10)])
    for _ in range(20):
        plog.append(batch)
    real_copy = log_dir_mover.copy_files
    tails = []
    real_sync = log_dir_mover.sync_files

    def copy_while_written(src, dst, stopped=None):
        real_copy(src, dst, stopped)
        for _ in range(30):  # ~300 KB after the copy listed its files
            plog.append(batch)

    def sync_measuring_tail(src, dst):
        newest = max(n for n in os.listdir(src) if n.endswith(".log"))
        tails.append(os.path.getsize(os.path.join(src, newest)))
        real_sync(src, dst)

    monkeypatch.setattr(log_dir_mover, "copy_files", copy_while_written)
    monkeypatch.setattr(log_dir_mover, "sync_files", sync_measuring_tail)

    async def move():
        broker.log_dir_mover.start("t", 0, dest_dir)
        m = broker.log_dir_mover.moves[("t", 0)]
        await m.task
        return m

    m = asyncio.run(move())
    assert m.catch_up_rounds == 1
    assert tails == [0]  # nothing was written after the catch-up round's roll
    assert broker.log_manager.dir_of("t", 0) == dest_dir
    moved = broker.apis.replica_manager.partitions[("t", 0)].log.local_log
    assert moved.log_end_offset == 500
    values, offset = [], 0
    while offset < 500:
        for got in logstore.decode_batches(moved.read(offset, 1 << 20)):
            values += [r.value for r in got.records]
            offset = got.base_offset + got.last_offset_delta + 1
    assert len(values) == 500
    assert values[-10:] == [r.value for r in logstore.decode_batches(batch)[0].records]
    broker.log_manager.shutdown()


def _moving_broker(tmp_path, monkeypatch, dirs=("a", "b", "c")):
    """A broker over ``dirs`` with topic t (one partition, 100 records, in the first
    dir) whose moves pause after their first copy until the returned event is set."""
    import threading

    import logstore
    from broker_py.log import log_dir_mover

    paths = []
    for d in dirs:
        (tmp_path / d).mkdir()
        paths.append(str(tmp_path / d))
    broker = KafkaServer(BrokerConfig({"log.dirs": ",".join(paths)}))
    broker.apis.topic_admin_manager.create_topic("t", 1)
    home = broker.log_manager.dir_of("t", 0)
    batch = logstore.encode_batch([(None, b"v%d" % i) for i in range(10)])
    for _ in range(10):
        broker.apis.replica_manager.partitions[("t", 0)].log.local_log.append(batch)
    release = threading.Event()
    real_copy = log_dir_mover.copy_files

    def paused_copy(src, dst, stopped=None):
        real_copy(src, dst, stopped)
        release.wait(10)

    monkeypatch.setattr(log_dir_mover, "copy_files", paused_copy)
    return broker, home, [p for p in paths if p != home], release


def _futures(dirs):
    return [n for d in dirs for n in os.listdir(d) if n.endswith("-future")]


def test_a_second_move_redirects_the_first(tmp_path, monkeypatch):
    import asyncio

    broker, home, (b, c), release = _moving_broker(tmp_path, monkeypatch)

    async def scenario():
        mover = broker.log_dir_mover
        mover.start("t", 0, b)
        first = mover.moves[("t", 0)]
        await asyncio.sleep(0.05)
        mover.start("t", 0, c)
        second = mover.moves[("t", 0)]
        assert first.stopped.is_set() and second is not first
        release.set()
        await second.task
        assert first.task.done()
        return first

    first = asyncio.run(scenario())
    assert broker.log_manager.dir_of("t", 0) == c
    assert not os.path.exists(first.future_path) and _futures([home, b, c]) == []
    assert broker.apis.replica_manager.partitions[("t", 0)].log.local_log.log_end_offset == 100
    assert broker.log_dir_mover.moves == {}
    broker.log_manager.shutdown()


def test_a_move_back_to_the_partitions_own_dir_stops_the_move(tmp_path, monkeypatch):
    import asyncio

    broker, home, (b,), release = _moving_broker(tmp_path, monkeypatch, dirs=("a", "b"))

    async def scenario():
        mover = broker.log_dir_mover
        mover.start("t", 0, b)
        first = mover.moves[("t", 0)]
        await asyncio.sleep(0.05)
        mover.start("t", 0, home)
        assert mover.moves[("t", 0)] is first and first.stopped.is_set()
        release.set()
        await first.task

    asyncio.run(scenario())
    assert broker.log_manager.dir_of("t", 0) == home
    assert _futures([home, b]) == []
    assert broker.apis.replica_manager.partitions[("t", 0)].log.local_log.log_end_offset == 100
    assert broker.log_dir_mover.moves == {}
    broker.log_manager.shutdown()


def test_logs_the_topic_metadata_does_not_account_for_are_set_aside(tmp_path):
    """Left by a deletion a crash cut short: a topic gone from the metadata, a partition
    past the count, a directory of an earlier topic of the same name. They are renamed
    ``-stray`` (kept, not deleted) and the rest is untouched."""
    import uuid

    from broker_py.log.partition_metadata_file import partition_metadata_text

    a, b = _dirs(tmp_path)
    broker = KafkaServer(BrokerConfig({"log.dirs": f"{a},{b}"}))
    broker.apis.topic_admin_manager.create_topic("t", 2)
    broker.apis.topic_admin_manager.create_topic("u", 1)
    t0 = os.path.join(broker.log_manager.dir_of("t", 0), "t-0")
    u0 = os.path.join(broker.log_manager.dir_of("u", 0), "u-0")
    broker.log_manager.shutdown()
    shutil.copytree(t0, os.path.join(a, "ghost-0"))
    shutil.copytree(t0, os.path.join(b, "t-7"))
    with open(os.path.join(u0, "partition.metadata"), "w") as f:
        f.write(partition_metadata_text(uuid.uuid4()))

    again = KafkaServer(BrokerConfig({"log.dirs": f"{a},{b}"}))  # sets them aside as it starts
    moved = [os.path.join(d, n) for d in (a, b) for n in os.listdir(d) if n.endswith("-stray")]
    assert sorted(os.path.basename(p).split(".")[0] for p in moved) == ["ghost-0", "t-7", "u-0"]
    assert all(p.endswith("-stray") and os.path.isdir(p) for p in moved)
    assert not any(os.path.exists(os.path.join(d, n)) for d in (a, b) for n in ("ghost-0", "t-7"))
    # u-0 starts again, empty, for the topic id the metadata names
    assert again.apis.replica_manager.get_partition("u", 0).log_end_offset == 0
    assert os.path.isdir(t0)
    assert (
        again.log_manager.set_aside_stray_logs(again.apis.metadata_cache.topics) == []
    )  # nothing left to set aside
    again.log_manager.shutdown()


def test_a_broker_alone_opens_its_logs_on_its_recovery_threads(tmp_path, caplog):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    config = {"log.dirs": ",".join(dirs), "num.recovery.threads.per.data.dir": "3"}
    broker = KafkaServer(BrokerConfig(config))
    broker.apis.topic_admin_manager.create_topic("t", 200)
    logs = broker.log_manager.logs
    for p in range(0, 200, 7):
        logs[("t", p)].append(logstore.encode_batch([(b"k", b"v%d" % p)]))
    placement = dict(broker.log_manager._dir_of)
    assert len(placement) == 200 and [_count(d) for d in dirs] == [100, 100]
    for plog in logs.values():  # a crash: no flush, no checkpoint, no marker
        plog.close_handlers()
    broker.log_manager._unlock()

    # Each log is recovered in the dir that holds it, with what was written; past
    # RECOVERED_LINES recoveries that cut nothing, one line stands for them all.
    with caplog.at_level("WARNING", logger="broker_py.log.log_manager"):
        again = KafkaServer(BrokerConfig(config))
    lines = [r.getMessage() for r in caplog.records if "recovered" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("recovered 200 logs ("), lines
    assert dict(again.log_manager._dir_of) == placement
    ends = {key: plog.log_end_offset for key, plog in again.log_manager.logs.items()}
    assert ends == {("t", p): int(p % 7 == 0) for p in range(200)}
    assert all(plog.recovered for plog in again.log_manager.logs.values())
    assert {again.apis.replica_manager.partitions[("t", p)].leader_id for p in range(200)} == {
        again.apis.replica_manager.broker_id
    }
    again.log_manager.shutdown()

    # After a clean shutdown, none is; no marker is left and each log takes appends.
    third = KafkaServer(BrokerConfig(config))
    assert not any(plog.recovered for plog in third.log_manager.logs.values())
    assert len(third.log_manager.logs) == 200
    reopened = third.log_manager.logs.values()
    assert not any(os.path.exists(os.path.join(p.path, ".kafka_cleanshutdown")) for p in reopened)
    assert third.log_manager.logs[("t", 3)].append(logstore.encode_batch([(b"k", b"v")])) == (0, 0)
    third.log_manager.shutdown()


def test_a_creation_whose_log_fails_to_open_leaves_no_log_of_it(tmp_path, monkeypatch):
    import asyncio
    import uuid

    from broker_py.controller.topic_assignment import TopicAssignment
    from logstore.protocol.errors import KafkaStorageError

    broker = KafkaServer(BrokerConfig({"log.dirs": str(tmp_path / "a")}))
    lm = broker.log_manager
    real = lm.open_files

    def open_files(topic, partition, *args):
        if partition == 150:
            raise KafkaStorageError("no room")
        return real(topic, partition, *args)

    monkeypatch.setattr(lm, "open_files", open_files)
    creator = broker.apis.topic_admin_manager._local_creator
    assignment = TopicAssignment(uuid.uuid4(), {p: [0] for p in range(200)})
    with pytest.raises(KafkaStorageError):
        asyncio.run(creator.create_topic("t", assignment, {}))
    assert not any(t == "t" for t, _ in lm.logs)
    assert _count(str(tmp_path / "a")) == 0
    lm.shutdown()
