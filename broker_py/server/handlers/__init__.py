"""Request handlers, one module per API family.

A handler is ``handle(apis, request, connection)``: it takes what the broker offers
handlers (:class:`~broker_py.server.kafka_apis.KafkaApis`), the decoded
:class:`~logstore.protocol.frame.Request` and the connection it came on, and returns the
response message (or that response already encoded as a whole frame, ``bytes``),
``None`` (send nothing, as for Produce with acks=0), or, when it must wait (a Fetch
long poll, JoinGroup, SyncGroup), a coroutine that returns one. The network layer
runs the first kind inline and the second as a task, answering in request order
either way. Handlers touch no sockets, so tests drive them with decoded requests
(:func:`call` awaits whichever kind it gets). Each module exports ``HANDLERS``,
a mapping from :class:`ApiKey` to its handler; :func:`registry` merges them, and
ApiVersions advertises exactly the api keys found there. A handler that raises gets
the request answered with UNKNOWN_SERVER_ERROR (:mod:`broker_py.server.error_response`)
and the connection kept.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.frame import UnsupportedRequest
from logstore.protocol.messages.api_versions import ApiVersionsResponse

if TYPE_CHECKING:
    from broker_py.server.kafka_apis import KafkaApis


def _modules():
    from broker_py.server.handlers import (
        acls,
        api_versions,
        client_quotas,
        cluster,
        configs,
        consumer_group,
        controller,
        fetch,
        groups,
        list_offsets,
        log_dirs,
        metadata,
        produce,
        records,
        replicas,
        sasl,
        share_fetch,
        share_group,
        share_group_offsets,
        share_state,
        telemetry,
        topics,
        transactions,
    )

    return (
        acls,
        api_versions,
        client_quotas,
        cluster,
        configs,
        consumer_group,
        controller,
        fetch,
        groups,
        list_offsets,
        log_dirs,
        metadata,
        produce,
        records,
        replicas,
        sasl,
        share_fetch,
        share_group,
        share_group_offsets,
        share_state,
        telemetry,
        topics,
        transactions,
    )


# Answers drawn from the brokers the metadata cache knows: a cluster broker just started
# holds them back until the controller's first UpdateMetadata (MetadataCache.knows_cluster).
_CLUSTER_VIEWS = frozenset(
    {
        ApiKey.METADATA,
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        ApiKey.FIND_COORDINATOR,
        ApiKey.DESCRIBE_CLUSTER,
    }
)


def registry(apis: KafkaApis) -> dict:
    out = {}
    for module in _modules():
        for key, fn in module.HANDLERS.items():
            if key in out:
                raise RuntimeError(f"two handlers for {key.api_name}")
            out[key] = (
                _after_cluster_known(apis, fn)
                if key in _CLUSTER_VIEWS and apis.zk_support is not None
                else _bind(apis, fn)
            )
    return out


def _after_cluster_known(apis, fn):
    """``fn`` answering once the metadata cache knows the cluster, or after a third of
    ``request.timeout.ms`` with what it knows then."""
    cache = apis.metadata_cache
    timeout_s = apis.config["request.timeout.ms"] / 3000

    def handle(request, connection):
        if cache.knows_cluster:
            return fn(apis, request, connection)
        return _answer_later(request, connection)

    async def _answer_later(request, connection):
        await cache.wait_for_cluster(timeout_s)
        return await call(fn, apis, request, connection)

    return handle


def served_api_keys() -> list[ApiKey]:
    keys: list[ApiKey] = []
    for module in _modules():
        keys.extend(module.HANDLERS)
    return sorted(keys)


def _bind(apis, fn):
    return functools.partial(fn, apis)


async def call(fn, apis, request, connection):
    """Runs a handler of either kind to its response (for tests and internal callers)."""
    result = fn(apis, request, connection)
    if inspect.isawaitable(result):
        result = await result
    return result


def on_unsupported(apis: KafkaApis, event: UnsupportedRequest):
    """The answer to a request at a version we do not serve
    (:func:`~broker_py.server.handlers.api_versions.unsupported_version_answer`);
    None closes the connection."""
    from broker_py.server.handlers.api_versions import unsupported_version_answer

    return unsupported_version_answer(event)


__all__ = ["ApiVersionsResponse", "call", "on_unsupported", "registry", "served_api_keys"]
