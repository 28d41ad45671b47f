"""Shared pytest fixtures."""

from __future__ import annotations

import contextlib
import os

import pytest


@pytest.fixture
def partition_dir(tmp_path):
    """A fresh partition directory ``<log.dir>/topic-0`` (created)."""
    d = tmp_path / "logs" / "topic-0"
    d.mkdir(parents=True)
    return d


@pytest.fixture
def open_log(partition_dir):
    """Factory: ``open_log(path=None, **config)`` opens a Log and closes it at teardown."""
    from logstore import _native

    opened = []

    def _open(path=None, **config):
        log = _native.Log.open(os.fspath(path or partition_dir), **config)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        # a test may leave a log broken on purpose; teardown must not mask its result
        with contextlib.suppress(Exception):
            if not log.closed:
                log.close()
