"""Damaged files under ``__logstore_metadata``: the broker refuses to start with an error
naming the file and what is wrong, and writes nothing over it."""

from __future__ import annotations

import os

import pytest

from broker_py.config.kafka_config import BrokerConfig
from broker_py.server.kafka_server import KafkaServer
from broker_py.utils.metadata_file import METADATA_DIR, MetadataFileError

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
GOOD_UUID = "0" * 31 + "1"


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("topics.json", '{"version": 1, "topics": {"t": {"topic_id"', "is not valid JSON"),
        ("topics.json", "[1, 2]", "holds a JSON list, not an object"),
        (
            "topics.json",
            '{"topics": {"t": {"partitions": 1}}}',
            "lacks the key or names an unknown value 'topic_id'",
        ),
        (
            "topics.json",
            '{"topics": {"t": {"topic_id": "zz", "partitions": 1}}}',
            "badly formed hexadecimal UUID",
        ),
        (
            "topics.json",
            f'{{"topics": {{"t": {{"topic_id": "{GOOD_UUID}", "partitions": "3"}}}}}}',
            "not a positive integer",
        ),
        (
            "topics.json",
            f'{{"topics": {{"t": {{"topic_id": "{GOOD_UUID}", "partitions": 0}}}}}}',
            "not a positive integer",
        ),
        ("topics.json", b"\xff\xfe{}", "cannot be read"),
        ("cluster-metadata.json", '{"version": 1, "topics": ', "is not valid JSON"),
        ("cluster-metadata.json", "[1, 2]", "holds a JSON list, not an object"),
        ("acls.json", '{"acls": [["TOPIC", "t", "LITERAL"]]}', "malformed entry"),
        (
            "acls.json",
            '{"acls": [["NOPE", "t", "LITERAL", "User:a", "*", "READ", "ALLOW"]]}',
            "lacks the key or names an unknown value 'NOPE'",
        ),
        (
            "scram-credentials.json",
            '{"users": {"a": {"SCRAM-SHA-256": '
            '{"salt": "!!", "stored_key": "", "server_key": "", "iterations": 4096}}}}',
            "malformed entry",
        ),
        ("broker-configs.json", '{"default": ["x"]}', "malformed entry"),
        ("producer-id-block", "next: 4000\n", "not the next producer id block"),
    ],
)
def test_a_damaged_metadata_file_stops_the_broker_and_stays_as_it_was(
    tmp_path, name, content, reason
):
    d = tmp_path / "data"
    KafkaServer(BrokerConfig({"log.dirs": str(d)})).log_manager.shutdown()
    path = d / METADATA_DIR / name
    path.parent.mkdir(exist_ok=True)
    if name == "topics.json":  # read only to take its topics over, when no store file exists yet
        (d / METADATA_DIR / "cluster-metadata.json").unlink()
    raw = content if isinstance(content, bytes) else content.encode()
    path.write_bytes(raw)
    with pytest.raises(MetadataFileError) as e:
        KafkaServer(BrokerConfig({"log.dirs": str(d), **AUTHORIZER}))
    assert str(e.value).startswith(f"{path}: ") and reason in str(e.value), str(e.value)
    assert path.read_bytes() == raw
    assert not os.path.exists(str(path) + ".tmp")


def test_topics_of_an_older_data_dir_are_taken_over(tmp_path):
    """A data dir from before the controller store has ``topics.json`` only: its topics,
    their ids, configs and records stay, each partition led by this broker in epoch 0."""
    import json
    import uuid

    import logstore
    from broker_py.log.partition_metadata_file import partition_metadata_text

    d = tmp_path / "data"
    meta = d / METADATA_DIR
    meta.mkdir(parents=True)
    topic_id = uuid.UUID(int=5)
    (meta / "topics.json").write_text(
        json.dumps(
            {
                "version": 1,
                "topics": {
                    "old": {
                        "topic_id": topic_id.hex,
                        "partitions": 2,
                        "configs": {"retention.ms": "1000"},
                    }
                },
            }
        )
    )
    part = d / "old-1"
    part.mkdir()
    (part / "partition.metadata").write_text(partition_metadata_text(topic_id))
    plog = logstore.Log.open(str(part))
    plog.append(logstore.encode_batch([(None, b"kept")]))
    plog.close()
    broker = KafkaServer(BrokerConfig({"log.dirs": str(d)}))
    try:
        info = broker.apis.metadata_cache.get("old")
        assert info is not None and info.topic_id == topic_id and info.partitions == 2
        assert info.configs == {"retention.ms": "1000"}
        partition = broker.apis.replica_manager.get_partition("old", 1)
        assert partition.is_leader and partition.leader_epoch == 0 and partition.log_end_offset == 1
        assert (meta / "cluster-metadata.json").exists()
    finally:
        broker.log_manager.shutdown()
