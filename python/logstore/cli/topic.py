"""``logstore topic``: create, list, describe, alter-config, add-partitions, delete and
trim-prefix, as ``rpk topic`` and ``kafka-topics.sh`` / ``kafka-configs.sh`` /
``kafka-delete-records.sh`` do them, through the Kafka protocol only.

Internal topics are those whose name starts with ``__`` (``__consumer_offsets``,
``__transaction_state``), as Kafka names them.
"""

from __future__ import annotations

import re
from typing import Any

import click
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from logstore.cli.admin import Admin, BrokerError
from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_OK, CliError, _native
from logstore.cli.config_values import config_value
from logstore.cli.confirm import confirm, no_confirm_option
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.metadata_probe import offline_replicas
from logstore.cli.output import Output, report, status_of
from logstore.cli.positions import parse_position


@cli_group("topic")
def group() -> None:
    """Create, list, describe, configure and delete topics."""


def parse_pairs(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{option} {pair!r}: expected KEY=VALUE (e.g. retention.ms=3600000)")
        out[key.strip()] = value.strip()
    return out


def parse_configs(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    """``KEY=VALUE`` topic configs, with durations for ``*.ms`` keys in milliseconds
    (:mod:`logstore.cli.config_values`)."""
    return {k: config_value(k, v) for k, v in parse_pairs(pairs, option).items()}


def is_internal(topic: str) -> bool:
    return topic.startswith("__")


def topic_metadata(admin: Admin, topics: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Metadata of the named topics; BrokerError UNKNOWN_TOPIC_OR_PART for one missing.
    (All topics are asked for: naming one would let a broker auto-create it.)"""
    md = admin.metadata()
    out = {}
    for name in topics:
        t = md.topics.get(name)
        if t is None or (
            t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        ):
            raise BrokerError(f"topic {name}", KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        if t.error is not None:
            raise BrokerError(f"topic {name}", t.error)
        out[name] = t
    return out


def source_name(source: Any) -> str:
    """Kafka's name of a config source (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...)."""
    try:
        return ConfigSource(int(source)).name
    except (ValueError, TypeError):
        return str(getattr(source, "name", source))


def config_rows(
    entries: dict[str, ConfigEntry], known: frozenset[str] | None = None
) -> list[dict[str, Any]]:
    """One row per config; with ``known`` (the topic config names), a key outside it (a
    stray key stored before keys were checked, which the broker ignores) is marked in its
    source as unknown."""
    rows = []
    for name in sorted(entries):
        e = entries[name]
        source = source_name(e.source)
        rows.append(
            {
                "key": name,
                "value": None if e.is_sensitive else e.value,
                "source": source
                if known is None or name in known
                else f"{source} (unknown topic config: ignored)",
                "sensitive": bool(e.is_sensitive),
                "read_only": bool(e.is_read_only),
            }
        )
    return rows


@group.command("create")
@click.argument("topics", nargs=-1, required=True)
@click.option(
    "-p",
    "--partitions",
    type=int,
    default=-1,
    help="partitions (default: the broker's num.partitions)",
)
@click.option(
    "-r",
    "--replicas",
    type=int,
    default=-1,
    help="replication factor (default: default.replication.factor)",
)
@click.option(
    "-c",
    "--config",
    multiple=True,
    metavar="KEY=VALUE",
    help="a topic config, *.ms ones also as durations (1h, 7d); repeatable",
)
@click.option("--dry-run", is_flag=True, help="only validate the request (validate_only)")
@broker_command
def create(
    topics: tuple[str, ...],
    partitions: int,
    replicas: int,
    config: tuple[str, ...],
    dry_run: bool,
    client: ClientOptions,
    out: Output,
) -> int:
    """Create TOPICS with partitions, a replication factor and configs."""
    configs = parse_configs(config, "--config")
    admin = Admin(client)
    new = [
        NewTopic(t, num_partitions=partitions, replication_factor=replicas, config=configs)
        for t in topics
    ]
    results = admin.results(
        admin.client.create_topics(
            new, validate_only=dry_run, operation_timeout=admin.timeout, **admin.kwargs()
        )
    )
    rows = [{"topic": t, "error": status_of(results[t])} for t in topics]
    return report(out, rows, ["topic"])


@group.command("list")
@click.argument("patterns", nargs=-1, metavar="[REGEX]...")
@click.option(
    "-i", "--internal", is_flag=True, help="include internal topics (__consumer_offsets ...)"
)
@broker_command
def list_(patterns: tuple[str, ...], internal: bool, client: ClientOptions, out: Output) -> int:
    """List topics with their partition count and replication factor (optionally only
    those matching a regular expression)."""
    try:
        regexes = [re.compile(p) for p in patterns]
    except re.error as exc:
        raise CliError(f"bad regular expression: {exc}") from None
    md = Admin(client).metadata()
    rows = []
    for name in sorted(md.topics):
        if is_internal(name) and not internal:
            continue
        if regexes and not any(r.search(name) for r in regexes):
            continue
        t = md.topics[name]
        parts = list(t.partitions.values())
        rows.append(
            {
                "name": name,
                "partitions": len(parts),
                "replicas": max((len(p.replicas) for p in parts), default=0),
                "internal": is_internal(name),
            }
        )

    out.emit(
        rows,
        lambda o, d: o.table(
            ["name", "partitions", "replicas"],
            ([r["name"], r["partitions"], r["replicas"]] for r in d),
        ),
    )
    return EXIT_OK


def describe_topic(
    admin: Admin, name: str, meta: Any, offline: dict[int, list[int]] | None
) -> dict[str, Any]:
    """The topic's summary, partitions and configs; ``offline`` maps each partition to
    its offline replicas (None: unknown, shown as null)."""
    parts = sorted(meta.partitions.values(), key=lambda p: p.id)
    tps = [(name, p.id) for p in parts]
    starts = admin.offsets(tps, "earliest")
    ends = admin.offsets(tps, "latest")
    partitions = []
    for p in parts:
        start, end = starts.get((name, p.id)), ends.get((name, p.id))
        partitions.append(
            {
                "partition": p.id,
                "leader": p.leader if p.leader >= 0 else None,
                "replicas": list(p.replicas),
                "isr": list(p.isrs),
                "offline_replicas": None if offline is None else offline.get(p.id),
                "log_start_offset": start if isinstance(start, int) else None,
                "high_watermark": end if isinstance(end, int) else None,
                "error": status_of(p.error)
                if p.error is not None
                else (status_of(start) or status_of(end)),
            }
        )
    resource = ConfigResource(ResourceType.TOPIC, name)
    entries = admin.result(
        admin.client.describe_configs([resource], **admin.kwargs())[resource], f"configs of {name}"
    )
    return {
        "name": name,
        "internal": is_internal(name),
        "partition_count": len(parts),
        "replication_factor": max((len(p["replicas"]) for p in partitions), default=0),
        "partitions": partitions,
        "configs": config_rows(entries, frozenset(k[0] for k in _native().topic_config_keys())),
    }


@group.command("describe")
@click.argument("topics", nargs=-1, required=True)
@click.option("-p", "--print-partitions", is_flag=True, help="only the partitions section")
@click.option("-c", "--print-configs", is_flag=True, help="only the configs section")
@broker_command
def describe(
    topics: tuple[str, ...],
    print_partitions: bool,
    print_configs: bool,
    client: ClientOptions,
    out: Output,
) -> int:
    """Show each topic's partitions (leader, replicas, ISR, offline replicas, log start
    offset, high watermark) and configs with their sources."""
    admin = Admin(client)
    metas = topic_metadata(admin, topics)
    offline = offline_replicas(client, list(topics))
    data = [describe_topic(admin, name, metas[name], offline.get(name)) for name in topics]
    every = not (print_partitions or print_configs)

    def draw(o: Output, described: list[dict[str, Any]]) -> None:
        for t in described:
            if every:
                o.fields(
                    [
                        ("name", t["name"]),
                        ("internal", t["internal"]),
                        ("partitions", t["partition_count"]),
                        ("replicas", t["replication_factor"]),
                    ],
                    title="SUMMARY",
                )
            if every or print_partitions:
                o.table(
                    [
                        "partition",
                        "leader",
                        "replicas",
                        "isr",
                        "offline",
                        "log-start-offset",
                        "high-watermark",
                        "error",
                    ],
                    (
                        [
                            p["partition"],
                            p["leader"],
                            p["replicas"],
                            p["isr"],
                            p["offline_replicas"],
                            p["log_start_offset"],
                            p["high_watermark"],
                            p["error"],
                        ]
                        for p in t["partitions"]
                    ),
                    title="PARTITIONS",
                )
            if every or print_configs:
                o.table(
                    ["key", "value", "source"],
                    ([c["key"], c["value"], c["source"]] for c in t["configs"]),
                    title="CONFIGS",
                )

    out.emit(data, draw)
    return EXIT_OK


@group.command("alter-config")
@click.argument("topics", nargs=-1, required=True)
@click.option(
    "-s",
    "--set",
    "set_",
    multiple=True,
    metavar="KEY=VALUE",
    help="set a config, *.ms ones also as durations (1h, 7d); repeatable",
)
@click.option(
    "-d",
    "--delete",
    multiple=True,
    metavar="KEY",
    help="remove a config (back to the default); repeatable",
)
@click.option(
    "--append", multiple=True, metavar="KEY=VALUE", help="add a value to a list config; repeatable"
)
@click.option(
    "--subtract",
    multiple=True,
    metavar="KEY=VALUE",
    help="remove a value from a list config; repeatable",
)
@click.option("--dry-run", is_flag=True, help="only validate the change")
@broker_command
def alter_config(
    topics: tuple[str, ...],
    set_: tuple[str, ...],
    delete: tuple[str, ...],
    append: tuple[str, ...],
    subtract: tuple[str, ...],
    dry_run: bool,
    client: ClientOptions,
    out: Output,
) -> int:
    """Change topic configs incrementally (IncrementalAlterConfigs)."""
    entries = incremental_entries(set_, delete, append, subtract)
    admin = Admin(client)
    resources = [ConfigResource(ResourceType.TOPIC, t, incremental_configs=entries) for t in topics]
    futures = admin.client.incremental_alter_configs(
        resources, validate_only=dry_run, **admin.kwargs()
    )
    results = admin.results(futures)
    rows = [{"topic": r.name, "error": status_of(results[r])} for r in resources]
    return report(out, rows, ["topic"])


def incremental_entries(
    set_: tuple[str, ...],
    delete: tuple[str, ...],
    append: tuple[str, ...] = (),
    subtract: tuple[str, ...] = (),
) -> list[ConfigEntry]:
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in parse_configs(set_, "--set").items()
    ]
    entries += [
        ConfigEntry(k.strip(), None, incremental_operation=AlterConfigOpType.DELETE) for k in delete
    ]
    entries += [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.APPEND)
        for k, v in parse_pairs(append, "--append").items()
    ]
    entries += [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SUBTRACT)
        for k, v in parse_pairs(subtract, "--subtract").items()
    ]
    if not entries:
        raise CliError("nothing to change: give --set, --delete, --append or --subtract")
    return entries


@group.command("add-partitions")
@click.argument("topics", nargs=-1, required=True)
@click.option(
    "-n", "--num", type=click.IntRange(min=1), required=True, help="how many partitions to add"
)
@broker_command
def add_partitions(topics: tuple[str, ...], num: int, client: ClientOptions, out: Output) -> int:
    """Add NUM partitions to each topic."""
    admin = Admin(client)
    metas = topic_metadata(admin, topics)
    new = [NewPartitions(t, len(metas[t].partitions) + num) for t in topics]
    results = admin.results(
        admin.client.create_partitions(new, operation_timeout=admin.timeout, **admin.kwargs())
    )
    rows = [
        {"topic": t, "partitions": len(metas[t].partitions) + num, "error": status_of(results[t])}
        for t in topics
    ]
    return report(out, rows, ["topic", "partitions"])


@group.command("delete")
@click.argument("topics", nargs=-1, required=True)
@no_confirm_option
@broker_command
def delete(topics: tuple[str, ...], no_confirm: bool, client: ClientOptions, out: Output) -> int:
    """Delete TOPICS and their data (asks first; see --no-confirm)."""
    confirm(f"Delete topic(s) {', '.join(topics)} and all their records?", no_confirm)
    admin = Admin(client)
    results = admin.results(
        admin.client.delete_topics(list(topics), operation_timeout=admin.timeout, **admin.kwargs())
    )
    rows = [{"topic": t, "error": status_of(results[t])} for t in topics]
    return report(out, rows, ["topic"])


def parse_partitions(text: str | None, available: list[int]) -> list[int]:
    """``0,2,5`` or ``0-3`` ranges, checked against the topic's partitions; all when None."""
    if not text:
        return sorted(available)
    chosen: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise CliError(f"--partitions {text!r}: expected numbers and ranges like 0,2,4-6")
        lo, hi = int(m[1]), int(m[2] or m[1])
        chosen.update(range(lo, hi + 1))
    missing = sorted(chosen - set(available))
    if missing:
        raise BrokerError(f"partitions {missing}", KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    return sorted(chosen)


@group.command("trim-prefix")
@click.argument("topic")
@click.option(
    "-o",
    "--offset",
    "position",
    required=True,
    metavar="OFFSET|end|@TIME",
    help="new log start offset: an offset, end, -N, or @timestamp",
)
@click.option("-p", "--partitions", metavar="0,1,4-6", help="only these partitions (default: all)")
@no_confirm_option
@broker_command
def trim_prefix(
    topic: str,
    position: str,
    partitions: str | None,
    no_confirm: bool,
    client: ClientOptions,
    out: Output,
) -> int:
    """Delete the records before an offset (DeleteRecords): the log start offset moves up
    (asks first; see --no-confirm)."""
    where = parse_position(position, "--offset")
    admin = Admin(client)
    meta = topic_metadata(admin, [topic])[topic]
    chosen = parse_partitions(partitions, list(meta.partitions))
    tps = [(topic, p) for p in chosen]
    targets = []
    for tp, (_, end, offset) in admin.positions(tps, where).items():
        if where.kind == "offset" and where.value > end:
            raise BrokerError(
                f"{topic}-{tp[1]}: offset {where.value} is past the high watermark {end}",
                KafkaError(KafkaError.OFFSET_OUT_OF_RANGE),
            )
        targets.append(TopicPartition(topic, tp[1], offset))
    plan = ", ".join(f"{t.partition}:{t.offset}" for t in targets)
    confirm(f"Delete the records of {topic} before (partition:offset) {plan}?", no_confirm)
    results = admin.results(
        admin.client.delete_records(targets, operation_timeout=admin.timeout, **admin.kwargs())
    )
    rows = []
    for tp in targets:
        value = results[tp]
        rows.append(
            {
                "topic": topic,
                "partition": tp.partition,
                "new_start_offset": None
                if isinstance(value, BaseException)
                else value.low_watermark,
                "error": status_of(value),
            }
        )
    return report(out, rows, ["topic", "partition", "new_start_offset"])
