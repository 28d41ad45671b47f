"""Connection limits across the broker's listeners (Kafka's ``ConnectionQuotas``).

- ``max.connections``: connections open at once over every listener. At the limit a
  listener stops accepting (new connections wait in the kernel's backlog) until one
  closes, as Kafka's acceptor blocks. The limit in force is the lower of the key and the
  descriptors budgeted for connections (``fd_budget``), so idle sockets never take the
  descriptors storage needs.
- ``max.connections.per.ip`` and ``max.connections.per.ip.overrides`` (``host:count``
  pairs; 0 refuses a host): a connection over its address's limit is closed at once.
- ``connection_creation_rate`` client quotas of IP entities (KIP-612, given by
  ``ip_connection_rate``): each address's new connections are counted in a windowed rate
  (``quota.window.num`` x ``quota.window.size.seconds``); one that would take it over its
  quota is not counted and is held unserved for the throttle time (at most one window),
  then closed, as Kafka's acceptor does. At most ``MAX_IP_RATES`` addresses are tracked
  (the least recently seen dropped first).

Invariant: ``total`` is the number of connections accepted and not yet released, and
``per_ip`` holds the same connections by address (no zero entries).
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from broker_py.utils.sampled_rate import RateConfig, SampledRate

MAX_IP_RATES = 10_000


class ConnectionQuotas:
    def __init__(self, config, fd_connections: int) -> None:
        self.config = config
        self.fd_connections = fd_connections
        self.total = 0
        self.per_ip: dict[str, int] = {}
        # Called when a connection is released below the limit (acceptors paused at it).
        self._waiting: list[Callable[[], None]] = []
        # The connection_creation_rate an address is held to (None: none); set by the
        # broker from its client quotas.
        self.ip_connection_rate: Callable[[str], float | None] | None = None
        self._ip_rates: collections.OrderedDict[str, SampledRate] = collections.OrderedDict()

    @property
    def max_connections(self) -> int:
        return min(self.config["max.connections"], self.fd_connections)

    def limit_for(self, host: str) -> int:
        overrides = self.config["max.connections.per.ip.overrides"]
        return overrides.get(host, self.config["max.connections.per.ip"])

    def at_limit(self) -> bool:
        return self.total >= self.max_connections

    def refusal(self, host: str) -> str | None:
        """Why a new connection from ``host`` cannot be had (None: it can)."""
        limit = self.limit_for(host)
        if self.per_ip.get(host, 0) >= limit:
            key = (
                "max.connections.per.ip.overrides"
                if host in self.config["max.connections.per.ip.overrides"]
                else "max.connections.per.ip"
            )
            return (
                f"{host} has {self.per_ip.get(host, 0)} connections, "
                f"the most {key} allows ({limit})"
            )
        if self.at_limit():
            return (
                f"the broker has {self.total} connections, the most it takes ({self._limit_name()})"
            )
        return None

    def ip_throttle_ms(self, host: str, now_ms: int) -> int:
        """Counts a new connection from ``host`` against its connection_creation_rate:
        0 when it is within (counted), else how long to hold it before closing it (not
        counted)."""
        rate_of = self.ip_connection_rate
        bound = rate_of(host) if rate_of is not None else None
        if bound is None:
            return 0
        rates = self._ip_rates
        rate = rates.get(host)
        config = RateConfig(
            self.config["quota.window.num"], self.config["quota.window.size.seconds"] * 1000
        )
        if rate is None or rate.config != config:
            while len(rates) >= MAX_IP_RATES:
                rates.popitem(last=False)
            rate = rates[host] = SampledRate(config)
        rates.move_to_end(host)
        rate.record(1, now_ms)
        throttle = rate.throttle_time_ms(bound, now_ms)
        if throttle <= 0:
            return 0
        rate.record(-1, now_ms)
        return min(throttle, config.window_ms)

    def _limit_name(self) -> str:
        if self.config["max.connections"] <= self.fd_connections:
            return f"max.connections={self.config['max.connections']}"
        return f"{self.fd_connections}, the file descriptors set aside for connections"

    def acquire(self, host: str) -> None:
        self.total += 1
        self.per_ip[host] = self.per_ip.get(host, 0) + 1

    def release(self, host: str) -> None:
        self.total -= 1
        n = self.per_ip.get(host, 0) - 1
        if n > 0:
            self.per_ip[host] = n
        else:
            self.per_ip.pop(host, None)
        if self._waiting and not self.at_limit():
            waiting, self._waiting = self._waiting, []
            for resume in waiting:
                resume()

    def wait_for_room(self, resume: Callable[[], None]) -> None:
        """``resume`` is called once a connection is released below the limit."""
        if resume not in self._waiting:
            self._waiting.append(resume)

    def limits_changed(self) -> None:
        """After a dynamic change of the keys: paused acceptors look again."""
        if not self.at_limit():
            waiting, self._waiting = self._waiting, []
            for resume in waiting:
                resume()
