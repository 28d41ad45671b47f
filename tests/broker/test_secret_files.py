"""Files holding secrets are written, and kept, readable by their owner only."""

from __future__ import annotations

import os
import stat

from broker_py.config.dynamic_broker_config import DynamicBrokerConfigStore
from broker_py.config.kafka_config import BrokerConfig
from broker_py.security.sasl.scram_credentials import ScramCredentialStore
from broker_py.utils import metadata_file
from broker_py.utils.metadata_file import METADATA_DIR


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_scram_credentials_are_written_0600_even_under_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        from broker_py.security.sasl.scram_credentials import ScramCredential

        store = ScramCredentialStore(str(tmp_path))
        store.apply([("alice", "SCRAM-SHA-256", ScramCredential(b"s", b"k", b"v", 4096))], [])
    finally:
        os.umask(old)
    path = os.path.join(tmp_path, METADATA_DIR, "scram-credentials.json")
    assert _mode(path) == 0o600
    assert ScramCredentialStore(str(tmp_path)).get("alice", "SCRAM-SHA-256") is not None


def test_a_world_readable_credentials_file_is_restricted_when_loaded(tmp_path):
    path = os.path.join(tmp_path, METADATA_DIR, "scram-credentials.json")
    metadata_file.write(path, {"version": 1, "users": {}})
    os.chmod(path, 0o644)
    ScramCredentialStore(str(tmp_path))
    assert _mode(path) == 0o600


def test_dynamic_broker_configs_are_0600(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    store = DynamicBrokerConfigStore(str(tmp_path), config)
    store.set("", {"log.retention.ms": "1000"}, lambda: None)
    assert _mode(os.path.join(tmp_path, METADATA_DIR, "broker-configs.json")) == 0o600


def test_other_metadata_files_keep_0644(tmp_path):
    path = os.path.join(tmp_path, "x.json")
    metadata_file.write(path, {"a": 1})
    assert _mode(path) == 0o644
    assert not os.path.exists(path + ".tmp")
