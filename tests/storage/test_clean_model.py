"""Model-based test of compaction (hypothesis state machine).

Random keyed appends and tombstones, cleaning passes, reopenings, rolls and clock
steps against a model of the latest value per key. After every step, reading the
log gives, for each key, exactly the model's latest record (same offset, same
value), every record read is the one appended at its offset, offsets ascend, and
a key's latest tombstone is gone only once ``delete.retention.ms`` has passed
since it was appended.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from logstore import _native as ls

from .helpers import RECENT_T0

T0 = RECENT_T0
RETENTION_MS = 1000
KEYS = [b"k%d" % i for i in range(8)]

record_st = st.tuples(st.sampled_from(KEYS), st.none() | st.binary(min_size=1, max_size=40))


class CleanMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.tmp = tempfile.mkdtemp(prefix="cleanmodel-", dir=shm)
        self.path = os.path.join(self.tmp, "topic-0")
        self.log = None
        self.now = T0
        self.appended: dict[
            int, tuple[bytes, bytes | None, int]
        ] = {}  # offset -> key, value, clock
        self.latest: dict[bytes, int] = {}  # key -> offset of its latest record

    @initialize(
        segment_bytes=st.integers(200, 1200),
        ratio=st.sampled_from(["0.01", "0.5", "0.9"]),
    )
    def open_log(self, segment_bytes, ratio):
        self.config = {
            "segment_bytes": segment_bytes,
            "cleanup_policy": "compact",
            "delete_retention_ms": RETENTION_MS,
            "min_cleanable_dirty_ratio": ratio,
        }
        self.log = ls.Log.open(self.path, **self.config)

    def teardown(self):
        if self.log is not None and not self.log.closed:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(
        records=st.lists(record_st, min_size=1, max_size=5),
        codec=st.sampled_from(["none", "zstd", "gzip"]),
    )
    def append(self, records, codec):
        base, _ = self.log.append(
            ls.encode_batch([(k, v, [], self.now) for k, v in records], codec)
        )
        for i, (key, value) in enumerate(records):
            self.appended[base + i] = (key, value, self.now)
            self.latest[key] = base + i

    @rule(key=st.sampled_from(KEYS))
    def delete(self, key):
        base, _ = self.log.append(ls.encode_batch([(key, None, [], self.now)]))
        self.appended[base] = (key, None, self.now)
        self.latest[key] = base

    @rule(force=st.booleans())
    def clean(self, force):
        self.log.clean(now_ms=self.now, force=force, dedupe_buffer_size=4096)

    @rule(ms=st.integers(0, 2 * RETENTION_MS))
    def advance_time(self, ms):
        self.now += ms

    @rule()
    def roll(self):
        self.log.roll(now_ms=self.now)

    @precondition(lambda self: self.log is not None)
    @rule()
    def reopen(self):
        self.log.close()
        self.log = ls.Log.open(self.path, **self.config)

    @invariant()
    def reads_match_the_model(self):
        if self.log is None:
            return
        got, offset = [], self.log.log_start_offset
        while offset < self.log.log_end_offset:
            data = self.log.read(offset, 1 << 30)
            if not data:
                break  # every record from here to the log end was cleaned away
            for b in ls.decode_batches(data):
                got += [(r.offset, r.key, r.value) for r in b.records]
                offset = b.last_offset + 1
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(set(offsets)), "offsets ascend, each once"
        last_seen: dict[bytes, int] = {}
        for o, key, value in got:
            assert self.appended[o][:2] == (key, value), f"record at {o} changed"
            last_seen[key] = o
        for key, latest in self.latest.items():
            if key in last_seen:
                assert last_seen[key] == latest, f"{key!r}: read {last_seen[key]}, latest {latest}"
            else:
                _, value, clock = self.appended[latest]
                assert value is None, f"{key!r}: latest value at {latest} lost"
                assert self.now - clock >= RETENTION_MS, (
                    f"{key!r}: tombstone gone before delete.retention.ms"
                )


TestCleanModel = CleanMachine.TestCase
TestCleanModel.settings = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
