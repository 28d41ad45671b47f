"""What ``logstore cluster partitions`` and ``decommission`` say to the brokers, and how a
list of moves is carried out.

confluent-kafka 2.16 has no reassignment calls, so AlterPartitionReassignments (v0),
ListPartitionReassignments (v0) and DescribeLogDirs go through logstore's protocol codec
over the command's connection settings (:func:`metadata_probe.connect`: TLS, SASL,
``--timeout``): the reassignment requests to the first bootstrap server that answers
(a broker that is not the controller forwards them), DescribeLogDirs to every broker,
as each reports only its own replicas. Configs and elections go through the
AdminClient.

Throttles, as ``kafka-reassign-partitions.sh --throttle`` sets them and ``--verify``
removes them (KIP-73):

- the dynamic broker configs ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` (bytes/s) on every live broker a move involves
  (the partition's replicas before and after);
- per topic, ``leader.replication.throttled.replicas``: ``partition:broker`` for every
  replica a moving partition had before the move (they serve the copy), and
  ``follower.replication.throttled.replicas``: ``partition:broker`` for every replica
  the move adds (they fetch it). Both are set whole (a value there before is replaced)
  and deleted when the moves end.

:func:`execute` submits the moves at most ``max_in_flight`` partitions at a time, polls
ListPartitionReassignments every half second (a partition no longer listed has finished
its move), prints on stderr a line per finished partition and, every 5 s, the bytes the
moving partitions' new replicas hold (:func:`progress`), then asks for a preferred
leader election of the moved partitions (ELECTION_NOT_NEEDED is success), checks that
the metadata lists each partition's target replicas, and removes the throttle, also when
interrupted or failed (the moves under way then go on, unthrottled, until cancelled).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click
from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from logstore.balance.planner import Move
from logstore.cli.admin import Admin, kafka_error
from logstore.cli.common import EXIT_FAILED, CliError
from logstore.cli.connection import ClientOptions
from logstore.cli.metadata_probe import connect, first_answer, negotiated_version
from logstore.protocol import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from logstore.protocol.messages.partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from logstore.spark.kafka_client.errors import KafkaClientError

Partition = tuple[str, int]
BROKER_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
POLL_SECONDS = 0.5
PROGRESS_SECONDS = 5.0
_RATE = re.compile(r"^\s*(\d+)\s*(?:([kmg])(i?)b?)?(?:/s)?\s*$", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Ongoing:
    """One partition's move under way (ListPartitionReassignments)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


def parse_rate(text: str) -> int:
    """Bytes per second: ``10485760``, ``10MB`` (10^6), ``10MiB`` (2^20), ``500k``..."""
    m = _RATE.match(text)
    if not m or int(m.group(1)) <= 0:
        raise CliError(f"throttle {text!r}: expected bytes per second, e.g. 10485760 or 10MiB")
    base = 1024 if m.group(3) else 1000
    power = {"": 0, "k": 1, "m": 2, "g": 3}[(m.group(2) or "").lower()]
    return int(m.group(1)) * base**power


def parse_partition(text: str) -> Partition:
    """``TOPIC:PARTITION`` (or rpk's ``TOPIC/PARTITION``)."""
    topic, sep, index = text.rpartition(":") if ":" in text else text.rpartition("/")
    if not sep or not topic or not index.isdigit():
        raise CliError(f"{text!r}: expected TOPIC:PARTITION")
    return topic, int(index)


def parse_plan(text: str, source: str) -> dict[Partition, list[int]]:
    """Kafka's reassignment JSON (``kafka-reassign-partitions.sh``):
    ``{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..],
    "log_dirs":[..]}]}``; ``log_dirs``, when given, must be ``"any"`` for every replica."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CliError(f"{source}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise CliError(f'{source}: expected {{"version": 1, "partitions": [...]}}')
    entries = doc.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise CliError(f"{source}: 'partitions' must be a non-empty list")
    out: dict[Partition, list[int]] = {}
    for i, e in enumerate(entries):
        what = f"{source}: partitions[{i}]"
        if not isinstance(e, dict):
            raise CliError(f"{what}: expected an object")
        topic, index, replicas = e.get("topic"), e.get("partition"), e.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise CliError(f"{what}: 'topic' must be a topic name")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise CliError(f"{what}: 'partition' must be a partition index")
        if (
            not isinstance(replicas, list)
            or not replicas
            or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas)
        ):
            raise CliError(f"{what}: 'replicas' must be a non-empty list of broker ids")
        if len(set(replicas)) != len(replicas):
            raise CliError(f"{what}: 'replicas' names a broker twice: {replicas}")
        dirs = e.get("log_dirs")
        if dirs is not None and (
            not isinstance(dirs, list)
            or len(dirs) != len(replicas)
            or any(d != "any" for d in dirs)
        ):
            raise CliError(
                f"{what}: 'log_dirs' other than \"any\" per replica is not supported "
                "(each broker picks the dir)"
            )
        if (topic, index) in out:
            raise CliError(f"{what}: {topic}:{index} is listed twice")
        out[(topic, index)] = replicas
    return out


def plan_json(moves: Iterable[Move]) -> dict[str, Any]:
    """The moves as Kafka's reassignment JSON (for ``kafka-reassign-partitions.sh``)."""
    return {
        "version": 1,
        "partitions": [
            {
                "topic": m.topic,
                "partition": m.partition,
                "replicas": list(m.after),
                "log_dirs": ["any"] * len(m.after),
            }
            for m in moves
        ],
    }


# ---- the wire ----


def _by_topic(partitions: Iterable[Partition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        out.setdefault(t, []).append(p)
    return out


def alter_reassignments(
    options: ClientOptions, targets: dict[Partition, list[int] | None]
) -> dict[Partition, str | None]:
    """AlterPartitionReassignments: each partition's target replicas (None cancels its
    move); each partition's error name (None when accepted)."""
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    Part = AlterPartitionReassignmentsRequest.ReassignablePartition
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=int(options.timeout * 1000),
        topics=[
            Topic(name=t, partitions=[Part(partition_index=p, replicas=targets[(t, p)])])
            for t, ps in _by_topic(targets).items()
            for p in ps
        ],
    )

    def exchange(connection: Any) -> AlterPartitionReassignmentsResponse:
        if negotiated_version(connection, ApiKey.ALTER_PARTITION_REASSIGNMENTS) < 0:
            raise CliError(f"{connection.address} does not serve AlterPartitionReassignments")
        response = connection.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request, version=0)
        assert isinstance(response, AlterPartitionReassignmentsResponse)
        return response

    response = first_answer(options, "AlterPartitionReassignments", exchange, None)
    assert response is not None
    if response.error_code:
        raise CliError(
            f"AlterPartitionReassignments: {error_name(response.error_code)}"
            + (f": {response.error_message}" if response.error_message else ""),
            EXIT_FAILED,
        )
    out: dict[Partition, str | None] = dict.fromkeys(targets)
    for t in response.responses:
        for p in t.partitions:
            if p.error_code:
                out[(t.name, p.partition_index)] = error_name(p.error_code) + (
                    f": {p.error_message}" if p.error_message else ""
                )
    return out


def list_reassignments(options: ClientOptions) -> dict[Partition, Ongoing]:
    """ListPartitionReassignments of every partition."""

    def exchange(connection: Any) -> ListPartitionReassignmentsResponse:
        if negotiated_version(connection, ApiKey.LIST_PARTITION_REASSIGNMENTS) < 0:
            raise CliError(f"{connection.address} does not serve ListPartitionReassignments")
        response = connection.request(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            ListPartitionReassignmentsRequest(timeout_ms=int(options.timeout * 1000), topics=None),
            version=0,
        )
        assert isinstance(response, ListPartitionReassignmentsResponse)
        return response

    response = first_answer(options, "ListPartitionReassignments", exchange, None)
    assert response is not None
    if response.error_code:
        raise CliError(
            f"ListPartitionReassignments: {error_name(response.error_code)}", EXIT_FAILED
        )
    return {
        (t.name, p.partition_index): Ongoing(
            tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
        )
        for t in response.topics
        for p in t.partitions
    }


def log_dirs(
    options: ClientOptions, brokers: dict[int, tuple[str, int]]
) -> dict[int, dict[Partition, tuple[int, int]]]:
    """DescribeLogDirs of every broker given (id -> host, port): per broker, each
    partition's (size in bytes, offset lag) (the larger size when a partition has a
    future replica too). A broker that cannot be asked is left out."""
    conf = options.config()
    out: dict[int, dict[Partition, tuple[int, int]]] = {}
    for broker, (host, port) in sorted(brokers.items()):
        try:
            connection = connect(conf, host, port, options.timeout)
        except KafkaClientError:
            continue
        try:
            version = negotiated_version(connection, ApiKey.DESCRIBE_LOG_DIRS)
            if version < 0:
                continue
            response = connection.request(
                ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None), version=version
            )
            assert isinstance(response, DescribeLogDirsResponse)
            found: dict[Partition, tuple[int, int]] = {}
            for d in response.results:
                if d.error_code:
                    continue
                for t in d.topics:
                    for p in t.partitions:
                        key = (t.name, p.partition_index)
                        size = max(p.partition_size, found.get(key, (0, 0))[0])
                        found[key] = (size, p.offset_lag)
            out[broker] = found
        except KafkaClientError:
            continue
        finally:
            connection.close()
    return out


def partition_sizes(
    replicas: dict[Partition, list[int]], dirs: dict[int, dict[Partition, tuple[int, int]]]
) -> dict[Partition, int]:
    """Each partition's size: the largest any of its replicas reports (0 when none)."""
    return {
        p: max((dirs.get(b, {}).get(p, (0, 0))[0] for b in rs), default=0)
        for p, rs in replicas.items()
    }


# ---- throttles ----


def _alter(admin: Admin, resources: list[ConfigResource]) -> list[str]:
    """IncrementalAlterConfigs of each resource (one at a time: librdkafka takes one
    BROKER resource per request); the failures, as text."""
    failures = []
    for resource in resources:
        results = admin.results(
            admin.client.incremental_alter_configs([resource], **admin.kwargs())
        )
        value = results[resource]
        if isinstance(value, KafkaException):
            kerr = kafka_error(value)
            text = kerr.str() if kerr is not None else str(value)
            failures.append(f"{resource.restype.name.lower()} {resource.name}: {text}")
    return failures


def live_brokers(admin: Admin) -> set[int]:
    desc = admin.result(admin.client.describe_cluster(**admin.kwargs()), "describe cluster")
    return {n.id for n in desc.nodes}


def set_throttle(admin: Admin, rate: int, moves: Sequence[Move]) -> None:
    """The throttle for ``moves`` (see the module's docstring; the rates on the live
    brokers only: a dead one cannot be asked); CliError when a broker refuses part of it
    (what was set is removed first)."""
    live = live_brokers(admin)
    brokers = sorted({b for m in moves for b in (*m.before, *m.after)} & live)
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for m in moves:
        leaders.setdefault(m.topic, []).extend(f"{m.partition}:{b}" for b in m.before)
        followers.setdefault(m.topic, []).extend(f"{m.partition}:{b}" for b in m.adding)
    resources = [
        ConfigResource(
            ResourceType.BROKER,
            str(b),
            incremental_configs=[
                ConfigEntry(k, str(rate), incremental_operation=AlterConfigOpType.SET)
                for k in BROKER_RATES
            ],
        )
        for b in brokers
    ]
    for topic in sorted(leaders):
        entries = [
            ConfigEntry(
                LEADER_REPLICAS,
                ",".join(leaders[topic]),
                incremental_operation=AlterConfigOpType.SET,
            )
        ]
        if followers[topic]:
            entries.append(
                ConfigEntry(
                    FOLLOWER_REPLICAS,
                    ",".join(followers[topic]),
                    incremental_operation=AlterConfigOpType.SET,
                )
            )
        resources.append(ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries))
    failures = _alter(admin, resources)
    if failures:
        clear_throttle(admin, brokers, sorted(leaders))
        raise CliError("setting the throttle: " + "; ".join(failures), EXIT_FAILED)


def clear_throttle(admin: Admin, brokers: Iterable[int], topics: Iterable[str]) -> list[str]:
    """Deletes the throttle configs of ``brokers`` (the live ones) and ``topics``; the
    failures."""
    brokers = set(brokers) & live_brokers(admin)
    resources = [
        ConfigResource(
            ResourceType.BROKER,
            str(b),
            incremental_configs=[
                ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in BROKER_RATES
            ],
        )
        for b in sorted(set(brokers))
    ]
    resources += [
        ConfigResource(
            ResourceType.TOPIC,
            t,
            incremental_configs=[
                ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)
            ],
        )
        for t in sorted(set(topics))
    ]
    return _alter(admin, resources)


# ---- carrying moves out ----


def elect_preferred(admin: Admin, partitions: Iterable[Partition]) -> dict[Partition, str | None]:
    """A preferred leader election of ``partitions``; each one's error (None when done or
    not needed)."""
    tps = [TopicPartition(t, p) for t, p in sorted(set(partitions))]
    if not tps:
        return {}
    result = admin.result(
        admin.client.elect_leaders(ElectionType.PREFERRED, tps),
        "preferred leader election",
    )
    return {(tp.topic, tp.partition): election_error(err) for tp, err in result.items()}


def election_error(err: Any) -> str | None:
    """An ElectLeaders partition result as an error name; None for success and for
    ELECTION_NOT_NEEDED (the preferred replica leads already)."""
    if err is None:
        return None
    kerr = kafka_error(err) if isinstance(err, BaseException) else err
    if kerr is None:
        return str(err)
    if kerr.code() == ErrorCode.ELECTION_NOT_NEEDED:
        return None
    return str(kerr.name())


def _replicas_reached(
    options: ClientOptions,
    admin: Admin,
    moves: Sequence[Move],
    errors: dict[Partition, str | None],
) -> dict[Partition, list[int]]:
    """The finished moves whose partition does not list its target replicas in the
    metadata, asked again for up to ``--timeout`` seconds (a broker's metadata follows
    the controller's a moment later): partition -> the replicas it lists."""
    deadline = time.monotonic() + options.timeout
    while True:
        md = admin.metadata()
        wrong: dict[Partition, list[int]] = {}
        for m in moves:
            key = (m.topic, m.partition)
            if errors.get(key) is not None:
                continue
            t = md.topics.get(m.topic)
            has = t is not None and m.partition in t.partitions
            now = list(t.partitions[m.partition].replicas) if has else []
            if now != list(m.after):
                wrong[key] = now
        if not wrong or time.monotonic() >= deadline:
            return wrong
        time.sleep(POLL_SECONDS)


def progress(
    options: ClientOptions, admin: Admin, moving: Sequence[Move], done: int, total: int
) -> str:
    """One line on the moves under way: the bytes their new replicas hold of what they
    will hold (DescribeLogDirs of the brokers receiving them)."""
    md = admin.metadata()
    receiving = {b for m in moving for b in m.adding}
    addresses = {b.id: (b.host, b.port) for b in md.brokers.values() if b.id in receiving}
    dirs = log_dirs(options, addresses)
    copied = sum(
        min(dirs.get(b, {}).get((m.topic, m.partition), (0, 0))[0], m.size)
        for m in moving
        for b in m.adding
    )
    return (
        f"{done}/{total} partitions moved; {len(moving)} moving: "
        f"{copied} of {sum(m.cost for m in moving)} bytes copied"
    )


def execute(
    options: ClientOptions,
    admin: Admin,
    moves: Sequence[Move],
    throttle: int | None,
    max_in_flight: int,
    note: Callable[[str], None] = lambda s: click.echo(s, err=True),
) -> dict[Partition, str | None]:
    """Carries ``moves`` out (see the module's docstring); each partition's error (None
    when it ended on its target replicas)."""
    errors: dict[Partition, str | None] = {}
    if not moves:
        return errors
    in_plan = {(m.topic, m.partition): m for m in moves}
    brokers = sorted({b for m in moves for b in (*m.before, *m.after)})
    topics = sorted({m.topic for m in moves})
    if throttle is not None:
        set_throttle(admin, throttle, moves)
        shown = sorted(set(brokers) & live_brokers(admin))
        note(f"throttle {throttle} B/s on brokers {','.join(map(str, shown))}")
    try:
        pending = list(moves)
        in_flight: dict[Partition, Move] = {}
        done = 0
        next_progress = time.monotonic() + PROGRESS_SECONDS
        while pending or in_flight:
            if in_flight and time.monotonic() >= next_progress:
                note(progress(options, admin, list(in_flight.values()), done, len(moves)))
                next_progress = time.monotonic() + PROGRESS_SECONDS
            room = max_in_flight - len(in_flight)
            batch, pending = pending[:room], pending[room:]
            if batch:
                answers = alter_reassignments(
                    options, {(m.topic, m.partition): list(m.after) for m in batch}
                )
                for m in batch:
                    key = (m.topic, m.partition)
                    if answers.get(key):
                        errors[key] = answers[key]
                        note(f"{m.topic}:{m.partition} refused: {answers[key]}")
                    else:
                        in_flight[key] = m
            time.sleep(POLL_SECONDS)
            ongoing = list_reassignments(options)
            for key in [k for k in in_flight if k not in ongoing]:
                m = in_flight.pop(key)
                done += 1
                errors[key] = None
                note(
                    f"moved {m.topic}:{m.partition} {list(m.before)} -> {list(m.after)} "
                    f"({done}/{len(moves)})"
                )
        moved = [k for k, e in errors.items() if e is None]
        for key, err in elect_preferred(admin, moved).items():
            if err is not None:
                note(f"{key[0]}:{key[1]} preferred leader election: {err}")
        for key, now in _replicas_reached(options, admin, moves, errors).items():
            errors[key] = f"replicas are {now}, not {list(in_plan[key].after)}"
    except KeyboardInterrupt:
        note(
            "interrupted: the moves under way go on without a throttle; "
            "`logstore cluster partitions cancel` stops them"
        )
        raise
    finally:
        if throttle is not None:
            failures = clear_throttle(admin, brokers, topics)
            if failures:
                note("removing the throttle failed: " + "; ".join(failures))
            else:
                note("throttle removed")
    return errors
