"""Client telemetry subscriptions (KIP-714), sans-IO: Kafka's ``ClientMetricsManager``
with an injected clock (``now_ms``) and uuid source.

State:

- subscriptions: the CLIENT_METRICS resources by name (:func:`update_subscription`
  with a resource's whole configs; empty configs remove it), and a version counted up
  on every change;
- client instances by client instance id, in least-recently-used order, at most
  ``max_instances``: each holds the client's attributes (what ``match`` selects on),
  the metrics and push interval of every subscription that matched when the instance
  was made, the subscription id computed from them, the subscription version it was
  made at, its last GetTelemetrySubscriptions and accepted PushTelemetry times, its
  terminating flag and last error.

Rules (Kafka's):

- a request naming an instance made at an older subscription version remakes it
  (matching again, timestamps cleared); an unknown id makes a new instance; the zero
  uuid in GetTelemetrySubscriptions gets a fresh id;
- the metrics are the union of the matching subscriptions' (``["*"]`` when one has
  ``*``), the interval their smallest (300000 when none matches); the subscription id
  is CRC32C of ``"[m1, m2, ...]<interval>"`` (metrics sorted: Kafka prints a Java
  HashSet, in its own order) XOR the Java ``Uuid.hashCode`` of the instance id;
- GetTelemetrySubscriptions within a push interval of the instance's last request is
  THROTTLING_QUOTA_EXCEEDED, unless its last error was UNKNOWN_SUBSCRIPTION_ID or
  UNSUPPORTED_COMPRESSION_TYPE;
- PushTelemetry is checked in this order: an instance that sent ``terminating`` takes no
  more pushes (INVALID_REQUEST); a push within a push interval of the previous accepted
  one, with no GetTelemetrySubscriptions since and not terminating, is
  THROTTLING_QUOTA_EXCEEDED; another subscription id is UNKNOWN_SUBSCRIPTION_ID; a
  compression id outside 0-4 is UNSUPPORTED_COMPRESSION_TYPE; more than
  ``telemetry_max_bytes`` is TELEMETRY_TOO_LARGE. The push's terminating flag is kept
  whatever the outcome. The zero uuid (and Kafka's other reserved one, 1) is
  INVALID_REQUEST;
- an instance expires ``max(cache_expiry_ms, 3 * push interval)`` after its last
  request (:meth:`expire`).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker_py.server.telemetry import client_metrics_configs as cmc
from logstore import crc32c
from logstore.protocol.error_codes import ErrorCode

# The compression ids the broker takes, its preference first (Kafka's order): zstd, lz4,
# gzip, snappy. A push may use any record batch compression id, none (0) included.
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
VALID_COMPRESSION_TYPES = frozenset({0, 1, 2, 3, 4})
CACHE_EXPIRY_MS = 60_000
MAX_INSTANCES = 16_384
EXPIRY_PUSH_INTERVALS = 3
RESERVED_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})


def java_uuid_hash(instance_id: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode``: the two 64-bit halves XORed, then the high and low
    32 bits of that XORed (a signed 32-bit int)."""
    h = (instance_id.int >> 64) ^ (instance_id.int & 0xFFFF_FFFF_FFFF_FFFF)
    return _int32((h >> 32) ^ (h & 0xFFFF_FFFF))


def _int32(n: int) -> int:
    n &= 0xFFFF_FFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    text = "[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)
    return _int32(crc32c(text.encode()) ^ java_uuid_hash(instance_id))


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str]
    subscription_version: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    subscription_id: int
    expires_at_ms: int = 0
    last_get_ms: int | None = None
    last_push_ms: int | None = None
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class Subscriptions:
    """GetTelemetrySubscriptions' answer: ``error`` NONE with the fields, or an error
    (and ``message``) alone."""

    error: ErrorCode
    message: str | None = None
    instance_id: uuid.UUID = uuid.UUID(int=0)
    subscription_id: int = 0
    accepted_compression_types: tuple[int, ...] = ()
    push_interval_ms: int = 0
    telemetry_max_bytes: int = 0
    delta_temporality: bool = False
    requested_metrics: tuple[str, ...] = ()


@dataclass(frozen=True)
class PushDecision:
    """PushTelemetry's answer before the payload is read: NONE means the payload is to be
    decoded (:meth:`ClientMetricsManager.export_failed` records a failure to)."""

    error: ErrorCode
    message: str | None = None
    instance: ClientInstance | None = None


@dataclass
class ClientMetricsManager:
    telemetry_max_bytes: int
    now_ms: Callable[[], int]
    new_uuid: Callable[[], uuid.UUID] = uuid.uuid4
    cache_expiry_ms: int = CACHE_EXPIRY_MS
    max_instances: int = MAX_INSTANCES
    version: int = 0
    subscriptions: dict[str, cmc.Subscription] = field(default_factory=dict)
    instances: OrderedDict[uuid.UUID, ClientInstance] = field(default_factory=OrderedDict)

    # ---- subscriptions ----

    def update_subscription(self, name: str, configs: Mapping[str, str]) -> None:
        """Sets resource ``name`` to ``configs`` (its whole set; empty removes it). Raises
        InvalidRequestError / InvalidConfigError as :func:`client_metrics_configs.validate`."""
        parsed = cmc.validate(name, configs)
        if not configs:
            if self.subscriptions.pop(name, None) is not None:
                self.version += 1
            return
        self.subscriptions[name] = parsed
        self.version += 1

    def subscription_names(self) -> list[str]:
        return sorted(self.subscriptions)

    # ---- instances ----

    def _make(self, instance_id: uuid.UUID, attributes: dict[str, str]) -> ClientInstance:
        attributes = {**attributes, cmc.CLIENT_INSTANCE_ID: str(instance_id)}
        metrics: set[str] = set()
        interval = cmc.INTERVAL_MS_DEFAULT
        every = False
        for sub in self.subscriptions.values():
            if _matches(sub.match, attributes):
                every = every or cmc.ALL_METRICS in sub.metrics
                metrics.update(sub.metrics)
                interval = min(interval, sub.interval_ms)
        chosen = (cmc.ALL_METRICS,) if every else tuple(sorted(metrics))
        return ClientInstance(
            instance_id,
            attributes,
            self.version,
            chosen,
            interval,
            subscription_id(chosen, interval, instance_id),
        )

    def _instance(self, instance_id: uuid.UUID, attributes: dict[str, str]) -> ClientInstance:
        """The instance (made or remade as the module's rules say), its expiry renewed and
        moved to the most recently used end; the least recently used goes past
        ``max_instances``."""
        instance = self.instances.get(instance_id)
        if instance is None:
            instance = self._make(instance_id, attributes)
        elif instance.subscription_version < self.version:
            instance = self._make(instance_id, instance.attributes)
        instance.expires_at_ms = self.now_ms() + max(
            self.cache_expiry_ms, EXPIRY_PUSH_INTERVALS * instance.push_interval_ms
        )
        self.instances[instance_id] = instance
        self.instances.move_to_end(instance_id)
        while len(self.instances) > self.max_instances:
            self.instances.popitem(last=False)
        return instance

    def expire(self) -> list[uuid.UUID]:
        """Removes the instances whose expiry has passed; returns their ids."""
        now = self.now_ms()
        gone = [i for i, inst in self.instances.items() if inst.expires_at_ms <= now]
        for instance_id in gone:
            del self.instances[instance_id]
        return gone

    def next_expiry_ms(self) -> int | None:
        return min((i.expires_at_ms for i in self.instances.values()), default=None)

    # ---- requests ----

    def get_subscriptions(
        self, instance_id: uuid.UUID, attributes: dict[str, str]
    ) -> Subscriptions:
        now = self.now_ms()
        if instance_id == uuid.UUID(int=0):
            instance_id = self.new_uuid()
            while instance_id in self.instances or instance_id in RESERVED_IDS:
                instance_id = self.new_uuid()
        instance = self._instance(instance_id, attributes)
        last = max(instance.last_get_ms or 0, instance.last_push_ms or 0)
        never = instance.last_get_ms is None and instance.last_push_ms is None
        if never or now - last >= instance.push_interval_ms:
            instance.last_get_ms = now
        elif instance.last_error not in (
            ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        ):
            return Subscriptions(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{instance_id}] arrived before the next push "
                "interval time",
            )
        instance.last_error = ErrorCode.NONE
        return Subscriptions(
            ErrorCode.NONE,
            None,
            instance_id,
            instance.subscription_id,
            ACCEPTED_COMPRESSION_TYPES,
            instance.push_interval_ms,
            self.telemetry_max_bytes,
            True,
            instance.metrics,
        )

    def push(
        self,
        instance_id: uuid.UUID,
        attributes: dict[str, str],
        sub_id: int,
        terminating: bool,
        compression_type: int,
        size: int,
    ) -> PushDecision:
        if instance_id in RESERVED_IDS:
            return PushDecision(
                ErrorCode.INVALID_REQUEST,
                f"Invalid request from the client [{instance_id}], invalid client instance id",
            )
        instance = self._instance(instance_id, attributes)
        error, message = self._check_push(instance, sub_id, terminating, compression_type, size)
        instance.terminating = terminating
        instance.last_error = error
        return PushDecision(error, message, instance)

    def _check_push(
        self,
        instance: ClientInstance,
        sub_id: int,
        terminating: bool,
        compression_type: int,
        size: int,
    ) -> tuple[ErrorCode, str | None]:
        client = instance.instance_id
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST, (
                f"Client [{client}] sent the previous request with state terminating to "
                "TRUE, can not accept any requests after that"
            )
        now = self.now_ms()
        last_push = instance.last_push_ms
        accept = (
            last_push is None
            or (instance.last_get_ms is not None and instance.last_get_ms > last_push)
            or now - last_push >= instance.push_interval_ms
        )
        if accept:
            instance.last_push_ms = now
        elif not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, (
                f"Request from the client [{client}] arrived before the next push interval time"
            )
        if sub_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID, (
                f"Unknown client subscription id for the client [{client}]"
            )
        if compression_type not in VALID_COMPRESSION_TYPES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, (
                f"Unknown compression type [{compression_type}] is received in telemetry "
                f"request from [{client}]"
            )
        if size > self.telemetry_max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE, (
                f"Telemetry request from [{client}] is larger than the maximum allowed size "
                f"[{self.telemetry_max_bytes}]"
            )
        return ErrorCode.NONE, None

    def export_failed(self, instance: ClientInstance, error: ErrorCode) -> None:
        """The accepted payload could not be read (INVALID_RECORD) or decompressed past
        its bound (TELEMETRY_TOO_LARGE)."""
        instance.last_error = error


def _matches(match: Mapping[str, object], attributes: Mapping[str, str]) -> bool:
    for selector, regex in match.items():
        value = attributes.get(selector)
        if value is None or regex.fullmatch(value) is None:  # type: ignore[attr-defined]
            return False
    return True
