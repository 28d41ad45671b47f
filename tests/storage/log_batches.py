"""Batches to append in the log tests: ``mk`` makes one, ``build`` appends several and
says where they went, ``stored`` is what the log should then hold."""

from __future__ import annotations

from logstore import _native as ls

from .helpers import RECENT_T0, with_base_offset

T0 = RECENT_T0
BIG = 1 << 30


def mk(n, ts=T0, tag="", codec="none", vsize=20, ts_step=1):
    """A batch of n records with timestamps ts, ts+ts_step, ..."""
    return ls.encode_batch(
        [
            (f"k{tag}{i}".encode(), (f"v{tag}{i}-".encode() * vsize)[:vsize], [], ts + i * ts_step)
            for i in range(n)
        ],
        codec,
    )


def build(log, sizes, ts=T0, **kw):
    """Append one batch per entry of ``sizes``; returns [(base, last, bytes)]."""
    out = []
    for i, n in enumerate(sizes):
        data = mk(n, ts=ts + 100 * i, tag=str(i), **kw)
        base, last = log.append(data)
        out.append((base, last, data))
    return out


def open_read(path):
    with open(path, "rb") as f:
        return f.read()


def stored(batches):
    """What the log should hold: the input batches with their assigned base offsets."""
    return b"".join(with_base_offset(d, base) for base, _, d in batches)


def rolled_log(
    open_log, n_segments=4, per_segment=(2, 3), ts_of=lambda s: T0 + 10_000 * s, **config
):
    """A log whose segment s holds batches stamped ts_of(s); roll() between segments."""
    log = open_log(**config)
    layout = []
    for s in range(n_segments):
        if s:
            log.roll()
        for j, n in enumerate(per_segment):
            base, last = log.append(mk(n, ts=ts_of(s), tag=f"{s}.{j}"))
            layout.append((s, base, last))
    return log, layout
