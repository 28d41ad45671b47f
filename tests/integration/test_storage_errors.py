"""A broker process that may not write more bytes: RLIMIT_FSIZE makes the kernel refuse
writes past a size (EFBIG), with no privileges needed. Appends that fail get
KAFKA_STORAGE_ERROR and leave nothing behind; what was acknowledged stays readable; a
file size limit is the process's, not a failed disk, so the broker keeps serving and
says so in its log, once per interval rather than once per retry. A full disk (ENOSPC)
takes its log dir offline instead: tests/integration/test_log_dir_failure_alone.py and
tests/cluster/test_log_dir_failure.py."""

from __future__ import annotations

import os
import resource

import pytest

LIMIT = 4 << 20
VALUE = 100_000


def _limit_file_size(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_appends_past_what_the_disk_takes_fail_cleanly_and_lose_nothing(broker_factory):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaStorageError

    b = broker_factory(
        {"log.segment.bytes": str(64 << 20), "log.index.size.max.bytes": str(1 << 20)}, start=False
    )
    b.preexec_fn = _limit_file_size(LIMIT)
    b.start()
    p = KafkaProducer(
        bootstrap_servers=b.bootstrap, retries=0, acks="all", max_request_size=2 * VALUE
    )
    acked: list[int] = []
    failure = None
    for i in range(2 * LIMIT // VALUE):
        try:
            acked.append(p.send("full", bytes([i % 251]) * VALUE, partition=0).get(30).offset)
        except KafkaStorageError as e:
            failure = e
            break
    assert failure is not None, "the file size limit was never reached"
    assert acked == list(range(len(acked))) and len(acked) >= LIMIT // VALUE - 3
    for _ in range(20):  # every retry fails the same way; the broker stays up
        with pytest.raises(KafkaStorageError):
            p.send("full", b"x" * VALUE, partition=0).get(30)
    p.close()
    assert b.alive()
    errors = [line for line in b.log_text().splitlines() if "(KAFKA_STORAGE_ERROR)" in line]
    assert (
        len(errors) == 1
        and "appending to full-0 failed" in errors[0]
        and "File too large" in errors[0]
    ), errors

    c = KafkaConsumer(
        bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000
    )
    tp = TopicPartition("full", 0)
    c.assign([tp])
    got = [(m.offset, m.value) for m in c]
    c.close()
    assert got == [(i, bytes([i % 251]) * VALUE) for i in acked]

    # Nothing of the failed appends is on disk: a clean restart recovers nothing, and
    # without the limit the log takes appends again, after what was acknowledged.
    assert b.stop() == 0
    b.preexec_fn = None
    b.start()
    assert "recovered full-0" not in b.log_text()
    p = KafkaProducer(
        bootstrap_servers=b.bootstrap, retries=0, acks="all", max_request_size=2 * VALUE
    )
    assert p.send("full", b"after", partition=0).get(30).offset == len(acked)
    p.close()


def test_a_log_that_cannot_be_opened_stops_startup_with_a_message(broker_factory):
    """The default 10 MB index preallocation of the active segment is past the limit."""
    from kafka import KafkaProducer

    b = broker_factory()
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all")
    p.send("kept", b"v").get(30)
    p.close()
    assert b.stop() == 0
    b.preexec_fn = _limit_file_size(1 << 20)
    with pytest.raises(RuntimeError, match="broker did not start"):
        b.start(timeout=30)
    assert b.proc is not None and b.proc.wait(10) == 1
    text = b.log_text()
    assert "logstore-broker: " in text and "kept-0" in text and "File too large" in text, text[
        -2000:
    ]
    assert "Traceback" not in text
    b.preexec_fn = None
    b.start()
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=b.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000
    )
    c.assign([TopicPartition("kept", 0)])
    assert [m.value for m in c] == [b"v"]
    c.close()


def _topics(admin) -> set[str]:
    return {t for t in admin.list_topics() if not t.startswith("__")}


def test_topics_the_disk_refuses_are_not_half_made(broker_factory, monkeypatch):
    """Under a 1 MB limit a log whose index preallocates 10 MB cannot be created: the
    topic (or the new partitions) must go with it, on disk and in the metadata."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
    from kafka.errors import KafkaStorageError

    b = broker_factory({"log.index.size.max.bytes": "4096"}, start=False)
    b.preexec_fn = _limit_file_size(1 << 20)
    b.start()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    big_index = {"segment.index.bytes": str(10 << 20)}
    with pytest.raises(KafkaStorageError, match="File too large"):
        admin.create_topics([NewTopic("big", 3, 1, topic_configs=big_index)])
    assert "big" not in _topics(admin)
    assert not [n for n in os.listdir(b.data_dir) if n.startswith("big-")]

    admin.create_topics([NewTopic("grow", 1, 1)])
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "grow", configs=big_index)])
    with pytest.raises(KafkaStorageError, match="File too large"):
        admin.create_partitions({"grow": NewPartitions(3)})
    assert len(admin.describe_topics(["grow"])[0]["partitions"]) == 1
    assert sorted(n for n in os.listdir(b.data_dir) if n.startswith("grow-")) == ["grow-0"]
    admin.close()
    assert b.stop() == 0
    b.preexec_fn = None
    b.start()  # what the metadata holds opens: the same topics, the same partition counts
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    assert _topics(admin) == {"grow"}
    assert len(admin.describe_topics(["grow"])[0]["partitions"]) == 1
    admin.close()


def test_topic_metadata_the_disk_refuses_changes_nothing(broker_factory, monkeypatch):
    """Under a 64 KiB limit the topic metadata file stops taking new topics after a few
    hundred: a create then fails with KAFKA_STORAGE_ERROR and the topic does not exist;
    a delete makes room again."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import KafkaStorageError

    monkeypatch.setenv(
        "LOGSTORE_LOG_LEVEL", "WARNING"
    )  # the broker's log is a file under the limit too
    b = broker_factory({"log.index.size.max.bytes": "4096"}, start=False)
    b.preexec_fn = _limit_file_size(64 << 10)
    b.start()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    created: list[str] = []
    refused = None
    for i in range(2000):
        name = f"topic-{i:04d}"
        try:
            admin.create_topics([NewTopic(name, 1, 1)])
        except KafkaStorageError as e:
            refused = name
            assert "cluster-metadata.json" in str(e)
            break
        created.append(name)
    assert refused is not None and len(created) > 100
    assert _topics(admin) == set(created)
    assert not os.path.exists(os.path.join(b.data_dir, f"{refused}-0"))
    with pytest.raises(KafkaStorageError):
        admin.create_topics([NewTopic(refused, 1, 1)])
    admin.delete_topics(created[:50])
    admin.create_topics([NewTopic(refused, 1, 1)])
    expected = set(created[50:]) | {refused}
    assert _topics(admin) == expected
    admin.close()
    assert b.alive()
    assert b.stop() == 0
    b.preexec_fn = None
    b.start()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    assert _topics(admin) == expected
    admin.close()


@pytest.mark.parametrize("transactional", [False, True])
def test_producer_ids_the_disk_refuses_are_retried_by_the_client(broker, transactional):
    """A directory where the producer id block's temporary file goes makes its write fail
    (a real OSError, no privileges needed): InitProducerId answers
    COORDINATOR_LOAD_IN_PROGRESS, which clients retry, and the idempotent or
    transactional producer delivers once the block can be written."""
    import time

    from confluent_kafka import KafkaError, KafkaException, Producer

    block_tmp = os.path.join(broker.data_dir, "__logstore_metadata", "producer-id-block.tmp")
    os.makedirs(block_tmp)
    delivered: list[int] = []
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "enable.idempotence": True,
        "retry.backoff.ms": 100,
    }
    if transactional:
        conf["transactional.id"] = "pids-txn"
    p = Producer(conf)
    if transactional:
        # librdkafka hands a retriable InitProducerId error to the application, which
        # calls init_transactions again (as confluent-kafka documents).
        with pytest.raises(KafkaException) as e:
            p.init_transactions(10)
        assert (
            e.value.args[0].code() == KafkaError.COORDINATOR_LOAD_IN_PROGRESS
            and e.value.args[0].retriable()
        )
    else:
        p.produce(
            "pids",
            value=b"v",
            on_delivery=lambda err, msg: delivered.append(msg.offset()) if err is None else None,
        )
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            p.poll(0.1)
        assert delivered == []
    assert "no producer id block" in broker.log_text() and "producer-id-block" in broker.log_text()
    os.rmdir(block_tmp)
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(
            "pids",
            value=b"v",
            on_delivery=lambda err, msg: delivered.append(msg.offset()) if err is None else None,
        )
        p.commit_transaction(30)
    assert p.flush(30) == 0
    assert delivered == [0]
    assert broker.alive()


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize(("codec", "mib"), [("zstd", 256), ("gzip", 256), ("lz4", 128)])
def test_a_compression_bomb_is_checked_in_bounded_memory(broker, codec, mib):
    """A batch under message.max.bytes that decompresses to hundreds of MiB (lz4's
    frames expand at most about 255 times): the broker checks its records as the codec
    streams them out and stores it as sent, without ever holding the decompressed
    records (its peak memory grows by far less than they take)."""
    import socket
    import struct

    import logstore
    from logstore.protocol.frame import encode_request
    from logstore.protocol.headers import RequestHeader
    from logstore.protocol.messages.produce import ProduceRequest

    value = bytes(mib << 20)
    batch = logstore.encode_batch([(b"k", value), (b"k", b"after the bomb")], codec)
    del value
    assert len(batch) < 1_000_000
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="bomb",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)],
            )
        ],
    )
    frame = encode_request(
        RequestHeader(api_key=0, api_version=9, correlation_id=7, client_id="bomb"), body
    )
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("bomb", 1, 1)])
    admin.close()
    assert broker.proc is not None
    before = _peak_rss(broker.proc.pid)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=60) as s:
        s.sendall(frame)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = s.recv(1 << 16)
            assert chunk, "the broker closed the connection"
            buf += chunk
    assert _peak_rss(broker.proc.pid) - before < 64 << 20
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert c.end_offsets([TopicPartition("bomb", 0)]) == {
        TopicPartition("bomb", 0): 2
    }  # stored, both records
    c.close()
