"""ACL znodes as Kafka's ZooKeeper authorizer (``AclAuthorizer``, ``ZkData.ZkAclStore``)
keeps them, so Kafka-era tools (``kafka-acls.sh --authorizer-properties
zookeeper.connect=..``) read what logstore writes and the reverse. Pure: no client, no I/O.

    /kafka-acl/<Type>/<name>                     ACLs of a LITERAL pattern
    /kafka-acl-extended/prefixed/<Type>/<name>   ACLs of a PREFIXED pattern
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                              "operation":"Read","host":"*"}, ...]}
    /kafka-acl-changes/acl_changes_<n>           "<RESOURCE_TYPE>:<name>", UTF-8, not JSON
    /kafka-acl-extended-changes/acl_changes_<n>  {"version":1,"resourceType":"TOPIC","name":"t",
                                                  "patternType":"PREFIXED"}

``<Type>``, the permission type and the operation are written in Kafka's
``SecurityUtils`` Pascal case (``Topic``, ``TransactionalId``, ``Allow``,
``DescribeConfigs``); read in Pascal case or as its upper case (``TRANSACTIONALID``), as
Kafka reads them. The change nodes carry the Java enum names (``TRANSACTIONAL_ID``),
read case-insensitively. Resource names are the znode names as they are (not
sanitized), so a name must be a valid znode name (:func:`zk_data.is_valid_node_name`);
Kafka refuses a '/' in it.

Invariants: a pattern's znode exists only while it has ACLs (the last one removed
deletes it); its zkVersion orders the read-modify-write updates brokers make with
conditional setData; every change is followed by one change node, which tells every
broker to read the pattern's znode again.

Decoders raise only :class:`ZkDataError`; an entry with an unknown operation or
permission type is an error too (Kafka would keep it as UNKNOWN, which matches nothing).
"""

from __future__ import annotations

from collections.abc import Iterable

from broker_py.security.authorizer.acl_binding import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker_py.zk.zk_data import ZkDataError, _check, _dumps, _get, _object

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"

# ResourceType values a binding can have (AclEntry.ResourceTypes), in code order.
RESOURCE_TYPES = tuple(t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY))
PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)  # PatternType.isSpecific


def pascal_case(enum_name: str) -> str:
    """``SecurityUtils.toPascalCase``: ``TRANSACTIONAL_ID`` -> ``TransactionalId``."""
    return "".join(word.capitalize() for word in enum_name.split("_"))


def _by_security_name(cls) -> dict:
    names = {}
    for member in cls:
        names[pascal_case(member.name)] = member
        names[pascal_case(member.name).upper()] = member
    return names


_RESOURCE_TYPES = _by_security_name(ResourceType)
_OPERATIONS = _by_security_name(AclOperation)
_PERMISSIONS = _by_security_name(AclPermissionType)


def _security_name(names: dict, name: str, default):
    """``SecurityUtils.valueFromMap``: the Pascal-case name, else its upper case."""
    return names.get(name, names.get(name.upper(), default))


def resource_type_from_name(name: str) -> ResourceType:
    """A ``<Type>`` znode name as ``SecurityUtils.resourceType`` reads it (UNKNOWN if none)."""
    return _security_name(_RESOURCE_TYPES, name, ResourceType.UNKNOWN)


def acl_root(pattern_type: PatternType) -> str:
    """``ZkAclStore(patternType).aclPath``."""
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/prefixed"
    raise ValueError(f"no ACL store for pattern type {pattern_type.name}")


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{acl_root(pattern_type)}/{pascal_case(resource_type.name)}"


def changes_root(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES_PATH if pattern_type == PatternType.LITERAL else EXTENDED_CHANGES_PATH


def acl_paths() -> list[str]:
    """Every path Kafka's ``createAclPaths`` makes: the stores, their resource types and
    the two change roots."""
    paths = [resource_type_path(p, t) for p in PATTERN_TYPES for t in RESOURCE_TYPES]
    return paths + [LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH]


class ResourceZNode:
    """``/kafka-acl[-extended/prefixed]/<Type>/<name>``: the ACLs of one pattern."""

    @staticmethod
    def path(pattern: ResourcePattern) -> str:
        return f"{resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"

    @staticmethod
    def encode(entries: Iterable[AccessControlEntry]) -> bytes:
        return _dumps(
            {
                "version": 1,
                "acls": [
                    {
                        "principal": e.principal,
                        "permissionType": pascal_case(e.permission_type.name),
                        "operation": pascal_case(e.operation.name),
                        "host": e.host,
                    }
                    for e in entries
                ],
            }
        )

    @staticmethod
    def decode(data: bytes, *, path: str = "/kafka-acl/<type>/<name>") -> list[AccessControlEntry]:
        """The entries in stored order, each once. Empty data: no ACLs (``AclEntry.fromBytes``)."""
        if not data:
            return []
        out: dict[AccessControlEntry, None] = {}
        for item in _get(path, _object(path, data, 1), "acls", "list"):
            item = _check(path, "acl", item, "object")
            principal = _get(path, item, "principal", "str")
            kind, sep, name = principal.partition(":")
            if not (kind and sep and name):
                raise ZkDataError(path, f"principal {principal!r:.60} is not Type:name")
            permission = _security_name(
                _PERMISSIONS, _get(path, item, "permissionType", "str"), AclPermissionType.UNKNOWN
            )
            operation = _security_name(
                _OPERATIONS, _get(path, item, "operation", "str"), AclOperation.UNKNOWN
            )
            if permission in (AclPermissionType.UNKNOWN, AclPermissionType.ANY) or operation in (
                AclOperation.UNKNOWN,
                AclOperation.ANY,
            ):
                raise ZkDataError(path, f"unknown permission type or operation in {item!r:.100}")
            out[
                AccessControlEntry(
                    principal, _get(path, item, "host", "str"), operation, permission
                )
            ] = None
        return list(out)


class LiteralAclChangeStore:
    """``/kafka-acl-changes``: notifications of LITERAL patterns."""

    ROOT = LITERAL_CHANGES_PATH

    @staticmethod
    def encode(pattern: ResourcePattern) -> bytes:
        if pattern.pattern_type != PatternType.LITERAL:
            raise ValueError("only literal resource patterns go to /kafka-acl-changes")
        return f"{pattern.resource_type.name}:{pattern.name}".encode()

    @staticmethod
    def decode(data: bytes) -> ResourcePattern:
        path = f"{LITERAL_CHANGES_PATH}/{CHANGE_PREFIX}<n>"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ZkDataError(path, "not UTF-8") from None
        kind, sep, name = text.partition(":")
        resource_type = _enum_from_string(ResourceType, kind)
        if not sep or resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise ZkDataError(path, f"expected ResourceType:ResourceName, got {text!r:.80}")
        return ResourcePattern(resource_type, name, PatternType.LITERAL)


class ExtendedAclChangeStore:
    """``/kafka-acl-extended-changes``: notifications of the other patterns (PREFIXED)."""

    ROOT = EXTENDED_CHANGES_PATH

    @staticmethod
    def encode(pattern: ResourcePattern) -> bytes:
        if pattern.pattern_type == PatternType.LITERAL:
            raise ValueError("literal resource patterns go to /kafka-acl-changes")
        return _dumps(
            {
                "version": 1,
                "resourceType": pattern.resource_type.name,
                "name": pattern.name,
                "patternType": pattern.pattern_type.name,
            }
        )

    @staticmethod
    def decode(data: bytes) -> ResourcePattern:
        path = f"{EXTENDED_CHANGES_PATH}/{CHANGE_PREFIX}<n>"
        obj = _object(path, data, 1)
        resource_type = _enum_from_string(ResourceType, _get(path, obj, "resourceType", "str"))
        pattern_type = _enum_from_string(PatternType, _get(path, obj, "patternType", "str"))
        if (
            resource_type in (ResourceType.UNKNOWN, ResourceType.ANY)
            or pattern_type not in PATTERN_TYPES
        ):
            raise ZkDataError(path, f"unknown resource or pattern type in {obj!r:.100}")
        return ResourcePattern(resource_type, _get(path, obj, "name", "str"), pattern_type)


def change_store(
    pattern_type: PatternType,
) -> type[LiteralAclChangeStore] | type[ExtendedAclChangeStore]:
    return LiteralAclChangeStore if pattern_type == PatternType.LITERAL else ExtendedAclChangeStore


def _enum_from_string(cls, name: str):
    """Java's ``Enum.fromString``: the enum name, case-insensitively (UNKNOWN if none)."""
    try:
        return cls[name.upper()]
    except KeyError:
        return cls.UNKNOWN
