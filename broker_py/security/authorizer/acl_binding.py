"""ACL bindings: a resource pattern and the access control entry bound to it, with the
filters CreateAcls, DescribeAcls and DeleteAcls carry. Codes are Kafka's, as the wire
has them:

- ResourceType: UNKNOWN 0, ANY 1, TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5,
  DELEGATION_TOKEN 6, USER 7;
- PatternType: UNKNOWN 0, ANY 1, MATCH 2, LITERAL 3, PREFIXED 4;
- AclOperation: UNKNOWN 0, ANY 1, ALL 2, READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
  DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
  IDEMPOTENT_WRITE 12, CREATE_TOKENS 13, DESCRIBE_TOKENS 14;
- AclPermissionType: UNKNOWN 0, ANY 1, DENY 2, ALLOW 3.

A LITERAL pattern names one resource, or every resource of its type when the name is
``*``; a PREFIXED pattern names the resources whose names start with it. In a filter,
ANY matches every value, a null name/principal/host matches every one, and MATCH
matches the patterns that would apply to the named resource (literal same name,
literal ``*``, or a prefix of it). Principals are ``Type:name`` (``User:alice``);
``User:*`` and host ``*`` match everyone.
"""

from __future__ import annotations

import dataclasses
import enum

from logstore.protocol.errors import InvalidRequestError

WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _enum(cls, code: int):
    try:
        return cls(code)
    except ValueError:
        return cls.UNKNOWN


def parse_principal(principal: str) -> tuple[str, str]:
    """``Type:name`` as (type, name); InvalidRequestError when it has no type."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidRequestError(f"invalid principal {principal!r}: expected Type:name")
    return kind, name


@dataclasses.dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclasses.dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclasses.dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def create(
        cls,
        resource_type: int,
        name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission: int,
    ) -> AclBinding:
        """A binding CreateAcls may store; InvalidRequestError naming what is wrong."""
        rtype = _enum(ResourceType, resource_type)
        ptype = _enum(PatternType, pattern_type)
        op = _enum(AclOperation, operation)
        perm = _enum(AclPermissionType, permission)
        if rtype in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidRequestError(f"invalid resource type {resource_type}")
        if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidRequestError(
                f"invalid pattern type {pattern_type}: must be LITERAL or PREFIXED"
            )
        if op in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise InvalidRequestError(f"invalid operation {operation}")
        if perm in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
            raise InvalidRequestError(f"invalid permission type {permission}")
        if not name:
            raise InvalidRequestError("the resource name must not be empty")
        if rtype == ResourceType.CLUSTER and name != CLUSTER_NAME:
            raise InvalidRequestError(
                f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            )
        parse_principal(principal)
        if not host:
            raise InvalidRequestError("the host must not be empty")
        return cls(
            ResourcePattern(rtype, name, ptype), AccessControlEntry(principal, host, op, perm)
        )

    def to_json(self) -> list:
        p, e = self.pattern, self.entry
        return [
            p.resource_type.name,
            p.name,
            p.pattern_type.name,
            e.principal,
            e.host,
            e.operation.name,
            e.permission_type.name,
        ]

    @classmethod
    def from_json(cls, doc: list) -> AclBinding:
        rtype, name, ptype, principal, host, op, perm = doc
        return cls(
            ResourcePattern(ResourceType[rtype], name, PatternType[ptype]),
            AccessControlEntry(principal, host, AclOperation[op], AclPermissionType[perm]),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class AclBindingFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def create(
        cls,
        resource_type: int,
        name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclBindingFilter:
        """A filter DescribeAcls or DeleteAcls may apply; InvalidRequestError for a
        filter with an UNKNOWN part, which could match nothing."""
        f = cls(
            _enum(ResourceType, resource_type),
            name,
            _enum(PatternType, pattern_type),
            principal,
            host,
            _enum(AclOperation, operation),
            _enum(AclPermissionType, permission),
        )
        if AclOperation.UNKNOWN == f.operation or f.resource_type == ResourceType.UNKNOWN:
            raise InvalidRequestError("the filter has an unknown resource type or operation")
        if f.pattern_type == PatternType.UNKNOWN or f.permission_type == AclPermissionType.UNKNOWN:
            raise InvalidRequestError("the filter has an unknown pattern type or permission type")
        return f

    def matches(self, binding: AclBinding) -> bool:
        e = binding.entry
        if not self.matches_pattern(binding.pattern):
            return False
        if self.principal is not None and self.principal != e.principal:
            return False
        if self.host is not None and self.host != e.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != e.operation:
            return False
        return (
            self.permission_type == AclPermissionType.ANY
            or self.permission_type == e.permission_type
        )

    def matches_pattern(self, p: ResourcePattern) -> bool:
        """Whether the filter's resource part matches the pattern (Kafka's
        ``ResourcePatternFilter.matches``)."""
        if self.resource_type != ResourceType.ANY and self.resource_type != p.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not (
                (p.pattern_type == PatternType.LITERAL and p.name in (self.name, WILDCARD))
                or (p.pattern_type == PatternType.PREFIXED and self.name.startswith(p.name))
            ):
                return False
        else:
            if self.pattern_type != PatternType.ANY and self.pattern_type != p.pattern_type:
                return False
            if self.name is not None and self.name != p.name:
                return False
        return True
