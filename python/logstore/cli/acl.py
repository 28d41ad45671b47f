"""``logstore acl``: create, list and delete ACLs, with ``rpk acl``'s flags
(``kafka-acls.sh`` names them ``--add``/``--list``/``--remove``).

A binding is (resource type, resource name, pattern type, principal, host, operation,
permission). ``create`` makes every combination of the principals, hosts, operations
and resources given; ``list`` and ``delete`` take the same flags as filters, where a
flag left out matches anything. The cluster resource is named ``kafka-cluster``.
"""

from __future__ import annotations

import itertools
from typing import Any

import click
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from logstore.cli.admin import Admin
from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_OK, CliError
from logstore.cli.confirm import confirm, no_confirm_option
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.output import Output, report, status_of

CLUSTER_NAME = "kafka-cluster"
OPERATIONS = [op.name.lower() for op in AclOperation if op not in (AclOperation.UNKNOWN,)]
PATTERNS = ("literal", "prefixed", "match", "any")


@cli_group("acl")
def group() -> None:
    """Create, list and delete ACLs."""


def _filters(f: Any) -> Any:
    options = [
        click.option(
            "--allow-principal",
            multiple=True,
            metavar="User:NAME",
            help="principal to allow; repeatable",
        ),
        click.option(
            "--deny-principal",
            multiple=True,
            metavar="User:NAME",
            help="principal to deny; repeatable",
        ),
        click.option(
            "--host",
            "hosts",
            multiple=True,
            metavar="HOST",
            help="client host (default *); repeatable",
        ),
        click.option(
            "--operation",
            "operations",
            multiple=True,
            type=click.Choice(OPERATIONS, case_sensitive=False),
            help="operation; repeatable",
        ),
        click.option("--topic", "topics", multiple=True, help="topic resource; repeatable"),
        click.option(
            "--group", "groups", multiple=True, help="consumer group resource; repeatable"
        ),
        click.option(
            "--transactional-id",
            "txn_ids",
            multiple=True,
            help="transactional id resource; repeatable",
        ),
        click.option("--cluster", is_flag=True, help="the cluster resource"),
        click.option(
            "--resource-pattern-type",
            "pattern",
            type=click.Choice(PATTERNS, case_sensitive=False),
            help=(
                "literal (default for create) or prefixed; list and delete also take match and any"
            ),
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _resources(
    topics: tuple[str, ...], groups: tuple[str, ...], txn_ids: tuple[str, ...], cluster: bool
) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in topics]
    out += [(ResourceType.GROUP, g) for g in groups]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in txn_ids]
    if cluster:
        out.append((ResourceType.BROKER, CLUSTER_NAME))
    return out


def _principals(
    allow: tuple[str, ...], deny: tuple[str, ...]
) -> list[tuple[str, AclPermissionType]]:
    for p in (*allow, *deny):
        kind, sep, name = p.partition(":")
        if not sep or not kind or not name:
            raise CliError(f"principal {p!r}: expected Type:name, e.g. User:alice")
    return [(p, AclPermissionType.ALLOW) for p in allow] + [
        (p, AclPermissionType.DENY) for p in deny
    ]


def _row(b: Any) -> dict[str, Any]:
    return {
        "principal": b.principal,
        "host": b.host,
        "resource_type": "CLUSTER" if b.restype == ResourceType.BROKER else b.restype.name,
        "resource_name": b.name,
        "pattern": b.resource_pattern_type.name,
        "operation": b.operation.name,
        "permission": b.permission_type.name,
    }


COLUMNS = [
    "principal",
    "host",
    "resource_type",
    "resource_name",
    "pattern",
    "operation",
    "permission",
]


def _table(o: Output, rows: list[dict[str, Any]]) -> None:
    o.table([c.replace("_", "-") for c in COLUMNS], ([r[c] for c in COLUMNS] for r in rows))


@group.command("create")
@_filters
@broker_command
def create(
    allow_principal: tuple[str, ...],
    deny_principal: tuple[str, ...],
    hosts: tuple[str, ...],
    operations: tuple[str, ...],
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    txn_ids: tuple[str, ...],
    cluster: bool,
    pattern: str | None,
    client: ClientOptions,
    out: Output,
) -> int:
    """Create ACLs: every combination of the principals, hosts, operations and resources."""
    principals = _principals(allow_principal, deny_principal)
    resources = _resources(topics, groups, txn_ids, cluster)
    if not principals or not operations or not resources:
        raise CliError(
            "give a principal (--allow-principal/--deny-principal), an --operation and a resource "
            "(--topic, --group, --transactional-id or --cluster)"
        )
    pattern_type = ResourcePatternType[(pattern or "literal").upper()]
    if pattern_type not in (ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED):
        raise CliError("--resource-pattern-type for create is literal or prefixed")
    bindings = [
        AclBinding(rt, name, pattern_type, principal, host, AclOperation[op.upper()], permission)
        for (rt, name), (principal, permission), host, op in itertools.product(
            resources, principals, hosts or ("*",), operations
        )
    ]
    admin = Admin(client)
    results = admin.results(admin.client.create_acls(bindings, **admin.kwargs()))
    rows = [{**_row(b), "error": status_of(results[b])} for b in bindings]
    return report(out, rows, COLUMNS)


def _binding_filters(
    allow_principal: tuple[str, ...],
    deny_principal: tuple[str, ...],
    hosts: tuple[str, ...],
    operations: tuple[str, ...],
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    txn_ids: tuple[str, ...],
    cluster: bool,
    pattern: str | None,
) -> list[AclBindingFilter]:
    principals: list[tuple[str | None, AclPermissionType]] = list(
        _principals(allow_principal, deny_principal)
    ) or [(None, AclPermissionType.ANY)]
    resources: list[tuple[ResourceType, str | None]] = list(
        _resources(topics, groups, txn_ids, cluster)
    ) or [(ResourceType.ANY, None)]
    pattern_type = ResourcePatternType[(pattern or "any").upper()]
    ops = [AclOperation[o.upper()] for o in operations] or [AclOperation.ANY]
    return [
        AclBindingFilter(rt, name, pattern_type, principal, host, op, permission)
        for (rt, name), (principal, permission), host, op in itertools.product(
            resources, principals, hosts or (None,), ops
        )
    ]


def _matching(admin: Admin, filters: list[AclBindingFilter]) -> list[dict[str, Any]]:
    """The rows of the ACLs that match any of ``filters``, each once, sorted."""
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for f in filters:
        for b in admin.result(admin.client.describe_acls(f, **admin.kwargs()), "describe ACLs"):
            row = _row(b)
            seen[tuple(row.values())] = row
    return sorted(seen.values(), key=lambda r: tuple(r.values()))


@group.command("list")
@_filters
@broker_command
def list_(client: ClientOptions, out: Output, **flags: Any) -> int:
    """List the ACLs matching the flags given (all when none)."""
    out.emit(_matching(Admin(client), _binding_filters(**flags)), _table)
    return EXIT_OK


@group.command("delete")
@_filters
@no_confirm_option
@broker_command
def delete(no_confirm: bool, client: ClientOptions, out: Output, **flags: Any) -> int:
    """Delete the ACLs matching the flags (at least a principal or a resource); lists
    them and asks first (see --no-confirm)."""
    if not (
        flags["allow_principal"]
        or flags["deny_principal"]
        or flags["topics"]
        or flags["groups"]
        or flags["txn_ids"]
        or flags["cluster"]
    ):
        raise CliError(
            "give a principal or a resource to match: deleting every ACL takes "
            "--allow-principal/--topic ..."
        )
    filters = _binding_filters(**flags)
    admin = Admin(client)

    def question() -> str:
        rows = _matching(admin, filters)
        listed = "".join(
            "\n  " + " ".join(str(r[c]) for c in COLUMNS if c != "pattern") for r in rows
        )
        return f"Delete these {len(rows)} ACL(s)?{listed}\n"

    confirm(question, no_confirm)
    results = admin.results(admin.client.delete_acls(filters, **admin.kwargs()))
    rows: list[dict[str, Any]] = []
    for f in filters:
        value = results[f]
        if isinstance(value, BaseException):
            rows.append({c: None for c in COLUMNS} | {"error": status_of(value)})
        else:
            rows += [{**_row(b), "error": None} for b in value]
    return report(out, rows, COLUMNS)
