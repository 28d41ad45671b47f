"""FrameDecoder read in place (get_buffer / buffer_updated, as an asyncio.BufferedProtocol
reads): every frame comes out whole and in order, whatever the read sizes, mixed with
receive_data, and a large frame's own buffer stays within four times what arrived of it."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.protocol.frame import DIRECT_FRAME_BYTES, READ_BYTES, FrameDecoder

SIZES = st.one_of(
    st.integers(0, 300),
    st.integers(DIRECT_FRAME_BYTES - 2, DIRECT_FRAME_BYTES + 2),
    st.integers(DIRECT_FRAME_BYTES, 3 * READ_BYTES),
)


def _stream(sizes: list[int]) -> tuple[list[bytes], bytes]:
    frames = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    return frames, b"".join(struct.pack(">i", len(f)) + f for f in frames)


def _feed(decoder: FrameDecoder, stream: bytes, reads: list[tuple[bool, int]]) -> list[bytes]:
    """Feeds ``stream`` in reads of the given sizes, each through the lent buffer (True)
    or receive_data; takes every complete frame after each read."""
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        lent, size = reads[i % len(reads)]
        i += 1
        if lent:
            buf = decoder.get_buffer()
            assert len(buf) > 0
            n = min(size, len(buf), len(stream) - pos)
            buf[:n] = stream[pos : pos + n]
            del buf
            decoder.buffer_updated(n)
        else:
            n = min(size, len(stream) - pos)
            decoder.receive_data(stream[pos : pos + n])
        pos += n
        arrived = pos
        while (frame := decoder.next_frame()) is not None:
            out.append(frame)
            arrived = pos - sum(4 + len(f) for f in out)
        # a frame's own buffer is at most four times what arrived of it (plus its prefix)
        assert decoder.buffered <= max(4 * arrived, arrived + 4)
    return out


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(SIZES, min_size=1, max_size=6),
    reads=st.lists(
        st.tuples(st.booleans(), st.integers(1, 2 * READ_BYTES)), min_size=1, max_size=8
    ),
)
def test_frames_whole_and_in_order(sizes: list[int], reads: list[tuple[bool, int]]) -> None:
    frames, stream = _stream(sizes)
    decoder = FrameDecoder()
    assert _feed(decoder, stream, reads) == frames
    assert decoder.buffered == 0


def test_large_frame_read_in_place() -> None:
    """After a quarter of a 1 MiB frame has arrived, reads go straight into its buffer."""
    (frame,), stream = _stream([1 << 20])
    decoder = FrameDecoder()
    decoder.receive_data(stream[: 4 + (1 << 18)])
    assert decoder.next_frame() is None
    assert decoder.buffered == 1 << 20  # the frame's own buffer, counted whole
    buf = decoder.get_buffer()
    assert len(buf) == (1 << 20) - (1 << 18)
    buf[:] = stream[4 + (1 << 18) :]
    del buf
    decoder.buffer_updated((1 << 20) - (1 << 18))
    got = decoder.next_frame()
    assert type(got) is bytes and got == frame
    assert decoder.buffered == 0
