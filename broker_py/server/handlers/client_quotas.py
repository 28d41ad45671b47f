"""DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546, over the broker's
:class:`~broker_py.server.quota.client_quotas.ClientQuotas`.

Describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS
(CLUSTER_AUTHORIZATION_FAILED otherwise), as Kafka. A describe filter Kafka refuses gets
INVALID_REQUEST (UNSUPPORTED_VERSION for an entity type other than user, client-id and
ip) with Kafka's message and null entries; otherwise every entity with quotas it
matches. Each AlterClientQuotas entry is checked on its own (entity types and names,
keys, values: INVALID_REQUEST with Kafka's message) and answered in request order; an
entity named twice is refused the second time. ``validate_only`` checks without
writing. In a cluster the answer waits for the ZooKeeper writes (UNKNOWN_SERVER_ERROR
for one that fails).
"""

from __future__ import annotations

import inspect

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation
from broker_py.server.quota.client_quota_entity import (
    FilterComponent,
    QuotaEntity,
    QuotaEntityError,
    entity_of_wire,
    quota_filter,
)
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError
from logstore.protocol.messages.client_quotas import (
    AlterClientQuotasResponse,
    DescribeClientQuotasResponse,
)


def _entity_data(cls, pairs):
    return [cls(entity_type=kind, entity_name=name) for kind, name in pairs]


def handle_describe_client_quotas(apis, request, connection):
    body = request.body
    R = DescribeClientQuotasResponse

    def refused(code: ErrorCode, message: str):
        return R(throttle_time_ms=0, error_code=int(code), error_message=message, entries=None)

    if not auth_helper.authorize_cluster(apis, connection, AclOperation.DESCRIBE_CONFIGS):
        return refused(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "DESCRIBE_CONFIGS on the cluster is not authorized",
        )
    try:
        wanted = quota_filter(
            [FilterComponent(c.entity_type, c.match_type, c.match) for c in body.components],
            body.strict,
        )
    except QuotaEntityError as e:
        code = ErrorCode.UNSUPPORTED_VERSION if e.unsupported else ErrorCode.INVALID_REQUEST
        return refused(code, str(e))
    entries = [
        R.EntryData(
            entity=_entity_data(R.EntityData, entity.wire()),
            values=[R.ValueData(key=k, value=v) for k, v in sorted(values.items())],
        )
        for entity, values in apis.client_quotas.describe(wanted)
    ]
    return R(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


def handle_alter_client_quotas(apis, request, connection):
    body = request.body
    R = AlterClientQuotasResponse
    allowed = auth_helper.authorize_cluster(apis, connection, AclOperation.ALTER_CONFIGS)
    # Per entry: (code, message) decided before any write, or the index of its write.
    answers: list[tuple[ErrorCode, str | None] | int] = []
    writes: list[tuple[QuotaEntity, list[tuple[str, float, bool]]]] = []
    seen: set[QuotaEntity] = set()
    for entry in body.entries:
        if not allowed:
            answers.append(
                (
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    "ALTER_CONFIGS on the cluster is not authorized",
                )
            )
            continue
        try:
            entity = entity_of_wire((e.entity_type, e.entity_name) for e in entry.entity)
        except QuotaEntityError as e:
            answers.append((ErrorCode.INVALID_REQUEST, str(e)))
            continue
        if entity in seen:
            answers.append((ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity}"))
            continue
        seen.add(entity)
        answers.append(len(writes))
        writes.append((entity, [(op.key, op.value, op.remove) for op in entry.ops]))

    def response(outcomes: list[Exception | None]):
        results = []
        for entry, answer in zip(body.entries, answers):
            if isinstance(answer, int):
                failure = outcomes[answer]
                if failure is None:
                    answer = (ErrorCode.NONE, None)
                elif isinstance(failure, QuotaEntityError):
                    answer = (ErrorCode.INVALID_REQUEST, str(failure))
                elif isinstance(failure, KafkaError):
                    answer = (failure.errno, str(failure))
                else:
                    answer = (ErrorCode.UNKNOWN_SERVER_ERROR, str(failure))
            code, message = answer
            results.append(
                R.EntryData(
                    error_code=int(code),
                    error_message=message,
                    entity=[
                        R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                        for e in entry.entity
                    ],
                )
            )
        return R(throttle_time_ms=0, entries=results)

    outcomes = apis.client_quotas.alter(writes, body.validate_only) if writes else []
    if not inspect.isawaitable(outcomes):
        return response(outcomes)

    async def written():
        return response(await outcomes)

    return written()


HANDLERS = {
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
}
