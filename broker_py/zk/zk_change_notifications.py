"""Kafka's change notifications (``ZkNodeChangeNotificationListener``): how every broker
learns that a cluster-wide entity changed in ZooKeeper.

A writer first updates the entity's znode, then creates a persistent sequential node
under the notification root; its data names the entity, never its new value. Readers
watch the root's children, and for every notification newer than the last one they
processed read the entity's znode again. Roots in use (formats in :mod:`zk_data` and
:mod:`zk_acl_data`):

    /config/changes/config_change_<10 digits>
        {"version":2,"entity_path":"<type>/<name>"}
    /kafka-acl-changes/acl_changes_<10 digits>
        "<RESOURCE_TYPE>:<name>" (literal patterns)
    /kafka-acl-extended-changes/acl_changes_<10 digits>
        {"version":1,"resourceType":..,"name":..,"patternType":..}

Invariants:
- Notifications present when a listener starts count as processed: its owner reads the
  whole state after starting it, so nothing written before that read is missed and
  nothing after it goes unannounced.
- Notifications are handled one at a time, in sequence order, on the listener's own
  thread ("zk-changes-<root>"); kazoo's watch callback only signals that thread.
- A handler that fails with :class:`ZooKeeperError` leaves its notification unprocessed:
  the pass stops and is retried after ``retry_backoff_s`` (ZooKeeper is down, the
  entity will be read again). Any other failure (a notification that does not decode, a
  handler bug) is logged and the notification skipped, so one bad node never blocks the
  ones after it, and nothing here ever raises into the broker.
- After a pass, notifications older than ``CHANGE_EXPIRATION_MS`` (by ctime) are deleted,
  by every listener of the root (deleting a node already gone is fine).

:func:`call_on_loop` hands a result from such a thread to the event loop; an owner that
posts while holding its own lock, around the ZooKeeper read or write the result comes
from, sees results applied in the order ZooKeeper served them.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable

from broker_py.utils.time import SYSTEM_TIME, Time
from broker_py.zk import zk_data
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_data import ConfigEntityChangeNotificationSequenceZNode, ZkDataError
from broker_py.zk.zk_errors import ZooKeeperError

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener changeExpirationMs
RETRY_BACKOFF_S = 1.0


def call_on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: object) -> None:
    """Runs ``fn(*args)`` on ``loop`` (from any thread; at once when called on the loop's
    own thread). An exception of ``fn`` is logged; a closed loop drops the call."""

    def run() -> None:
        try:
            fn(*args)
        except Exception:
            log.exception(
                "applying a change from ZooKeeper failed (%s)", getattr(fn, "__qualname__", fn)
            )

    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        run()
        return
    try:
        loop.call_soon_threadsafe(run)
    except RuntimeError:  # the loop is closed: the broker is stopping
        log.debug("dropping a change from ZooKeeper: the event loop is closed")


def sequence_number(name: str, prefix: str) -> int | None:
    """The sequence number of child ``<prefix><digits>``, None for any other name."""
    if name.startswith(prefix) and name[len(prefix) :].isdigit():
        return int(name[len(prefix) :])
    return None


class ZkNodeChangeNotificationListener:
    """Calls ``handler(data)`` for each new notification under ``root`` (children named
    ``<prefix><sequence>``), see the module's docstring."""

    def __init__(
        self,
        zk: KafkaZkClient,
        root: str,
        prefix: str,
        handler: Callable[[bytes], None],
        *,
        time: Time = SYSTEM_TIME,
        expiration_ms: int = CHANGE_EXPIRATION_MS,
        retry_backoff_s: float = RETRY_BACKOFF_S,
    ) -> None:
        self.zk = zk
        self.root = root
        self.prefix = prefix
        self._handler = handler
        self._time = time
        self._expiration_ms = expiration_ms
        self._retry_backoff_s = retry_backoff_s
        self._signals: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: process; False: stop
        self._last = -1  # the last notification processed
        self._started = False
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, name=f"zk-changes-{root.strip('/')}", daemon=True
        )

    def start(self) -> None:
        """Arms the watch (the notifications there now count as processed) and starts the
        thread. Blocking; ZooKeeperError if ZooKeeper cannot be reached."""
        if self._started:
            return
        self._started = True
        self.zk.ensure_paths([self.root])
        first = [True]

        def on_children(children: list[str]) -> bool | None:
            if self._closed:
                return False
            if first[0]:  # on the caller's thread, within children_watch()
                first[0] = False
                self._last = max(
                    (s for c in children if (s := sequence_number(c, self.prefix)) is not None),
                    default=-1,
                )
                return None
            self._signals.put(True)
            return None

        try:
            self.zk.children_watch(self.root, on_children)
        except Exception as e:
            raise ZooKeeperError(f"watching {self.root}: {e!r}") from e
        self._thread.start()

    def close(self) -> None:
        """Stops the thread (the watch ends at its next call)."""
        self._closed = True
        self._signals.put(False)

    def _run(self) -> None:
        retry = False
        while True:
            try:
                signal = self._signals.get(timeout=self._retry_backoff_s if retry else None)
            except queue.Empty:
                signal = True
            while signal:  # one pass covers every signal queued meanwhile
                try:
                    signal = self._signals.get_nowait()
                except queue.Empty:
                    break
            if not signal or self._closed:
                return
            try:
                retry = not self._process()
            except ZooKeeperError as e:
                log.warning("processing %s: %s (retrying)", self.root, e)
                retry = True
            except Exception:
                log.exception("processing %s failed", self.root)
                retry = False

    def _process(self) -> bool:
        """One pass: handles each fresh notification in order, then purges the expired
        ones. False when ZooKeeper failed part way (the rest is left for a retry)."""
        now = self._time.milliseconds()
        named = sorted(
            (seq, c)
            for c in self.zk.list_children(self.root)
            if (seq := sequence_number(c, self.prefix)) is not None
        )
        fresh = [(seq, f"{self.root}/{c}") for seq, c in named if seq > self._last]
        for (seq, path), got in zip(fresh, self.zk.read_versioned_many(p for _, p in fresh)):
            if self._closed:
                return True
            if got is not None:
                try:
                    self._handler(got[0])
                except ZooKeeperError as e:
                    log.warning("notification %s: %s (retrying)", path, e)
                    return False
                except Exception:
                    log.exception("skipping notification %s, whose handling failed", path)
            self._last = seq
        paths = [f"{self.root}/{c}" for seq, c in named if seq <= self._last]
        for path, ctime in zip(paths, self.zk.ctimes(paths)):
            if ctime is not None and now - ctime > self._expiration_ms:
                log.debug("purging change notification %s", path)
                self.zk.delete_if_exists(path)
        return True


class ConfigChangeListener:
    """Kafka's ``DynamicConfigManager`` for this broker's stores: one listener of
    ``/config/changes`` that hands each notification's entity name to the handler of its
    type (``handler(sanitized_name)`` on the listener's thread; "users" and "brokers"
    here, topics are the controller store's). Entities of types without a handler, and
    a user's client quotas (``users/<user>/clients/<client>``), are ignored, except by a
    handler registered with ``nested=True``: it gets every notification of its type,
    nested names included, beside the type's own handler (client quotas share
    ``users`` with SCRAM credentials)."""

    def __init__(self, zk: KafkaZkClient, *, time: Time = SYSTEM_TIME) -> None:
        self._handlers: dict[str, Callable[[str], None]] = {}
        self._nested: dict[str, Callable[[str], None]] = {}
        self._listener = ZkNodeChangeNotificationListener(
            zk,
            zk_data.ConfigEntityChangeNotificationZNode.PATH,
            ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX,
            self._on_notification,
            time=time,
        )

    def register(
        self, entity_type: str, handler: Callable[[str], None], *, nested: bool = False
    ) -> None:
        """Registers the handler, then starts listening if not yet (blocking). The owner
        reads its entities after this returns."""
        (self._nested if nested else self._handlers)[entity_type] = handler
        self._listener.start()

    def close(self) -> None:
        self._listener.close()

    def _on_notification(self, data: bytes) -> None:
        try:
            entity_path = ConfigEntityChangeNotificationSequenceZNode.decode(data)
        except ZkDataError as e:
            log.warning("skipping a config change notification: %s", e)
            return
        entity_type, _, name = entity_path.partition("/")
        handler = self._handlers.get(entity_type)
        if handler is not None and name and "/" not in name:
            handler(name)
        nested = self._nested.get(entity_type)
        if nested is not None and name:
            nested(name)
