"""What handlers ask of the authorizer about a request's connection (Kafka's AuthHelper).

With no authorizer (``authorizer.class.name`` unset) every check passes and the
authorized operations are every operation the resource type supports. A connection
of ``None`` (a request made inside the broker) is the broker itself and passes too.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker_py.security.authorizer import authorized_operations as ops
from broker_py.security.authorizer.acl_binding import CLUSTER_NAME, AclOperation, ResourceType
from logstore.protocol.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)

__all__ = [
    "AclOperation",
    "ResourceType",
    "authorize",
    "authorize_cluster",
    "authorized_operations",
    "denied",
    "ensure",
]

_ALL_OPERATIONS = {
    ResourceType.TOPIC: ops.TOPIC,
    ResourceType.GROUP: ops.GROUP,
    ResourceType.CLUSTER: ops.CLUSTER,
}


def authorize(
    broker, connection, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    if connection is None or (authorizer := broker.authorizer) is None:
        return True
    return authorizer.authorize(
        connection.principal, connection.host, operation, resource_type, name
    )


_REFUSALS = {
    ResourceType.TOPIC: TopicAuthorizationFailedError,
    ResourceType.GROUP: GroupAuthorizationFailedError,
    ResourceType.CLUSTER: ClusterAuthorizationFailedError,
    ResourceType.TRANSACTIONAL_ID: TransactionalIdAuthorizationFailedError,
}


def ensure(
    broker,
    connection,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str = CLUSTER_NAME,
) -> None:
    """Raises the resource type's authorization error (TOPIC_AUTHORIZATION_FAILED ...)
    unless the connection may perform the operation."""
    if not authorize(broker, connection, operation, resource_type, name):
        raise _REFUSALS[resource_type](
            f"{operation.name} on {resource_type.name.lower()} {name!r} is not authorized"
        )


def authorize_cluster(broker, connection, operation: AclOperation) -> bool:
    return authorize(broker, connection, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def denied(
    broker, connection, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> set[str]:
    """The names among ``names`` the connection may not perform ``operation`` on."""
    if connection is None or broker.authorizer is None:
        return set()
    return {n for n in set(names) if not authorize(broker, connection, operation, resource_type, n)}


def authorize_by_resource_type(
    broker, connection, operation: AclOperation, resource_type: ResourceType
) -> bool:
    if connection is None or (authorizer := broker.authorizer) is None:
        return True
    return authorizer.authorize_by_resource_type(
        connection.principal, connection.host, operation, resource_type
    )


def authorized_operations(
    broker, connection, resource_type: ResourceType, name: str, requested: bool
) -> int:
    """The response's authorized-operations field: the bit set, or OMITTED when the
    request did not ask for it."""
    if not requested:
        return ops.OMITTED
    if connection is None or (authorizer := broker.authorizer) is None:
        return _ALL_OPERATIONS[resource_type]
    return authorizer.authorized_operations(
        connection.principal, connection.host, resource_type, name
    )
