"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72) and
ListClientMetricsResources (74), each only v0, flexible.

A client asks GetTelemetrySubscriptions with its ``client_instance_id`` (the zero uuid
the first time: the broker answers a new one) and learns which metrics to push
(``requested_metrics``: name prefixes, ``["*"]`` for all, ``[]`` for none), how often
(``push_interval_ms``), in which compressions (``accepted_compression_types``: the
record batch compression ids, the broker's preference first), at most how many bytes
(``telemetry_max_bytes``) and whether sums are deltas (``delta_temporality``).
PushTelemetry carries ``metrics``, an OpenTelemetry ``MetricsData`` protobuf compressed
with ``compression_type``, under the ``subscription_id`` the client was given;
``terminating`` marks a client's last push. ListClientMetricsResources names the
CLIENT_METRICS config resources.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, BYTES, INT8, INT16, INT32, STRING, UUID

__all__ = [
    "GetTelemetrySubscriptionsRequest",
    "GetTelemetrySubscriptionsResponse",
    "ListClientMetricsResourcesRequest",
    "ListClientMetricsResourcesResponse",
    "PushTelemetryRequest",
    "PushTelemetryResponse",
]

GetTelemetrySubscriptionsRequest = message(
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
    "request",
    [Field("client_instance_id", UUID, "0+")],
)

GetTelemetrySubscriptionsResponse = message(
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("client_instance_id", UUID, "0+"),
        Field("subscription_id", INT32, "0+"),
        Field("accepted_compression_types", Array(INT8), "0+"),
        Field("push_interval_ms", INT32, "0+"),
        Field("telemetry_max_bytes", INT32, "0+"),
        Field("delta_temporality", BOOL, "0+"),
        Field("requested_metrics", Array(STRING), "0+"),
    ],
)

PushTelemetryRequest = message(
    ApiKey.PUSH_TELEMETRY,
    "request",
    [
        Field("client_instance_id", UUID, "0+"),
        Field("subscription_id", INT32, "0+"),
        Field("terminating", BOOL, "0+"),
        Field("compression_type", INT8, "0+"),
        Field("metrics", BYTES, "0+"),
    ],
)

PushTelemetryResponse = message(
    ApiKey.PUSH_TELEMETRY,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
    ],
)

ListClientMetricsResourcesRequest = message(
    ApiKey.LIST_CLIENT_METRICS_RESOURCES,
    "request",
    [],
)

ListClientMetricsResourcesResponse = message(
    ApiKey.LIST_CLIENT_METRICS_RESOURCES,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field(
            "client_metrics_resources",
            Array(Struct("ClientMetricsResource", [Field("name", STRING, "0+")])),
            "0+",
        ),
    ],
)
