"""Fixtures of the storage tests (``open_log`` and ``partition_dir`` are in tests/conftest.py)."""

from __future__ import annotations

import pytest

from .log_batches import build


@pytest.fixture
def five_batches(open_log):
    log = open_log()
    batches = build(log, [3, 1, 4, 2, 5])  # offsets 0-2, 3, 4-7, 8-9, 10-14
    return log, batches
