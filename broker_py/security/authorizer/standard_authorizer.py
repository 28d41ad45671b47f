"""The ACL authorizer, as Kafka's StandardAuthorizer decides.

A request's principal on a host may perform an operation on a resource when:

1. the principal is one of ``super.users``; otherwise
2. no DENY binding applies (its pattern covers the resource, its principal is the
   principal or ``User:*``, its host the host or ``*``, its operation the operation or
   ALL); and
3. an ALLOW binding applies, where ALLOW of READ, WRITE, DELETE or ALTER also allows
   DESCRIBE, and ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS; or, when no
   binding at all covers the resource, ``allow.everyone.if.no.acl.found`` is true.

Bindings are kept in ``<first log dir>/__logstore_metadata/acls.json``::

    {"version": 1, "acls": [[resource_type, name, pattern_type, principal, host,
                             operation, permission_type], ...]}

with each code's name (``"TOPIC"``, ``"LITERAL"``, ``"READ"``, ``"ALLOW"``); the file is
replaced whole after every change that stored or removed a binding. (A cluster keeps them
in ZooKeeper instead: :class:`~broker_py.zk.acl_authorizer.AclAuthorizer`,
which decides as this class does.)

Lookups are indexed: literal bindings by (type, name), ``*`` under the name ``*``, and
prefixed ones by (type, prefix) with the set of prefix lengths in use, so a decision
costs a few dict lookups whatever the number of bindings. Decisions are also cached
per (principal, host, operation, type, name), up to ``DECISION_CACHE_SIZE`` entries;
any change to the bindings clears the cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from broker_py.security.authorizer.acl_binding import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker_py.utils import metadata_file
from broker_py.utils.metadata_file import METADATA_DIR

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
DECISION_CACHE_SIZE = 65536

# Operations an ALLOW of another operation implies.
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.ALL,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.ALL}
    ),
}

# Kafka's supported operations per resource type (authorized_operations bit sets).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}


def _deny_covers(operation: AclOperation, acl: AclOperation) -> bool:
    return acl == operation or acl == AclOperation.ALL


def _allow_covers(operation: AclOperation, acl: AclOperation) -> bool:
    implied = _IMPLIED_BY.get(operation)
    if implied is not None:
        return acl in implied
    return acl == operation or acl == AclOperation.ALL


class StandardAuthorizer:
    def __init__(
        self,
        log_dir: str,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self._path = os.path.join(log_dir, METADATA_DIR, "acls.json")
        bindings = (
            metadata_file.load(
                self._path,
                lambda doc: dict.fromkeys(AclBinding.from_json(b) for b in doc.get("acls", ())),
            )
            or {}
        )
        self._setup(super_users, allow_everyone_if_no_acl_found, bindings)

    def _setup(
        self,
        super_users: Iterable[str],
        allow_everyone_if_no_acl_found: bool,
        bindings: dict[AclBinding, None],
    ) -> None:
        """The decision state over ``bindings`` (shared with the cluster's authorizer)."""
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        # Insertion-ordered, so DescribeAcls lists bindings in the order they were made.
        self._bindings: dict[AclBinding, None] = bindings
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        self._decisions: dict[tuple, bool] = {}
        self._index()

    def _index(self) -> None:
        self._by_type, self._literal, self._prefixed, self._decisions = {}, {}, {}, {}
        lengths: dict[ResourceType, set[int]] = {}
        for b in self._bindings:
            p = b.pattern
            self._by_type.setdefault(p.resource_type, []).append(b)
            if p.pattern_type == PatternType.LITERAL:
                self._literal.setdefault((p.resource_type, p.name), []).append(b)
            else:
                self._prefixed.setdefault((p.resource_type, p.name), []).append(b)
                lengths.setdefault(p.resource_type, set()).add(len(p.name))
        self._prefix_lengths = {t: sorted(ls) for t, ls in lengths.items()}

    def _covering(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every binding whose pattern covers the resource."""
        found = [
            *self._literal.get((resource_type, name), ()),
            *self._literal.get((resource_type, "*"), ()),
        ]
        for n in self._prefix_lengths.get(resource_type, ()):
            if n > len(name):
                break
            found.extend(self._prefixed.get((resource_type, name[:n]), ()))
        return found

    def _replace_pattern(
        self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]
    ) -> bool:
        """The bindings of ``pattern`` become ``entries``, where its first binding was (at
        the end if it had none); True if that changed anything (then it is re-indexed)."""
        new = [AclBinding(pattern, e) for e in entries]
        old = [b for b in self._bindings if b.pattern == pattern]
        if old == new:
            return False
        if not old:
            self._bindings.update(dict.fromkeys(new))
        else:
            updated: dict[AclBinding, None] = {}
            for b in self._bindings:
                if b.pattern != pattern:
                    updated[b] = None
                elif b is old[0]:
                    updated.update(dict.fromkeys(new))
            self._bindings = updated
        self._index()
        return True

    def _save(self) -> None:
        self._index()
        metadata_file.write(
            self._path, {"version": 1, "acls": [b.to_json() for b in self._bindings]}
        )

    @property
    def bindings(self) -> list[AclBinding]:
        return list(self._bindings)

    def create(self, bindings: Iterable[AclBinding]) -> None:
        """Stores the bindings (one already stored is kept once)."""
        added = False
        for b in bindings:
            if b not in self._bindings:
                self._bindings[b] = None
                added = True
        if added:
            self._save()

    def describe(self, filter_: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._bindings if filter_.matches(b)]

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Removes every binding each filter matches; per filter, the bindings it matched."""
        matched = [self.describe(f) for f in filters]
        removed = False
        for bindings in matched:
            for b in bindings:
                if b in self._bindings:
                    del self._bindings[b]
                    removed = True
        if removed:
            self._save()
        return matched

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        key = (principal, host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._decisions) >= DECISION_CACHE_SIZE:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _decide(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        covering = self._covering(resource_type, name)
        allowed = False
        for b in covering:
            e = b.entry
            if e.principal not in (principal, "User:*") or e.host not in (host, "*"):
                continue
            if e.permission_type == DENY:
                if _deny_covers(operation, e.operation):
                    return False
            elif _allow_covers(operation, e.operation):
                allowed = True
        return allowed or (not covering and self.allow_everyone_if_no_acl_found)

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may perform the operation on some resource of the type
        (Kafka's Authorizer.authorizeByResourceType): an ALLOW binding for it that no
        DENY binding's pattern covers."""
        if principal in self.super_users:
            return True
        bindings = self._by_type.get(resource_type, ())
        if not bindings:
            return self.allow_everyone_if_no_acl_found

        def applies(b: AclBinding) -> bool:
            return b.entry.principal in (principal, "User:*") and b.entry.host in (host, "*")

        denies = [
            b.pattern
            for b in bindings
            if b.entry.permission_type == DENY
            and applies(b)
            and _deny_covers(operation, b.entry.operation)
        ]
        for b in bindings:
            if (
                b.entry.permission_type != ALLOW
                or not applies(b)
                or not _allow_covers(operation, b.entry.operation)
            ):
                continue
            p = b.pattern
            covered = any(
                (d.pattern_type == PatternType.LITERAL and d.name == "*")
                or (d.pattern_type == PatternType.PREFIXED and p.name.startswith(d.name))
                or (
                    d.pattern_type == PatternType.LITERAL
                    and p.pattern_type == PatternType.LITERAL
                    and d.name == p.name
                )
                for d in denies
            )
            if not covered:
                return True
        return False

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The ``1 << code`` bit set of the type's operations the principal may perform."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits
