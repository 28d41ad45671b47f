"""The controller's store in memory (optionally persisted to one file): ZooKeeper's
semantics without ZooKeeper, for a single broker and as the unit tests' stand-in.

It keeps what :class:`broker_py.zk.zk_controller_store.ZkControllerStore` keeps in
znodes, with the same rules:

- A zxid counter grows on every change; a broker registration's epoch is the zxid that
  created it (the czxid), so a broker that registers again gets a higher epoch.
- ``/controller_epoch`` is (epoch, zk_version): created at (0, 0) on the first election,
  each election adds one to both. ``controller_*`` writes raise
  :class:`ControllerMovedError` and change nothing unless given the current zk_version.
- A partition state's epoch (its zkVersion) is 0 when created and grows by one per write;
  a write naming another epoch gets :class:`PartitionEpochMismatch` (-1: no state).
- Broker registrations and the controller are ephemeral: owned by a session, gone when it
  expires. Each store object is one session; :meth:`LocalControllerStore.session` opens
  another over the same data (another broker of a simulated cluster), :meth:`add_broker`
  registers a broker under a session of its own, :meth:`expire_broker` /
  :meth:`expire_session` end a session as ZooKeeper does.
- Watch callbacks run synchronously on the thread that made the change, after it (and
  after the lock is released), in every session that watches: the same
  :class:`StoreChange` kinds as ZooKeeper's watches give (a reassignment or preferred
  election request is reported when written, not when deleted; PARTITION_MODIFICATIONS
  only to sessions that ``watch_topic``-ed it, until the topic is deleted;
  SESSION_EXPIRED to the expired session only). Registering a watch reports nothing.

With ``path``, every change rewrites that file whole (:func:`metadata_file.write_text`,
the text put together from a cached JSON fragment per topic, so only the topics it
touched are encoded again) before it is visible, and the file is read on construction
(a file that does not parse raises MetadataFileError naming it). Its JSON, with every
znode's object in Kafka's format (:mod:`broker_py.zk.zk_data`)::

    {"version": 1, "zxid": <last zxid>,
     "controller_epoch": {"epoch": E, "zk_version": V} | null,
     "topics": {"<T>": <TopicZNode object>},
     "partition_states": {"<T>": {"<P>": {"zk_version": V,
                                          "state": <TopicPartitionStateZNode object>}}},
     "configs": {"<T>": {"<key>": "<value>"}},
     "topic_deletions": ["<T>", ...],
     "reassign_partitions": <ReassignPartitionsZNode object> | null,
     "preferred_replica_election": <PreferredReplicaElectionZNode object> | null}

Brokers and the controller are ephemeral and not kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.broker_info import BrokerInfo
from broker_py.controller.controller_store import (
    BrokerIdInUseError,
    BrokerRegistration,
    ControllerEpoch,
    ControllerMovedError,
    PartitionEpochMismatch,
    StoreChange,
    StoreChangeKind,
    TopicExistsInStoreError,
)
from broker_py.controller.leader_and_isr import LeaderIsrAndControllerEpoch
from broker_py.controller.topic_assignment import TopicAssignment
from broker_py.utils import metadata_file
from broker_py.utils.time import SYSTEM_TIME, Time
from broker_py.zk import zk_data
from logstore.protocol.errors import UnknownTopicOrPartitionError

__all__ = ["LocalControllerStore"]

_FORMAT_VERSION = 1


def _has_collision(a: str, b: str) -> bool:
    return a.replace(".", "_") == b.replace(".", "_")


def _copy_assignment(a: TopicAssignment) -> TopicAssignment:
    def copy(m: Mapping[int, list[int]]) -> dict[int, list[int]]:
        return {p: list(r) for p, r in m.items()}

    return TopicAssignment(a.topic_id, copy(a.partitions), copy(a.adding), copy(a.removing))


def _copy_state(
    state: LeaderIsrAndControllerEpoch, partition_epoch: int | None = None
) -> LeaderIsrAndControllerEpoch:
    epoch = state.partition_epoch if partition_epoch is None else partition_epoch
    return dataclasses.replace(state, isr=list(state.isr), partition_epoch=epoch)


def _znode_object(data: bytes) -> Any:
    return json.loads(data)


def _znode_bytes(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def _compact(obj: Any) -> str:
    """JSON text as ``metadata_file.write(..., compact=True)`` writes it."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def _assignment_object(a: TopicAssignment) -> Any:
    return _znode_object(zk_data.TopicZNode.encode(a))


def _states_object(states: Mapping[int, LeaderIsrAndControllerEpoch]) -> dict[str, Any]:
    return {
        str(p): {
            "zk_version": s.partition_epoch,
            "state": _znode_object(zk_data.TopicPartitionStateZNode.encode(s)),
        }
        for p, s in states.items()
    }


@dataclasses.dataclass
class _Data:
    """The persistent znodes (values are never changed in place, only replaced)."""

    zxid: int = 0
    controller_epoch: ControllerEpoch | None = None
    topics: dict[str, TopicAssignment] = dataclasses.field(default_factory=dict)
    states: dict[str, dict[int, LeaderIsrAndControllerEpoch]] = dataclasses.field(
        default_factory=dict
    )
    configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    deletions: dict[str, None] = dataclasses.field(default_factory=dict)  # ordered set
    reassignment: dict[TopicPartition, list[int]] | None = None
    preferred: dict[TopicPartition, None] | None = None

    def copy(self) -> _Data:
        return dataclasses.replace(
            self,
            topics=dict(self.topics),
            states={t: dict(s) for t, s in self.states.items()},
            configs=dict(self.configs),
            deletions=dict(self.deletions),
        )

    def to_doc(self) -> dict[str, Any]:
        """The file's JSON object (:meth:`to_text` writes it)."""
        return {
            **self._doc_without_topics(),
            "topics": {t: _assignment_object(a) for t, a in self.topics.items()},
            "partition_states": {t: _states_object(s) for t, s in self.states.items()},
        }

    def to_text(self, fragments: dict[tuple[str, str], tuple[Any, ...]]) -> str:
        """The file's text: ``to_doc()`` as ``metadata_file.write(..., compact=True)``
        writes it, put together from one JSON fragment per topic's assignment and per
        topic's partition states. ``fragments`` caches those by the identity of the values
        they were made of (values are replaced, never changed), so a write encodes only
        the topics a change touched; it is left holding only this document's."""
        fresh: dict[tuple[str, str], tuple[Any, ...]] = {}

        def assignment_text(topic: str, a: TopicAssignment) -> str:
            hit = fragments.get(("a", topic))
            if hit is None or hit[0] is not a:
                hit = (a, _compact(_assignment_object(a)))
            fresh[("a", topic)] = hit
            return str(hit[1])

        def states_text(topic: str, states: dict[int, LeaderIsrAndControllerEpoch]) -> str:
            keys, values = tuple(states), tuple(states.values())
            hit = fragments.get(("s", topic))
            if hit is None or hit[0] != keys or any(a is not b for a, b in zip(hit[1], values)):
                hit = (keys, values, _compact(_states_object(states)))
            fresh[("s", topic)] = hit
            return str(hit[2])

        def mapping(texts: dict[str, str]) -> str:
            return "{" + ",".join(f"{_compact(k)}:{v}" for k, v in sorted(texts.items())) + "}"

        parts = {k: _compact(v) for k, v in self._doc_without_topics().items()}
        parts["topics"] = mapping({t: assignment_text(t, a) for t, a in self.topics.items()})
        parts["partition_states"] = mapping({t: states_text(t, s) for t, s in self.states.items()})
        fragments.clear()
        fragments.update(fresh)
        return mapping(parts)

    def _doc_without_topics(self) -> dict[str, Any]:
        epoch = self.controller_epoch
        return {
            "version": _FORMAT_VERSION,
            "zxid": self.zxid,
            "controller_epoch": None
            if epoch is None
            else {"epoch": epoch.epoch, "zk_version": epoch.zk_version},
            "configs": self.configs,
            "topic_deletions": list(self.deletions),
            "reassign_partitions": None
            if self.reassignment is None
            else _znode_object(zk_data.ReassignPartitionsZNode.encode(self.reassignment)),
            "preferred_replica_election": None
            if self.preferred is None
            else _znode_object(zk_data.PreferredReplicaElectionZNode.encode(self.preferred)),
        }

    @staticmethod
    def from_doc(
        doc: dict[str, Any], fragments: dict[tuple[str, str], tuple[Any, ...]] | None = None
    ) -> _Data:
        """Raises KeyError / TypeError / ValueError (ZkDataError) on what is malformed.
        ``fragments`` is given each topic's fragments as the file has them (the
        :meth:`to_text` cache), so the first write encodes no topic again."""
        cache = fragments if fragments is not None else {}
        if doc["version"] != _FORMAT_VERSION:
            raise ValueError(f"unknown version {doc['version']!r}")
        data = _Data(zxid=_int(doc["zxid"], "zxid"))
        if (epoch := doc["controller_epoch"]) is not None:
            data.controller_epoch = ControllerEpoch(
                _int(epoch["epoch"], "epoch"), _int(epoch["zk_version"], "zk_version")
            )
        for topic, obj in doc["topics"].items():
            assignment = zk_data.TopicZNode.decode(
                _znode_bytes(obj), path=zk_data.TopicZNode.path(topic)
            )
            data.topics[topic] = assignment
            cache[("a", topic)] = (assignment, _compact(obj))
        for topic, states in doc["partition_states"].items():
            data.states[topic] = {}
            for p, entry in states.items():
                path = zk_data.TopicPartitionStateZNode.path(topic, int(p))
                version = _int(entry["zk_version"], f"{path} zk_version")
                state = zk_data.TopicPartitionStateZNode.decode(
                    _znode_bytes(entry["state"]), version, path=path
                )
                data.states[topic][int(p)] = state
            loaded = data.states[topic]
            cache[("s", topic)] = (tuple(loaded), tuple(loaded.values()), _compact(states))
        for topic, config in doc["configs"].items():
            path = zk_data.ConfigEntityZNode.path("topics", topic)
            data.configs[topic] = zk_data.ConfigEntityZNode.decode(
                _znode_bytes({"version": 1, "config": config}), path=path
            )
        data.deletions = dict.fromkeys(_str(t, "topic_deletions") for t in doc["topic_deletions"])
        if (obj := doc["reassign_partitions"]) is not None:
            data.reassignment = zk_data.ReassignPartitionsZNode.decode(_znode_bytes(obj))
        if (obj := doc["preferred_replica_election"]) is not None:
            data.preferred = dict.fromkeys(
                zk_data.PreferredReplicaElectionZNode.decode(_znode_bytes(obj))
            )
        return data


def _int(v: Any, what: str) -> int:
    if type(v) is not int:
        raise ValueError(f"{what}: {v!r:.40} is not an integer")
    return v


def _str(v: Any, what: str) -> str:
    if type(v) is not str:
        raise ValueError(f"{what}: {v!r:.40} is not a string")
    return v


class _Backend:
    """What every session over one store shares: the data, the ephemerals, the sessions."""

    def __init__(self, path: str | None, time: Time) -> None:
        self.lock = threading.RLock()
        self.path = path
        self.fragments: dict[tuple[str, str], tuple[Any, ...]] = {}  # see _Data.to_text
        self.time = time
        self.data = (
            metadata_file.load(path, lambda doc: _Data.from_doc(doc, self.fragments))
            if path
            else None
        ) or _Data()
        self.brokers: dict[
            int, tuple[BrokerRegistration, int]
        ] = {}  # id -> (registration, owner session)
        self.controller: tuple[int, int] | None = None  # (broker id, owner session)
        self.session_ids = itertools.count(1)
        self.sessions: list[LocalControllerStore] = []
        # Pending log dir failure notifications (name -> broker), not persisted: a new
        # controller learns offline replicas from its LeaderAndIsr responses.
        self.log_dir_events: dict[str, int] = {}
        self.log_dir_event_ids = itertools.count()

    def next_zxid(self) -> int:
        self.data.zxid += 1
        return self.data.zxid


_Change = tuple[StoreChange, "LocalControllerStore | None"]  # None: to every watching session


class LocalControllerStore:
    """:class:`ControllerStore` in memory; see the module's docstring. ``time`` stamps
    registrations given without a timestamp."""

    def __init__(
        self,
        broker_id: int,
        path: str | None = None,
        time: Time = SYSTEM_TIME,
        *,
        _backend: _Backend | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._b = _backend if _backend is not None else _Backend(path, time)
        with self._b.lock:
            self._session = next(self._b.session_ids)
            self._b.sessions.append(self)
        self._on_change: Callable[[StoreChange], None] | None = None
        self._watched_topics: set[str] = set()

    @property
    def path(self) -> str | None:
        return self._b.path

    # ---- test hooks: sessions and brokers of a simulated cluster ----

    def session(self, broker_id: int) -> LocalControllerStore:
        """Another session over the same data: the store another broker would have."""
        return LocalControllerStore(broker_id, _backend=self._b)

    def add_broker(self, info: BrokerInfo) -> int:
        """Registers another broker, under a session of its own; returns its epoch."""
        return self._register(info, next(self._b.session_ids))

    def expire_broker(self, broker_id: int) -> None:
        """Ends the session that registered ``broker_id`` (nothing if it is not registered)."""
        with self._b.lock:
            entry = self._b.brokers.get(broker_id)
        if entry is not None:
            self._expire(entry[1])

    def expire_session(self) -> None:
        """Ends this store's session: its registration and controllership go, and it goes
        on with a new session (reporting SESSION_EXPIRED if watching)."""
        self._expire(self._session)

    def _expire(self, session: int) -> None:
        with self._write(persist=False) as changes:
            gone = [i for i, (_, owner) in self._b.brokers.items() if owner == session]
            for broker_id in gone:
                del self._b.brokers[broker_id]
            owner = next((s for s in self._b.sessions if s._session == session), None)
            if owner is not None:
                owner._session = next(self._b.session_ids)
                changes.append((StoreChange(StoreChangeKind.SESSION_EXPIRED), owner))
            if gone:
                changes.append((StoreChange(StoreChangeKind.BROKERS), None))
            if self._b.controller is not None and self._b.controller[1] == session:
                self._b.controller = None
                changes.append((StoreChange(StoreChangeKind.CONTROLLER), None))

    # ---- writing and reporting ----

    @contextlib.contextmanager
    def _write(self, persist: bool = True) -> Iterator[list[_Change]]:
        """Runs a change under the lock, persists it (when ``persist`` and the store has a
        file) and reports the changes the body lists. A body or a persisting that raises
        leaves the data as it was and reports nothing."""
        changes: list[_Change] = []
        b = self._b
        with b.lock:
            before = b.data.copy() if b.path else None
            brokers, controller = dict(b.brokers), b.controller
            try:
                yield changes
                if b.path and persist:
                    metadata_file.write_text(b.path, b.data.to_text(b.fragments))
            except BaseException:
                if before is not None:
                    b.data = before
                b.brokers, b.controller = brokers, controller
                raise
            if any(c.kind == StoreChangeKind.TOPICS for c, _ in changes):
                for s in b.sessions:
                    s._watched_topics &= set(b.data.topics)
            targets = [
                (s, s._on_change, set(s._watched_topics))
                for s in b.sessions
                if s._on_change is not None
            ]
        for change, only in changes:
            for session, on_change, topics in targets:
                if only is not None and session is not only:
                    continue
                if (
                    change.kind == StoreChangeKind.PARTITION_MODIFICATIONS
                    and change.name not in topics
                ):
                    continue
                on_change(change)

    def _fence(self, epoch_zk_version: int) -> None:
        current = self._b.data.controller_epoch
        if current is None or current.zk_version != epoch_zk_version:
            raise ControllerMovedError(
                f"/controller_epoch is no longer at version {epoch_zk_version}: "
                "another controller exists"
            )

    # ---- membership and election ----

    def register_broker(self, info: BrokerInfo, wait_ms: int = 0) -> int:
        return self._register(info, self._session)

    def _register(self, info: BrokerInfo, session: int) -> int:
        if info.timestamp_ms is None:
            info = dataclasses.replace(info, timestamp_ms=self._b.time.milliseconds())
        with self._write() as changes:
            if (entry := self._b.brokers.get(info.id)) is not None:
                if entry[1] == session:
                    return entry[0].epoch  # a retry by the same session
                raise BrokerIdInUseError(
                    f"broker.id {info.id} is registered at {zk_data.BrokerIdZNode.path(info.id)} "
                    "by another live broker; two brokers cannot share a broker.id"
                )
            self._b.brokers[info.id] = (BrokerRegistration(info, self._b.next_zxid()), session)
            changes.append((StoreChange(StoreChangeKind.BROKERS), None))
            return self._b.data.zxid

    def live_brokers(self) -> dict[int, BrokerRegistration]:
        with self._b.lock:
            return {i: registration for i, (registration, _) in sorted(self._b.brokers.items())}

    def controller_id(self) -> int | None:
        with self._b.lock:
            return None if self._b.controller is None else self._b.controller[0]

    def elect_controller(self, broker_id: int, timestamp_ms: int) -> ControllerEpoch:
        with self._write() as changes:
            data = self._b.data
            if data.controller_epoch is None:
                self._b.next_zxid()
                data.controller_epoch = ControllerEpoch(0, 0)
            if self._b.controller is not None:
                raise ControllerMovedError(
                    f"broker {self._b.controller[0]} is the controller "
                    f"(epoch {data.controller_epoch.epoch})"
                )
            self._b.next_zxid()
            data.controller_epoch = ControllerEpoch(
                data.controller_epoch.epoch + 1, data.controller_epoch.zk_version + 1
            )
            self._b.controller = (broker_id, self._session)
            changes.append((StoreChange(StoreChangeKind.CONTROLLER), None))
            return data.controller_epoch

    def resign_controller(self) -> None:
        with self._write(persist=False) as changes:
            if self._b.controller is not None and self._b.controller[1] == self._session:
                self._b.controller = None
                self._b.next_zxid()
                changes.append((StoreChange(StoreChangeKind.CONTROLLER), None))

    # ---- reads ----

    def all_topics(self) -> set[str]:
        with self._b.lock:
            return set(self._b.data.topics)

    def topic_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        with self._b.lock:
            known = self._b.data.topics
            return {t: _copy_assignment(known[t]) for t in topics if t in known}

    def partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        with self._b.lock:
            states = self._b.data.states
            out = {}
            for tp in partitions:
                if (state := states.get(tp.topic, {}).get(tp.partition)) is not None:
                    out[tp] = _copy_state(state)
            return out

    def topic_configs(self, topic: str) -> dict[str, str]:
        with self._b.lock:
            return dict(self._b.data.configs.get(topic, {}))

    def topics_to_delete(self) -> set[str]:
        with self._b.lock:
            return set(self._b.data.deletions)

    def reassignment_request(self) -> dict[TopicPartition, list[int]]:
        with self._b.lock:
            return {tp: list(r) for tp, r in (self._b.data.reassignment or {}).items()}

    def preferred_election_request(self) -> set[TopicPartition]:
        with self._b.lock:
            return set(self._b.data.preferred or ())

    def log_dir_event_notifications(self) -> dict[str, int]:
        with self._b.lock:
            return dict(self._b.log_dir_events)

    # ---- controller writes ----

    def controller_create_partition_states(
        self, epoch_zk_version: int, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> dict[TopicPartition, int | PartitionEpochMismatch]:
        """A partition of a topic that is gone gets a mismatch of -1."""
        out: dict[TopicPartition, int | PartitionEpochMismatch] = {}
        with self._write():
            self._fence(epoch_zk_version)
            data = self._b.data
            for tp, state in states.items():
                if tp.topic not in data.topics:
                    out[tp] = PartitionEpochMismatch(-1)
                elif (existing := data.states.get(tp.topic, {}).get(tp.partition)) is not None:
                    out[tp] = PartitionEpochMismatch(existing.partition_epoch)
                else:
                    self._b.next_zxid()
                    data.states.setdefault(tp.topic, {})[tp.partition] = _copy_state(state, 0)
                    out[tp] = 0
        return out

    def controller_update_partition_states(
        self, epoch_zk_version: int, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> dict[TopicPartition, int | PartitionEpochMismatch]:
        out: dict[TopicPartition, int | PartitionEpochMismatch] = {}
        with self._write():
            self._fence(epoch_zk_version)
            data = self._b.data
            for tp, state in states.items():
                existing = data.states.get(tp.topic, {}).get(tp.partition)
                if existing is None:
                    out[tp] = PartitionEpochMismatch(-1)
                elif existing.partition_epoch != state.partition_epoch:
                    out[tp] = PartitionEpochMismatch(existing.partition_epoch)
                else:
                    self._b.next_zxid()
                    data.states[tp.topic][tp.partition] = _copy_state(
                        state, existing.partition_epoch + 1
                    )
                    out[tp] = existing.partition_epoch + 1
        return out

    def controller_set_topic_assignment(
        self, epoch_zk_version: int, topic: str, assignment: TopicAssignment
    ) -> None:
        """UnknownTopicOrPartitionError if the topic is gone."""
        with self._write() as changes:
            self._fence(epoch_zk_version)
            self._set_assignment(topic, assignment, changes)

    def _set_assignment(
        self, topic: str, assignment: TopicAssignment, changes: list[_Change]
    ) -> None:
        if topic not in self._b.data.topics:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        self._b.next_zxid()
        self._b.data.topics[topic] = _copy_assignment(assignment)
        changes.append((StoreChange(StoreChangeKind.PARTITION_MODIFICATIONS, topic), None))

    def controller_delete_topic(self, epoch_zk_version: int, topic: str) -> None:
        with self._write() as changes:
            self._fence(epoch_zk_version)
            data = self._b.data
            data.states.pop(topic, None)
            if data.topics.pop(topic, None) is not None:
                changes.append((StoreChange(StoreChangeKind.TOPICS), None))
            data.configs.pop(topic, None)
            if topic in data.deletions:
                del data.deletions[topic]
                changes.append((StoreChange(StoreChangeKind.TOPIC_DELETIONS), None))
            self._b.next_zxid()

    def controller_delete_reassignment_request(self, epoch_zk_version: int) -> None:
        with self._write():
            self._fence(epoch_zk_version)
            self._b.data.reassignment = None

    def controller_delete_preferred_election_request(self, epoch_zk_version: int) -> None:
        with self._write():
            self._fence(epoch_zk_version)
            self._b.data.preferred = None

    def controller_delete_log_dir_event_notifications(
        self, epoch_zk_version: int, names: Iterable[str]
    ) -> None:
        with self._write(persist=False):
            self._fence(epoch_zk_version)
            for name in names:
                self._b.log_dir_events.pop(name, None)

    # ---- admin writes ----

    def create_topic(
        self, topic: str, assignment: TopicAssignment, configs: Mapping[str, str]
    ) -> None:
        with self._write() as changes:
            data = self._b.data
            if topic in data.topics:
                raise TopicExistsInStoreError(f"topic {topic!r} already exists")
            if colliding := sorted(t for t in data.topics if _has_collision(topic, t)):
                raise TopicExistsInStoreError(
                    f"topic {topic!r} collides with existing topics: {', '.join(colliding)}"
                )
            data.configs[topic] = dict(configs)
            data.topics[topic] = _copy_assignment(assignment)
            self._b.next_zxid()
            changes.append((StoreChange(StoreChangeKind.TOPICS), None))

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment) -> None:
        """UnknownTopicOrPartitionError if the topic does not exist."""
        with self._write() as changes:
            self._set_assignment(topic, assignment, changes)

    def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """UnknownTopicOrPartitionError if the topic does not exist."""
        with self._write() as changes:
            if topic not in self._b.data.topics:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
            self._b.data.configs[topic] = dict(configs)
            self._b.next_zxid()
            changes.append((StoreChange(StoreChangeKind.TOPIC_CONFIG, topic), None))

    def mark_topic_for_deletion(self, topic: str) -> None:
        """Idempotent; UnknownTopicOrPartitionError if the topic does not exist."""
        with self._write() as changes:
            data = self._b.data
            if topic not in data.topics:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
            if topic not in data.deletions:
                data.deletions[topic] = None
                self._b.next_zxid()
                changes.append((StoreChange(StoreChangeKind.TOPIC_DELETIONS), None))

    def request_reassignment(self, reassignment: Mapping[TopicPartition, list[int]]) -> None:
        with self._write() as changes:
            self._b.data.reassignment = {
                TopicPartition(*tp): list(r) for tp, r in reassignment.items()
            }
            self._b.next_zxid()
            changes.append((StoreChange(StoreChangeKind.REASSIGNMENT), None))

    def request_preferred_election(self, partitions: Iterable[TopicPartition]) -> None:
        with self._write() as changes:
            self._b.data.preferred = dict.fromkeys(TopicPartition(*tp) for tp in partitions)
            self._b.next_zxid()
            changes.append((StoreChange(StoreChangeKind.PREFERRED_ELECTION), None))

    def propagate_log_dir_event(self, broker_id: int) -> None:
        with self._write(persist=False) as changes:
            name = f"log_dir_event_{next(self._b.log_dir_event_ids):010d}"
            self._b.log_dir_events[name] = broker_id
            changes.append((StoreChange(StoreChangeKind.LOG_DIR_EVENT), None))

    # ---- changes ----

    def watch(self, on_change: Callable[[StoreChange], None]) -> None:
        """Reports later changes to ``on_change``; a later call replaces it."""
        with self._b.lock:
            self._on_change = on_change
            self._watched_topics = set()

    def unwatch(self) -> None:
        with self._b.lock:
            self._on_change = None
            self._watched_topics = set()

    def watch_topic(self, topic: str) -> None:
        """Reports PARTITION_MODIFICATIONS(topic) until the topic is deleted; nothing if
        it does not exist."""
        with self._b.lock:
            if self._on_change is None:
                raise RuntimeError("watch_topic before watch")
            if topic in self._b.data.topics:
                self._watched_topics.add(topic)
