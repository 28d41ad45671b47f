"""The broker's client telemetry (KIP-714): the CLIENT_METRICS resources (kept by a
:class:`~broker_py.config.config_entity_store.LocalConfigEntityStore` or, in a
cluster, a :class:`~broker_py.zk.zk_config_entity_store.ZkConfigEntityStore`), the
sans-IO :class:`~broker_py.server.telemetry.client_metrics_manager.ClientMetricsManager`
they feed, and the pushed metrics
(:class:`~broker_py.server.metrics.client_telemetry.PushedClientMetrics`) the Prometheus
endpoint serves.

A push's payload is read only after the manager accepted the push: decompressed to at
most ``DECOMPRESSED_LIMIT_FACTOR * telemetry.max.bytes`` (past it, TELEMETRY_TOO_LARGE),
then decoded (failing, INVALID_RECORD). Its points are kept only while the Prometheus
endpoint is on. Instances expire on the manager's rule, checked at most once a
``EXPIRY_CHECK_MS`` on requests and at each scrape; their series go with them, as do
those of instances the manager let go past its bound.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from broker_py.config.config_entity_store import ConfigEntityStore
from broker_py.server.metrics.client_telemetry import PushedClientMetrics
from broker_py.server.telemetry import client_metrics_configs as cmc
from broker_py.server.telemetry import otlp_payload
from broker_py.server.telemetry.client_metrics_manager import ClientMetricsManager
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.telemetry import (
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
)

log = logging.getLogger(__name__)

DECOMPRESSED_LIMIT_FACTOR = 10
EXPIRY_CHECK_MS = 1000


def attributes_of(connection: Any) -> dict[str, str]:
    """What ``match`` selects on, from the request context."""
    out: dict[str, str] = {}
    if connection is None:
        return out
    if connection.client_id is not None:
        out[cmc.CLIENT_ID] = connection.client_id
    software = getattr(connection, "client_software", None)
    if software:
        name, _, version = software.partition("/")
        out[cmc.CLIENT_SOFTWARE_NAME] = name
        out[cmc.CLIENT_SOFTWARE_VERSION] = version
    out[cmc.CLIENT_SOURCE_ADDRESS] = connection.host
    peer = getattr(connection, "peer", "") or ""
    if ":" in peer:
        out[cmc.CLIENT_SOURCE_PORT] = peer.rsplit(":", 1)[1]
    return out


class ClientTelemetry:
    def __init__(
        self, store: ConfigEntityStore, telemetry_max_bytes: int, now_ms: Callable[[], int]
    ) -> None:
        self.store = store
        self.manager = ClientMetricsManager(telemetry_max_bytes, now_ms)
        self.pushed = PushedClientMetrics()
        self.keep_points = False  # True while the Prometheus endpoint is on
        self._now_ms = now_ms
        self._next_expiry_check = 0

    def start(self) -> None:
        self.store.start(self._on_change)

    def _on_change(self, name: str, configs: dict[str, str]) -> None:
        try:
            self.manager.update_subscription(name, configs)
        except Exception as e:
            log.error("ignoring client metrics resource %r %s: %s", name, configs, e)

    # ---- CLIENT_METRICS resources ----

    def names(self) -> list[str]:
        return self.store.names()

    def describe(self, name: str) -> dict[str, str]:
        return self.store.get(name)

    def alter(
        self,
        name: str,
        change: Callable[[dict[str, str]], dict[str, str]],
        validate_only: bool,
    ) -> Awaitable[None] | None:
        """Sets the resource to ``change(its configs)``, checked first (Kafka's errors)."""

        def checked(current: dict[str, str]) -> dict[str, str]:
            configs = change(current)
            cmc.validate(name, configs)
            return configs

        if not name:
            cmc.validate(name, {})
        return self.store.update(name, checked, validate_only)

    # ---- requests ----

    def expire(self) -> None:
        """Drops expired instances, and the series of every instance the manager no longer
        keeps (expired, or the least recently used past its bound)."""
        self.manager.expire()
        kept = {str(i) for i in self.manager.instances}
        for instance_id in self.pushed.instance_ids():
            if instance_id not in kept:
                self.pushed.drop(instance_id)

    def _maybe_expire(self) -> None:
        now = self._now_ms()
        if now >= self._next_expiry_check:
            self._next_expiry_check = now + EXPIRY_CHECK_MS
            self.expire()

    def get_subscriptions(self, instance_id: uuid.UUID, connection: Any) -> Any:
        self._maybe_expire()
        got = self.manager.get_subscriptions(instance_id, attributes_of(connection))
        if got.error != ErrorCode.NONE:
            log.debug("GetTelemetrySubscriptions of %s: %s", instance_id, got.message)
            return GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=int(got.error))
        return GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0,
            error_code=0,
            client_instance_id=got.instance_id,
            subscription_id=got.subscription_id,
            accepted_compression_types=list(got.accepted_compression_types),
            push_interval_ms=got.push_interval_ms,
            telemetry_max_bytes=got.telemetry_max_bytes,
            delta_temporality=got.delta_temporality,
            requested_metrics=list(got.requested_metrics),
        )

    def push(self, body: Any, connection: Any) -> Any:
        self._maybe_expire()
        payload = bytes(body.metrics or b"")
        decision = self.manager.push(
            body.client_instance_id,
            attributes_of(connection),
            body.subscription_id,
            body.terminating,
            body.compression_type,
            len(payload),
        )
        error = decision.error
        if error == ErrorCode.NONE and payload and decision.instance is not None:
            error = self._export(decision.instance, body.compression_type, payload, connection)
        elif error != ErrorCode.NONE:
            log.debug("PushTelemetry of %s: %s", body.client_instance_id, decision.message)
        return PushTelemetryResponse(throttle_time_ms=0, error_code=int(error))

    def _export(self, instance: Any, compression_type: int, payload: bytes, connection: Any):
        limit = DECOMPRESSED_LIMIT_FACTOR * self.manager.telemetry_max_bytes
        try:
            points = otlp_payload.decode(otlp_payload.decompress(payload, compression_type, limit))
        except otlp_payload.PayloadTooLarge as e:
            log.warning("client telemetry of %s: %s", instance.instance_id, e)
            self.manager.export_failed(instance, ErrorCode.TELEMETRY_TOO_LARGE)
            return ErrorCode.TELEMETRY_TOO_LARGE
        except otlp_payload.BadPayload as e:
            log.warning("client telemetry of %s: %s", instance.instance_id, e)
            self.manager.export_failed(instance, ErrorCode.INVALID_RECORD)
            return ErrorCode.INVALID_RECORD
        if self.keep_points:
            client_id = instance.attributes.get(cmc.CLIENT_ID, "")
            self.pushed.record(str(instance.instance_id), client_id, points)
        return ErrorCode.NONE
