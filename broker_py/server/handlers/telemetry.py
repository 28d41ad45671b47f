"""Client telemetry (KIP-714): GetTelemetrySubscriptions, PushTelemetry and
ListClientMetricsResources, answered by ``apis.client_telemetry``
(:class:`~broker_py.server.telemetry.client_telemetry.ClientTelemetry`).

Any client may ask for its subscription and push (Kafka authorizes neither); listing the
CLIENT_METRICS resources needs DESCRIBE_CONFIGS on the cluster, as describing them does.
A request that fails inside is answered INVALID_REQUEST, as Kafka answers it.

ApiVersions lists GetTelemetrySubscriptions and PushTelemetry only when the pushed
metrics have somewhere to go, the Prometheus endpoint (``metrics.port`` set), as Kafka
lists them only when a client telemetry receiver is configured: otherwise clients do
not ask. (A client that asks anyway is answered.)
"""

from __future__ import annotations

import logging

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError
from logstore.protocol.messages.telemetry import (
    GetTelemetrySubscriptionsResponse,
    ListClientMetricsResourcesResponse,
    PushTelemetryResponse,
)

log = logging.getLogger(__name__)

_PUSH_APIS = frozenset({ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY})


def unadvertised(apis) -> frozenset[ApiKey]:
    """The api keys ApiVersions leaves out (see the module)."""
    return frozenset() if apis.config["metrics.port"] is not None else _PUSH_APIS


def handle_get_telemetry_subscriptions(apis, request, connection):
    try:
        return apis.client_telemetry.get_subscriptions(request.body.client_instance_id, connection)
    except Exception:
        log.exception("GetTelemetrySubscriptions failed")
        return GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST)
        )


def handle_push_telemetry(apis, request, connection):
    try:
        return apis.client_telemetry.push(request.body, connection)
    except Exception:
        log.exception("PushTelemetry failed")
        return PushTelemetryResponse(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST))


def handle_list_client_metrics_resources(apis, request, connection):
    try:
        auth_helper.ensure(apis, connection, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
    except KafkaError as e:
        return ListClientMetricsResourcesResponse(
            throttle_time_ms=0, error_code=int(e.errno), client_metrics_resources=[]
        )
    return ListClientMetricsResourcesResponse(
        throttle_time_ms=0,
        error_code=0,
        client_metrics_resources=[
            ListClientMetricsResourcesResponse.ClientMetricsResource(name=name)
            for name in apis.client_telemetry.names()
        ],
    )


HANDLERS = {
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: handle_get_telemetry_subscriptions,
    ApiKey.PUSH_TELEMETRY: handle_push_telemetry,
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: handle_list_client_metrics_resources,
}
