"""``logstore cluster health [--watch [SECONDS]]``, as ``rpk cluster health``: whether the
cluster is healthy, and what is wrong when it is not.

One Metadata request for every topic (through :func:`metadata_probe.first_answer`, so
the answer carries Kafka's ``offline_replicas`` from v5) says:

- ``brokers``: the live brokers (those in the answer);
- ``brokers_down``: broker ids named in some partition's replica list, or seen earlier
  in the same ``--watch``, that are not live;
- ``leaderless_partitions``: no leader (-1), or a leader that is not a live broker (as
  ``kafka-topics.sh --unavailable-partitions`` counts them);
- ``under_replicated_partitions``: an ISR smaller than the replica list;
- ``offline_replicas``: partitions with replicas on a dead broker or a failed log dir
  (null when the broker's Metadata is older than v5 and cannot say);
- ``under_min_isr_partitions``: an ISR smaller than the topic's ``min.insync.replicas``,
  read with one DescribeConfigs on the same connection for the topics with an
  under-replicated partition only (null when it could not be read).

The cluster is healthy when all of these are empty and there is a controller; otherwise
``unhealthy_reasons`` names the non-empty ones (and ``no_controller``). Exit status 0
healthy, 1 unhealthy, 2 no broker answered. ``--watch`` asks every SECONDS (default 2)
and prints a report when it differs from the previous one (the first always), until
Ctrl-C (exit status 130); a failed ask after the first is one line on stderr and the
watch goes on.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any, NoReturn

import click

from logstore.cli.base import command as cli_command
from logstore.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, CliError
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.metadata_probe import (
    FIRST_VERSION_WITH_OFFLINE_REPLICAS,
    answered_metadata,
    first_answer,
    negotiated_version,
)
from logstore.cli.output import Output
from logstore.protocol import ApiKey
from logstore.protocol.messages.configs import DescribeConfigsRequest, DescribeConfigsResponse
from logstore.spark.kafka_client.connection import _BrokerConnection
from logstore.spark.kafka_client.errors import KafkaClientError

WATCH_DEFAULT_S = 2.0
TABLE_ROWS = 20  # partitions listed in the table; --format json lists every one
TOPIC_RESOURCE = 2
MIN_ISR = "min.insync.replicas"


@dataclasses.dataclass(frozen=True)
class Partition:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] | None  # None: Metadata older than v5


@dataclasses.dataclass(frozen=True)
class Observation:
    """What one Metadata answer (and the optional DescribeConfigs) said."""

    controller: int
    brokers: frozenset[int]
    partitions: tuple[Partition, ...]
    min_isr: dict[str, int] | None  # topic -> min.insync.replicas; None: not readable


def observe(client: ClientOptions) -> Observation:
    """The cluster as the first bootstrap server that answers sees it."""
    observation = first_answer(client, "", _exchange, unsupported=None)
    if observation is None:
        raise CliError(
            f"the broker of {client.brokers} speaks too old a protocol (Metadata v1+ needed)"
        )
    return observation


def _exchange(connection: _BrokerConnection) -> Observation:
    response = answered_metadata(connection, None)
    knows_offline = connection.versions[ApiKey.METADATA] >= FIRST_VERSION_WITH_OFFLINE_REPLICAS
    partitions = tuple(
        sorted(
            (
                Partition(
                    topic=t.name,
                    partition=p.partition_index,
                    leader=p.leader_id,
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                    offline=tuple(p.offline_replicas) if knows_offline else None,
                )
                for t in response.topics
                if t.name is not None
                for p in t.partitions
            ),
            key=lambda p: (p.topic, p.partition),
        )
    )
    under = sorted({p.topic for p in partitions if len(p.isr) < len(p.replicas)})
    return Observation(
        controller=response.controller_id,
        brokers=frozenset(b.node_id for b in response.brokers),
        partitions=partitions,
        min_isr=_min_isr(connection, under),
    )


def _min_isr(connection: _BrokerConnection, topics: list[str]) -> dict[str, int] | None:
    """Each topic's min.insync.replicas (one DescribeConfigs); None when not readable."""
    if not topics:
        return {}
    version = negotiated_version(connection, ApiKey.DESCRIBE_CONFIGS)
    if version < 0:
        return None
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[
            resource(resource_type=TOPIC_RESOURCE, resource_name=t, configuration_keys=[MIN_ISR])
            for t in topics
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    try:
        response = connection.request(ApiKey.DESCRIBE_CONFIGS, request, version=version)
    except KafkaClientError:
        return None
    assert isinstance(response, DescribeConfigsResponse)
    out: dict[str, int] = {}
    for result in response.results:
        for entry in result.configs if result.error_code == 0 else []:
            if entry.name == MIN_ISR and entry.value is not None and entry.value.isdigit():
                out[result.resource_name] = int(entry.value)
    return out if set(out) >= set(topics) else None


def report(observation: Observation, known: set[int]) -> dict[str, Any]:
    """The health report (plain data, as ``--format json`` prints it) of one observation;
    ``known`` holds broker ids seen before (by an earlier ``--watch`` round)."""
    live = observation.brokers
    named = {r for p in observation.partitions for r in p.replicas}
    down = sorted((named | known) - live)
    leaderless = [p for p in observation.partitions if p.leader not in live]
    under = [p for p in observation.partitions if len(p.isr) < len(p.replicas)]
    knows_offline = all(p.offline is not None for p in observation.partitions)
    offline = [p for p in observation.partitions if p.offline]
    min_isr = observation.min_isr
    below = (
        None
        if min_isr is None
        else [p for p in under if p.topic in min_isr and len(p.isr) < min_isr[p.topic]]
    )
    controller = observation.controller if observation.controller >= 0 else None
    reasons = [
        name
        for name, bad in (
            ("no_controller", controller is None),
            ("brokers_down", bool(down)),
            ("leaderless_partitions", bool(leaderless)),
            ("under_replicated_partitions", bool(under)),
            ("offline_replicas", bool(offline)),
            ("under_min_isr_partitions", bool(below)),
        )
        if bad
    ]
    return {
        "healthy": not reasons,
        "unhealthy_reasons": reasons,
        "controller": controller,
        "brokers": sorted(live),
        "brokers_down": down,
        "topics": len({p.topic for p in observation.partitions}),
        "partitions": len(observation.partitions),
        "leaderless_partitions": [
            {"topic": p.topic, "partition": p.partition, "leader": _leader(p)} for p in leaderless
        ],
        "under_replicated_partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "leader": _leader(p),
                "replicas": p.replicas,
                "isr": p.isr,
            }
            for p in under
        ],
        "offline_replicas": (
            [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "leader": _leader(p),
                    "offline_replicas": p.offline,
                }
                for p in offline
            ]
            if knows_offline
            else None
        ),
        "under_min_isr_partitions": (
            None
            if below is None or min_isr is None
            else [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "isr": p.isr,
                    "min_insync_replicas": min_isr[p.topic],
                }
                for p in below
            ]
        ),
    }


def _leader(p: Partition) -> int | None:
    return p.leader if p.leader >= 0 else None


def _count(items: list[Any] | None) -> int | None:
    return None if items is None else len(items)


def draw(o: Output, d: dict[str, Any]) -> None:
    """The report as ``KEY  value`` lines, then one table of the partitions that need
    attention (at most TABLE_ROWS rows)."""
    o.fields(
        [
            ("healthy", d["healthy"]),
            ("unhealthy reasons", d["unhealthy_reasons"]),
            ("controller", d["controller"]),
            ("brokers", d["brokers"]),
            ("brokers down", d["brokers_down"]),
            ("topics", d["topics"]),
            ("partitions", d["partitions"]),
            ("leaderless partitions", len(d["leaderless_partitions"])),
            ("under-replicated partitions", len(d["under_replicated_partitions"])),
            ("partitions with offline replicas", _count(d["offline_replicas"])),
            ("partitions under min isr", _count(d["under_min_isr_partitions"])),
        ]
    )
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for key in ("leaderless_partitions", "under_replicated_partitions", "offline_replicas"):
        for item in d[key] or []:
            rows.setdefault((item["topic"], item["partition"]), {}).update(item)
    for item in d["under_min_isr_partitions"] or []:
        rows.setdefault((item["topic"], item["partition"]), {}).update(item)
    if not rows:
        return
    shown = sorted(rows)[:TABLE_ROWS]
    o.table(
        ["topic", "partition", "leader", "replicas", "isr", "offline", "min-isr"],
        (
            [
                t,
                p,
                rows[(t, p)].get("leader"),
                rows[(t, p)].get("replicas"),
                rows[(t, p)].get("isr"),
                rows[(t, p)].get("offline_replicas"),
                rows[(t, p)].get("min_insync_replicas"),
            ]
            for t, p in shown
        ),
    )
    if len(rows) > len(shown):
        o.line(f"... and {len(rows) - len(shown)} more partitions (--format json lists all)")


@cli_command("health")
@click.option(
    "--watch",
    type=click.FloatRange(min=0.1),
    is_flag=False,
    flag_value=WATCH_DEFAULT_S,
    default=None,
    metavar="[SECONDS]",
    help=f"ask every SECONDS (default {WATCH_DEFAULT_S:g}) and print each change until Ctrl-C",
)
@broker_command
def command(watch: float | None, client: ClientOptions, out: Output) -> int:
    """Is the cluster healthy: controller, brokers down, leaderless, under-replicated and
    under-min-ISR partitions, offline replicas. Exit status 0 healthy, 1 unhealthy."""
    if watch is None:
        data = report(observe(client), set())
        out.emit(data, draw)
        return EXIT_OK if data["healthy"] else EXIT_FAILED
    try:
        _watch(client, out, watch)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _watch(client: ClientOptions, out: Output, seconds: float) -> NoReturn:
    """Prints the first report, then every changed one, until interrupted."""
    first = report(observe(client), set())
    known = set(first["brokers"]) | set(first["brokers_down"])
    last: dict[str, Any] | str = first
    _print_round(out, first)
    while True:
        time.sleep(seconds)
        try:
            data = report(observe(client), known)
        except CliError as exc:
            if last != str(exc):
                print(f"{_now()} {exc}", file=sys.stderr, flush=True)
                last = str(exc)
            continue
        known |= set(data["brokers"]) | set(data["brokers_down"])
        if data != last:
            _print_round(out, data)
            last = data


def _print_round(out: Output, data: dict[str, Any]) -> None:
    """One ``--watch`` report: a JSON object on one line, or the time then the report."""
    if out.json:
        sys.stdout.write(json.dumps({"time": _now(), **data}) + "\n")
    else:
        out.line(_now())
        draw(out, data)
    sys.stdout.flush()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
