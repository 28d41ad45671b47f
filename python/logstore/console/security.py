"""The security and configs page, read-only: ACLs (DescribeAcls, every binding), SCRAM
users (DescribeUserScramCredentials), a broker's configs with their sources
(DescribeConfigs of the broker chosen, the controller by default) and client quotas
(DescribeClientQuotas, every entity). Each section shows the broker's error in place of
its table when the broker refuses it (SECURITY_DISABLED without an authorizer, an
API it does not serve).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from logstore.cli import acl, cluster_quotas, user
from logstore.cli.common import CliError
from logstore.cli.topic import config_rows
from logstore.console.kafka import Kafka
from logstore.console.web import render, state
from logstore.protocol import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.client_quotas import DescribeClientQuotasRequest


def _section(fn: Callable[[], Any]) -> dict[str, Any]:
    try:
        return {"rows": fn(), "error": None}
    except CliError as exc:
        return {"rows": [], "error": str(exc)}


def acls(kafka: Kafka) -> list[dict[str, Any]]:
    admin = kafka.admin
    every = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    bindings = admin.result(admin.client.describe_acls(every, **admin.kwargs()), "describe ACLs")
    return sorted((acl._row(b) for b in bindings), key=lambda r: tuple(map(str, r.values())))


def users(kafka: Kafka) -> list[dict[str, Any]]:
    described = user._describe(kafka.admin)
    return [{"user": name, "credentials": described[name]} for name in sorted(described)]


def broker_configs(kafka: Kafka, broker: int) -> list[dict[str, Any]]:
    admin = kafka.admin
    resource = ConfigResource(ResourceType.BROKER, str(broker))
    entries = admin.result(
        admin.client.describe_configs([resource], **admin.kwargs())[resource],
        f"configs of broker {broker}",
    )
    return config_rows(entries)


def quotas(kafka: Kafka) -> list[dict[str, Any]]:
    request = DescribeClientQuotasRequest(components=[], strict=False)
    response = cluster_quotas._exchange(kafka.options, ApiKey.DESCRIBE_CLIENT_QUOTAS, request)
    if response is None:
        raise CliError("the broker does not serve DescribeClientQuotas")
    if response.error_code:
        raise CliError(
            f"DescribeClientQuotas: {ErrorCode(response.error_code).name}: {response.error_message}"
        )
    return sorted(
        (
            {
                "entity": cluster_quotas._label(
                    [(e.entity_type, e.entity_name) for e in entry.entity]
                ),
                "values": {v.key: cluster_quotas._value(v.value) for v in entry.values},
            }
            for entry in response.entries or []
        ),
        key=lambda r: str(r["entity"]),
    )


def security(kafka: Kafka, broker: int | None) -> dict[str, Any]:
    admin = kafka.admin
    desc = admin.result(admin.client.describe_cluster(**admin.kwargs()), "describe cluster")
    kafka.remember(desc.nodes)
    ids = sorted(n.id for n in desc.nodes)
    if broker not in ids:
        broker = desc.controller.id if desc.controller is not None else (ids or [0])[0]
    chosen = broker
    return {
        "acls": _section(lambda: acls(kafka)),
        "users": _section(lambda: users(kafka)),
        "configs": _section(lambda: broker_configs(kafka, chosen)),
        "quotas": _section(lambda: quotas(kafka)),
        "broker": chosen,
        "brokers": ids,
    }


async def page(request: web.Request) -> web.Response:
    st = state(request)
    text = request.query.get("broker", "")
    broker = int(text) if text.isdigit() else None
    data = await st.kafka.run(security, st.kafka, broker)
    return render(request, "security.html", **data)


def routes(app: web.Application) -> None:
    app.router.add_get("/security", page)
