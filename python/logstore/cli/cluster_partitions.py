"""``logstore cluster partitions move|status|cancel|balance``, ``logstore cluster
decommission|recommission`` and ``logstore cluster elect-leaders``: where partitions'
replicas live and which one leads, as ``kafka-reassign-partitions.sh``,
``kafka-leader-election.sh``, ``rpk cluster partitions`` and ``rpk redpanda
decommission`` do it (docs/cli.md has the table).

``balance`` and ``decommission`` plan with :mod:`logstore.balance.planner` from the live
brokers and racks (DescribeCluster), the replicas (Metadata) and the partitions' sizes
(DescribeLogDirs of every broker), print the plan and its cost, and carry it out with
:func:`partition_moves.execute` (throttled with ``--throttle``, at most
``--max-in-flight`` partitions moving at once), waiting until the last move ends.

``balance`` and ``decommission`` refuse to plan while partitions are moving, or while a
broker that is not live holds replicas (unless it is the one decommissioned: a broker
that died for good is emptied the same way, its replicas copied from the others).

Decommissioned state is kept nowhere: ``decommission BROKER`` moves every replica off
the broker and returns when none is left there, and the broker can then be stopped.
Until it is, a topic created later may place replicas on it again, as in Kafka.
``recommission BROKER`` cancels the moves still taking replicas off it (after an
interrupted ``decommission``) and removes their throttle.
"""

from __future__ import annotations

from typing import Any

import click
from confluent_kafka import ElectionType, TopicPartition

from logstore.balance.planner import Move, Plan, PlanError, plan
from logstore.cli import partition_moves as pm
from logstore.cli.admin import Admin
from logstore.cli.base import command as cli_command
from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_FAILED, EXIT_OK, CliError
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.output import Output, report

Partition = tuple[str, int]


@cli_group("partitions")
def partitions() -> None:
    """Move partitions' replicas between brokers, and balance them."""


def _cluster(
    admin: Admin, topics: tuple[str, ...] = ()
) -> tuple[dict[int, str | None], dict[int, tuple[str, int]], dict[Partition, list[int]]]:
    """Live brokers -> rack, brokers -> (host, port), and every partition's replicas (of
    ``topics`` when given)."""
    desc = admin.result(admin.client.describe_cluster(**admin.kwargs()), "describe cluster")
    racks = {n.id: (n.rack or None) for n in desc.nodes}
    addresses = {n.id: (n.host, n.port) for n in desc.nodes}
    md = admin.metadata()
    missing = [t for t in topics if t not in md.topics]
    if missing:
        raise CliError(f"no topic named {', '.join(missing)}", EXIT_FAILED)
    assignment = {
        (t, p.id): list(p.replicas)
        for t, tm in md.topics.items()
        if not topics or t in topics
        for p in tm.partitions.values()
    }
    return racks, addresses, assignment


def _move_row(m: Move, error: str | None = None) -> dict[str, Any]:
    return {
        "topic": m.topic,
        "partition": m.partition,
        "before": list(m.before),
        "after": list(m.after),
        "bytes": m.cost,
        "error": error,
    }


def _plan_data(result: Plan, racks: dict[int, str | None]) -> dict[str, Any]:
    brokers = sorted(result.replicas_after)
    return {
        "cost_bytes": result.cost,
        "replica_moves": result.replica_moves,
        "brokers": [
            {
                "id": b,
                "rack": racks.get(b),
                "live": b in racks,
                "replicas": [result.replicas_before[b], result.replicas_after[b]],
                "leaders": [result.leaders_before[b], result.leaders_after[b]],
                "bytes": [result.bytes_before[b], result.bytes_after[b]],
            }
            for b in brokers
        ],
        "moves": [_move_row(m) for m in result.moves],
        "reassignment": pm.plan_json(result.moves),
    }


def _draw_plan(o: Output, d: dict[str, Any]) -> None:
    o.fields(
        [
            ("partitions to move", len(d["moves"])),
            ("replicas to copy", d["replica_moves"]),
            ("cost (bytes)", d["cost_bytes"]),
        ]
    )
    o.table(
        ["broker", "rack", "replicas", "leaders", "bytes"],
        (
            [
                b["id"] if b["live"] else f"{b['id']} (not live)",
                b["rack"],
                f"{b['replicas'][0]} -> {b['replicas'][1]}",
                f"{b['leaders'][0]} -> {b['leaders'][1]}",
                f"{b['bytes'][0]} -> {b['bytes'][1]}",
            ]
            for b in d["brokers"]
        ),
    )
    if d["moves"]:
        columns = ["topic", "partition", "before", "after", "bytes"]
        if "status" in d:
            columns.append("status")
        o.table(
            columns,
            (
                [
                    m["topic"],
                    m["partition"],
                    ",".join(map(str, m["before"])),
                    ",".join(map(str, m["after"])),
                    m["bytes"],
                    *([m["error"] or "OK"] if "status" in d else []),
                ]
                for m in d["moves"]
            ),
        )


def _run_plan(
    client: ClientOptions,
    out: Output,
    exclude: tuple[int, ...],
    topics: tuple[str, ...],
    dry_run: bool,
    throttle: str | None,
    max_in_flight: int,
) -> int:
    rate = pm.parse_rate(throttle) if throttle is not None else None
    admin = Admin(client)
    racks, addresses, assignment = _cluster(admin, topics)
    holding = {b for r in assignment.values() for b in r}
    unknown = [b for b in exclude if b not in racks and b not in holding]
    if unknown:
        raise CliError(
            f"broker {', '.join(map(str, unknown))} is not live and holds no replica",
            EXIT_FAILED,
        )
    dead = sorted(b for b in holding if b not in racks and b not in exclude)
    if dead:
        raise CliError(
            f"broker {', '.join(map(str, dead))} holds replicas and is not live: start it, "
            "or move its replicas off with `logstore cluster decommission`",
            EXIT_FAILED,
        )
    moving = pm.list_reassignments(client)
    if moving:
        raise CliError(
            f"{len(moving)} partitions are moving already (`logstore cluster partitions "
            "status`): wait for them, or cancel them",
            EXIT_FAILED,
        )
    sizes = pm.partition_sizes(assignment, pm.log_dirs(client, addresses))
    try:
        result = plan(racks, assignment, sizes, exclude)
    except PlanError as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    data = _plan_data(result, racks)
    if dry_run or not result.moves:
        out.emit(data, _draw_plan)
        return EXIT_OK
    if not out.json:
        _draw_plan(out, data)
    errors = pm.execute(client, admin, result.moves, rate, max_in_flight)
    data["moves"] = [_move_row(m, errors.get((m.topic, m.partition))) for m in result.moves]
    data["status"] = "done"
    if out.json:
        out.print_json(data)
    else:
        failed = [m for m in data["moves"] if m["error"]]
        for m in failed:
            out.line(f"{m['topic']}:{m['partition']}: {m['error']}")
        out.line(f"{len(data['moves']) - len(failed)} of {len(data['moves'])} partitions moved")
    return EXIT_FAILED if any(m["error"] for m in data["moves"]) else EXIT_OK


_throttle = click.option(
    "--throttle",
    metavar="RATE",
    help="replication throttle while moving, bytes/s (10485760, 10MiB, 10MB); removed after",
)
_in_flight = click.option(
    "--max-in-flight",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="partitions moving at once",
)


@partitions.command("balance")
@click.option("--dry-run", is_flag=True, help="print the plan only")
@click.option("--topic", "topics", multiple=True, help="balance these topics only; repeatable")
@_throttle
@_in_flight
@broker_command
def balance(
    dry_run: bool,
    topics: tuple[str, ...],
    throttle: str | None,
    max_in_flight: int,
    client: ClientOptions,
    out: Output,
) -> int:
    """Even replicas, preferred leaders and bytes across the live brokers and racks
    with the fewest moves; print the plan and its cost, then carry it out."""
    return _run_plan(client, out, (), topics, dry_run, throttle, max_in_flight)


@partitions.command("move")
@click.argument("partition", required=False)
@click.option("--to", "to", metavar="IDS", help="the new replicas, preferred leader first: 1,2,4")
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False),
    help="Kafka's reassignment JSON (kafka-reassign-partitions.sh --reassignment-json-file)",
)
@_throttle
@_in_flight
@click.option("--no-wait", is_flag=True, help="submit the moves and return (no --throttle)")
@broker_command
def move(
    partition: str | None,
    to: str | None,
    plan_file: str | None,
    throttle: str | None,
    max_in_flight: int,
    no_wait: bool,
    client: ClientOptions,
    out: Output,
) -> int:
    """Move TOPIC:PARTITION's replicas --to brokers, or every partition of --plan FILE."""
    if (partition is None) == (plan_file is None):
        raise CliError("give TOPIC:PARTITION --to IDS, or --plan FILE")
    if plan_file is not None:
        if to is not None:
            raise CliError("--to goes with TOPIC:PARTITION, not --plan")
        try:
            with open(plan_file, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"--plan {plan_file}: {exc}") from None
        targets = pm.parse_plan(text, plan_file)
    else:
        if to is None:
            raise CliError("--to IDS is needed: the new replicas, e.g. --to 1,2,4")
        try:
            ids = [int(x) for x in to.split(",")]
        except ValueError:
            raise CliError(f"--to {to!r}: expected broker ids, e.g. 1,2,4") from None
        if len(set(ids)) != len(ids):
            raise CliError(f"--to {to!r} names a broker twice")
        targets = {pm.parse_partition(partition or ""): ids}
    if no_wait and throttle is not None:
        raise CliError("--throttle needs the command to wait, to remove it after the move")
    rate = pm.parse_rate(throttle) if throttle is not None else None
    admin = Admin(client)
    _racks, addresses, assignment = _cluster(admin)
    sizes = pm.partition_sizes(assignment, pm.log_dirs(client, addresses))
    moves = []
    for key, replicas in targets.items():
        if key not in assignment:
            raise CliError(f"no partition {key[0]}:{key[1]}", EXIT_FAILED)
        moves.append(Move(key[0], key[1], tuple(assignment[key]), tuple(replicas), sizes[key]))
    if no_wait:
        answers = pm.alter_reassignments(client, {k: list(v) for k, v in targets.items()})
        rows = [_move_row(m, answers.get((m.topic, m.partition))) for m in moves]
        return report(out, rows, ["topic", "partition", "before", "after", "bytes"])
    errors = pm.execute(client, admin, moves, rate, max_in_flight)
    rows = [_move_row(m, errors.get((m.topic, m.partition))) for m in moves]
    return report(out, rows, ["topic", "partition", "before", "after", "bytes"])


@partitions.command("status")
@broker_command
def status(client: ClientOptions, out: Output) -> int:
    """The moves under way: per new replica, the bytes it holds of the leader's and how
    many offsets it lags (DescribeLogDirs)."""
    admin = Admin(client)
    ongoing = pm.list_reassignments(client)
    rows: list[dict[str, Any]] = []
    if ongoing:
        md = admin.metadata()
        addresses = {b.id: (b.host, b.port) for b in md.brokers.values()}
        involved = {b for o in ongoing.values() for b in o.replicas}
        dirs = pm.log_dirs(client, {b: a for b, a in addresses.items() if b in involved})
        for (t, p), o in sorted(ongoing.items()):
            tm = md.topics.get(t)
            leader = tm.partitions[p].leader if tm and p in tm.partitions else -1
            leader_size = dirs.get(leader, {}).get((t, p), (None, None))[0]
            for b in o.adding or (None,):
                size, lag = (
                    dirs.get(b, {}).get((t, p), (None, None))
                    if b is not None
                    else (
                        None,
                        None,
                    )
                )
                rows.append(
                    {
                        "topic": t,
                        "partition": p,
                        "replicas": list(o.replicas),
                        "adding": list(o.adding),
                        "removing": list(o.removing),
                        "leader": leader,
                        "broker": b,
                        "bytes": size,
                        "leader_bytes": leader_size,
                        "offset_lag": lag,
                    }
                )

    def draw(o: Output, d: list[dict[str, Any]]) -> None:
        if not d:
            o.line("no partition is moving")
            return
        o.table(
            ["topic", "partition", "replicas", "adding", "removing", "broker", "bytes", "lag"],
            (
                [
                    r["topic"],
                    r["partition"],
                    ",".join(map(str, r["replicas"])),
                    ",".join(map(str, r["adding"])),
                    ",".join(map(str, r["removing"])),
                    r["broker"],
                    "?" if r["bytes"] is None else f"{r['bytes']}/{r['leader_bytes'] or '?'}",
                    r["offset_lag"],
                ]
                for r in d
            ),
        )

    out.emit(rows, draw)
    return EXIT_OK


def _cancel(
    client: ClientOptions,
    admin: Admin,
    out: Output,
    chosen: dict[Partition, pm.Ongoing],
    preserve_throttles: bool,
) -> int:
    if not chosen:
        out.emit([], lambda o, d: o.line("no partition is moving"))
        return EXIT_OK
    answers = pm.alter_reassignments(client, dict.fromkeys(chosen))
    if not preserve_throttles:
        failures = pm.clear_throttle(
            admin, {b for o in chosen.values() for b in o.replicas}, {t for t, _ in chosen}
        )
        if failures:
            click.echo("removing the throttle failed: " + "; ".join(failures), err=True)
    rows = [
        {"topic": t, "partition": p, "replicas": list(o.replicas), "error": answers.get((t, p))}
        for (t, p), o in sorted(chosen.items())
    ]
    return report(out, rows, ["topic", "partition", "replicas"])


@partitions.command("cancel")
@click.argument("partition_list", nargs=-1, metavar="[TOPIC:PARTITION ...]")
@click.option("--preserve-throttles", is_flag=True, help="leave the throttle configs in place")
@broker_command
def cancel(
    partition_list: tuple[str, ...], preserve_throttles: bool, client: ClientOptions, out: Output
) -> int:
    """Cancel the moves under way (all, or those named), and remove their throttle."""
    admin = Admin(client)
    ongoing = pm.list_reassignments(client)
    named = [pm.parse_partition(x) for x in partition_list]
    absent = [f"{t}:{p}" for t, p in named if (t, p) not in ongoing]
    if absent:
        raise CliError(f"not moving: {', '.join(absent)}", EXIT_FAILED)
    chosen = {k: v for k, v in ongoing.items() if not named or k in named}
    return _cancel(client, admin, out, chosen, preserve_throttles)


@cli_command("decommission")
@click.argument("broker", type=int)
@click.option("--dry-run", is_flag=True, help="print the plan only")
@_throttle
@_in_flight
@broker_command
def decommission(
    broker: int,
    dry_run: bool,
    throttle: str | None,
    max_in_flight: int,
    client: ClientOptions,
    out: Output,
) -> int:
    """Move every replica off BROKER (the rest stays balanced) and return when none is
    left there; then the broker can be stopped."""
    status_ = _run_plan(client, out, (broker,), (), dry_run, throttle, max_in_flight)
    if dry_run or status_ != EXIT_OK:
        return status_
    left = [k for k, r in _cluster(Admin(client))[2].items() if broker in r]
    if left:
        raise CliError(
            f"broker {broker} still holds {len(left)} replicas (a topic created meanwhile?): "
            + ", ".join(f"{t}:{p}" for t, p in sorted(left)[:10]),
            EXIT_FAILED,
        )
    click.echo(f"broker {broker} holds no replica; it can be stopped", err=True)
    return EXIT_OK


@cli_command("recommission")
@click.argument("broker", type=int)
@broker_command
def recommission(broker: int, client: ClientOptions, out: Output) -> int:
    """Cancel the moves still taking replicas off BROKER, and remove their throttle."""
    admin = Admin(client)
    ongoing = pm.list_reassignments(client)
    chosen = {k: o for k, o in ongoing.items() if broker in o.removing}
    return _cancel(client, admin, out, chosen, preserve_throttles=False)


@cli_command("elect-leaders")
@click.argument("partition_list", nargs=-1, metavar="[TOPIC:PARTITION ...]")
@click.option("--preferred", "kind", flag_value="preferred", help="elect the preferred replica")
@click.option(
    "--unclean",
    "kind",
    flag_value="unclean",
    help="elect any live replica when none in sync is left (may lose records)",
)
@broker_command
def elect_leaders(
    partition_list: tuple[str, ...], kind: str | None, client: ClientOptions, out: Output
) -> int:
    """Elect leaders (ElectLeaders) of the partitions named, or of every partition."""
    if kind is None:
        raise CliError("give --preferred or --unclean")
    admin = Admin(client)
    named = [pm.parse_partition(x) for x in partition_list]
    tps = [TopicPartition(t, p) for t, p in named] or None
    election = ElectionType.PREFERRED if kind == "preferred" else ElectionType.UNCLEAN
    result = admin.result(admin.client.elect_leaders(election, tps), f"{kind} leader election")
    rows = [
        {"topic": tp.topic, "partition": tp.partition, "error": pm.election_error(err)}
        for tp, err in sorted(result.items(), key=lambda i: (i[0].topic, i[0].partition))
    ]
    if not rows and not out.json:
        out.line("no partition needed an election")
        return EXIT_OK
    return report(out, rows, ["topic", "partition"])


COMMANDS = (partitions, decommission, recommission, elect_leaders)
