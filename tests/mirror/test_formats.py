"""MirrorMaker 2's internal record formats, byte for byte (Kafka's Schema structs:
INT16-length UTF-8 strings, big-endian integers)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore.mirror import source_offsets
from logstore.mirror.checkpoints import Checkpoint, latest
from logstore.mirror.heartbeats import Heartbeat
from logstore.mirror.offset_syncs import OffsetSync
from logstore.mirror.structs import FormatError

names = st.text(min_size=0, max_size=40)
offsets = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def test_offset_sync_bytes():
    s = OffsetSync("orders", 3, 100, 7)
    assert s.key() == b"\x00\x06orders\x00\x00\x00\x03"
    assert s.value() == (100).to_bytes(8, "big") + (7).to_bytes(8, "big")
    assert OffsetSync.decode(s.key(), s.value()) == s


def test_checkpoint_bytes():
    c = Checkpoint("g", "A.t", 1, 42, 40, "m")
    assert c.key() == b"\x00\x01g\x00\x03A.t\x00\x00\x00\x01"
    assert c.value() == (
        b"\x00\x00" + (42).to_bytes(8, "big") + (40).to_bytes(8, "big") + b"\x00\x01m"
    )
    assert Checkpoint.decode(c.key(), c.value()) == c


def test_heartbeat_bytes():
    h = Heartbeat("A", "B", 1700000000000)
    assert h.key() == b"\x00\x01A\x00\x01B"
    assert h.value() == b"\x00\x00" + (1700000000000).to_bytes(8, "big")
    assert Heartbeat.decode(h.key(), h.value()) == h


@given(names, st.integers(-(2**31), 2**31 - 1), offsets, offsets)
def test_offset_sync_round_trip(topic, partition, up, down):
    s = OffsetSync(topic, partition, up, down)
    assert OffsetSync.decode(s.key(), s.value()) == s


@given(names, names, st.integers(-(2**31), 2**31 - 1), offsets, offsets, names)
def test_checkpoint_round_trip(group, topic, partition, up, down, meta):
    c = Checkpoint(group, topic, partition, up, down, meta)
    assert Checkpoint.decode(c.key(), c.value()) == c


@given(st.binary(max_size=40), st.binary(max_size=40))
def test_garbage_is_a_format_error_never_a_crash(key, value):
    for decode in (OffsetSync.decode, Checkpoint.decode, Heartbeat.decode):
        try:
            decode(key, value)
        except FormatError:
            pass


def test_unknown_version_and_null_are_rejected():
    c = Checkpoint("g", "t", 0, 1, 1)
    with pytest.raises(FormatError):
        Checkpoint.decode(c.key(), b"\x00\x01" + c.value()[2:])
    with pytest.raises(FormatError):
        Heartbeat.decode(None, None)


def test_latest_checkpoint_per_partition_wins_and_bad_records_are_skipped():
    a = Checkpoint("g", "t", 0, 1, 1)
    b = Checkpoint("g", "t", 0, 5, 4)
    c = Checkpoint("h", "t", 0, 2, 2)
    got = latest([(a.key(), a.value()), (b"x", b"y"), (c.key(), c.value()), (b.key(), b.value())])
    assert got == {("g", "t", 0): b, ("h", "t", 0): c}


def test_source_offsets_are_connects_json_for_mm2():
    assert source_offsets.key("A", "t", 2) == (
        b'["MirrorSourceConnector",{"cluster":"A","partition":2,"topic":"t"}]'
    )
    assert source_offsets.value(41) == b'{"offset":41}'
    k = source_offsets.key("A", "t", 2)
    records = [(k, b'{"offset":1}'), (b"junk", b"{}"), (k, b'{"offset":9}')]
    assert source_offsets.fold(records) == {("A", "t", 2): 9}
    assert source_offsets.fold(records + [(k, None)]) == {}
    # another connector's offsets (e.g. a checkpoint connector) are not ours
    other = b'["MirrorCheckpointConnector",{"cluster":"A","partition":2,"topic":"t"}]'
    assert source_offsets.decode(other, b'{"offset":1}') is None
