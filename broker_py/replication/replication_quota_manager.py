"""Replication throttles (KIP-73, Kafka's ``ReplicationQuotaManager``), sans-IO: the time
comes from an injected clock in milliseconds.

A broker has two: the leader's (``LeaderReplication``: bytes it sends followers, bound by
``leader.replication.throttled.rate``) and the follower's (``FollowerReplication``: bytes
its replica fetchers take, bound by ``follower.replication.throttled.rate``). Each
measures a byte rate over ``replication.quota.window.num`` windows of
``replication.quota.window.size.seconds`` (:class:`~broker_py.utils.sampled_rate.SampledRate`).

Which partitions it throttles comes from a topic config, ``leader.replication.throttled.replicas``
or ``follower.replication.throttled.replicas``, in the format::

    *                           every partition of the topic, on every broker
    <partition>:<broker>,...    the partitions listed with this broker's id

(blanks around items ignored; an empty value, or an item naming another broker, throttles
nothing here). The value is read through ``throttled_replicas(topic)`` each time and parsed
once per distinct value, so a topic config change or deletion applies at the next fetch.

The bound is read through ``bound()`` each time (a dynamic broker config); its default,
``2**63 - 1``, never throttles. The quota is exceeded when the measured rate is above the
bound (Kafka's ``Quota.acceptable`` of an upper bound). The caller records the bytes of
throttled partitions only, and holds back a throttled partition's data while the quota is
exceeded, unless the replica is in sync.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker_py.config.kafka_config import BrokerConfig
from broker_py.utils.sampled_rate import RateConfig, SampledRate

LEADER = "LeaderReplication"
FOLLOWER = "FollowerReplication"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
UNBOUNDED = float((1 << 63) - 1)


@dataclass(frozen=True)
class ThrottledPartitions:
    """The partitions of one topic a broker throttles: all of them, or ``partitions``."""

    every: bool
    partitions: frozenset[int]

    def __contains__(self, partition: object) -> bool:
        return self.every or partition in self.partitions


NONE = ThrottledPartitions(False, frozenset())
ALL = ThrottledPartitions(True, frozenset())


def parse_throttled_replicas(value: str, broker_id: int) -> ThrottledPartitions:
    """The partitions ``value`` (a throttled-replicas topic config) throttles on broker
    ``broker_id``. Items that are not ``<partition>:<broker>`` in decimal are skipped (the
    topic config validator refuses them before they are stored)."""
    items = [item.strip() for item in value.split(",")]
    if "".join(items) == "*":
        return ALL
    partitions = set()
    for item in items:
        partition, sep, broker = item.partition(":")
        partition, broker = partition.strip(), broker.strip()
        if sep and _digits(partition) and _digits(broker) and int(broker) == broker_id:
            partitions.add(int(partition))
    return ThrottledPartitions(False, frozenset(partitions)) if partitions else NONE


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


class ReplicationQuotaManager:
    def __init__(
        self,
        kind: str,
        broker_id: int,
        clock_ms: Callable[[], int],
        bound: Callable[[], float] = lambda: UNBOUNDED,
        throttled_replicas: Callable[[str], str] = lambda topic: "",
        config: RateConfig | None = None,
    ) -> None:
        self.kind = kind
        self.broker_id = broker_id
        self._clock_ms = clock_ms
        self._bound = bound
        self._throttled_replicas = throttled_replicas
        self._rate = SampledRate(config or RateConfig())
        # topic -> (the config value parsed, its partitions); only topics with a value.
        self._parsed: dict[str, tuple[str, ThrottledPartitions]] = {}

    @property
    def upper_bound(self) -> float:
        """Bytes per second allowed to throttled partitions."""
        return float(self._bound())

    def throttled(self, topic: str) -> ThrottledPartitions:
        """The partitions of ``topic`` throttled here, per the topic config as it is now."""
        value = self._throttled_replicas(topic)
        if not value:
            self._parsed.pop(topic, None)
            return NONE
        cached = self._parsed.get(topic)
        if cached is None or cached[0] != value:
            cached = (value, parse_throttled_replicas(value, self.broker_id))
            self._parsed[topic] = cached
        return cached[1]

    def is_throttled(self, tp: tuple[str, int]) -> bool:
        return tp[1] in self.throttled(tp[0])

    def is_quota_exceeded(self) -> bool:
        """Whether the byte rate of throttled partitions is above the bound now."""
        bound = self.upper_bound
        if bound >= UNBOUNDED:
            return False
        return self._rate.rate(self._clock_ms()) > bound

    def record(self, size: int) -> None:
        """``size`` bytes of throttled partitions were replicated now."""
        self._rate.record(size, self._clock_ms())

    def byte_rate(self) -> float:
        """Bytes per second of throttled partitions (the ``byte-rate`` metric)."""
        return self._rate.rate(self._clock_ms())


def from_config(
    kind: str,
    config: BrokerConfig,
    clock_ms: Callable[[], int],
    topic_configs: Mapping[str, Mapping[str, str]],
) -> ReplicationQuotaManager:
    """The ``kind`` throttle of the broker ``config`` describes (its rate read from it at
    each use, so a dynamic change applies at once); ``topic_configs``: each topic's
    overrides as this broker knows them now."""
    leader = kind == LEADER
    rate = LEADER_RATE if leader else FOLLOWER_RATE
    replicas = LEADER_REPLICAS if leader else FOLLOWER_REPLICAS
    return ReplicationQuotaManager(
        kind,
        config.broker_id,
        clock_ms,
        lambda: float(config[rate]),
        lambda topic: topic_configs.get(topic, {}).get(replicas, ""),
        RateConfig(
            config["replication.quota.window.num"],
            config["replication.quota.window.size.seconds"] * 1000,
        ),
    )


def unthrottled(kind: str, broker_id: int, clock_ms: Callable[[], int]) -> ReplicationQuotaManager:
    """A manager that throttles nothing (a broker alone, or before the broker wires its own)."""
    return ReplicationQuotaManager(kind, broker_id, clock_ms)
