"""Finding 6 (recovery): after a SIGKILL, a torn or damaged segment tail is cut, the
broker's log says what was cut (records, bytes, offsets) for the partition, and a batch
whose baseOffset was raised by a bit flip (outside the CRC) is cut instead of moving the
log end offset. Every message acknowledged before the damaged batch is still there.
"""

from __future__ import annotations

import os
import re
import struct

from tests.integration.clients import create_topic
from tests.integration.conftest import consume_values
from tests.integration.hardening.support import WATCH_TOPIC, WellBehavedProducer


def _produce(bootstrap: str, topic: str, n: int) -> list[bytes]:
    from confluent_kafka import Producer

    p = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.num.messages": 1}
    )
    acked: list[bytes] = []
    for i in range(n):
        p.produce(
            topic,
            f"v{i}".encode(),
            on_delivery=lambda err, msg: err is None and acked.append(msg.value()),
        )
        p.flush(30)  # one batch per message
    return acked


def _batch_positions(path: str) -> list[tuple[int, int, int]]:
    """(position, baseOffset, size) of each batch of a segment file."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, base, length + 12))
        pos += length + 12
    return out


def _segment(data_dir: str, topic: str) -> str:
    d = os.path.join(data_dir, f"{topic}-0")
    return os.path.join(d, sorted(n for n in os.listdir(d) if n.endswith(".log"))[0])


def _leo(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "leo"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def test_torn_and_bit_flipped_tails_are_cut_and_reported(broker):
    create_topic(broker.bootstrap, "flip")
    create_topic(broker.bootstrap, "torn")
    create_topic(broker.bootstrap, WATCH_TOPIC)
    well = WellBehavedProducer(broker.bootstrap).start()
    flip = _produce(broker.bootstrap, "flip", 20)
    torn = _produce(broker.bootstrap, "torn", 20)
    well.stop()
    well.assert_responsive()
    broker.kill()

    # A bit flip raising the last batch's baseOffset by 2^27.
    path = _segment(broker.data_dir, "flip")
    pos, base, _ = _batch_positions(path)[-1]
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(struct.pack(">q", base | (1 << 27)))
    # A torn last batch: the end of its records gone.
    path = _segment(broker.data_dir, "torn")
    pos, _, size = _batch_positions(path)[-1]
    os.truncate(path, pos + size - 5)

    broker.start()
    assert _leo(broker.bootstrap, "flip") == 19
    assert _leo(broker.bootstrap, "torn") == 19
    assert consume_values(broker.bootstrap, "flip", 19) == flip[:19]
    assert consume_values(broker.bootstrap, "torn", 19) == torn[:19]
    assert set(well.acked) <= set(consume_values(broker.bootstrap, WATCH_TOPIC, len(well.acked)))
    text = broker.log_text()
    line = next(ln for ln in text.splitlines() if "recovered flip-0" in ln)
    assert re.search(
        r"log end offset 19; cut \d+ bytes: 1 batches, 1 records "
        r"\(their headers claim offsets 134217747\.\.134217747\)",
        line,
    ), line
    line = next(ln for ln in text.splitlines() if "recovered torn-0" in ln)
    assert re.search(
        r"log end offset 19; cut \d+ bytes: 1 batches, 1 records "
        r"\(their headers claim offsets 19\.\.19\)",
        line,
    ), line
    # New appends continue at the recovered end.
    assert _produce(broker.bootstrap, "flip", 1) == [b"v0"]
    assert _leo(broker.bootstrap, "flip") == 20
