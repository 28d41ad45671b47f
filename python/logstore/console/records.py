"""A topic's records page: the newest records, or those from an offset or a timestamp,
optionally filtered by key (equal to the key's text) or by a substring of the value's
text, shown as text, JSON or hex (:mod:`logstore.console.render`) and, with
``--registry``, decoded through the schema registry (:mod:`logstore.console.registry`).

Each request reads with its own consumer that is assigned partitions (no group: it
joins nothing and commits nothing) and closed before the answer is sent, so no consumer
outlives its request. It returns at most ``limit`` (<= :data:`MAX_LIMIT`) records and
reads at most :data:`SCAN_BUDGET` records and for at most :data:`READ_SECONDS`:

- *newest*: the last ``limit`` records of each chosen partition (with a filter, or when
  that would pass the budget, the last ``SCAN_BUDGET / partitions``), newest first;
- *offset* / *timestamp*: from that position (a timestamp: each partition's first record
  at or after it, by ListOffsets) up to the end offsets taken when the request began,
  oldest first.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from aiohttp import web
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from logstore.cli.admin import BrokerError
from logstore.cli.connection import client_config_error
from logstore.cli.positions import parse_timestamp
from logstore.cli.topic import topic_metadata
from logstore.console import render as show
from logstore.console.kafka import Kafka
from logstore.console.web import render, state

MAX_LIMIT = 200
DEFAULT_LIMIT = 20
SCAN_BUDGET = 5000
READ_SECONDS = 5.0
MODES = ("newest", "offset", "timestamp")


@dataclasses.dataclass(frozen=True)
class Query:
    topic: str
    mode: str = "newest"
    partition: int | None = None
    offset: int = 0
    timestamp: int = 0
    key: str = ""
    contains: str = ""
    limit: int = DEFAULT_LIMIT


@dataclasses.dataclass
class Record:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _matches(q: Query, key: bytes | None, value: bytes | None) -> bool:
    if q.key and (key is None or key.decode("utf-8", "backslashreplace") != q.key):
        return False
    if q.contains and (value is None or q.contains not in value.decode("utf-8", "replace")):
        return False
    return True


def browse(kafka: Kafka, q: Query) -> dict[str, Any]:
    """The records ``q`` asks for and what was read: ``records``, ``scanned``, and
    ``complete`` (False when the budget or the time ran out first)."""
    admin = kafka.admin
    meta = topic_metadata(admin, [q.topic])[q.topic]
    ids = sorted(meta.partitions)
    if q.partition is not None:
        if q.partition not in ids:
            raise BrokerError(
                f"{q.topic} partition {q.partition}",
                KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART),
            )
        ids = [q.partition]
    tps = [(q.topic, p) for p in ids]
    starts, ends = admin.offsets(tps, "earliest"), admin.offsets(tps, "latest")
    at_time = admin.offsets(tps, q.timestamp) if q.mode == "timestamp" else {}
    limit = max(1, min(q.limit, MAX_LIMIT))
    filtered = bool(q.key or q.contains)
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    for tp in tps:
        start, end = starts[tp], ends[tp]
        if isinstance(start, int) and isinstance(end, int) and end > start:
            bounds[tp] = (start, end)
    share = max(1, SCAN_BUDGET // max(1, len(bounds)))
    per_partition = share if filtered else min(limit, share)
    begin: dict[int, int] = {}
    stop: dict[int, int] = {}
    for tp, (start, end) in bounds.items():
        if q.mode == "newest":
            first = max(start, end - per_partition)
        elif q.mode == "offset":
            first = min(max(q.offset, start), end)
        else:
            at = at_time.get(tp)
            first = end if not isinstance(at, int) or at < 0 else min(max(at, start), end)
        if first < end:
            begin[tp[1]], stop[tp[1]] = first, end
    records: list[Record] = []
    scanned = 0
    complete = True
    if begin:
        records, scanned, complete = _read(kafka, q, begin, stop, limit)
    if q.mode == "newest":
        records.sort(key=lambda r: (r.timestamp, r.offset), reverse=True)
    else:
        records.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    return {
        "records": records[:limit],
        "scanned": scanned,
        "complete": complete,
        "partitions": len(ids),
    }


def _read(
    kafka: Kafka, q: Query, begin: dict[int, int], stop: dict[int, int], limit: int
) -> tuple[list[Record], int, bool]:
    conf = {
        **kafka.options.config(),
        "group.id": "logstore-console-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "fetch.max.bytes": 8 * 1024 * 1024,
        "queued.max.messages.kbytes": 16 * 1024,
    }
    try:
        consumer = Consumer(conf)
    except KafkaException as exc:
        raise client_config_error(exc) from None
    records: list[Record] = []
    scanned = 0
    left = dict(stop)
    deadline = time.monotonic() + READ_SECONDS
    # newest: every record read is kept (each partition reads at most `limit`, sorted
    # after); from a position: the first `limit` matches in offset order suffice.
    enough = limit if q.mode != "newest" else None
    try:
        consumer.assign([TopicPartition(q.topic, p, off) for p, off in begin.items()])
        while left and scanned < SCAN_BUDGET and time.monotonic() < deadline:
            if enough is not None and len(records) >= enough:
                break
            batch = consumer.consume(min(500, SCAN_BUDGET - scanned), timeout=0.2)
            for msg in batch:
                if msg.error() is not None:
                    continue
                p, offset = msg.partition(), msg.offset()
                if p not in left:
                    continue
                if offset >= left[p]:
                    del left[p]
                    continue
                scanned += 1
                if offset + 1 >= left[p]:
                    del left[p]
                if _matches(q, msg.key(), msg.value()):
                    records.append(
                        Record(
                            p,
                            offset,
                            msg.timestamp()[1],
                            msg.key(),
                            msg.value(),
                            list(msg.headers() or []),
                        )
                    )
    finally:
        consumer.close()
    return records, scanned, not left


async def shown(request: web.Request, records: list[Record], fmt: str) -> list[dict[str, Any]]:
    """The records as the page shows them, values decoded through the registry when
    they carry a schema id and ``--registry`` was given."""
    st = state(request)
    out = []
    for r in records:
        key_kind, key_text = show.show(r.key, fmt)
        value_kind, value_text = show.show(r.value, fmt)
        sid = show.schema_id(r.value)
        if sid is not None and st.registry is not None and st.session is not None and fmt == "auto":
            try:
                value_text = await st.registry.decode(st.session, sid, r.value or b"")
                value_kind = f"schema {sid}"
            except ValueError as exc:
                value_kind = f"schema {sid}: {exc}"
        out.append(
            {
                "partition": r.partition,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "time": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.timestamp / 1000))
                + f".{r.timestamp % 1000:03d}Z",
                "key": key_text,
                "key_kind": key_kind,
                "value": value_text,
                "value_kind": value_kind,
                "headers": [(k, show.show(v, fmt)[1]) for k, v in r.headers],
            }
        )
    return out


def query(topic: str, params: Any) -> tuple[Query, list[str]]:
    """The Query the page's form asks for, and the problems with it (shown on the page)."""
    problems = []
    mode = params.get("mode", "newest")
    if mode not in MODES:
        problems.append(f"mode {mode!r}: one of {', '.join(MODES)}")
        mode = "newest"

    def integer(name: str, default: int | None) -> int | None:
        text = str(params.get(name, "")).strip()
        if not text:
            return default
        try:
            return int(text)
        except ValueError:
            problems.append(f"{name} {text!r}: expected a whole number")
            return default

    timestamp = 0
    if mode == "timestamp":
        text = str(params.get("timestamp", "")).strip()
        try:
            timestamp = parse_timestamp(text) if text else 0
        except Exception as exc:
            problems.append(str(exc))
    return (
        Query(
            topic=topic,
            mode=mode,
            partition=integer("partition", None),
            offset=integer("offset", 0) or 0,
            timestamp=timestamp,
            key=str(params.get("key", "")),
            contains=str(params.get("contains", "")),
            limit=max(1, min(integer("limit", DEFAULT_LIMIT) or DEFAULT_LIMIT, MAX_LIMIT)),
        ),
        problems,
    )


async def page(request: web.Request) -> web.Response:
    st = state(request)
    q, problems = query(request.match_info["topic"], request.query)
    fmt = request.query.get("format", "auto")
    if fmt not in show.FORMATS:
        fmt = "auto"
    result: dict[str, Any] = {"records": [], "scanned": 0, "complete": True, "partitions": 0}
    if not problems:
        result = await st.kafka.run(browse, st.kafka, q)
    rows = await shown(request, result["records"], fmt)
    return render(
        request,
        "records.html",
        q=q,
        params=request.query,
        fmt=fmt,
        formats=show.FORMATS,
        problems=problems,
        rows=rows,
        result=result,
        max_limit=MAX_LIMIT,
        budget=SCAN_BUDGET,
    )


def routes(app: web.Application) -> None:
    app.router.add_get("/topics/{topic}/records", page)
