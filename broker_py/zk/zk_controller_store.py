"""The controller's store over ZooKeeper (:class:`ControllerStore` as Kafka's
``KafkaZkClient`` and ``AdminZkClient`` keep it), through :class:`KafkaZkClient`.

Every znode is read and written in :mod:`broker_py.zk.zk_data`'s formats (Kafka 3.9's):

- topic creation (``AdminZkClient.createTopicWithAssignment``): refused when the topic
  exists or collides with a topic once '.' and '_' are the same;
  then setOrCreate ``/config/topics/T``, then create ``/brokers/topics/T`` (NODEEXISTS:
  :class:`TopicExistsInStoreError`). Not atomic, as in Kafka: a config may outlive a failed
  creation, and the next creation overwrites it.
- config changes: setOrCreate ``/config/topics/T``, then a sequential
  ``/config/changes/config_change_N`` with entity path ``topics/T``.
- controller writes: every znode write behind ``check(/controller_epoch, epoch_zk_version)``
  (Kafka's ``wrapRequestWithControllerEpochCheck``), batched into pipelined multis with
  each write's outcome its own (:meth:`KafkaZkClient.controller_ops`). A partition state
  write is ``setData(state, version=partition_epoch)``; BADVERSION or NONODE give
  :class:`PartitionEpochMismatch` (the node's version, -1 when it is gone).
- reads leave out (and log) a node whose data does not decode: a broker registration, a
  topic, a partition state; a corrupt config, admin request or /controller reads as
  absent, as Kafka reads them.

Watches (:meth:`ZkControllerStore.watch`): children of ``/brokers/ids`` (BROKERS),
``/brokers/topics`` (TOPICS), ``/admin/delete_topics`` (TOPIC_DELETIONS) and
``/config/changes`` (TOPIC_CONFIG per new ``topics/T`` notification); data of
``/controller`` (CONTROLLER: created, changed, deleted), ``/admin/reassign_partitions``
(REASSIGNMENT) and ``/admin/preferred_replica_election`` (PREFERRED_ELECTION), both when
written, not when deleted; ``watch_topic``: data of ``/brokers/topics/T``
(PARTITION_MODIFICATIONS until the node is deleted). They are kazoo's ChildrenWatch /
DataWatch recipes, which re-arm themselves after a reconnect and after a new session.
Each recipe's first call (the state at registration) is not reported: the controller
reads everything after watching. After a reconnect a recipe reports a change when what
it watches differs from what it last saw. Callbacks run on kazoo's threads and only
call ``on_change``; config change notifications are read on the store's own thread
("zk-config-changes", as Kafka's ``ZkNodeChangeNotificationListener``), which also
purges notifications older than 15 minutes (by their ctime). Notifications present
when watching starts count as processed. A session expiry (LOST, then CONNECTED with a
new session) is reported as SESSION_EXPIRED once the new session exists.

Failures of ZooKeeper itself (connection loss, session expired) raise
:class:`ZooKeeperError`.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.broker_info import BrokerInfo
from broker_py.controller.controller_store import (
    BrokerRegistration,
    ControllerEpoch,
    PartitionEpochMismatch,
    StoreChange,
    StoreChangeKind,
    TopicExistsInStoreError,
)
from broker_py.controller.leader_and_isr import LeaderIsrAndControllerEpoch
from broker_py.controller.topic_assignment import TopicAssignment
from broker_py.utils.time import SYSTEM_TIME, Time
from broker_py.zk import zk_data
from broker_py.zk.kafka_zk_client import KafkaZkClient
from broker_py.zk.zk_data import (
    BrokerIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    TopicPartitionStateZNode,
    TopicZNode,
    ZkDataError,
)
from broker_py.zk.zk_errors import zk_failures
from broker_py.zk.zk_node_ops import CreateOp, DeleteOp, SetDataOp, first_error
from logstore.protocol.errors import UnknownTopicOrPartitionError

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener changeExpirationMs
_CHANGES = zk_data.ConfigEntityChangeNotificationZNode.PATH
_CHANGE_PREFIX = ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX
_TOPIC_ENTITY = "topics/"


def has_collision(a: str, b: str) -> bool:
    """Kafka's ``Topic.hasCollision``: the names are equal once '.' is '_'."""
    return a.replace(".", "_") == b.replace(".", "_")


def _sequence(name: str) -> int | None:
    if name.startswith(_CHANGE_PREFIX) and name[len(_CHANGE_PREFIX) :].isdigit():
        return int(name[len(_CHANGE_PREFIX) :])
    return None


class ZkControllerStore:
    """:class:`ControllerStore` over ZooKeeper. ``time`` dates the purge of config change
    notifications and registrations given without a timestamp."""

    def __init__(self, zk: KafkaZkClient, broker_id: int, *, time: Time = SYSTEM_TIME) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._time = time
        self._lock = threading.Lock()
        self._on_change: Callable[[StoreChange], None] | None = None
        self._generation = 0  # recipes of an older generation end at their next call
        self._watched_topics: set[str] = set()
        self._session_lost = False
        self._last_change = -1  # the last config change notification processed
        self._changes_queue: queue.SimpleQueue[int | None] | None = None

    # ---- membership and election ----

    @zk_failures
    def register_broker(self, info: BrokerInfo, wait_ms: int = 0) -> int:
        if info.timestamp_ms is None:
            info = dataclasses.replace(info, timestamp_ms=self._time.milliseconds())
        return self.zk.register_broker(info.id, BrokerIdZNode.encode(info), wait_ms)

    @zk_failures
    def live_brokers(self) -> dict[int, BrokerRegistration]:
        ids = self.zk.get_broker_ids()
        out = {}
        for broker_id, got in zip(ids, self.zk.get_data_many(BrokerIdZNode.path(i) for i in ids)):
            if got is None:
                continue  # its session ended between the listing and the read
            try:
                out[broker_id] = BrokerRegistration(
                    BrokerIdZNode.decode(broker_id, got[0]), got[1].czxid
                )
            except ZkDataError as e:
                log.warning(
                    "leaving out broker %d, whose registration does not decode: %s", broker_id, e
                )
        return out

    @zk_failures
    def controller_id(self) -> int | None:
        try:
            return self.zk.get_controller_id()
        except ZkDataError as e:
            log.warning("reading /controller as absent: %s", e)
            return None

    @zk_failures
    def elect_controller(self, broker_id: int, timestamp_ms: int) -> ControllerEpoch:
        return self.zk.register_controller_and_increment_epoch(broker_id, timestamp_ms)

    @zk_failures
    def resign_controller(self) -> None:
        self.zk.resign_controller()

    # ---- reads ----

    @zk_failures
    def all_topics(self) -> set[str]:
        return set(self.zk.get_children(zk_data.TopicsZNode.PATH))

    @zk_failures
    def topic_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        topics = list(topics)
        out = {}
        for topic, got in zip(topics, self.zk.get_data_many(TopicZNode.path(t) for t in topics)):
            if got is not None:
                try:
                    out[topic] = TopicZNode.decode(got[0], path=TopicZNode.path(topic))
                except ZkDataError as e:
                    log.warning("leaving out topic %s: %s", topic, e)
        return out

    @zk_failures
    def partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        partitions = list(partitions)
        paths = [TopicPartitionStateZNode.path(*tp) for tp in partitions]
        out = {}
        for tp, path, got in zip(partitions, paths, self.zk.get_data_many(paths)):
            if got is not None:
                try:
                    out[tp] = TopicPartitionStateZNode.decode(got[0], got[1].version, path=path)
                except ZkDataError as e:
                    log.warning("leaving out the state of %s-%d: %s", tp.topic, tp.partition, e)
        return out

    @zk_failures
    def topic_configs(self, topic: str) -> dict[str, str]:
        path = ConfigEntityZNode.path("topics", topic)
        got = self.zk.get_data(path)
        if got is None:
            return {}
        try:
            return ConfigEntityZNode.decode(got[0], path=path)
        except ZkDataError as e:
            log.warning("reading the config of topic %s as empty: %s", topic, e)
            return {}

    @zk_failures
    def topics_to_delete(self) -> set[str]:
        return set(self.zk.get_children(zk_data.DeleteTopicsZNode.PATH))

    @zk_failures
    def reassignment_request(self) -> dict[TopicPartition, list[int]]:
        got = self.zk.get_data(zk_data.ReassignPartitionsZNode.PATH)
        try:
            return {} if got is None else zk_data.ReassignPartitionsZNode.decode(got[0])
        except ZkDataError as e:
            log.warning("ignoring the partition reassignment: %s", e)
            return {}

    @zk_failures
    def preferred_election_request(self) -> set[TopicPartition]:
        got = self.zk.get_data(zk_data.PreferredReplicaElectionZNode.PATH)
        try:
            return set() if got is None else zk_data.PreferredReplicaElectionZNode.decode(got[0])
        except ZkDataError as e:
            log.warning("ignoring the preferred replica election: %s", e)
            return set()

    # ---- controller writes ----

    @zk_failures
    def controller_create_partition_states(
        self, epoch_zk_version: int, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> dict[TopicPartition, int | PartitionEpochMismatch]:
        """Creates ``/brokers/topics/T/partitions[/P]`` as needed, never the topic's node:
        a partition of a topic that is gone gets a mismatch of -1."""
        v = epoch_zk_version
        topics = sorted({tp.topic for tp in states})
        gone = set()
        parents = [[CreateOp(zk_data.TopicPartitionsZNode.path(t))] for t in topics]
        for topic, result in zip(topics, self.zk.controller_ops(v, parents)):
            if isinstance(error := first_error(result), NoNodeError):
                gone.add(topic)
            elif error is not None and not isinstance(error, NodeExistsError):
                raise error
        todo = [tp for tp in states if tp.topic not in gone]
        failed = [tp for tp in states if tp.topic in gone]
        created: list[TopicPartition] = []
        dir_exists: list[TopicPartition] = []

        def create_state(tp: TopicPartition) -> CreateOp:
            return CreateOp(
                TopicPartitionStateZNode.path(*tp), TopicPartitionStateZNode.encode(states[tp])
            )

        items = [[CreateOp(zk_data.TopicPartitionZNode.path(*tp)), create_state(tp)] for tp in todo]
        for tp, result in zip(todo, self.zk.controller_ops(v, items)):
            error = first_error(result)
            if error is None:
                created.append(tp)
            elif isinstance(result[0], NodeExistsError):
                dir_exists.append(tp)
            elif isinstance(error, (NodeExistsError, NoNodeError)):
                failed.append(tp)
            else:
                raise error
        for tp, result in zip(
            dir_exists, self.zk.controller_ops(v, [[create_state(tp)] for tp in dir_exists])
        ):
            error = first_error(result)
            if error is None:
                created.append(tp)
            elif isinstance(error, (NodeExistsError, NoNodeError)):
                failed.append(tp)
            else:
                raise error
        out: dict[TopicPartition, int | PartitionEpochMismatch] = dict.fromkeys(created, 0)
        out.update(self._mismatches(failed))
        return {tp: out[tp] for tp in states}

    def _mismatches(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, PartitionEpochMismatch]:
        """The current partition epochs of states a write missed (-1: no state)."""
        stats = self.zk.get_stat_many(TopicPartitionStateZNode.path(*tp) for tp in partitions)
        return {
            tp: PartitionEpochMismatch(-1 if stat is None else stat.version)
            for tp, stat in zip(partitions, stats)
        }

    @zk_failures
    def controller_update_partition_states(
        self, epoch_zk_version: int, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> dict[TopicPartition, int | PartitionEpochMismatch]:
        partitions = list(states)
        items = [
            [
                SetDataOp(
                    TopicPartitionStateZNode.path(*tp),
                    TopicPartitionStateZNode.encode(s),
                    s.partition_epoch,
                )
            ]
            for tp, s in states.items()
        ]
        out: dict[TopicPartition, int | PartitionEpochMismatch] = {}
        failed = []
        for tp, result in zip(partitions, self.zk.controller_ops(epoch_zk_version, items)):
            error = first_error(result)
            if error is None:
                out[tp] = result[0].version
            elif isinstance(error, (NoNodeError, BadVersionError)):
                failed.append(tp)
            else:
                raise error
        out.update(self._mismatches(failed))
        return {tp: out[tp] for tp in partitions}

    @zk_failures
    def controller_set_topic_assignment(
        self, epoch_zk_version: int, topic: str, assignment: TopicAssignment
    ) -> None:
        """UnknownTopicOrPartitionError if the topic's node is gone."""
        write = SetDataOp(TopicZNode.path(topic), TopicZNode.encode(assignment))
        (result,) = self.zk.controller_ops(epoch_zk_version, [[write]])
        if isinstance(error := first_error(result), NoNodeError):
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        if error is not None:
            raise error

    @zk_failures
    def controller_delete_topic(self, epoch_zk_version: int, topic: str) -> None:
        """Kafka's ``deleteTopicZNode`` (recursive), ``deleteTopicConfigs`` and
        ``deleteTopicDeletions``, every delete fenced; nodes already gone are skipped.
        Each partition goes as its state then its node in one item; a partition holding
        anything else (or missing its state) is deleted level by level, deepest first."""
        v = epoch_zk_version
        partitions = zk_data.TopicPartitionsZNode.path(topic)
        ids = self.zk.get_children(partitions)
        items = [[DeleteOp(f"{partitions}/{p}/state"), DeleteOp(f"{partitions}/{p}")] for p in ids]
        for p, result in zip(ids, self.zk.controller_ops(v, items)):
            if first_error(result) is not None:
                self._delete_recursive(v, f"{partitions}/{p}")
        self._delete_recursive(v, TopicZNode.path(topic))
        self._fenced_deletes(
            v, [ConfigEntityZNode.path("topics", topic), zk_data.DeleteTopicsTopicZNode.path(topic)]
        )

    def _delete_recursive(self, epoch_zk_version: int, path: str) -> None:
        for level in self.zk.get_subtree(path):
            self._fenced_deletes(epoch_zk_version, level)
        self._fenced_deletes(epoch_zk_version, [path])

    def _fenced_deletes(self, epoch_zk_version: int, paths: list[str]) -> None:
        for result in self.zk.controller_ops(epoch_zk_version, [[DeleteOp(p)] for p in paths]):
            error = first_error(result)
            if error is not None and not isinstance(error, NoNodeError):
                raise error

    @zk_failures
    def controller_delete_reassignment_request(self, epoch_zk_version: int) -> None:
        self._fenced_deletes(epoch_zk_version, [zk_data.ReassignPartitionsZNode.PATH])

    @zk_failures
    def controller_delete_preferred_election_request(self, epoch_zk_version: int) -> None:
        self._fenced_deletes(epoch_zk_version, [zk_data.PreferredReplicaElectionZNode.PATH])

    # ---- admin writes ----

    @zk_failures
    def create_topic(
        self, topic: str, assignment: TopicAssignment, configs: Mapping[str, str]
    ) -> None:
        if self.zk.get_stat_many([TopicZNode.path(topic)])[0] is not None:
            raise TopicExistsInStoreError(f"topic {topic!r} already exists")
        if "." in topic or "_" in topic:
            existing = self.all_topics()
            if topic in existing:
                raise TopicExistsInStoreError(f"topic {topic!r} already exists")
            if colliding := sorted(t for t in existing if has_collision(topic, t)):
                raise TopicExistsInStoreError(
                    f"topic {topic!r} collides with existing topics: {', '.join(colliding)}"
                )
        self.zk.set_or_create(
            ConfigEntityZNode.path("topics", topic), ConfigEntityZNode.encode(configs)
        )
        try:
            self.zk.create(TopicZNode.path(topic), TopicZNode.encode(assignment))
        except NodeExistsError:
            raise TopicExistsInStoreError(f"topic {topic!r} already exists") from None

    @zk_failures
    def set_topic_assignment(self, topic: str, assignment: TopicAssignment) -> None:
        """UnknownTopicOrPartitionError if the topic does not exist."""
        try:
            self.zk.set_data(TopicZNode.path(topic), TopicZNode.encode(assignment))
        except NoNodeError:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist") from None

    @zk_failures
    def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """UnknownTopicOrPartitionError if the topic does not exist (Kafka's
        ``AdminZkClient.changeTopicConfig``)."""
        if self.zk.get_stat_many([TopicZNode.path(topic)])[0] is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        self.zk.set_or_create(
            ConfigEntityZNode.path("topics", topic), ConfigEntityZNode.encode(configs)
        )
        self.zk.create(
            ConfigEntityChangeNotificationSequenceZNode.create_path(),
            ConfigEntityChangeNotificationSequenceZNode.encode(_TOPIC_ENTITY + topic),
            sequence=True,
        )

    @zk_failures
    def mark_topic_for_deletion(self, topic: str) -> None:
        """Idempotent; UnknownTopicOrPartitionError if the topic does not exist."""
        if self.zk.get_stat_many([TopicZNode.path(topic)])[0] is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        try:
            self.zk.create(zk_data.DeleteTopicsTopicZNode.path(topic), b"", makepath=True)
        except NodeExistsError:
            pass  # already marked (Kafka's callers swallow TopicAlreadyMarkedForDeletion)

    @zk_failures
    def request_reassignment(self, reassignment: Mapping[TopicPartition, list[int]]) -> None:
        self.zk.set_or_create(
            zk_data.ReassignPartitionsZNode.PATH,
            zk_data.ReassignPartitionsZNode.encode(reassignment),
        )

    @zk_failures
    def propagate_log_dir_event(self, broker_id: int) -> None:
        self.zk.create_sequential(
            zk_data.LogDirEventNotificationSequenceZNode.path(),
            zk_data.LogDirEventNotificationSequenceZNode.encode(broker_id),
        )

    @zk_failures
    def log_dir_event_notifications(self) -> dict[str, int]:
        names = sorted(self.zk.get_children(zk_data.LogDirEventNotificationZNode.PATH))
        paths = [f"{zk_data.LogDirEventNotificationZNode.PATH}/{n}" for n in names]
        out = {}
        for name, path, got in zip(names, paths, self.zk.get_data_many(paths)):
            if got is None:
                continue
            try:
                out[name] = zk_data.LogDirEventNotificationSequenceZNode.decode(got[0], path=path)
            except ZkDataError as e:
                log.warning("leaving out the log dir event %s: %s", path, e)
        return out

    @zk_failures
    def controller_delete_log_dir_event_notifications(
        self, epoch_zk_version: int, names: Iterable[str]
    ) -> None:
        parent = zk_data.LogDirEventNotificationZNode.PATH
        for name in names:
            try:
                self.zk.controller_transaction(
                    epoch_zk_version, lambda t, path=f"{parent}/{name}": t.delete(path)
                )
            except NoNodeError:
                continue

    @zk_failures
    def request_preferred_election(self, partitions: Iterable[TopicPartition]) -> None:
        data = zk_data.PreferredReplicaElectionZNode.encode(partitions)
        self.zk.set_or_create(zk_data.PreferredReplicaElectionZNode.PATH, data)

    # ---- changes ----

    @zk_failures
    def watch(self, on_change: Callable[[StoreChange], None]) -> None:
        """Arms the watches (see the module's docstring); a later call replaces them."""
        self.unwatch()
        with self._lock:
            self._generation += 1
            generation = self._generation
            self._on_change = on_change
            self._session_lost = False
            self._changes_queue = changes = queue.SimpleQueue()
        threading.Thread(
            target=self._process_config_changes,
            args=(generation, changes),
            name="zk-config-changes",
            daemon=True,
        ).start()
        self.zk.add_state_listener(self._state_changed)
        for path, kind in (
            (zk_data.BrokerIdsZNode.PATH, StoreChangeKind.BROKERS),
            (zk_data.TopicsZNode.PATH, StoreChangeKind.TOPICS),
            (zk_data.DeleteTopicsZNode.PATH, StoreChangeKind.TOPIC_DELETIONS),
            (zk_data.LogDirEventNotificationZNode.PATH, StoreChangeKind.LOG_DIR_EVENT),
        ):
            self.zk.children_watch(path, self._children_reporter(generation, kind))
        self.zk.children_watch(_CHANGES, self._changes_reporter(generation, changes))
        for path, kind, on_delete in (
            (zk_data.ReassignPartitionsZNode.PATH, StoreChangeKind.REASSIGNMENT, False),
            (zk_data.PreferredReplicaElectionZNode.PATH, StoreChangeKind.PREFERRED_ELECTION, False),
            (zk_data.ControllerZNode.PATH, StoreChangeKind.CONTROLLER, True),
        ):
            self.zk.data_watch(path, self._data_reporter(generation, StoreChange(kind), on_delete))

    def unwatch(self) -> None:
        """Stops reporting (the recipes end at their next call)."""
        with self._lock:
            self._generation += 1
            self._on_change = None
            self._watched_topics.clear()
            changes, self._changes_queue = self._changes_queue, None
        if changes is not None:
            changes.put(None)
        self.zk.remove_state_listener(self._state_changed)

    @zk_failures
    def watch_topic(self, topic: str) -> None:
        """Reports PARTITION_MODIFICATIONS(topic) on changes of ``/brokers/topics/<topic>``'s
        data, until the node is deleted (not reported); nothing if it does not exist."""
        with self._lock:
            if self._on_change is None:
                raise RuntimeError("watch_topic before watch")
            if topic in self._watched_topics:
                return
            self._watched_topics.add(topic)
            generation = self._generation
        self._watch_topic(generation, topic)

    def _watch_topic(self, generation: int, topic: str) -> None:
        report = self._data_reporter(
            generation, StoreChange(StoreChangeKind.PARTITION_MODIFICATIONS, topic), False, topic
        )
        self.zk.data_watch(TopicZNode.path(topic), report)

    def _report(self, generation: int, change: StoreChange) -> bool:
        """Hands ``change`` on; False once the watch it came from is stale."""
        with self._lock:
            on_change = self._on_change if generation == self._generation else None
        if on_change is None:
            return False
        try:
            on_change(change)
        except Exception:
            log.exception("reporting %s failed", change)
        return True

    def _children_reporter(
        self, generation: int, kind: StoreChangeKind
    ) -> Callable[[list[str]], bool | None]:
        first = [True]

        def on_children(children: list[str]) -> bool | None:
            if first[0]:
                first[0] = False
                return None
            return None if self._report(generation, StoreChange(kind)) else False

        return on_children

    def _data_reporter(
        self, generation: int, change: StoreChange, on_delete: bool, topic: str | None = None
    ) -> Callable:
        first = [True]

        def on_data(data: bytes | None, stat: Any, event: Any = None) -> bool | None:
            if stat is None and topic is not None:  # the topic is gone: so is its watch
                with self._lock:
                    if generation == self._generation:
                        self._watched_topics.discard(topic)
                return False
            if first[0]:
                first[0] = False
                return None
            if stat is None and not on_delete:
                return None if self._is_current(generation) else False
            return None if self._report(generation, change) else False

        return on_data

    def _is_current(self, generation: int) -> bool:
        with self._lock:
            return generation == self._generation

    def _changes_reporter(
        self, generation: int, changes: queue.SimpleQueue
    ) -> Callable[[list[str]], bool | None]:
        first = [True]

        def on_children(children: list[str]) -> bool | None:
            if first[0]:  # on the caller's thread, in watch(): what exists now counts as processed
                first[0] = False
                self._last_change = max(
                    (s for c in children if (s := _sequence(c)) is not None), default=-1
                )
            if not self._is_current(generation):
                return False
            changes.put(generation)
            return None

        return on_children

    def _process_config_changes(self, generation: int, changes: queue.SimpleQueue) -> None:
        while changes.get() is not None:
            while True:  # one pass covers every signal queued meanwhile
                try:
                    if changes.get_nowait() is None:
                        return
                except queue.Empty:
                    break
            try:
                self._process_notifications(generation)
            except (
                KazooException,
                KazooTimeoutError,
            ) as e:  # the session is down: the next change retries
                log.warning("processing %s: %r", _CHANGES, e)
            except Exception:
                log.exception("processing %s failed", _CHANGES)

    def _process_notifications(self, generation: int) -> None:
        """Kafka's ``ZkNodeChangeNotificationListener.processNotifications``: reports each
        notification after the last one processed, then purges the expired ones."""
        now = self._time.milliseconds()
        named = sorted(
            (seq, c) for c in self.zk.get_children(_CHANGES) if (seq := _sequence(c)) is not None
        )
        fresh = [(seq, f"{_CHANGES}/{c}") for seq, c in named if seq > self._last_change]
        for (seq, path), got in zip(fresh, self.zk.get_data_many(p for _, p in fresh)):
            if not self._is_current(generation):
                return
            self._last_change = seq
            if got is None:
                continue
            try:
                entity_path = ConfigEntityChangeNotificationSequenceZNode.decode(got[0], path=path)
            except ZkDataError as e:
                log.warning("skipping a config change notification: %s", e)
                continue
            if entity_path.startswith(_TOPIC_ENTITY):
                self._report(
                    generation,
                    StoreChange(StoreChangeKind.TOPIC_CONFIG, entity_path[len(_TOPIC_ENTITY) :]),
                )
        paths = [f"{_CHANGES}/{c}" for _, c in named]
        for path, stat in zip(paths, self.zk.get_stat_many(paths)):
            if stat is not None and now - stat.ctime > CHANGE_EXPIRATION_MS:
                log.debug("purging config change notification %s", path)
                self.zk.delete(path)

    def _state_changed(self, state: str) -> None:
        """On kazoo's connection thread: a LOST then CONNECTED is a new session."""
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            with self._lock:
                generation = self._generation
            self._report(generation, StoreChange(StoreChangeKind.SESSION_EXPIRED))
