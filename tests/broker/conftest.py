"""Fixtures shared by the broker tests."""

from __future__ import annotations

import pytest

import logstore
from broker_py.log.unified_log import UnifiedLog


@pytest.fixture
def logs(tmp_path):
    """Opens the UnifiedLogs named ``topic-index`` under tmp_path; closes them after the test."""
    opened = []

    def open_log(name: str) -> UnifiedLog:
        plog = logstore.Log.open(str(tmp_path / name))
        opened.append(plog)
        topic, index = name.rsplit("-", 1)
        return UnifiedLog(topic, int(index), plog)

    yield open_log
    for plog in opened:
        if not plog.closed:
            plog.close()
