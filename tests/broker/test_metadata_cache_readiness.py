"""A cluster broker just started knows no broker until the controller's first
UpdateMetadata; its Metadata, FindCoordinator and DescribeCluster answers wait for it
(an answer listing no broker makes librdkafka drop every broker it knew, its
coordinators included)."""

from __future__ import annotations

import asyncio
import types

from broker_py.controller.broker_info import BrokerInfo, EndPoint
from broker_py.controller.controller_request_batch import UpdateMetadataRequestData
from broker_py.controller.controller_store import BrokerRegistration
from broker_py.server.handlers import _after_cluster_known
from broker_py.server.metadata_cache import MetadataCache

ME = 2


def update(*broker_ids: int) -> UpdateMetadataRequestData:
    live = tuple(
        BrokerRegistration(
            BrokerInfo(b, [EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b, "PLAINTEXT")]), 10 + b
        )
        for b in broker_ids
    )
    return UpdateMetadataRequestData(1, 1, 11, (), {}, live)


def apis_with(cache: MetadataCache, request_timeout_ms: int = 30_000):
    return types.SimpleNamespace(
        metadata_cache=cache, config={"request.timeout.ms": request_timeout_ms}
    )


def answer(apis, request, connection):
    return sorted(apis.metadata_cache.alive_broker_ids())


def test_the_answer_waits_for_an_update_naming_this_broker():
    cache = MetadataCache(ME)
    handle = _after_cluster_known(apis_with(cache), answer)

    async def go():
        pending = asyncio.ensure_future(handle(None, None))
        await asyncio.sleep(0.01)
        cache.update_metadata(update(1, 3))  # a view from before this broker registered
        await asyncio.sleep(0.01)
        assert not pending.done()
        cache.update_metadata(update(1, 2, 3))
        return await asyncio.wait_for(pending, 5)

    assert asyncio.run(go()) == [1, 2, 3]
    assert cache.knows_cluster
    assert handle(None, None) == [1, 2, 3]  # known: answered at once, not as a coroutine


def test_without_an_update_the_answer_comes_after_a_third_of_the_request_timeout():
    cache = MetadataCache(ME)
    handle = _after_cluster_known(apis_with(cache, request_timeout_ms=150), answer)

    async def go():
        return await asyncio.wait_for(handle(None, None), 5)

    assert asyncio.run(go()) == []
    assert not cache.knows_cluster
