"""The startup calls of a broker's ZooKeeper session are made again when the connection
drops under them (kazoo's ConnectionLoss: the session lives on), until
``zookeeper.connection.timeout.ms``; no ZooKeeper is needed to check that."""

from __future__ import annotations

import time

import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError

from broker_py.zk.zk_errors import ZooKeeperClientTimeoutError
from broker_py.zk.zk_session import ZkSession


def test_a_call_the_connection_dropped_under_is_made_again():
    session = ZkSession("127.0.0.1:1", session_timeout_ms=6000, connection_timeout_ms=5000)
    calls = []

    def flaky(path, *, makepath=False):
        calls.append((path, makepath))
        if len(calls) < 3:
            raise ConnectionLoss()
        return "made"

    assert session._until_connected(flaky, "/brokers/ids", makepath=True) == "made"
    assert calls == [("/brokers/ids", True)] * 3


def test_other_errors_are_not_retried():
    session = ZkSession("127.0.0.1:1", session_timeout_ms=6000, connection_timeout_ms=5000)
    calls = []

    def missing():
        calls.append(1)
        raise NoNodeError()

    with pytest.raises(NoNodeError):
        session._until_connected(missing)
    assert calls == [1]


def test_a_connection_that_keeps_dropping_ends_at_the_connection_timeout():
    session = ZkSession("127.0.0.1:1", session_timeout_ms=6000, connection_timeout_ms=600)

    def dropped():
        raise ConnectionLoss()

    started = time.monotonic()
    with pytest.raises(ZooKeeperClientTimeoutError, match="zookeeper.connection.timeout.ms"):
        session._until_connected(dropped)
    assert time.monotonic() - started < 5
