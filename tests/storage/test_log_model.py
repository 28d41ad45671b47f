"""Model-based test: Log against an in-memory list of batches (hypothesis state machine)."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from logstore import _native as ls

from .helpers import RECENT_T0, linear_offset_for_timestamp, parse_raw_batches, with_base_offset

T0 = RECENT_T0
BIG = 1 << 30

headers_st = st.lists(
    st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=6)),
    max_size=2,
)
record_st = st.tuples(
    st.none() | st.binary(max_size=8), st.none() | st.binary(max_size=60), headers_st
)
batch_st = st.tuples(
    st.lists(record_st, min_size=1, max_size=4),
    st.sampled_from(("none", "none", "gzip", "snappy", "lz4", "zstd")),
)


class ModelBatch:
    __slots__ = ("base", "data", "last", "size")

    def __init__(self, base, last, data):
        self.base, self.last, self.data, self.size = base, last, data, len(data)


class LogMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        # tmpfs when there is one: the model checks semantics, not durability, and
        # fsync-free closes keep shrinking a failure quick
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.tmp = tempfile.mkdtemp(prefix="logmodel-", dir=shm)
        self.path = os.path.join(self.tmp, "topic-0")
        self.log = None

    # -- setup / teardown -------------------------------------------------

    @initialize(
        segment_bytes=st.integers(400, 2000),
        retention_bytes=st.integers(300, 4000),
        index_interval_bytes=st.sampled_from([1, 100, 4096]),
    )
    def open_log(self, segment_bytes, retention_bytes, index_interval_bytes):
        self.config = {
            "segment_bytes": segment_bytes,
            "retention_bytes": retention_bytes,
            "retention_ms": -1,
            "index_interval_bytes": index_interval_bytes,
        }
        self.log = ls.Log.open(self.path, **self.config)
        self.batches: list[ModelBatch] = []  # readable batches: last offset >= start
        self.start = 0
        self.end = 0
        self.clock = 0

    def teardown(self):
        try:
            if self.log is not None and not self.log.closed:
                self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers ----------------------------------------------------------

    def _drop_below_start(self):
        self.batches = [b for b in self.batches if b.last >= self.start]

    def _batch_holding(self, offset):
        for b in self.batches:
            if b.base <= offset <= b.last:
                return b
        return None

    # -- rules ------------------------------------------------------------

    @rule(specs=st.lists(batch_st, min_size=1, max_size=3))
    def append(self, specs):
        encoded = []
        for records, codec in specs:
            recs = []
            for key, value, headers in records:
                recs.append((key, value, headers, T0 + self.clock))
                self.clock += 1
            encoded.append((len(recs), ls.encode_batch(recs, codec)))
        # one append must fit in a segment (else RecordTooLargeError, as Kafka)
        while len(encoded) > 1 and sum(len(d) for _, d in encoded) > self.config["segment_bytes"]:
            encoded.pop()
        n_records = sum(n for n, _ in encoded)
        base, last = self.log.append(b"".join(d for _, d in encoded))
        assert (base, last) == (self.end, self.end + n_records - 1)
        off = self.end
        for n, d in encoded:
            self.batches.append(ModelBatch(off, off + n - 1, with_base_offset(d, off)))
            off += n
        self.end = off

    @rule(data=st.data())
    def read(self, data):
        offset = data.draw(st.integers(self.start, self.end), label="offset")
        max_bytes = data.draw(st.integers(1, 3000), label="max_bytes")
        min_one = data.draw(st.booleans(), label="min_one_batch")
        got = self.log.read(offset, max_bytes, min_one_batch=min_one)
        if offset == self.end:
            assert got == b""
            return
        first = self._batch_holding(offset)
        assert first is not None
        idx = self.batches.index(first)
        raws = parse_raw_batches(got)
        assert sum(r.size for r in raws) == len(got), "read returned a partial batch"
        expect = self.batches[idx : idx + len(raws)]
        assert [r.data for r in raws] == [b.data for b in expect]
        if min_one:
            assert len(raws) >= 1
        if len(raws) > 1 or not min_one:
            assert len(got) <= max_bytes
        if raws:
            # as many whole batches as fit, within the segment that was read
            seg = next(
                s for s in self.log.segments() if s.base_offset <= first.base < s.next_offset
            )
            nxt = idx + len(raws)
            if nxt < len(self.batches) and self.batches[nxt].base < seg.next_offset:
                assert len(got) + self.batches[nxt].size > max_bytes, "read stopped early"
        elif not min_one:
            assert first.size > max_bytes

    @rule(data=st.data())
    def read_out_of_range(self, data):
        if self.start > 0 and data.draw(st.booleans()):
            offset = data.draw(st.integers(max(0, self.start - 3), self.start - 1))
        else:
            offset = data.draw(st.integers(self.end + 1, self.end + 3))
        with pytest.raises(ls.OffsetOutOfRangeError):
            self.log.read(offset, 1000)

    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        target = data.draw(st.integers(T0 - 2, T0 + self.clock + 2))
        decoded = ls.decode_batches(b"".join(b.data for b in self.batches))
        assert self.log.offset_for_timestamp(target) == linear_offset_for_timestamp(
            decoded, target, self.start
        )

    @rule(data=st.data())
    def truncate_to(self, data):
        o = data.draw(st.integers(self.start, self.end + 2), label="truncate_to")
        removed = [b for b in self.batches if b.last >= o]
        if removed and removed[0].base < self.start:
            return  # would cut below the log start offset: not a replication case
        self.log.truncate_to(o)
        if removed:
            self.end = min(self.end, o, removed[0].base)
            self.batches = [b for b in self.batches if b.last < o]

    @rule(data=st.data())
    def delete_records(self, data):
        o = data.draw(st.integers(0, self.end), label="delete_records")
        before = self.log.segments()
        new_start = max(self.start, min(o, self.end))
        assert self.log.delete_records(o) == new_start
        advanced = new_start > self.start
        self.start = new_start
        self._drop_below_start()
        if advanced:
            # whole non-active segments below the new log start offset are deleted
            after = {s.base_offset for s in self.log.segments()}
            for s in before[:-1]:
                if s.next_offset <= self.start:
                    assert s.base_offset not in after, (
                        "segment wholly below the log start offset kept"
                    )

    @rule()
    def enforce_retention(self):
        # Kafka's deleteOldSegments with retention.ms unlimited: first the segments
        # wholly below the log start offset, then by size while (size - segment size)
        # stays >= retention.bytes; never the active segment.
        segs = self.log.segments()
        non_active = segs[:-1]
        expect = 0
        while expect < len(non_active) and non_active[expect].next_offset <= self.start:
            expect += 1
        total = sum(s.size for s in segs[expect:])
        while (
            expect < len(non_active)
            and total - non_active[expect].size >= self.config["retention_bytes"]
        ):
            total -= non_active[expect].size
            expect += 1
        assert self.log.enforce_retention() == expect
        if expect:
            self.start = max(self.start, segs[expect].base_offset)
            self._drop_below_start()
        assert [s.base_offset for s in self.log.segments()] == [
            s.base_offset for s in segs[expect:]
        ]

    @rule()
    def reopen(self):
        self.log.close()
        assert self.log.closed
        self.log = ls.Log.open(self.path, log_start_offset=self.start, **self.config)
        assert self.log.recovered is False

    # -- invariants -------------------------------------------------------

    @invariant()
    def offsets_match(self):
        if self.log is None:
            return
        assert self.log.log_start_offset == self.start
        assert self.log.log_end_offset == self.end

    @invariant()
    def segments_consistent(self):
        if self.log is None:
            return
        segs = self.log.segments()
        assert segs, "a log always has an active segment"
        assert segs[0].base_offset <= self.start
        for a, b in itertools.pairwise(segs):
            assert a.next_offset == b.base_offset
        assert segs[-1].next_offset == self.end
        assert self.log.size_bytes == sum(s.size for s in segs)
        assert self.log.num_segments == len(segs)
        bases = {b.base for b in self.batches}
        for s in segs:
            if s.size and s.base_offset >= self.start and self.batches:
                assert s.base_offset in bases or s.base_offset < self.batches[0].base

    @invariant()
    def contents_match(self):
        if self.log is None:
            return
        got = []
        off = self.start
        while off < self.end:
            chunk = self.log.read(off, BIG)
            raws = parse_raw_batches(chunk)
            assert raws and sum(r.size for r in raws) == len(chunk)
            got += [r.data for r in raws]
            off = raws[-1].next_offset
        assert off == self.end
        assert got == [b.data for b in self.batches]


LogMachine.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLogModel = LogMachine.TestCase
