"""Fixtures for cluster tests: one real ZooKeeper per session, and a fresh chroot of
it per test so tests never see each other's znodes."""

from __future__ import annotations

import uuid

import pytest

from .zookeeper import ZooKeeperServer


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper) -> str:
    """``host:port/chroot`` of a chroot no other test uses (created on first use)."""
    return f"{zookeeper.connect}/t{uuid.uuid4().hex[:12]}"
