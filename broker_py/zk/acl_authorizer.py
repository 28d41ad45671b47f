"""The ACL authorizer of a cluster (Kafka's ZooKeeper ``AclAuthorizer``): bindings kept in
ZooKeeper in Kafka's layout (:mod:`broker_py.zk.zk_acl_data`), decisions as
:class:`~broker_py.security.authorizer.standard_authorizer.StandardAuthorizer` makes them,
over a cache every broker keeps current through Kafka's ACL change notifications.

    /kafka-acl/<Type>/<name>, /kafka-acl-extended/prefixed/<Type>/<name>
        a pattern's ACLs
    /kafka-acl-changes/acl_changes_N, /kafka-acl-extended-changes/acl_changes_N
        "this pattern changed"

Invariants:
- Startup: Kafka's ACL paths exist, both change listeners run, then every pattern is read
  (the listeners first, so no change falls between the read and the notifications).
- The cache holds each pattern's znode as last read: all of them at startup, one pattern
  again on each notification naming it, and a pattern right after this broker wrote it.
- CreateAcls and DeleteAcls (on any broker) update each pattern they touch with Kafka's
  ``updateResourceAcls``: read the znode and its zkVersion, compute the new ACLs, then
  create it (absent), setData at that version, or delete it at that version (no ACL
  left); a BADVERSION or NODEEXISTS (another broker wrote meanwhile) reads again and
  retries, up to ``MAX_UPDATE_RETRIES`` times ``RETRY_BACKOFF_S`` (+ jitter) apart, as
  Kafka does. A change that changed something is followed by its change node.
- ZooKeeper I/O runs off the event loop (``asyncio.to_thread`` and the listeners'
  threads), each read or write under the authorizer's lock, and the cache changes only on
  the event loop, in the order of those operations (posted while holding the lock).
- A pattern whose znode does not decode is logged and left out of the cache at load
  and on notification; an update refuses to overwrite it (UNKNOWN_SERVER_ERROR).
- Resource names must be valid znode names (Kafka refuses a '/'): INVALID_REQUEST.
- ZooKeeper unreachable: the binding's result is UNKNOWN_SERVER_ERROR naming it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterable

from broker_py.security.authorizer.acl_binding import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker_py.security.authorizer.standard_authorizer import StandardAuthorizer
from broker_py.zk import zk_acl_data
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_acl_data import CHANGE_PREFIX, PATTERN_TYPES, ResourceZNode, change_store
from broker_py.zk.zk_change_notifications import ZkNodeChangeNotificationListener, call_on_loop
from broker_py.zk.zk_data import ZkDataError, is_valid_node_name
from broker_py.zk.zk_errors import ZooKeeperError, zk_failure
from logstore.protocol.errors import InvalidRequestError, KafkaError, UnknownServerError

log = logging.getLogger(__name__)

MAX_UPDATE_RETRIES = 10  # AclAuthorizer.maxUpdateRetries
RETRY_BACKOFF_S, RETRY_JITTER_S = 0.1, 0.05  # retryBackoffMs, retryBackoffJitterMs


class AclAuthorizer(StandardAuthorizer):
    def __init__(
        self,
        zk: KafkaZkClient,
        loop: asyncio.AbstractEventLoop,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self._setup(super_users, allow_everyone_if_no_acl_found, {})
        self._zk = zk
        self._loop = loop
        self._lock = threading.Lock()
        self._listeners = [
            ZkNodeChangeNotificationListener(
                zk, store.ROOT, CHANGE_PREFIX, self._notification_handler(store.decode)
            )
            for store in (zk_acl_data.LiteralAclChangeStore, zk_acl_data.ExtendedAclChangeStore)
        ]

    # ---- lifecycle ----

    def start(self) -> None:
        """Makes Kafka's ACL paths, starts the change listeners, then reads every pattern
        (blocking: at construction, on the event loop's thread)."""
        self._zk.ensure_paths(zk_acl_data.acl_paths())
        for listener in self._listeners:
            listener.start()
        with self._lock:
            loaded = self._read_all()
        self._bindings = {AclBinding(p, e): None for p, entries in loaded.items() for e in entries}
        self._index()
        log.info(
            "loaded %d ACLs of %d resource patterns from ZooKeeper",
            len(self._bindings),
            len(loaded),
        )

    def close(self) -> None:
        for listener in self._listeners:
            listener.close()

    def _read_all(self) -> dict[ResourcePattern, list[AccessControlEntry]]:
        """Kafka's ``loadAllAcls``: every pattern of both stores, by resource type."""
        patterns: list[ResourcePattern] = []
        for pattern_type in PATTERN_TYPES:
            root = zk_acl_data.acl_root(pattern_type)
            for type_name in self._zk.list_children(root):
                resource_type = zk_acl_data.resource_type_from_name(type_name)
                if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                    log.warning("ignoring ACLs of unknown resource type %s/%s", root, type_name)
                    continue
                names = self._zk.list_children(f"{root}/{type_name}")
                patterns.extend(ResourcePattern(resource_type, n, pattern_type) for n in names)
        out = {}
        for pattern, got in zip(
            patterns, self._zk.read_versioned_many(ResourceZNode.path(p) for p in patterns)
        ):
            if got is not None:
                try:
                    out[pattern] = ResourceZNode.decode(got[0], path=ResourceZNode.path(pattern))
                except ZkDataError as e:
                    log.warning("leaving out the ACLs of %s: %s", ResourceZNode.path(pattern), e)
        return out

    # ---- changes from other brokers ----

    def _notification_handler(
        self, decode: Callable[[bytes], ResourcePattern]
    ) -> Callable[[bytes], None]:
        def on_notification(data: bytes) -> None:
            try:
                pattern = decode(data)
            except ZkDataError as e:
                log.warning("skipping an ACL change notification: %s", e)
                return
            self._reload(pattern)

        return on_notification

    def _reload(self, pattern: ResourcePattern) -> None:
        """On a listener's thread: reads the pattern's znode again (Kafka's
        ``processAclChangeNotification``) and hands it to the event loop."""
        if not is_valid_node_name(pattern.name):
            log.warning("ignoring an ACL change notification for the invalid name %r", pattern.name)
            return
        path = ResourceZNode.path(pattern)
        with self._lock:
            got = self._zk.read_versioned(path)
            try:
                entries = [] if got is None else ResourceZNode.decode(got[0], path=path)
            except ZkDataError as e:
                log.warning("leaving out the ACLs of %s: %s", path, e)
                entries = []
            call_on_loop(self._loop, self._cache, pattern, entries)

    def _cache(self, pattern: ResourcePattern, entries: list[AccessControlEntry]) -> None:
        """On the event loop: the pattern's ACLs are now ``entries``."""
        if self._replace_pattern(pattern, entries):
            log.info(
                "ACLs of %s %r (%s): %d",
                pattern.resource_type.name,
                pattern.name,
                pattern.pattern_type.name,
                len(entries),
            )

    # ---- CreateAcls and DeleteAcls ----

    def create(self, bindings: Iterable[AclBinding]) -> Awaitable[list[KafkaError | None]]:
        """Adds the bindings in ZooKeeper, one pattern at a time; returns the writes to
        await, which give each binding's error (None: stored, or already there)."""
        bindings = list(bindings)
        results: list[KafkaError | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, b in enumerate(bindings):
            if not is_valid_node_name(b.pattern.name):
                results[i] = InvalidRequestError(
                    f"ACL binding contains invalid resource name: {b.pattern.name!r}"
                )
            else:
                by_pattern.setdefault(b.pattern, []).append(i)

        def write_all() -> list[KafkaError | None]:
            for pattern, indexes in by_pattern.items():
                added = [bindings[i].entry for i in indexes]
                error = self._guarded(
                    pattern,
                    lambda current, added=added: [
                        *current,
                        *(e for e in dict.fromkeys(added) if e not in current),
                    ],
                )
                for i in indexes:
                    results[i] = error
            return results

        return asyncio.to_thread(write_all)

    def delete(
        self, filters: list[AclBindingFilter]
    ) -> Awaitable[tuple[list[list[AclBinding]], dict[AclBinding, KafkaError]]]:
        """Removes every binding each filter matches, in ZooKeeper; returns the writes to
        await, which give per filter the bindings it matched, and the error of each one a
        failed write left in place. The patterns looked at are those in the cache and those
        a filter names exactly (Kafka's ``deleteAcls``): a binding another broker added that
        this one has not heard of yet is deleted only if a filter names its pattern."""
        candidates = dict.fromkeys(b.pattern for b in self._bindings)
        for f in filters:
            candidates.update(dict.fromkeys(_named_patterns(f)))
        patterns = [p for p in candidates if any(f.matches_pattern(p) for f in filters)]
        # What the cache says each pattern's deletion removes: reported, with the error,
        # when ZooKeeper fails before it could be read.
        by_pattern: dict[ResourcePattern, list[AclBinding]] = {}
        for b in self._bindings:
            by_pattern.setdefault(b.pattern, []).append(b)
        cached = {
            p: [b for b in by_pattern.get(p, ()) if any(f.matches(b) for f in filters)]
            for p in patterns
        }
        matched: list[list[AclBinding]] = [[] for _ in filters]
        errors: dict[AclBinding, KafkaError] = {}

        def delete_all():
            for pattern in patterns:
                if not is_valid_node_name(pattern.name):
                    continue
                removed: list[AclBinding] = list(cached[pattern])

                def without(
                    current: list[AccessControlEntry], pattern=pattern, removed=removed
                ) -> list[AccessControlEntry]:
                    bindings = [AclBinding(pattern, e) for e in current]
                    removed[:] = [b for b in bindings if any(f.matches(b) for f in filters)]
                    return [b.entry for b in bindings if b not in removed]

                error = self._guarded(pattern, without)
                for b in removed:
                    for i, f in enumerate(filters):
                        if f.matches(b):
                            matched[i].append(b)
                    if error is not None:
                        errors[b] = error
            return matched, errors

        return asyncio.to_thread(delete_all)

    def _guarded(
        self,
        pattern: ResourcePattern,
        update: Callable[[list[AccessControlEntry]], list[AccessControlEntry]],
    ) -> KafkaError | None:
        """:meth:`_update_pattern`, its failure as the error to answer."""
        try:
            self._update_pattern(pattern, update)
            return None
        except ZooKeeperError as e:
            return zk_failure(e)
        except KafkaError as e:
            return e
        except Exception as e:
            log.exception("updating the ACLs of %s failed", ResourceZNode.path(pattern))
            return UnknownServerError(f"updating the ACLs failed: {e!r}")

    def _update_pattern(
        self,
        pattern: ResourcePattern,
        update: Callable[[list[AccessControlEntry]], list[AccessControlEntry]],
    ) -> None:
        """Kafka's ``updateResourceAcls`` (see the module's docstring). On a worker thread."""
        path = ResourceZNode.path(pattern)
        for attempt in range(MAX_UPDATE_RETRIES + 1):
            with self._lock:
                got = self._zk.read_versioned(path)
                try:
                    current = [] if got is None else ResourceZNode.decode(got[0], path=path)
                except ZkDataError as e:
                    raise UnknownServerError(
                        f"the stored ACLs of {path} do not decode, not overwriting them: "
                        f"{e.problem}"
                    ) from None
                new = update(current)
                if new == current:
                    call_on_loop(self._loop, self._cache, pattern, current)
                    return
                if not new:
                    assert got is not None
                    written = self._zk.conditional_delete(path, got[1])
                elif got is None:
                    written = self._zk.create_if_absent(path, ResourceZNode.encode(new))
                else:
                    written = self._zk.conditional_set(path, ResourceZNode.encode(new), got[1])
                if written:
                    store = change_store(pattern.pattern_type)
                    self._zk.create_sequential(
                        f"{store.ROOT}/{CHANGE_PREFIX}", store.encode(pattern)
                    )
                    call_on_loop(self._loop, self._cache, pattern, new)
                    log.info("updated the ACLs of %s (%d)", path, len(new))
                    return
            log.debug(
                "the ACLs of %s changed meanwhile (attempt %d): reading them again",
                path,
                attempt + 1,
            )
            time.sleep(RETRY_BACKOFF_S + random.random() * RETRY_JITTER_S)
        raise UnknownServerError(
            f"failed to update the ACLs of {path} after trying {MAX_UPDATE_RETRIES} times"
        )


def _named_patterns(f: AclBindingFilter) -> list[ResourcePattern]:
    """The patterns a filter names exactly (Kafka's ``filterToResources`` of a filter that
    ``matchesAtMostOne``): a resource type, a name, and LITERAL, PREFIXED or ANY."""
    if f.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN) or f.name is None:
        return []
    if f.pattern_type in PATTERN_TYPES:
        return [ResourcePattern(f.resource_type, f.name, f.pattern_type)]
    if f.pattern_type == PatternType.ANY:
        return [ResourcePattern(f.resource_type, f.name, p) for p in PATTERN_TYPES]
    return []
