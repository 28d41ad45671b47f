"""LogManager: partitions spread over log.dirs, reopened where they are."""

from __future__ import annotations

import os

from broker_py.config import BrokerConfig
from broker_py.broker import Broker


def _count(d):
    return sum(1 for n in os.listdir(d) if n.rsplit("-", 1)[-1].isdigit())


def test_new_partitions_go_to_the_dir_with_fewest(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")]
    broker = Broker(BrokerConfig({"log.dirs": ",".join(dirs)}))
    broker.create_topic("t", 6)
    assert [_count(d) for d in dirs] == [2, 2, 2]
    broker.create_topic("u", 1)
    broker.create_topic("v", 2)
    assert sorted(_count(d) for d in dirs) == [3, 3, 3]
    placement = {key: broker.log_manager._dir_of[key] for key in broker.log_manager.logs}
    broker.log_manager.shutdown()

    # A restarted broker opens each partition in the directory that holds it.
    again = Broker(BrokerConfig({"log.dirs": ",".join(dirs)}))
    for topic in again.metadata.topics.values():
        for p in range(topic.partitions):
            again.log_manager.open_log(topic, p, again.effective_config(topic))
    assert {key: again.log_manager._dir_of[key] for key in again.log_manager.logs} == placement
    assert [_count(d) for d in dirs] == [3, 3, 3]
    again.log_manager.shutdown()


def test_meta_properties_guard_the_broker_id(tmp_path):
    d = str(tmp_path / "data")
    Broker(BrokerConfig({"log.dirs": d, "broker.id": "1"})).log_manager.shutdown()
    with open(os.path.join(d, "meta.properties")) as f:
        text = f.read()
    assert "broker.id=1" in text and "cluster.id=" in text
    import pytest

    from broker_py.config import ConfigError

    with pytest.raises(ConfigError) as e:
        Broker(BrokerConfig({"log.dirs": d, "broker.id": "2"}))
    assert e.value.key == "broker.id"
