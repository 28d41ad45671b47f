"""Request and response schemas, one module per API family.

:func:`request_class` and :func:`response_class` map an :class:`ApiKey` to
its message classes; every api key in :class:`ApiKey` has both.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages import (
    acls,
    api_versions,
    client_quotas,
    configs,
    consumer_group,
    controller,
    delete_records,
    describe_cluster,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    find_coordinator,
    group,
    group_admin,
    list_offsets,
    log_dirs,
    metadata,
    offset_commit,
    offset_delete,
    offset_for_leader_epoch,
    partition_reassignments,
    produce,
    sasl,
    scram,
    share_fetch,
    share_group,
    share_group_offsets,
    share_state,
    telemetry,
    topic_admin,
    transaction_admin,
    transactions,
)
from logstore.protocol.schema import Message

__all__ = ["REQUESTS", "RESPONSES", "request_class", "response_class"]

_MODULES = (
    acls,
    api_versions,
    client_quotas,
    configs,
    consumer_group,
    controller,
    delete_records,
    describe_cluster,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    find_coordinator,
    group,
    group_admin,
    list_offsets,
    log_dirs,
    metadata,
    offset_commit,
    offset_delete,
    offset_for_leader_epoch,
    partition_reassignments,
    produce,
    sasl,
    scram,
    share_fetch,
    share_group,
    share_group_offsets,
    share_state,
    telemetry,
    topic_admin,
    transaction_admin,
    transactions,
)


def _collect(kind: str) -> dict[ApiKey, type[Message]]:
    found: dict[ApiKey, type[Message]] = {}
    for module in _MODULES:
        for name in module.__all__:
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, Message) and cls.KIND == kind:
                if cls.API_KEY in found:
                    raise RuntimeError(f"two {kind} classes for {cls.API_KEY.name}")
                found[cls.API_KEY] = cls
    missing = set(ApiKey) - set(found)
    if missing:
        raise RuntimeError(f"no {kind} schema for {sorted(k.name for k in missing)}")
    return found


REQUESTS: dict[ApiKey, type[Message]] = _collect("request")
RESPONSES: dict[ApiKey, type[Message]] = _collect("response")


def request_class(api_key: ApiKey) -> type[Message]:
    return REQUESTS[api_key]


def response_class(api_key: ApiKey) -> type[Message]:
    return RESPONSES[api_key]
