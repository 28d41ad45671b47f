"""One client quota type's quotas and sensors (Kafka's ``ClientQuotaManager`` with its
default quota callback), sans-IO: every call takes the time in milliseconds.

Precedence. A request from ``user`` with ``client_id`` is held to the first quota set,
in this order (Kafka's, for each quota type on its own):

1. ``users/<user>/clients/<client-id>``
2. ``users/<user>/clients/<default>``
3. ``users/<user>``
4. ``users/<default>/clients/<client-id>``
5. ``users/<default>/clients/<default>``
6. ``users/<default>``
7. ``clients/<client-id>``
8. ``clients/<default>``

and to none when no level has one. The level also picks the sensor the request counts
in, named by its metric tags (``user``, ``client-id``): (user, client-id) for levels 1-2
and 4-5, (user, "") for 3 and 6, ("", client-id) for 7-8 and when nothing applies. So
clients sharing a user quota share one rate, and each client id under a default of the
client id level has its own.

A sensor is a :class:`~broker_py.utils.sampled_rate.SampledRate` over ``quota.window.num``
windows of ``quota.window.size.seconds`` (the quota's metric: ``byte-rate``, or
``request-time`` in percent for request quotas), and the average throttle time given
(``throttle-time``) over the same windows. Nothing is recorded while no quota of this type
exists. A sensor not recorded to for ``expiry_ms`` (an hour, as Kafka) is dropped, and at
most ``max_sensors`` are kept (the least recently used dropped first), so client ids a
client makes up cannot grow the broker's memory without bound.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from broker_py.server.quota.client_quota_entity import DEFAULT, QuotaEntity
from broker_py.utils.sampled_rate import RateConfig, SampledRate

Tags = tuple[str, str]  # (user, client-id) metric tags, "" for a tag not used

INACTIVE_SENSOR_EXPIRY_MS = 3_600_000
# About 3 kB a sensor at most (three rates of 11 windows): 10,000 keep it under ~30 MB.
MAX_SENSORS = 10_000


@dataclass
class Sensor:
    """The rate a group of clients is held to, and the throttle times they were given."""

    rate: SampledRate
    throttle_total: SampledRate
    throttle_count: SampledRate
    last_record_ms: int = 0

    def throttle_time_avg(self, now_ms: int) -> float:
        count = self.throttle_count.total(now_ms)
        return self.throttle_total.total(now_ms) / count if count > 0 else 0.0


@dataclass
class ClientQuotaManager:
    key: str  # the quota key this manager enforces (producer_byte_rate, ...)
    config: RateConfig = field(default_factory=RateConfig)
    # Throttle times over this are cut to it (request quotas: one window, as Kafka).
    max_throttle_ms: int | None = None
    expiry_ms: int = INACTIVE_SENSOR_EXPIRY_MS
    max_sensors: int = MAX_SENSORS
    _quotas: dict[QuotaEntity, float] = field(default_factory=dict, init=False)
    _sensors: collections.OrderedDict[Tags, Sensor] = field(
        default_factory=collections.OrderedDict, init=False
    )

    # ---- quotas ----

    @property
    def enabled(self) -> bool:
        return bool(self._quotas)

    def update(self, entity: QuotaEntity, bound: float | None) -> None:
        """Sets (or with None removes) ``entity``'s quota of this type."""
        if bound is None:
            self._quotas.pop(entity, None)
        else:
            self._quotas[entity] = bound

    def quotas(self) -> dict[QuotaEntity, float]:
        return dict(self._quotas)

    def tags(self, user: str, client_id: str) -> Tags:
        """The sensor a request of ``user`` / ``client_id`` counts in (module docstring)."""
        q = self._quotas
        if QuotaEntity(user, client_id) in q or QuotaEntity(user, DEFAULT) in q:
            return user, client_id
        if QuotaEntity(user, None) in q:
            return user, ""
        if QuotaEntity(DEFAULT, client_id) in q or QuotaEntity(DEFAULT, DEFAULT) in q:
            return user, client_id
        if QuotaEntity(DEFAULT, None) in q:
            return user, ""
        return "", client_id

    def bound(self, tags: Tags) -> float | None:
        """The quota of the sensor ``tags`` name (None: unlimited)."""
        user, client_id = tags
        order: tuple[QuotaEntity, ...]
        if user and client_id:
            order = (
                QuotaEntity(user, client_id),
                QuotaEntity(user, DEFAULT),
                QuotaEntity(DEFAULT, client_id),
                QuotaEntity(DEFAULT, DEFAULT),
            )
        elif user:
            order = (QuotaEntity(user, None), QuotaEntity(DEFAULT, None))
        elif client_id:
            order = (QuotaEntity(None, client_id), QuotaEntity(None, DEFAULT))
        else:
            return None
        for entity in order:
            got = self._quotas.get(entity)
            if got is not None:
                return got
        return None

    def quota_of(self, user: str, client_id: str) -> float | None:
        return self.bound(self.tags(user, client_id))

    # ---- recording ----

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Counts ``value``; the throttle time it earns (0 while within the quota)."""
        if not self._quotas:
            return 0
        tags = self.tags(user, client_id)
        sensor = self._sensor(tags, now_ms)
        sensor.rate.record(value, now_ms)
        bound = self.bound(tags)
        if bound is None:
            return 0
        throttle = sensor.rate.throttle_time_ms(bound, now_ms)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return throttle

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Takes back a ``value`` recorded (a throttled fetch answered empty)."""
        if self._quotas:
            self._sensor(self.tags(user, client_id), now_ms).rate.record(-value, now_ms)

    def throttle_time(self, user: str, client_id: str, now_ms: int) -> int:
        """The throttle time the rate so far earns, recording nothing."""
        if not self._quotas:
            return 0
        tags = self.tags(user, client_id)
        sensor = self._sensors.get(tags)
        bound = self.bound(tags)
        if sensor is None or bound is None:
            return 0
        throttle = sensor.rate.throttle_time_ms(bound, now_ms)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return throttle

    def record_throttle(self, user: str, client_id: str, throttle_ms: int, now_ms: int) -> None:
        """Counts a throttle time given (the ``throttle-time`` average)."""
        if self._quotas and throttle_ms > 0:
            sensor = self._sensor(self.tags(user, client_id), now_ms)
            sensor.throttle_total.record(throttle_ms, now_ms)
            sensor.throttle_count.record(1, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most one request may count without being throttled for certain: the quota
        over all but the current window (None: unlimited). Bounds a consumer's fetch."""
        if not self._quotas:
            return None
        bound = self.quota_of(user, client_id)
        if bound is None:
            return None
        return bound * (self.config.samples - 1) * self.config.window_ms / 1000

    # ---- sensors ----

    def _sensor(self, tags: Tags, now_ms: int) -> Sensor:
        sensors = self._sensors
        sensor = sensors.get(tags)
        if sensor is None:
            self._expire(now_ms, self.max_sensors - 1)
            sensor = Sensor(
                SampledRate(self.config), SampledRate(self.config), SampledRate(self.config)
            )
            sensors[tags] = sensor
        else:
            sensors.move_to_end(tags)
        sensor.last_record_ms = now_ms
        return sensor

    def _expire(self, now_ms: int, keep: int) -> None:
        """Drops the sensors not recorded to for ``expiry_ms``, and the least recently
        recorded ones past ``keep``."""
        sensors = self._sensors
        while sensors:
            tags, oldest = next(iter(sensors.items()))
            if len(sensors) <= keep and now_ms - oldest.last_record_ms < self.expiry_ms:
                break
            del sensors[tags]

    def sensors(self, now_ms: int) -> list[tuple[Tags, float, float]]:
        """(tags, rate, average throttle time) of each sensor kept."""
        self._expire(now_ms, self.max_sensors)
        return [
            (tags, s.rate.rate(now_ms), s.throttle_time_avg(now_ms))
            for tags, s in self._sensors.items()
        ]
