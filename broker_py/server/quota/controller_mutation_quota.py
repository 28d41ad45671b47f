"""Controller mutation quotas (KIP-599, Kafka's ``ControllerMutationQuotaManager``),
sans-IO: every call takes the time in milliseconds.

The ``controller_mutation_rate`` of a user / client id (same precedence and sensor tags
as the other client quotas, :mod:`client_quota_manager`) bounds the partitions its
CreateTopics, CreatePartitions and DeleteTopics requests create or delete, per second.
Each sensor is a token bucket (Kafka's ``TokenBucket``): it holds up to ``burst = rate x
samples x window seconds`` tokens (``controller.quota.window.num``,
``controller.quota.window.size.seconds``), refills at ``rate`` per second, starts full,
and a mutation of ``n`` partitions takes ``n`` tokens, going below zero if it must. While
the bucket is below zero the client is over its quota; the throttle time is how long the
refill takes back to zero: ``-tokens / rate x 1000`` ms.

A request is checked in one of two modes (:class:`MutationQuota`):
- strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic asked for
  while the bucket is below zero is refused (THROTTLING_QUOTA_EXCEEDED) and the response
  carries the throttle time then seen; others take their tokens;
- permissive (older versions): every topic is done and takes its tokens, and the
  response carries the throttle time after the last.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from broker_py.server.quota.client_quota_entity import QuotaEntity
from broker_py.server.quota.client_quota_manager import (
    INACTIVE_SENSOR_EXPIRY_MS,
    MAX_SENSORS,
    ClientQuotaManager,
    Tags,
)
from broker_py.utils.sampled_rate import RateConfig
from logstore.protocol.api_keys import ApiKey

# The first version of each mutating API whose quota is strict.
STRICT_SINCE = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}


@dataclass
class TokenBucket:
    tokens: float
    last_ms: int

    def refill(self, rate: float, burst: float, now_ms: int) -> float:
        self.tokens = min(burst, self.tokens + rate * max(0, now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms
        return self.tokens


@dataclass
class ControllerMutationQuotaManager:
    config: RateConfig = field(default_factory=RateConfig)
    expiry_ms: int = INACTIVE_SENSOR_EXPIRY_MS
    max_sensors: int = MAX_SENSORS
    _quotas: ClientQuotaManager = field(init=False)
    _buckets: collections.OrderedDict[Tags, TokenBucket] = field(
        default_factory=collections.OrderedDict, init=False
    )

    def __post_init__(self) -> None:
        self._quotas = ClientQuotaManager("controller_mutation_rate", self.config)

    @property
    def enabled(self) -> bool:
        return self._quotas.enabled

    def update(self, entity: QuotaEntity, rate: float | None) -> None:
        self._quotas.update(entity, rate)

    def _burst(self, rate: float) -> float:
        return rate * self.config.samples * self.config.window_ms / 1000

    def _bucket(self, tags: Tags, rate: float, now_ms: int) -> TokenBucket:
        buckets = self._buckets
        bucket = buckets.get(tags)
        if bucket is None:
            while buckets:
                oldest_tags, oldest = next(iter(buckets.items()))
                if len(buckets) < self.max_sensors and now_ms - oldest.last_ms < self.expiry_ms:
                    break
                del buckets[oldest_tags]
            bucket = buckets[tags] = TokenBucket(self._burst(rate), now_ms)
        else:
            buckets.move_to_end(tags)
        bucket.refill(rate, self._burst(rate), now_ms)
        return bucket

    def quota(self, user: str, client_id: str, strict: bool) -> MutationQuota:
        """The quota one request of ``user`` / ``client_id`` is held to."""
        return MutationQuota(self, user, client_id, strict)

    def over(self, user: str, client_id: str, now_ms: int) -> int:
        """0 while the bucket is not below zero, else its throttle time."""
        tags = self._quotas.tags(user, client_id)
        rate = self._quotas.bound(tags)
        if rate is None:
            return 0
        bucket = self._bucket(tags, rate, now_ms)
        return round(-bucket.tokens / rate * 1000) if bucket.tokens < 0 else 0

    def take(self, user: str, client_id: str, permits: float, now_ms: int) -> int:
        """Takes ``permits`` tokens; the throttle time after (0 while not below zero)."""
        tags = self._quotas.tags(user, client_id)
        rate = self._quotas.bound(tags)
        if rate is None:
            return 0
        bucket = self._bucket(tags, rate, now_ms)
        bucket.tokens = min(self._burst(rate), bucket.tokens - permits)
        return round(-bucket.tokens / rate * 1000) if bucket.tokens < 0 else 0


@dataclass
class MutationQuota:
    """One request's view of its client's controller mutation quota."""

    manager: ControllerMutationQuotaManager
    user: str
    client_id: str
    strict: bool
    throttle_time_ms: int = 0

    def record(self, permits: float, now_ms: int) -> bool:
        """Takes ``permits`` for one topic's mutation; False (nothing taken) when a strict
        quota is already exceeded: the topic must be refused."""
        if not self.manager.enabled:
            return True
        if self.strict:
            over = self.manager.over(self.user, self.client_id, now_ms)
            if over > 0:
                self.throttle_time_ms = over
                return False
        throttle = self.manager.take(self.user, self.client_id, permits, now_ms)
        if not self.strict:
            self.throttle_time_ms = throttle
        return True
