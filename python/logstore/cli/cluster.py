"""``logstore cluster``: ``info`` (cluster id, controller, brokers), ``health``
(:mod:`logstore.cli.cluster_health`), ``partitions``, ``decommission``,
``recommission`` and ``elect-leaders`` (:mod:`logstore.cli.cluster_partitions`),
``quotas describe|alter`` (:mod:`logstore.cli.cluster_quotas`) and ``config get|set``
(broker configs, as ``rpk cluster config`` and ``kafka-configs.sh --entity-type
brokers`` do them).

``config set`` changes a dynamic broker config on every live broker (``--broker ID``:
on one). librdkafka cannot name the cluster-wide default resource (Kafka's BROKER
resource with an empty name, ``kafka-configs.sh --entity-default``), so each broker gets
its own value (source DYNAMIC_BROKER_CONFIG), and a broker that joins later does not.
``config get`` reads one broker's effective values (the controller's unless ``--broker``).
"""

from __future__ import annotations

from typing import Any

import click
from confluent_kafka.admin import ConfigResource, ResourceType

from logstore.cli import cluster_health, cluster_partitions, cluster_quotas
from logstore.cli.admin import Admin
from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_FAILED, EXIT_OK, CliError
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.output import Output, report, status_of
from logstore.cli.topic import config_rows, incremental_entries


@cli_group("cluster")
def group() -> None:
    """Cluster id, brokers, controller, and broker configs."""


def _node(node: Any) -> dict[str, Any]:
    return {"id": node.id, "host": node.host, "port": node.port, "rack": node.rack or None}


@group.command("info")
@broker_command
def info(client: ClientOptions, out: Output) -> int:
    """Show the cluster id, the controller and every broker."""
    admin = Admin(client)
    desc = admin.result(admin.client.describe_cluster(**admin.kwargs()), "describe cluster")
    controller = desc.controller.id if desc.controller is not None else None
    md = admin.metadata()
    data = {
        "cluster_id": desc.cluster_id,
        "controller": controller,
        "brokers": sorted((_node(n) for n in desc.nodes), key=lambda n: n["id"]),
        "topics": len([t for t in md.topics if not t.startswith("__")]),
    }

    def draw(o: Output, d: dict[str, Any]) -> None:
        o.fields(
            [
                ("cluster", d["cluster_id"]),
                ("controller", d["controller"]),
                ("brokers", len(d["brokers"])),
                ("topics", d["topics"]),
            ]
        )
        o.table(
            ["id", "host", "port", "rack"],
            (
                [
                    f"{b['id']}*" if b["id"] == d["controller"] else b["id"],
                    b["host"],
                    b["port"],
                    b["rack"],
                ]
                for b in d["brokers"]
            ),
        )

    out.emit(data, draw)
    return EXIT_OK


group.add_command(cluster_health.command)
group.add_command(cluster_quotas.quotas)
for _command in cluster_partitions.COMMANDS:
    group.add_command(_command)


@group.group("config")
def config() -> None:
    """Read and change broker configs."""


def _broker_id(admin: Admin, broker: int | None) -> str:
    if broker is not None:
        return str(broker)
    desc = admin.result(admin.client.describe_cluster(**admin.kwargs()), "describe cluster")
    if desc.controller is not None:
        return str(desc.controller.id)
    return str(min(n.id for n in desc.nodes))


@config.command("get")
@click.argument("keys", nargs=-1)
@click.option("--broker", type=int, help="the broker to read (default: the controller)")
@broker_command
def get(keys: tuple[str, ...], broker: int | None, client: ClientOptions, out: Output) -> int:
    """Show broker configs (all, or the KEYS named) with their values and sources."""
    admin = Admin(client)
    resource = ConfigResource(ResourceType.BROKER, _broker_id(admin, broker))
    entries = admin.result(
        admin.client.describe_configs([resource], **admin.kwargs())[resource],
        f"configs of broker {resource.name}",
    )
    rows = config_rows(entries)
    if keys:
        missing = [k for k in keys if k not in entries]
        if missing:
            raise CliError(
                f"broker {resource.name} has no config named {', '.join(missing)}", EXIT_FAILED
            )
        rows = [r for r in rows if r["key"] in keys]
    out.emit(
        rows,
        lambda o, d: o.table(
            ["key", "value", "source"], ([r["key"], r["value"], r["source"]] for r in d)
        ),
    )
    return EXIT_OK


def _pairs(args: tuple[str, ...]) -> tuple[str, ...]:
    """``KEY VALUE`` (rpk's form) or ``KEY=VALUE...`` as KEY=VALUE strings."""
    if len(args) == 2 and "=" not in args[0]:
        return (f"{args[0]}={args[1]}",)
    for a in args:
        if "=" not in a:
            raise CliError(f"{a!r}: expected KEY VALUE or KEY=VALUE ...")
    return args


@config.command("set")
@click.argument("args", nargs=-1, metavar="KEY VALUE | KEY=VALUE...")
@click.option(
    "--broker", type=int, help="set it on this broker only (default: on every live broker)"
)
@click.option(
    "-d", "--delete", multiple=True, metavar="KEY", help="remove a dynamic value; repeatable"
)
@broker_command
def set_(
    args: tuple[str, ...],
    broker: int | None,
    delete: tuple[str, ...],
    client: ClientOptions,
    out: Output,
) -> int:
    """Change broker configs at runtime (IncrementalAlterConfigs on BROKER resources)."""
    entries = incremental_entries(_pairs(args) if args else (), delete)
    admin = Admin(client)
    if broker is None:
        desc = admin.result(admin.client.describe_cluster(**admin.kwargs()), "describe cluster")
        ids = sorted(n.id for n in desc.nodes)
    else:
        ids = [broker]
    rows = []
    for i in ids:  # librdkafka takes one BROKER resource per request
        resource = ConfigResource(ResourceType.BROKER, str(i), incremental_configs=entries)
        results = admin.results(
            admin.client.incremental_alter_configs([resource], **admin.kwargs())
        )
        rows += [
            {"broker": i, "key": e.name, "value": e.value, "error": status_of(results[resource])}
            for e in entries
        ]
    return report(out, rows, ["broker", "key", "value"])
