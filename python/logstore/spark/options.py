"""The data source's options, with the names and meanings of Spark's Kafka source.

- ``path`` (``load(path)``): the broker's ``log.dirs`` (comma-separated) to read files from
- ``kafka.bootstrap.servers``: read over the Kafka protocol instead of files
- ``topics`` / ``subscribe``: comma-separated topic names
- ``subscribePattern``: a regex a topic name must match in full
- ``assign``: JSON ``{"t": [0, 1]}``: exactly these topic-partitions
- ``startingOffsets``: ``earliest``, ``latest`` or JSON ``{"t": {"0": 23, "1": -2}}``
  (-2 earliest, -1 latest)
- ``endingOffsets``: ``latest`` or JSON (-1 latest); batch queries only
- ``startingTimestamp``: ms; the first offset with a timestamp >= it, for every partition
- ``startingOffsetsByTimestamp``: JSON ``{"t": {"0": ms}}``
- ``endingTimestamp`` / ``endingOffsetsByTimestamp``: the same for the end (exclusive)
- ``startingOffsetsByTimestampStrategy``: ``error`` (default) or ``latest`` when no offset
  matches
- ``minPartitions``: split offset ranges until there are at least this many Spark partitions
- ``failOnDataLoss``: ``true`` (default): fail when planned offsets are gone; ``false``: skip
  them
- ``includeHeaders``: add ``headers array<struct<key:string,value:binary>>``
- ``maxOffsetsPerTrigger``: streaming: at most this many offsets per micro-batch
- ``minOffsetsPerTrigger``: streaming: wait for at least this many new offsets before a
  micro-batch ...
- ``maxTriggerDelay``: ... but no longer than this (default ``15m``; ``500ms``, ``30s``,
  ``5m``, ``1h``, ``1d`` or ms)
- ``maxRecordsPerBatch``: rows per Arrow batch yielded to Spark (default 65536)
- ``kafka.request.timeout.ms``: network: one request's timeout (default 30000)
- ``kafka.default.api.timeout.ms``: network: how long a call keeps retrying while a leader
  moves or a broker is down (default 60000)
- ``kafka.retry.backoff.ms`` / ``kafka.retry.backoff.max.ms``: network: backoff between
  retries, doubling from the first to the second (default 100 / 1000)
- ``kafka.max.partition.fetch.bytes``: network: record bytes one Fetch asks for (default
  4 MiB; a larger first batch is still read whole)

At most one of ``topics``/``subscribe``, ``subscribePattern`` and ``assign`` is given;
with none, every topic but the internal ones (``__``...) is read.

Precedence is Kafka's: startingTimestamp, then startingOffsetsByTimestamp, then
startingOffsets (and the same for the ending options).

The ``kafka.*`` settings are Kafka consumer configs of the same names (Spark's Kafka
source passes them to its consumer); other ``kafka.*`` keys are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from logstore.spark.errors import InvalidOptionError

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: ``kind`` is "earliest", "latest", "offsets" or "timestamps".

    ``per_partition`` maps (topic, partition) to an offset (-2/-1 allowed) or a timestamp
    (ms); ``timestamp`` is one time for every partition.
    """

    kind: str
    per_partition: Mapping[tuple[str, int], int] | None = None
    timestamp: int | None = None


@dataclass(frozen=True)
class NetworkSettings:
    """How the network reader talks to a cluster (the ``kafka.*`` options), in seconds
    and bytes.  ``retry_timeout_s`` is each call's retry budget: it must outlast a
    leader election (Kafka notices a dead broker after ``zookeeper.session.timeout.ms``,
    18 s by default) for a read to ride over one."""

    request_timeout_s: float = 30.0
    retry_timeout_s: float = 60.0
    retry_backoff_s: float = 0.1
    retry_backoff_max_s: float = 1.0
    fetch_max_bytes: int = 4 << 20


@dataclass(frozen=True)
class SourceOptions:
    log_dirs: tuple[str, ...]
    bootstrap_servers: str | None
    topics: tuple[str, ...] | None
    pattern: str | None
    assigned: frozenset[tuple[str, int]] | None
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_not_found_latest: bool
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    max_records_per_batch: int
    network: NetworkSettings = NetworkSettings()

    def selects(self, topic: str, partition: int | None = None) -> bool:
        """Whether ``topic`` (or its ``partition``) is read: assigned, named, matching the
        pattern, or (none of those given) not internal."""
        if self.assigned is not None:
            return any(
                t == topic and (partition is None or p == partition) for t, p in self.assigned
            )
        if self.topics is not None:
            return topic in self.topics
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return not topic.startswith("__")


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    v = options.get(key)
    if v is None:
        return default
    if v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise InvalidOptionError(f"option {key}={v!r}: expected true or false")


def _int(options: Mapping[str, str], key: str, minimum: int) -> int | None:
    v = options.get(key)
    if v is None:
        return None
    try:
        n = int(v)
    except ValueError:
        raise InvalidOptionError(f"option {key}={v!r}: expected an integer") from None
    if n < minimum:
        raise InvalidOptionError(f"option {key}={v!r}: must be >= {minimum}")
    return n


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {
    None: 1,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def _duration_ms(options: Mapping[str, str], key: str, default: str) -> int:
    """A duration as Spark writes them: a number of ms, or a number and a unit."""
    v = options.get(key, default)
    m = _DURATION.match(v)
    if m is None:
        raise InvalidOptionError(
            f"option {key}={v!r}: expected a duration like 500ms, 30s, 15m, 1h or 1d"
        )
    return int(m[1]) * _DURATION_MS[m[2].lower() if m[2] else None]


def _assign_json(text: str) -> frozenset[tuple[str, int]]:
    try:
        doc = json.loads(text)
        out = frozenset((str(topic), int(p)) for topic, parts in doc.items() for p in parts)
    except (ValueError, AttributeError, TypeError):
        raise InvalidOptionError(
            f'option assign={text!r}: expected JSON like {{"topic": [0, 1]}}'
        ) from None
    if not out or any(p < 0 for _, p in out):
        raise InvalidOptionError(f"option assign={text!r}: name at least one partition, each >= 0")
    return out


def _per_partition_json(key: str, text: str) -> dict[tuple[str, int], int]:
    try:
        doc = json.loads(text)
        out = {}
        for topic, parts in doc.items():
            for p, v in parts.items():
                out[(str(topic), int(p))] = int(v)
        return out
    except (ValueError, AttributeError, TypeError):
        raise InvalidOptionError(
            f'option {key}={text!r}: expected JSON like {{"topic": {{"0": 23}}}}'
        ) from None


def _offset_spec(options: Mapping[str, str], prefix: str, default: str) -> OffsetSpec:
    ts = _int(options, f"{prefix}Timestamp", 0)
    if ts is not None:
        return OffsetSpec("timestamps", timestamp=ts)
    by_ts = options.get(f"{prefix}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetSpec(
            "timestamps", per_partition=_per_partition_json(f"{prefix}OffsetsByTimestamp", by_ts)
        )
    key = f"{prefix}Offsets"
    v = options.get(key, default).strip()
    if v.lower() in ("earliest", "latest"):
        if prefix == "ending" and v.lower() == "earliest":
            raise InvalidOptionError(
                f"option {key}=earliest is not allowed (as in Spark's Kafka source)"
            )
        return OffsetSpec(v.lower())
    spec = _per_partition_json(key, v)
    if prefix == "ending" and EARLIEST in spec.values():
        raise InvalidOptionError(f"option {key}: -2 (earliest) is not allowed for an ending offset")
    if any(o < EARLIEST for o in spec.values()):
        raise InvalidOptionError(f"option {key}: offsets must be >= -2")
    return OffsetSpec("offsets", per_partition=spec)


def _network_settings(options: Mapping[str, str]) -> NetworkSettings:
    default = NetworkSettings()

    def ms(key: str, value: float, minimum: int) -> float:
        n = _int(options, key, minimum)
        return value if n is None else n / 1000

    backoff_s = ms("kafka.retry.backoff.ms", default.retry_backoff_s, 0)
    backoff_max_s = ms("kafka.retry.backoff.max.ms", max(default.retry_backoff_max_s, backoff_s), 0)
    if backoff_max_s < backoff_s:
        raise InvalidOptionError(
            f"option kafka.retry.backoff.max.ms={options.get('kafka.retry.backoff.max.ms')!r}: "
            "must be >= kafka.retry.backoff.ms"
        )
    return NetworkSettings(
        request_timeout_s=ms("kafka.request.timeout.ms", default.request_timeout_s, 1),
        retry_timeout_s=ms("kafka.default.api.timeout.ms", default.retry_timeout_s, 0),
        retry_backoff_s=backoff_s,
        retry_backoff_max_s=backoff_max_s,
        fetch_max_bytes=_int(options, "kafka.max.partition.fetch.bytes", 1)
        or default.fetch_max_bytes,
    )


def parse_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Reads and checks every option (``options`` is Spark's case-insensitive dict)."""
    bootstrap = options.get("kafka.bootstrap.servers")
    path = options.get("path")
    if not bootstrap and not path:
        raise InvalidOptionError(
            "give the broker's log.dirs with load(path) or kafka.bootstrap.servers"
        )
    topics_opt = options.get("topics") or options.get("subscribe")
    pattern = options.get("subscribePattern")
    assign = options.get("assign")
    if sum(x is not None and x != "" for x in (topics_opt, pattern, assign)) > 1:
        raise InvalidOptionError("give only one of topics/subscribe, subscribePattern and assign")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as e:
            raise InvalidOptionError(f"option subscribePattern={pattern!r}: {e}") from None
    topics = tuple(t.strip() for t in topics_opt.split(",") if t.strip()) if topics_opt else None
    strategy = options.get("startingOffsetsByTimestampStrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise InvalidOptionError(
            f"option startingOffsetsByTimestampStrategy={strategy!r}: expected error or latest"
        )
    ending = _offset_spec(options, "ending", "latest")
    if streaming and any(
        k in options for k in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
    ):
        raise InvalidOptionError(
            "ending offsets are for batch queries only (as in Spark's Kafka source)"
        )
    return SourceOptions(
        log_dirs=tuple(p.strip() for p in path.split(",") if p.strip())
        if path and not bootstrap
        else (),
        bootstrap_servers=bootstrap,
        topics=topics,
        pattern=pattern,
        assigned=_assign_json(assign) if assign else None,
        starting=_offset_spec(options, "starting", "latest" if streaming else "earliest"),
        ending=ending,
        timestamp_not_found_latest=strategy == "latest",
        min_partitions=_int(options, "minPartitions", 1),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", 1),
        min_offsets_per_trigger=_int(options, "minOffsetsPerTrigger", 1),
        max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", "15m"),
        max_records_per_batch=_int(options, "maxRecordsPerBatch", 1) or 65536,
        network=_network_settings(options),
    )
