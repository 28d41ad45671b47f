"""``logstore group``: list, describe (committed offsets, end offsets, lag, members),
seek (reset committed offsets, dry run unless ``--execute``) and delete consumer groups,
as ``rpk group`` and ``kafka-consumer-groups.sh`` do.

``describe`` lists, as ``rpk group describe`` does, every partition a member is assigned,
every partition the group committed, and the other partitions of the topics it
committed to or is assigned. Lag of a partition = its high watermark (``log-end-offset``,
what a read-uncommitted consumer can reach) minus the group's committed offset; for a
partition without a commit (current offset ``-``), the high watermark minus the log start
offset: every record there is unread. Lag is never below 0. ``total-lag`` is their sum.
With no GROUP (or ``--all``) it describes every group ``list`` shows.

A group's ``type`` is ``consumer`` on the consumer protocol (KIP-848) and ``classic``
otherwise. A consumer group also shows its group epoch, target assignment epoch and
server assignor, and per member its member epoch and its assigned and pending partitions
(:mod:`logstore.cli.consumer_group_describe`). A share group (KIP-932) has type
``share`` and per partition its share-partition start offset and in-flight records
instead of a committed offset and lag (:mod:`logstore.cli.share_group_describe`).

``list`` shows each group's type and state, as ``kafka-groups.sh --list`` does from
ListGroups v5; ``--type`` (repeatable) keeps the groups of the given types, passed to the
brokers as ListGroups' TypesFilter.
"""

from __future__ import annotations

from typing import Any

import click
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from logstore.cli.admin import Admin, BrokerError
from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_FAILED, EXIT_OK, CliError
from logstore.cli.confirm import confirm, no_confirm_option
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.consumer_group_describe import describe_consumer_group
from logstore.cli.output import Output, report, status_of
from logstore.cli.positions import parse_position
from logstore.cli.share_group_describe import (
    in_flight,
    share_group_at,
    share_group_ids,
    share_groups,
)
from logstore.cli.topic import topic_metadata

# States in which Kafka lets an admin client commit offsets for the group.
_INACTIVE = {ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD, ConsumerGroupState.UNKNOWN}


@cli_group("group")
def group() -> None:
    """List, describe, seek and delete groups."""


def state_name(state: Any) -> str:
    return getattr(state, "name", str(state))


def committed(admin: Admin, group_id: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets (partitions without a commit are left out)."""
    request = [ConsumerGroupTopicPartitions(group_id)]
    result = admin.result(
        admin.client.list_consumer_group_offsets(request, **admin.kwargs())[group_id],
        f"offsets of group {group_id}",
    )
    out = {}
    for tp in result.topic_partitions or []:
        if tp.error is not None:
            raise BrokerError(f"offsets of group {group_id} on {tp.topic}-{tp.partition}", tp.error)
        if tp.offset >= 0:
            out[(tp.topic, tp.partition)] = tp.offset
    return out


def describe_groups(admin: Admin, group_ids: tuple[str, ...] | list[str]) -> dict[str, Any]:
    futures = admin.client.describe_consumer_groups(list(group_ids), **admin.kwargs())
    return {g: admin.result(futures[g], f"group {g}") for g in group_ids}


# Group types as ListGroups v5 (KIP-848's TypesFilter) and ``kafka-groups.sh`` name them.
GROUP_TYPES = ("classic", "consumer", "share")
_CONFLUENT_TYPES = {"classic": ConsumerGroupType.CLASSIC, "consumer": ConsumerGroupType.CONSUMER}


def type_name(group_type: Any) -> str:
    """``classic``/``consumer`` from confluent-kafka's ConsumerGroupType (``unknown``
    from a broker older than ListGroups v5)."""
    return state_name(group_type).lower()


@group.command("list")
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice(GROUP_TYPES, case_sensitive=False),
    help="only groups of this type (repeatable)",
)
@broker_command
def list_(types: tuple[str, ...], client: ClientOptions, out: Output) -> int:
    """List the groups (classic, consumer and share) with their types and states."""
    wanted = {t.lower() for t in types} or set(GROUP_TYPES)
    rows = []
    errors: list[Any] = []
    confluent_types = {_CONFLUENT_TYPES[t] for t in wanted if t in _CONFLUENT_TYPES}
    if confluent_types:
        admin = Admin(client)
        kwargs: dict[str, Any] = dict(admin.kwargs())
        if wanted != set(GROUP_TYPES):
            kwargs["types"] = confluent_types
        result = admin.result(admin.client.list_consumer_groups(**kwargs), "list groups")
        errors = result.errors
        rows = [
            {
                "group": g.group_id,
                "type": type_name(g.type),
                "state": state_name(g.state),
                "simple": g.is_simple_consumer_group,
            }
            for g in result.valid
        ]
    if "share" in wanted:
        rows += [
            {"group": g, "type": "share", "state": state.upper(), "simple": False}
            for g, state in share_groups(client).items()
        ]
    rows.sort(key=lambda r: r["group"])
    out.emit(
        rows,
        lambda o, d: o.table(
            ["group", "type", "state"], ([r["group"], r["type"], r["state"]] for r in d)
        ),
    )
    for err in errors:
        click.echo(f"logstore group list: error: {status_of(err)}", err=True)
    return EXIT_FAILED if errors else EXIT_OK


def describe_one(admin: Admin, desc: Any, topic_partitions: dict[str, list[int]]) -> dict[str, Any]:
    """The group's summary and per-partition rows; ``topic_partitions`` maps each topic
    in the cluster to its partition ids."""
    group_id = desc.group_id
    offsets = committed(admin, group_id)
    owners: dict[tuple[str, int], Any] = {}
    members = []
    for m in desc.members:
        tps = sorted(
            (tp.topic, tp.partition)
            for tp in (m.assignment.topic_partitions if m.assignment else [])
        )
        for tp in tps:
            owners[tp] = m
        members.append(
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.host,
                "instance_id": m.group_instance_id,
                "partitions": [f"{t}-{p}" for t, p in tps],
            }
        )
    listed = set(offsets) | set(owners)
    for topic in {t for t, _p in listed}:
        listed |= {(topic, p) for p in topic_partitions.get(topic, [])}
    tps = sorted(listed)
    starts, ends = admin.offsets(tps, "earliest"), admin.offsets(tps, "latest")
    partitions = []
    for tp in tps:
        start, end = starts.get(tp), ends.get(tp)
        current = offsets.get(tp)
        owner = owners.get(tp)
        partitions.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "current_offset": current,
                "log_start_offset": start if isinstance(start, int) else None,
                "log_end_offset": end if isinstance(end, int) else None,
                "lag": _lag(current, start, end),
                "member_id": owner.member_id if owner else None,
                "client_id": owner.client_id if owner else None,
                "host": owner.host if owner else None,
                "error": status_of(end) or status_of(start),
            }
        )
    coordinator = desc.coordinator
    consumer = getattr(desc, "type", None) == ConsumerGroupType.CONSUMER
    described = {
        "group": group_id,
        "type": "consumer" if consumer else "classic",
        "coordinator": None if coordinator is None else coordinator.id,
        "state": state_name(desc.state),
        "assignor": desc.partition_assignor or None,
        "group_epoch": None,
        "assignment_epoch": None,
        "members": members,
        "total_lag": sum(p["lag"] for p in partitions if p["lag"] is not None),
        "partitions": partitions,
    }
    if consumer and coordinator is not None:
        details = describe_consumer_group(
            admin.options, coordinator.host, coordinator.port, group_id
        )
        described.update(
            state=details["state"],
            assignor=details["assignor"] or None,
            group_epoch=details["group_epoch"],
            assignment_epoch=details["assignment_epoch"],
            members=details["members"],
        )
    return described


def _lag(current: int | None, start: object, end: object) -> int | None:
    """End minus the committed offset, or minus the log start without a commit; None
    when an offset could not be listed."""
    if not isinstance(end, int):
        return None
    if current is not None:
        return max(0, end - current)
    return max(0, end - start) if isinstance(start, int) else None


def _draw_groups(o: Output, described: list[dict[str, Any]]) -> None:
    if not described:
        o.line("No groups.")
    for i, g in enumerate(described):
        if i:
            o.line("")
        if g["type"] == "share":
            _draw_share(o, g)
            continue
        consumer = g["type"] == "consumer"
        epochs = [("group-epoch", g["group_epoch"]), ("assignment-epoch", g["assignment_epoch"])]
        o.fields(
            [
                *_identity(g),
                *(epochs if consumer else []),
                ("members", len(g["members"])),
                ("total-lag", g["total_lag"]),
            ]
        )
        if consumer and g["members"]:
            o.table(
                ["member-id", "instance-id", "client-id", "host", "epoch", "assigned", "pending"],
                (
                    [
                        m["member_id"],
                        m["instance_id"],
                        m["client_id"],
                        m["host"],
                        m["member_epoch"],
                        m["assigned"],
                        m["pending"],
                    ]
                    for m in g["members"]
                ),
            )
            o.line("")
        o.table(
            [
                "topic",
                "partition",
                "current-offset",
                "log-start-offset",
                "log-end-offset",
                "lag",
                "member-id",
                "client-id",
                "host",
            ],
            (
                [
                    p["topic"],
                    p["partition"],
                    p["current_offset"],
                    p["log_start_offset"],
                    p["log_end_offset"],
                    p["lag"],
                    p["member_id"],
                    p["client_id"],
                    p["host"],
                ]
                for p in g["partitions"]
            ),
        )


@group.command("describe")
@click.argument("groups", nargs=-1)
@click.option(
    "-a", "--all", "all_groups", is_flag=True, help="every group (the default without GROUP)"
)
@broker_command
def describe(groups: tuple[str, ...], all_groups: bool, client: ClientOptions, out: Output) -> int:
    """Show each group's state, members, and per partition its committed offset, log
    start and end offsets and lag. Without GROUP (or with --all): every group."""
    if groups and all_groups:
        raise CliError("give GROUP names or --all, not both")
    admin = Admin(client)
    status = EXIT_OK
    if not groups:
        listed = admin.result(admin.client.list_consumer_groups(**admin.kwargs()), "list groups")
        groups = tuple(sorted({g.group_id for g in listed.valid} | set(share_group_ids(client))))
        for err in listed.errors:
            click.echo(f"logstore group describe: error: {status_of(err)}", err=True)
            status = EXIT_FAILED
    topic_partitions = {
        name: sorted(t.partitions) for name, t in admin.metadata().topics.items() if not t.error
    }
    shares: dict[str, dict[str, Any]] = {}
    for group_id in groups:
        try:
            share = share_group_at(client, group_id)
        except CliError:
            share = None  # described below as a consumer group, with its error
        if share is not None:
            shares[group_id] = describe_share(admin, group_id, share)
    others = [g for g in groups if g not in shares]
    described = describe_groups(admin, others) if others else {}
    by_id = {d.group_id: describe_one(admin, d, topic_partitions) for d in described.values()}
    data = [shares.get(g) or by_id[g] for g in groups if g in shares or g in by_id]
    out.emit(data, _draw_groups)
    return status


def describe_share(admin: Admin, group_id: str, share: dict[str, Any]) -> dict[str, Any]:
    """A share group's summary, members and per-partition rows (start offset, log start
    and end offsets, in-flight records, how many members are assigned the partition)."""
    assigned: dict[tuple[str, int], int] = {}
    for m in share["members"]:
        for name in m["partitions"]:
            topic, _, partition = name.rpartition("-")
            tp = (topic, int(partition))
            assigned[tp] = assigned.get(tp, 0) + 1
    tps = sorted(set(share["start_offsets"]) | set(assigned))
    starts, ends = admin.offsets(tps, "earliest"), admin.offsets(tps, "latest")
    partitions = []
    for tp in tps:
        log_start, log_end = starts.get(tp), ends.get(tp)
        start = share["start_offsets"].get(tp)
        partitions.append(
            {
                "topic": tp[0],
                "partition": tp[1],
                "start_offset": start,
                "log_start_offset": log_start if isinstance(log_start, int) else None,
                "log_end_offset": log_end if isinstance(log_end, int) else None,
                "in_flight": in_flight(start, log_start, log_end),
                "members": assigned.get(tp, 0),
                "error": status_of(log_end) or status_of(log_start),
            }
        )
    return {
        "group": group_id,
        "type": "share",
        "coordinator": share["coordinator"],
        "state": share["state"],
        "assignor": share["assignor"] or None,
        "group_epoch": share["group_epoch"],
        "assignment_epoch": share["assignment_epoch"],
        "members": share["members"],
        "total_in_flight": sum(p["in_flight"] or 0 for p in partitions),
        "partitions": partitions,
    }


def _identity(g: dict[str, Any]) -> list[tuple[str, Any]]:
    """The fields every described group starts with, whatever its type."""
    return [
        ("group", g["group"]),
        ("type", g["type"]),
        ("coordinator", g["coordinator"]),
        ("state", g["state"]),
        ("balancer", g["assignor"]),
    ]


def _draw_share(o: Output, g: dict[str, Any]) -> None:
    o.fields(
        [
            *_identity(g),
            ("group-epoch", g["group_epoch"]),
            ("assignment-epoch", g["assignment_epoch"]),
            ("members", len(g["members"])),
            ("total-in-flight", g["total_in_flight"]),
        ]
    )
    if g["members"]:
        o.table(
            ["member-id", "client-id", "host", "epoch", "assigned"],
            (
                [m["member_id"], m["client_id"], m["host"], m["member_epoch"], m["partitions"]]
                for m in g["members"]
            ),
        )
        o.line("")
    o.table(
        [
            "topic",
            "partition",
            "start-offset",
            "log-start-offset",
            "log-end-offset",
            "in-flight",
            "members",
        ],
        (
            [
                p["topic"],
                p["partition"],
                p["start_offset"],
                p["log_start_offset"],
                p["log_end_offset"],
                p["in_flight"],
                p["members"],
            ]
            for p in g["partitions"]
        ),
    )


def _topic_partitions(admin: Admin, spec: str) -> list[tuple[str, int]]:
    """``t1,t2`` (every partition) or ``t1:0,1`` style (``;`` between topics with lists)."""
    out: list[tuple[str, int]] = []
    for item in filter(None, (s.strip() for s in spec.split(";" if ":" in spec else ","))):
        topic, sep, parts = item.partition(":")
        available = sorted(topic_metadata(admin, [topic])[topic].partitions)
        if sep:
            try:
                chosen = [int(p) for p in parts.split(",") if p.strip()]
            except ValueError:
                raise CliError(f"--topics {spec!r}: expected TOPIC or TOPIC:P,P;TOPIC...") from None
            missing = sorted(set(chosen) - set(available))
            if missing:
                raise BrokerError(
                    f"{topic} partitions {missing}", KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
                )
            available = chosen
        out += [(topic, p) for p in available]
    return out


def _draw_plan(o: Output, plan: dict[str, Any]) -> None:
    o.table(
        ["topic", "partition", "current-offset", "new-offset"],
        (
            [r["topic"], r["partition"], r["current_offset"], r["new_offset"]]
            for r in plan["partitions"]
        ),
    )
    o.line("Dry run: nothing changed. Run again with --execute to apply.")


@group.command("seek")
@click.argument("group_id", metavar="GROUP")
@click.option(
    "--to",
    "to",
    metavar="start|end|OFFSET|-N|@TIME",
    help="where to move each partition's committed offset",
)
@click.option("--to-group", metavar="GROUP", help="copy the committed offsets of another group")
@click.option(
    "--topics",
    metavar="T1,T2 | T1:0,1;T2",
    help="the partitions to move (default: those the group committed)",
)
@click.option(
    "--execute",
    is_flag=True,
    help="apply the change (without it: a dry run that only shows the plan)",
)
@broker_command
def seek(
    group_id: str,
    to: str | None,
    to_group: str | None,
    topics: str | None,
    execute: bool,
    client: ClientOptions,
    out: Output,
) -> int:
    """Move a group's committed offsets to start, end, an offset, a timestamp, or another
    group's offsets. Shows the plan (a dry run) unless --execute is given; the group must
    have no active members to apply it."""
    if (to is None) == (to_group is None):
        raise CliError("give exactly one of --to and --to-group")
    position = parse_position(to, "--to") if to is not None else None
    admin = Admin(client)
    current = committed(admin, group_id)
    source = committed(admin, to_group) if to_group else {}
    if topics:
        tps = _topic_partitions(admin, topics)
    else:
        tps = sorted(source if to_group else current)
    if not tps:
        raise CliError(
            f"group {group_id} has no committed offsets: name the partitions with --topics"
        )
    plan: dict[tuple[str, int], int | None] = {}
    if position is not None:
        for tp, (_, _, offset) in admin.positions(tps, position).items():
            plan[tp] = offset
    else:
        for tp in tps:
            plan[tp] = source.get(tp)
    rows = [
        {
            "topic": t,
            "partition": p,
            "current_offset": current.get((t, p)),
            "new_offset": plan[(t, p)],
            "error": None,
        }
        for t, p in tps
    ]
    if not execute:
        out.emit({"group": group_id, "dry_run": True, "partitions": rows}, _draw_plan)
        return EXIT_OK
    state = describe_groups(admin, [group_id])[group_id].state
    if state not in _INACTIVE:
        raise BrokerError(
            f"group {group_id} is {state_name(state)}: "
            "offsets can only be reset while it has no members",
            KafkaError(KafkaError.NON_EMPTY_GROUP),
        )
    moves = [TopicPartition(t, p, off) for (t, p), off in plan.items() if off is not None]
    request = [ConsumerGroupTopicPartitions(group_id, moves)]
    result = admin.result(
        admin.client.alter_consumer_group_offsets(request, **admin.kwargs())[group_id],
        f"seek group {group_id}",
    )
    errors = {
        (tp.topic, tp.partition): tp.error
        for tp in result.topic_partitions or []
        if tp.error is not None
    }
    for r in rows:
        err = errors.get((r["topic"], r["partition"]))
        if r["new_offset"] is None:
            r["error"] = f"{to_group} has no committed offset here"
        elif err is not None:
            r["error"] = status_of(KafkaException(err))
    return report(out, rows, ["topic", "partition", "current_offset", "new_offset"])


@group.command("delete")
@click.argument("groups", nargs=-1, required=True)
@no_confirm_option
@broker_command
def delete(groups: tuple[str, ...], no_confirm: bool, client: ClientOptions, out: Output) -> int:
    """Delete consumer groups (with no active members) and their committed offsets (asks
    first; see --no-confirm)."""
    confirm(f"Delete group(s) {', '.join(groups)} and their committed offsets?", no_confirm)
    admin = Admin(client)
    results = admin.results(admin.client.delete_consumer_groups(list(groups), **admin.kwargs()))
    rows = [{"group": g, "error": status_of(results[g])} for g in groups]
    return report(out, rows, ["group"])
