"""DescribeAcls, CreateAcls and DeleteAcls.

Without an authorizer each answers SECURITY_DISABLED, as Kafka does. Describing needs
DESCRIBE on the cluster, creating and deleting ALTER (CLUSTER_AUTHORIZATION_FAILED
otherwise). A creation or filter Kafka would refuse (an UNKNOWN or ANY code where a
binding needs a real one, a principal without a type, a CLUSTER resource not named
``kafka-cluster``) gets INVALID_REQUEST on its own line of the response; the others are
still carried out.

A broker alone stores bindings in its log dir at once; in a cluster they are written to
ZooKeeper (:mod:`broker_py.zk.acl_authorizer`) and the response waits
for those writes, each binding failing alone (INVALID_REQUEST for a resource name that
cannot be a znode's, UNKNOWN_SERVER_ERROR when ZooKeeper cannot be reached).
"""

from __future__ import annotations

import inspect

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourceType,
)
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import InvalidRequestError
from logstore.protocol.messages.acls import (
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeAclsResponse,
)

_NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _filter(f) -> AclBindingFilter:
    return AclBindingFilter.create(
        f.resource_type_filter,
        f.resource_name_filter,
        f.pattern_type_filter,
        f.principal_filter,
        f.host_filter,
        f.operation,
        f.permission_type,
    )


def _refused(apis, connection, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    if apis.authorizer is None:
        return ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER
    if not auth_helper.authorize_cluster(apis, connection, operation):
        return (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{operation.name} on the cluster is not authorized",
        )
    return None


def _visible(binding: AclBinding, version: int) -> bool:
    # Before v3 a client cannot read the USER resource type.
    return version >= 3 or binding.pattern.resource_type != ResourceType.USER


def handle_describe_acls(apis, request, connection):
    refused = _refused(apis, connection, AclOperation.DESCRIBE)
    if refused is not None:
        return DescribeAclsResponse(
            throttle_time_ms=0, error_code=int(refused[0]), error_message=refused[1], resources=[]
        )
    try:
        found = apis.authorizer.describe(_filter(request.body))
    except InvalidRequestError as e:
        return DescribeAclsResponse(
            throttle_time_ms=0, error_code=int(e.errno), error_message=str(e), resources=[]
        )
    resources = []
    by_pattern: dict = {}
    for b in found:
        if _visible(b, request.api_version):
            by_pattern.setdefault(b.pattern, []).append(b)
    for pattern, group in by_pattern.items():
        resources.append(
            DescribeAclsResponse.DescribeAclsResource(
                resource_type=int(pattern.resource_type),
                resource_name=pattern.name,
                pattern_type=int(pattern.pattern_type),
                acls=[
                    DescribeAclsResponse.AclDescription(
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=int(b.entry.operation),
                        permission_type=int(b.entry.permission_type),
                    )
                    for b in group
                ],
            )
        )
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, resources=resources
    )


def handle_create_acls(apis, request, connection):
    refused = _refused(apis, connection, AclOperation.ALTER)
    results = []
    valid: list[tuple[int, AclBinding]] = []
    for c in request.body.creations:
        if refused is not None:
            results.append(
                CreateAclsResponse.AclCreationResult(
                    error_code=int(refused[0]), error_message=refused[1]
                )
            )
            continue
        try:
            if request.api_version < 3 and c.resource_type == ResourceType.USER:
                raise InvalidRequestError("the USER resource type needs CreateAcls v3")
            binding = AclBinding.create(
                c.resource_type,
                c.resource_name,
                c.resource_pattern_type,
                c.principal,
                c.host,
                c.operation,
                c.permission_type,
            )
            valid.append((len(results), binding))
            results.append(CreateAclsResponse.AclCreationResult(error_code=0, error_message=None))
        except InvalidRequestError as e:
            results.append(
                CreateAclsResponse.AclCreationResult(error_code=int(e.errno), error_message=str(e))
            )
    response = CreateAclsResponse(throttle_time_ms=0, results=results)
    # A broker alone stores them at once (None); a cluster's authorizer returns the
    # ZooKeeper writes to await, with each binding's error.
    writes = apis.authorizer.create([b for _, b in valid]) if valid else None
    if writes is None:
        return response

    async def written():
        for (i, _), error in zip(valid, await writes, strict=True):
            if error is not None:
                results[i] = CreateAclsResponse.AclCreationResult(
                    error_code=int(error.errno), error_message=str(error)
                )
        return response

    return written()


def handle_delete_acls(apis, request, connection):
    refused = _refused(apis, connection, AclOperation.ALTER)
    results: list = [None] * len(request.body.filters)
    filters, positions = [], []
    for i, f in enumerate(request.body.filters):
        if refused is not None:
            results[i] = DeleteAclsResponse.DeleteAclsFilterResult(
                error_code=int(refused[0]), error_message=refused[1], matching_acls=[]
            )
            continue
        try:
            filters.append(_filter(f))
            positions.append(i)
        except InvalidRequestError as e:
            results[i] = DeleteAclsResponse.DeleteAclsFilterResult(
                error_code=int(e.errno), error_message=str(e), matching_acls=[]
            )
    response = DeleteAclsResponse(throttle_time_ms=0, filter_results=results)

    def fill(deleted: list[list[AclBinding]], errors: dict) -> None:
        for i, matched in zip(positions, deleted, strict=True):
            results[i] = DeleteAclsResponse.DeleteAclsFilterResult(
                error_code=0,
                error_message=None,
                matching_acls=[
                    DeleteAclsResponse.DeleteAclsMatchingAcl(
                        error_code=int(errors[b].errno) if b in errors else 0,
                        error_message=str(errors[b]) if b in errors else None,
                        resource_type=int(b.pattern.resource_type),
                        resource_name=b.pattern.name,
                        pattern_type=int(b.pattern.pattern_type),
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=int(b.entry.operation),
                        permission_type=int(b.entry.permission_type),
                    )
                    for b in matched
                    if _visible(b, request.api_version)
                ],
            )

    if not filters:
        return response
    # A broker alone deletes at once (the matches); a cluster's authorizer returns the
    # ZooKeeper writes to await, with the matches and the error of each left in place.
    outcome = apis.authorizer.delete(filters)
    if not inspect.isawaitable(outcome):
        fill(outcome, {})
        return response

    async def deleted():
        fill(*await outcome)
        return response

    return deleted()


HANDLERS = {
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
}
