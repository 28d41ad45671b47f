"""Authorized operations: the ACL operations a client may perform on a resource, as
the 32-bit field Metadata, DescribeCluster and DescribeGroups return.

Bit ``1 << code`` is set for each allowed AclOperation code (READ 3, WRITE 4, CREATE 5,
DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
IDEMPOTENT_WRITE 12). With no authorizer, as Kafka without ``authorizer.class.name``,
every operation the resource type supports is allowed. A response field the client
did not ask for holds ``OMITTED`` (INT32_MIN).
"""

from __future__ import annotations

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

OMITTED = -(1 << 31)


def _bits(*codes: int) -> int:
    return sum(1 << c for c in codes)


# Kafka's AuthorizerUtils.supportedOperations per resource type.
TOPIC = _bits(READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS)
GROUP = _bits(READ, DESCRIBE, DELETE)
CLUSTER = _bits(
    CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE
)


def field(operations: int, requested: bool) -> int:
    """The response value: ``operations`` when the request asked for them."""
    return operations if requested else OMITTED
