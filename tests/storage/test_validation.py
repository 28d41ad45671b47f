"""Validation on append and decode: corrupt batches, oversized batches, bad configs."""

from __future__ import annotations

import os
import random
import struct

import pytest

import logstore
from logstore import _native as ls

from .helpers import (
    OFF_LAST_OFFSET_DELTA,
    OFF_LENGTH,
    OFF_RECORDS_COUNT,
    RECENT_T0,
    fix_crc,
    log_files,
)

T0 = RECENT_T0


def _batch(n=3, codec="none", tag=b"", value_size=20):
    return ls.encode_batch(
        [
            (b"k%d" % i + tag, (b"v%d-" % i + tag) * (value_size // 3 + 1), [], T0 + i)
            for i in range(n)
        ],
        codec,
    )


# -- corruptions: name -> function(bytes) -> bytes


def _flip_after_21(pos_frac):
    def f(b):
        b = bytearray(b)
        pos = 21 + int((len(b) - 22) * pos_frac)
        b[pos] ^= 0x5A
        return bytes(b)

    return f


def _wrong_magic(value):
    def f(b):
        b = bytearray(b)
        b[16] = value
        return bytes(b)

    return f


def _set_length(delta=None, absolute=None):
    def f(b):
        b = bytearray(b)
        (length,) = struct.unpack_from(">i", b, OFF_LENGTH)
        struct.pack_into(">i", b, OFF_LENGTH, absolute if absolute is not None else length + delta)
        return bytes(b)

    return f


def _last_offset_delta(value):
    def f(b):
        b = bytearray(b)
        struct.pack_into(">i", b, OFF_LAST_OFFSET_DELTA, value)
        return bytes(fix_crc(b))  # a valid CRC: only the offset check can catch it

    return f


def _records_count(value):
    def f(b):
        b = bytearray(b)
        struct.pack_into(">i", b, OFF_RECORDS_COUNT, value)
        struct.pack_into(">i", b, OFF_LAST_OFFSET_DELTA, value - 1)
        return bytes(fix_crc(b))

    return f


CORRUPTIONS = {
    "crc-flip-attributes": lambda b: bytes(bytearray(b[:21]) + bytes([b[21] ^ 0x40]) + b[22:]),
    "crc-flip-early": _flip_after_21(0.1),
    "crc-flip-middle": _flip_after_21(0.5),
    "crc-flip-last": _flip_after_21(1.0),
    "magic-0": _wrong_magic(0),
    "magic-1": _wrong_magic(1),
    "magic-3": _wrong_magic(3),
    "length-negative": _set_length(absolute=-1),
    "length-zero": _set_length(absolute=0),
    "length-below-header": _set_length(absolute=48),
    "length-too-small-by-one": _set_length(delta=-1),
    "last-offset-delta-high": _last_offset_delta(5),
    "last-offset-delta-low": _last_offset_delta(1),
    "last-offset-delta-negative": _last_offset_delta(-1),
    "records-count-lies": _records_count(4),
}
# A batchLength larger than the buffer is a partial batch for decode (allow_partial),
# but corrupt for append.
APPEND_ONLY_CORRUPTIONS = {
    "length-beyond-buffer": _set_length(delta=1),
    "length-far-beyond-buffer": _set_length(absolute=1 << 30),
    "truncated-buffer": lambda b: b[:-5],
    "shorter-than-header": lambda b: b[:30],
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_decode_rejects(name, codec):
    bad = CORRUPTIONS[name](_batch(3, codec))
    if name == "last-offset-delta-high":
        # Legal on read: compaction keeps a batch's lastOffsetDelta when it removes its
        # last records, so a stored batch may span more offsets than it has records.
        # Append (producer batches) rejects it; see test_append_rejects_and_leaves_log_unchanged.
        [batch] = ls.decode_batches(bad, verify_crc=True)
        assert (batch.records_count, batch.last_offset_delta) == (3, 5)
        assert [r.offset for r in batch.records] == [0, 1, 2]
        return
    with pytest.raises(ls.CorruptRecordError):
        ls.decode_batches(bad, verify_crc=True)
    with pytest.raises(ls.CorruptRecordError):
        ls.decode_batches(bad, verify_crc=True, allow_partial=False)


@pytest.mark.parametrize("name", sorted(APPEND_ONLY_CORRUPTIONS))
def test_decode_rejects_partial_when_not_allowed(name):
    bad = APPEND_ONLY_CORRUPTIONS[name](_batch(3))
    with pytest.raises(ls.CorruptRecordError):
        ls.decode_batches(bad, allow_partial=False)
    assert ls.decode_batches(bad, allow_partial=True) == []


def _state(log, partition_dir):
    files = {n: os.path.getsize(partition_dir / n) for n in log_files(partition_dir)}
    return (
        log.log_end_offset,
        log.log_start_offset,
        log.size_bytes,
        log.read(log.log_start_offset, 1 << 20),
        files,
    )


def _large_batch(n, codec, tag):
    """A batch of at least CONCURRENT_CHECK_MIN_BYTES, whatever the codec: its contents are
    checked while it is written, and a failed check must still leave nothing behind."""
    rng = random.Random(tag)
    return ls.encode_batch(
        [(b"k%d" % i + tag, rng.randbytes(100_000), [], T0 + i) for i in range(n)], codec
    )


@pytest.mark.parametrize("name", sorted(CORRUPTIONS) + sorted(APPEND_ONLY_CORRUPTIONS))
@pytest.mark.parametrize("codec", ["none", "zstd"])
@pytest.mark.parametrize("size", ["small", "large"])
def test_append_rejects_and_leaves_log_unchanged(open_log, partition_dir, name, codec, size):
    corrupt = {**CORRUPTIONS, **APPEND_ONLY_CORRUPTIONS}[name]
    log = open_log()
    log.append(_batch(2, codec, b"a"))
    log.append(_batch(4, codec, b"b"))
    before = _state(log, partition_dir)
    bad = corrupt(_batch(3, codec, b"c") if size == "small" else _large_batch(3, codec, b"c"))
    assert size == "small" or len(bad) >= 256 * 1024 or name == "shorter-than-header"
    with pytest.raises(logstore.CorruptRecordError) as ei:
        log.append(bad)
    assert isinstance(ei.value, logstore.LogStoreError)
    assert _state(log, partition_dir) == before
    # append_info takes the same path
    with pytest.raises(ls.CorruptRecordError):
        log.append_info(bad)
    assert _state(log, partition_dir) == before
    # and the log still works: the next good append gets the next offset
    assert log.append(_batch(3, codec, b"d")) == (6, 8)


@pytest.mark.parametrize("which", [1, 2])
def test_multi_batch_append_with_corrupt_batch_writes_nothing(open_log, partition_dir, which):
    log = open_log()
    log.append(_batch(2))
    before = _state(log, partition_dir)
    batches = [_batch(3, tag=b"x"), _batch(2, tag=b"y"), _batch(4, tag=b"z")]
    batches[which] = CORRUPTIONS["crc-flip-middle"](batches[which])
    with pytest.raises(ls.CorruptRecordError):
        log.append(b"".join(batches))
    assert _state(log, partition_dir) == before
    # The same with an append large enough to be checked while it is written.
    batches = [
        _large_batch(1, "none", b"x"),
        _large_batch(2, "none", b"y"),
        _large_batch(1, "none", b"z"),
    ]
    batches[which] = CORRUPTIONS["crc-flip-middle"](batches[which])
    with pytest.raises(ls.CorruptRecordError):
        log.append(b"".join(batches))
    assert _state(log, partition_dir) == before
    log.close()
    log = open_log()
    assert log.log_end_offset == 2
    assert log.read(0, 1 << 20) == before[3]


def test_multi_batch_append_with_trailing_partial_batch_writes_nothing(open_log, partition_dir):
    log = open_log()
    before = _state(log, partition_dir)
    data = _batch(2) + _batch(3)[:-1]
    with pytest.raises(ls.CorruptRecordError):
        log.append(data)
    assert _state(log, partition_dir) == before
    assert log.log_end_offset == 0


def test_empty_append_is_rejected_or_noop(open_log):
    log = open_log()
    try:
        log.append(b"")
    except ls.LogStoreError:
        pass
    assert log.log_end_offset == 0


def test_record_too_large(open_log, partition_dir):
    big = _batch(5, value_size=300)
    log = open_log(max_message_bytes=len(big) - 1)
    log.append(_batch(1, value_size=3))
    before = _state(log, partition_dir)
    with pytest.raises(logstore.RecordTooLargeError) as ei:
        log.append(big)
    assert isinstance(ei.value, ls.LogStoreError)
    assert not isinstance(ei.value, ls.CorruptRecordError)
    assert _state(log, partition_dir) == before
    # too large inside a multi-batch append: nothing written
    with pytest.raises(ls.RecordTooLargeError):
        log.append(_batch(1, tag=b"q") + big)
    assert _state(log, partition_dir) == before


def test_record_exactly_max_message_bytes_is_accepted(open_log):
    big = _batch(5, value_size=300)
    log = open_log(**{"max.message.bytes": len(big)})
    assert log.append(big) == (0, 4)


def test_compressed_batch_size_counts_compressed_bytes(open_log):
    # max.message.bytes applies to the batch as stored (compressed), as in Kafka.
    recs = [(None, b"a" * 10_000, [], T0)]
    compressed = ls.encode_batch(recs, "zstd")
    assert len(compressed) < 1000
    log = open_log(max_message_bytes=1000)
    assert log.append(compressed) == (0, 0)


def test_batch_larger_than_segment_is_too_large(open_log):
    big = _batch(5, value_size=400)
    log = open_log(segment_bytes=len(big) - 1)
    with pytest.raises(ls.RecordTooLargeError):
        log.append(big)
    assert log.log_end_offset == 0


def test_error_hierarchy():
    for name in [
        "CorruptRecordError",
        "OffsetOutOfRangeError",
        "RecordTooLargeError",
        "InvalidConfigError",
        "InvalidOffsetError",
        "CorruptIndexError",
        "LogClosedError",
        "LogIOError",
    ]:
        cls = getattr(ls, name)
        assert issubclass(cls, ls.LogStoreError), name
        assert getattr(logstore, name) is cls, name
    assert issubclass(ls.LogStoreError, Exception)
    assert logstore.LogStoreError is ls.LogStoreError
    # distinct classes
    assert (
        len(
            {
                ls.CorruptRecordError,
                ls.OffsetOutOfRangeError,
                ls.RecordTooLargeError,
                ls.InvalidConfigError,
            }
        )
        == 4
    )


def _names_key(msg: str, key: str) -> bool:
    return key in msg or key.replace(".", "_") in msg


@pytest.mark.parametrize(
    "config,key",
    [
        ({"segment_bytes": -1}, "segment.bytes"),
        ({"segment.bytes": 0}, "segment.bytes"),
        ({"segment_bytes": "big"}, "segment.bytes"),
        ({"message_timestamp_type": "bogus"}, "message.timestamp.type"),
        ({"message.timestamp.type": "createtime-ish"}, "message.timestamp.type"),
        ({"max_message_bytes": -5}, "max.message.bytes"),
        ({"index_interval_bytes": -1}, "index.interval.bytes"),
        ({"segment_ms": 0}, "segment.ms"),
        ({"retention_ms": -2}, "retention.ms"),
        ({"retention_bytes": "lots"}, "retention.bytes"),
        ({"bogus_key": 1}, "bogus.key"),
        ({"no.such.setting": 1}, "no.such.setting"),
    ],
)
def test_bad_config_names_the_key(partition_dir, config, key):
    with pytest.raises(logstore.InvalidConfigError) as ei:
        ls.Log.open(str(partition_dir), **config)
    assert isinstance(ei.value, ls.LogStoreError)
    assert _names_key(str(ei.value), key), str(ei.value)


def test_good_config_both_spellings(open_log, partition_dir):
    log = open_log(
        segment_bytes=4096, **{"retention.ms": 1000, "message.timestamp.type": "LogAppendTime"}
    )
    cfg = log.config()
    # values are typed ``object`` in the stub: compare their text, as DescribeConfigs shows them
    val = {k: str(v) for k, v in cfg.items()}
    assert val["segment.bytes"] == "4096"
    assert val["retention.ms"] == "1000"
    assert val["message.timestamp.type"] == "LogAppendTime"
    # Kafka's defaults for what was not given
    assert val["retention.bytes"] == "-1"
    assert val["index.interval.bytes"] == "4096"
    assert val["max.message.bytes"] == "1048588"
    assert val["segment.ms"] == "604800000"
    assert all("_" not in k for k in cfg), sorted(cfg)


@pytest.mark.parametrize(
    "config,key",
    [
        ({"segment_bytes": -1}, "segment.bytes"),
        ({"message.timestamp.type": "bogus"}, "message.timestamp.type"),
        ({"bogus_key": 1}, "bogus.key"),
    ],
)
def test_validate_log_config_rejects(config, key):
    with pytest.raises(ls.InvalidConfigError) as ei:
        ls.validate_log_config(**config)
    assert _names_key(str(ei.value), key), str(ei.value)


def test_validate_log_config_effective():
    cfg = ls.validate_log_config(segment_bytes=2048, **{"retention.ms": -1})
    assert cfg["segment.bytes"] == "2048"
    assert cfg["retention.ms"] == "-1"
    assert cfg["max.message.bytes"] == "1048588"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in cfg.items())
    assert ls.validate_log_config() == ls.validate_log_config(**{"segment.bytes": 1073741824})


def test_set_config_bad_value_keeps_old_config(open_log):
    log = open_log(segment_bytes=4096)
    before = log.config()
    with pytest.raises(ls.InvalidConfigError) as ei:
        log.set_config(segment_bytes=-1)
    assert _names_key(str(ei.value), "segment.bytes")
    with pytest.raises(ls.InvalidConfigError):
        log.set_config(no_such_key=5)
    assert log.config() == before


def test_set_config_max_message_bytes_applies(open_log):
    big = _batch(5, value_size=300)
    log = open_log()
    log.set_config(max_message_bytes=len(big) - 1)
    assert log.config()["max.message.bytes"] == str(len(big) - 1)
    with pytest.raises(ls.RecordTooLargeError):
        log.append(big)
    log.set_config(max_message_bytes=len(big))
    assert log.append(big) == (0, 4)
