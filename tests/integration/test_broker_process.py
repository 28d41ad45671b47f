"""The broker process itself: start, clean stop, config errors, a raw ApiVersions round trip."""

from __future__ import annotations

import os
import socket
import struct
import subprocess

import pytest

from tests.integration.conftest import consume_values


def test_sigterm_is_a_clean_shutdown_and_sigkill_is_recovered(broker):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("clean", value=b"%d" % i)
    assert p.flush(30) == 0
    assert broker.stop() == 0
    marker = os.path.join(broker.data_dir, "clean-0", ".kafka_cleanshutdown")
    assert os.path.exists(marker)
    broker.start()
    assert not os.path.exists(marker)  # removed while the log is open
    assert "recovered clean-0" not in broker.log_text()
    broker.kill()
    broker.start()
    assert "recovered clean-0" in broker.log_text()


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["num.partitions=zero"], "num.partitions"),
        (["listeners=INTERNAL://127.0.0.1:0"], "listener.security.protocol.map"),
        (
            ["listeners=SASL_PLAINTEXT://127.0.0.1:0"],
            "sasl.enabled.mechanisms",
        ),  # Kafka's default, GSSAPI
        (
            ["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=PLAIN"],
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        (
            [
                "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=PLAIN",
                'sasl.jaas.config=Plain required user_a="secret"',
            ],
            "sasl.jaas.config",
        ),
        (["zookeeper.connect=127.0.0.1:notaport"], "zookeeper.connect"),
        (["zookeeper.connect=:2181/kafka"], "zookeeper.connect"),
        (["zookeeper.connect=127.0.0.1:2181/kafka//brokers"], "zookeeper.connect"),
    ],
)
def test_bad_config_value_names_the_key(tmp_path, overrides, key):
    from tests.support.processes import REPO_ROOT, broker_command

    args = [arg for o in overrides for arg in ("--override", o)]
    r = subprocess.run(
        broker_command(*args, overrides={"log.dirs": str(tmp_path)}),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert r.returncode == 2, r.stderr
    assert f"for configuration {key}:" in r.stderr, r.stderr
    assert "secret" not in r.stderr
    # One line naming the key, no traceback.
    assert [line for line in r.stderr.splitlines() if line.startswith("logstore-broker: ")] == [
        line for line in r.stderr.splitlines() if key in line
    ], r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_key_warns_and_starts(broker_factory):
    b = broker_factory({"no.such.key": "1", "log.retension.hours": "1"})
    log = b.log_text()
    assert "The configuration 'no.such.key' was supplied but isn't a known config" in log
    assert "did you mean" not in log.split("'no.such.key'")[1].splitlines()[0]
    assert (
        "The configuration 'log.retension.hours' was supplied but isn't a known config "
        "(ignored); did you mean log.retention.hours?"
    ) in log


def test_a_second_broker_on_the_same_log_dirs_exits_and_the_first_keeps_serving(broker):
    """Kafka's .lock: the second process stops before recovering or rewriting anything."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        p.produce("locked", value=b"%d" % i)
    assert p.flush(30) == 0
    files = sorted(os.path.join(d, n) for d, _, names in os.walk(broker.data_dir) for n in names)
    before = {f: (os.stat(f).st_size, os.stat(f).st_mtime_ns) for f in files if "locked-0" in f}
    from tests.support.ports import free_port
    from tests.support.processes import REPO_ROOT, broker_command

    r = subprocess.run(
        broker_command(
            overrides={
                "log.dirs": broker.data_dir,
                "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
            }
        ),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert r.returncode == 1, r.stderr
    assert f"failed to acquire the lock on {os.path.join(broker.data_dir, '.lock')}" in r.stderr, (
        r.stderr
    )
    assert "recovered" not in r.stderr and "listening" not in r.stdout
    assert {f: (os.stat(f).st_size, os.stat(f).st_mtime_ns) for f in before} == before
    for i in range(100, 200):
        p.produce("locked", value=b"%d" % i)
    assert p.flush(30) == 0
    assert consume_values(broker.bootstrap, "locked", 200) == [b"%d" % i for i in range(200)]


def test_a_damaged_metadata_file_stops_startup_with_a_message(broker):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("meta", value=b"v")
    assert p.flush(30) == 0
    assert broker.stop() == 0
    path = os.path.join(broker.data_dir, "__logstore_metadata", "cluster-metadata.json")
    with open(path, "rb") as f:
        good = f.read()
    with open(path, "wb") as f:
        f.write(good[: len(good) // 2])
    with pytest.raises(RuntimeError, match="broker did not start"):
        broker.start()
    assert broker.proc is not None and broker.proc.wait(10) == 1
    text = broker.log_text()
    assert f"logstore-broker: {path}: is not valid JSON" in text and "Traceback" not in text, text[
        -2000:
    ]
    with open(path, "wb") as f:
        f.write(good)
    broker.start()
    assert "recovered meta-0" not in broker.log_text()


def test_unparsable_offset_checkpoints_are_set_aside_and_every_record_kept(broker):
    """As Kafka does: a recovery point that cannot be parsed means recovering every
    segment, a log start offset that cannot be parsed means the first segment's base."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("ckpt", value=b"%d" % i)
    assert p.flush(30) == 0
    broker.kill()
    part = os.path.join(broker.data_dir, "ckpt-0")
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        with open(os.path.join(part, name), "wb") as f:
            f.write(b"\x00garbage\n")
    broker.start()
    text = broker.log_text()
    assert (
        "ckpt-0: recovery-point-offset-checkpoint: " in text
        and "every segment is recovered" in text
    )
    assert (
        "ckpt-0: log-start-offset-checkpoint: " in text
        and "the log starts at its first segment" in text
    )
    assert consume_values(broker.bootstrap, "ckpt", 10) == [b"%d" % i for i in range(10)]


def test_a_topic_created_again_after_a_cut_short_deletion_starts_empty(broker):
    """Logs the metadata no longer accounts for (its topic gone from the store, the logs
    left behind) are set aside as stray at the next start, so a new topic of the same
    name does not get the old records."""
    import json

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        p.produce("again", value=b"old-%d" % i)
    assert p.flush(30) == 0
    broker.kill()
    path = os.path.join(broker.data_dir, "__logstore_metadata", "cluster-metadata.json")
    with open(path) as f:
        doc = json.load(f)
    for key in (
        "topics",
        "partition_states",
        "configs",
    ):  # the deletion's last step, then the crash
        doc[key].pop("again", None)
    with open(path, "w") as f:
        json.dump(doc, f)
    broker.start()
    strays = [
        n for n in os.listdir(broker.data_dir) if n.startswith("again-0.") and n.endswith("-stray")
    ]
    assert len(strays) == 1 and "set aside the stray log" in broker.log_text()
    assert (
        os.path.getsize(os.path.join(broker.data_dir, strays[0], "00000000000000000000.log")) > 0
    )  # kept

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("again", 1)])["again"].result(30)
    p.produce("again", value=b"new")
    assert p.flush(30) == 0
    assert consume_values(broker.bootstrap, "again", 1) == [b"new"]


def test_api_versions_v0_header_and_unsupported_version(broker):
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        # ApiVersions v99: answered with the v0 body, error 35, and the ranges.
        body = struct.pack(">hhih", 18, 99, 7, 4) + b"test"
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
        corr, error, count = struct.unpack_from(">ihi", data)
        assert (corr, error) == (7, 35)
        keys = {struct.unpack_from(">hhh", data, 10 + 6 * i)[0] for i in range(count)}
        assert {0, 1, 3, 18} <= keys


def test_frame_over_socket_request_max_bytes_closes_only_that_connection(broker_factory):
    b = broker_factory({"socket.request.max.bytes": "1024"})
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as bad:
        bad.sendall(struct.pack(">i", 1 << 30))  # refused before any body is sent
        assert bad.recv(10) == b""
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as good:
        body = struct.pack(">hhih", 18, 0, 1, -1)
        good.sendall(struct.pack(">i", len(body)) + body)
        assert len(good.recv(4)) == 4
    assert b.alive()
