"""The broker's client quotas (Kafka's ``QuotaFactory.QuotaManagers`` with the admin side
of ``ZkAdminManager``): what is stored, described, altered, and the managers that
enforce it.

Quotas are kept per entity path (:mod:`client_quota_entity`) in a
:class:`~broker_py.config.config_entity_store.ConfigEntityStore`: a broker alone's
``client-quotas.json``, a cluster's ZooKeeper (:mod:`broker_py.zk.zk_client_quota_store`).
Every change the store hands over (this broker's writes, another broker's through the
change notifications) updates the managers at once:

- ``produce`` (``producer_byte_rate``): bytes of Produce requests;
- ``fetch`` (``consumer_byte_rate``): bytes of consumers' Fetch responses;
- ``request`` (``request_percentage``): the event loop's time handling a client's
  requests, in percent of one second per second (Kafka counts a request handler thread's
  time; the broker's handlers share one event loop, so 100 is all of it);
- ``controller_mutation`` (``controller_mutation_rate``): partitions created or deleted
  by CreateTopics, CreatePartitions and DeleteTopics (a token bucket,
  :mod:`controller_mutation_quota`);
- :meth:`ClientQuotas.connection_rate` (``connection_creation_rate`` of IP entities): the
  connections per second an address may open, which the listeners' connection quotas
  enforce (:mod:`broker_py.network.connection_quotas`).

A quota's user is the principal's name (``User:alice`` is ``alice``, an unauthenticated
client ``ANONYMOUS``), as Kafka names it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any

from broker_py.config.config_entity_store import ConfigEntityStore
from broker_py.server.quota.client_quota_entity import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Default,
    QuotaEntity,
    QuotaFilter,
    alter,
    decode_values,
    encode_value,
    entity_of_path,
)
from broker_py.server.quota.client_quota_manager import ClientQuotaManager
from broker_py.server.quota.controller_mutation_quota import ControllerMutationQuotaManager
from broker_py.utils.sampled_rate import RateConfig

Ops = list[tuple[str, float, bool]]


def user_of(principal: str) -> str:
    """The quota user of a principal (``User:alice`` -> ``alice``)."""
    kind, sep, name = principal.partition(":")
    return name if sep else principal


def rate_config(config: Mapping[str, Any], prefix: str = "") -> RateConfig:
    return RateConfig(
        samples=int(config[f"{prefix}quota.window.num"]),
        window_ms=int(config[f"{prefix}quota.window.size.seconds"]) * 1000,
    )


class ClientQuotas:
    def __init__(self, store: ConfigEntityStore, config: Mapping[str, Any]) -> None:
        self._store = store
        rates = rate_config(config)
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, rates)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, rates)
        self.request = ClientQuotaManager(
            REQUEST_PERCENTAGE, rates, max_throttle_ms=rates.window_ms
        )
        self.controller_mutation = ControllerMutationQuotaManager(
            rate_config(config, "controller.")
        )
        self._entities: dict[QuotaEntity, dict[str, float]] = {}
        # connection_creation_rate per IP address (DEFAULT: every other address).
        self._ip_rates: dict[str | Default, float] = {}

    def start(self) -> None:
        self._store.start(self._changed)

    def connection_rate(self, host: str) -> float | None:
        """The connection_creation_rate ``host`` is held to (None: no quota)."""
        rates = self._ip_rates
        if not rates:
            return None
        got = rates.get(host)
        return got if got is not None else rates.get(DEFAULT)

    def managers(self) -> list[ClientQuotaManager]:
        return [self.produce, self.fetch, self.request]

    def _changed(self, path: str, configs: dict[str, str]) -> None:
        entity = entity_of_path(path)
        if entity is None:
            return
        values = decode_values(configs, entity.keys)
        if values:
            self._entities[entity] = values
        else:
            self._entities.pop(entity, None)
        if entity.ip is not None:
            rate = values.get(CONNECTION_CREATION_RATE)
            if rate is None:
                self._ip_rates.pop(entity.ip, None)
            else:
                self._ip_rates[entity.ip] = rate
            return
        for manager in self.managers():
            manager.update(entity, values.get(manager.key))
        self.controller_mutation.update(entity, values.get(CONTROLLER_MUTATION_RATE))

    # ---- admin ----

    def merge(self, path: str, configs: dict[str, str]) -> Awaitable[None] | None:
        """Adds ``configs`` (stored values of an entity path, a broker alone's) to what the
        store holds for that entity, the store's values winning; other entity paths and
        keys are left out."""
        entity = entity_of_path(path)
        if entity is None:
            return None
        keys = entity.keys
        local = {k: v for k, v in configs.items() if k in keys}
        return self._store.update(entity.path(), lambda shared: {**local, **shared}, False)

    def describe(self, quota_filter: QuotaFilter) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """The entities with quotas the filter matches, and their quotas."""
        return [
            (entity, dict(values))
            for entity, values in sorted(self._entities.items(), key=lambda e: e[0].path())
            if quota_filter.matches(entity)
        ]

    def alter(
        self, entries: Iterable[tuple[QuotaEntity, Ops]], validate_only: bool
    ) -> Awaitable[list[Exception | None]] | list[Exception | None]:
        """Applies each entry's ops to its entity's stored quotas, keeping every other key
        its node holds; the outcome of each (None, or what refused or failed it), at once
        in a broker alone, once the writes are done in a cluster."""
        outcomes: list[Exception | None | Awaitable[None]] = []
        for entity, ops in entries:

            def change(
                current: dict[str, str], ops: Ops = ops, keys: dict[str, bool] = entity.keys
            ) -> dict[str, str]:
                quotas = alter(decode_values(current, keys), ops, keys)
                out = {k: v for k, v in current.items() if k not in keys}
                out.update((k, encode_value(k, v)) for k, v in quotas.items())
                return out

            try:
                outcomes.append(self._store.update(entity.path(), change, validate_only))
            except Exception as e:  # refused (QuotaEntityError) or failed
                outcomes.append(e)
        if not any(inspect.isawaitable(o) for o in outcomes):
            return [o if isinstance(o, Exception) else None for o in outcomes]

        async def written() -> list[Exception | None]:
            out: list[Exception | None] = []
            for o in outcomes:
                if inspect.isawaitable(o):
                    try:
                        await o
                        out.append(None)
                    except Exception as e:
                        out.append(e)
                else:
                    out.append(o if isinstance(o, Exception) else None)
            return out

        return written()
