"""The broker's LogCleaner: log.cleaner.threads workers, a shared I/O throttle."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from types import SimpleNamespace

import logstore
from broker_py.config.kafka_config import BrokerConfig
from broker_py.log.log_cleaner_manager import LogCleaner

T0 = int(time.time() * 1000) - 60_000


class RecordingLog:
    """A real log whose clean() records which thread ran it, and when."""

    def __init__(self, log, calls):
        self.log, self.calls = log, calls

    def clean(self, **kwargs):
        start = time.monotonic()
        stats = self.log.clean(**kwargs)
        self.calls.append((threading.current_thread().name, start, time.monotonic()))
        return stats


def _partitions(tmp_path, n, calls):
    out = []
    for i in range(n):
        log = logstore.Log.open(tmp_path / f"t-{i}", segment_bytes=32768, cleanup_policy="compact")
        for _ in range(40):
            log.append(logstore.encode_batch([(b"k%d" % k, bytes(200), [], T0) for k in range(20)]))
        log.roll()
        out.append(SimpleNamespace(topic="t", index=i, local_log=RecordingLog(log, calls), raw=log))
    return out


def test_workers_clean_partitions_concurrently_under_one_throttle(tmp_path):
    calls = []
    parts = _partitions(tmp_path, 4, calls)
    size = sum(s.size for p in parts for s in p.raw.segments())
    # Mapping reads every byte once: about a second at this rate. The rewrite adds
    # little: segments whose records were all superseded are not read again.
    rate = size / 1.0
    config = BrokerConfig(
        {"log.cleaner.threads": "2", "log.cleaner.io.max.bytes.per.second": str(rate)}
    )
    cleaner = LogCleaner(config, lambda: parts)
    assert cleaner.dedupe_buffer_size == config["log.cleaner.dedupe.buffer.size"] // 2
    start = time.monotonic()
    asyncio.run(cleaner.clean_round())
    took = time.monotonic() - start
    cleaner.shutdown()
    assert cleaner.passes == 4
    assert len({name for name, _, _ in calls}) == 2  # two worker threads
    spans = sorted((s, e) for _, s, e in calls)
    assert any(b[0] < a[1] for a, b in itertools.pairwise(spans)), "two passes overlapped"
    assert took > 0.8, f"throttled to {rate:.0f} B/s, the round took {took:.2f} s"
    for p in parts:
        assert sum(s.size for s in p.raw.segments()) < size / 4 / 10
        p.raw.close()


def test_changed_cleaner_configs_apply_from_the_next_round():
    config = BrokerConfig({"log.cleaner.threads": "1"})
    cleaner = LogCleaner(config, lambda: [])
    throttler = cleaner.throttler
    config.set_dynamic({"log.cleaner.threads": "3", "log.cleaner.backoff.ms": "250"}, {})
    cleaner.reconfigure()
    assert (cleaner.threads, cleaner.backoff_s) == (3, 0.25)
    assert cleaner.dedupe_buffer_size == config["log.cleaner.dedupe.buffer.size"] // 3
    assert cleaner.throttler is throttler  # the rate did not change: the same throttle
    config.set_dynamic({}, {"log.cleaner.io.max.bytes.per.second": "1000000"})
    cleaner.reconfigure()
    assert cleaner.threads == 1 and cleaner.throttler is not throttler
    asyncio.run(cleaner.clean_round())
    cleaner.shutdown()
