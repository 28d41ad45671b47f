"""The cluster's znodes in Apache Kafka 3.9's formats (``kafka.zk.ZkData``), so Kafka-era tools
read what logstore writes and the reverse. Pure: no client, no I/O.

Paths are absolute and chroot-free; the client applies the chroot of ``zookeeper.connect``
(:func:`split_chroot`). One class per znode, named as Kafka's object: ``PATH`` or
``path(...)``, and for nodes with data ``encode(...) -> bytes`` and ``decode(bytes)``.

/controller                   ephemeral {"version":2,"brokerid":N,"timestamp":"<ms>",
                              "kraftControllerEpoch":-1}
/controller_epoch             the epoch as a bare decimal integer
/brokers/ids/<id>             ephemeral {"features":{},"listener_security_protocol_map":{"L":"P"},
                              "endpoints":["L://host:port"],"rack":R,"jmx_port":-1,"port":P,
                              "host":H,"version":5,"timestamp":"<ms>"}; rack only when set;
                              host/port those of the first PLAINTEXT endpoint, else null/-1
/brokers/topics/<T>           {"partitions":{"0":[1,2]},"topic_id":"<uuid>","adding_replicas":{},
                              "removing_replicas":{},"version":3}; topic_id absent on pre-2.8 topics
/brokers/topics/<T>/partitions/<P>/state  {"controller_epoch":C,"leader":L,
                              "version":1,"leader_recovery_state":1,"leader_epoch":E,"isr":[..]},
                              the recovery state only while RECOVERING; the node's zkVersion is
                              the partition epoch
/config/<type>/<name>         {"version":1,"config":{"k":"v"}}, string values, names sanitized
                              (:func:`sanitize`); <name> of a cluster-wide default is "<default>"
/config/changes/config_change_N  sequential {"version":2,"entity_path":"<type>/<name>"}
/admin/delete_topics/<T>      empty
/admin/reassign_partitions    {"version":1,"partitions":[{"topic":T,"partition":P,"replicas":[..]}]}
/admin/preferred_replica_election, /isr_change_notification/isr_change_N
                              {"version":1,"partitions":[{"topic":T,"partition":P}]}
/cluster/id                   {"version":"1","id":"<uuid>"} (the version is a string)
/latest_producer_id_block     {"version":1,"broker":N,"block_start":"<first>","block_end":"<last>"};
                              created empty: no block claimed yet
/consumers/<G>/offsets/<T>/<P>  an OffsetCommit v0 offset as a bare decimal integer (group and
                              topic names as they are)

A ``<uuid>`` is Kafka's ``Uuid.toString``: the 16 bytes in URL-safe base64 without padding.

Invariants: the zkVersion of /controller_epoch fences the controller (its every write is a multi
that checks it); a broker's epoch is the czxid of its /brokers/ids node; a partition's epoch is
the zkVersion of its state node; a replica list is in preference order, its head the preferred
leader; leader -1 is none, -2 a topic being deleted.

Encoding is byte-for-byte Kafka's: compact JSON as Jackson writes it (control characters and
characters beyond the basic plane as uppercase ``\\uXXXX``, the rest as UTF-8), keys in the
iteration order of the Scala or Java map Kafka hands to Jackson. Fixed keys come in the order
above; maps keyed by data follow their collection, reproduced here: partition maps are a Scala
``mutable.HashMap``, a config a ``java.util.Properties`` filled in the given order (bins of 8+
colliding keys, which Java treeifies, aside), the listener map a Scala immutable ``Map``,
features a ``java.util.HashMap``. Partition lists keep the caller's order (Kafka writes a set).

Decoders take Kafka's types (an int is a JSON integer of 32 bits; a long written as a string a
decimal string), ignore unknown fields, refuse unknown versions (broker registrations excepted:
Kafka reads them at any version >= 1) and raise only :class:`ZkDataError`.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker_py.common.topic_partition import TopicPartition
from broker_py.controller.broker_info import BrokerInfo, EndPoint
from broker_py.controller.leader_and_isr import (
    RECOVERED,
    RECOVERING,
    LeaderIsrAndControllerEpoch,
)
from broker_py.controller.topic_assignment import TopicAssignment

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")  # ConfigType.ALL
DEFAULT_ENTITY = "<default>"  # e.g. /config/brokers/<default>


class ZkDataError(ValueError):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


# ---- writing: Jackson's compact JSON, and the key orders of Kafka's maps ----

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_SPECIAL = re.compile('[\x00-\x1f"\\\\\U00010000-\U0010ffff]')


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    o = ord(c) - 0x10000
    if c in _ESCAPES:
        return _ESCAPES[c]
    if o < 0:
        return f"\\u{ord(c):04X}"
    return f"\\u{0xD800 + (o >> 10):04X}\\u{0xDC00 + (o & 0x3FF):04X}"


def _json(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, str):
        return '"' + _SPECIAL.sub(_escape, v) + '"'
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, dict):
        return "{" + ",".join(_json(k) + ":" + _json(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(map(_json, v)) + "]"
    raise TypeError(f"cannot encode {type(v).__name__}")


def _dumps(v: Any) -> bytes:
    return _json(v).encode("utf-8")


_M32 = 0xFFFFFFFF


def _java_hash(s: str) -> int:
    """``String.hashCode`` (over UTF-16 code units) as an unsigned 32-bit value."""
    h, b = 0, s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(b), 2):
        h = (31 * h + (b[i] << 8 | b[i + 1])) & _M32
    return h


def _scala_mutable_order(keys: Sequence[str]) -> list[str]:
    # 16 buckets, doubled when a put would reach 3/4 of them; bucket of h ^ (h >>> 16), then
    # ascending signed hash, then insertion.
    n = 16
    for size in range(len(keys)):
        if size + 1 >= n * 3 // 4:
            n *= 2
    hashes = []
    for k in keys:
        h = _java_hash(k) ^ (_java_hash(k) >> 16)
        hashes.append(h - ((h & 0x80000000) << 1))  # signed
    return [
        keys[i] for i in sorted(range(len(keys)), key=lambda i: (hashes[i] & (n - 1), hashes[i], i))
    ]


def _champ_order(entries: list[tuple[int, str]], shift: int) -> list[str]:
    # A trie node lists its own entries by 5-bit hash fragment, then its subnodes likewise.
    if shift >= 32:
        return [k for _, k in entries]
    groups: dict[int, list[tuple[int, str]]] = {}
    for e in entries:
        groups.setdefault((e[0] >> shift) & 31, []).append(e)
    ordered = sorted(groups.items())
    subnodes = [_champ_order(g, shift + 5) for _, g in ordered if len(g) > 1]
    return [g[0][1] for _, g in ordered if len(g) == 1] + [k for node in subnodes for k in node]


def _scala_immutable_order(keys: Sequence[str]) -> list[str]:
    if len(keys) <= 4:  # Map1..Map4 keep insertion order
        return list(keys)
    improved = []
    for k in keys:  # scala.collection.Hashing.improve
        h = _java_hash(k)
        h = (h + (_M32 ^ ((h << 9) & _M32))) & _M32
        h ^= h >> 14
        h = (h + (h << 4)) & _M32
        improved.append((h ^ (h >> 10), k))
    return _champ_order(improved, 0)


def _java_hashmap_order(keys: Sequence[str]) -> list[str]:
    n = 16
    while len(keys) > n * 3 // 4:
        n *= 2
    return sorted(
        keys, key=lambda k: (_java_hash(k) ^ (_java_hash(k) >> 16)) & (n - 1)
    )  # stable: insertion


def _properties_order(keys: Sequence[str]) -> list[str]:
    # A ConcurrentHashMap of 16 bins, doubled once the count reaches 3/4 of them; a bin appends,
    # and a resize splits each bin reversing all but its last run of the same new-bit.
    n, bins = 16, [[] for _ in range(16)]
    for count, k in enumerate(keys, 1):
        h = (_java_hash(k) ^ (_java_hash(k) >> 16)) & 0x7FFFFFFF
        bins[h & (n - 1)].append((h, k))
        if count >= n - (n >> 2):
            grown: list[list[tuple[int, str]]] = [[] for _ in range(2 * n)]
            for i, b in enumerate(bins):
                run = len(b) - 1
                while run > 0 and (b[run - 1][0] & n) == (b[-1][0] & n):
                    run -= 1
                for bit, dest in ((0, i), (n, i + n)):
                    tail = b[run:] if b and b[-1][0] & n == bit else []
                    grown[dest] = [e for e in b[:run] if e[0] & n == bit][::-1] + tail
            n, bins = 2 * n, grown
    return [k for b in bins for _, k in b]


# ---- reading ----

_INT32, _INT64 = 1 << 31, 1 << 63
_DECIMAL = re.compile(
    r"[+-]?0*[0-9]{1,19}", re.ASCII
)  # Java's parseInt/parseLong syntax, up to 19 digits
_REQUIRED = object()


def _is_int(v: Any, limit: int = _INT32) -> bool:
    return type(v) is int and -limit <= v < limit


_KINDS: dict[str, tuple[Any, str]] = {
    "int": (_is_int, "a 32-bit integer"),
    "short": (lambda v: _is_int(v, 1 << 15), "a 16-bit integer"),
    "str": (lambda v: type(v) is str, "a string"),
    "long": (
        lambda v: type(v) is str and _DECIMAL.fullmatch(v) and _is_int(int(v), _INT64),
        "a decimal string",
    ),
    "int string": (
        lambda v: type(v) is str and _DECIMAL.fullmatch(v) and _is_int(int(v)),
        "a 32-bit decimal string",
    ),
    "object": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "ints": (lambda v: isinstance(v, list) and all(map(_is_int, v)), "a list of 32-bit integers"),
}


def _check(path: str, what: str, v: Any, kind: str) -> Any:
    ok, expected = _KINDS[kind]
    if not ok(v):
        raise ZkDataError(path, f"{what}: expected {expected}, got {v!r:.60}")
    return int(v) if kind in ("long", "int string") else v


def _get(path: str, obj: dict[str, Any], key: str, kind: str, default: Any = _REQUIRED) -> Any:
    """The field, of ``kind``; absent or null gives ``default``, an error without one."""
    if (v := obj.get(key)) is not None:
        return _check(path, key, v, kind)
    if default is _REQUIRED:
        raise ZkDataError(path, f"missing {key!r}")
    return default


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _object(path: str, data: bytes, *versions: Any) -> dict[str, Any]:
    """The JSON object in ``data``, whose "version" is one of ``versions`` when given."""
    try:
        obj = _check(path, "data", json.loads(data, parse_constant=_reject_constant), "object")
    except (ValueError, TypeError, RecursionError) as e:
        raise ZkDataError(path, f"not JSON ({e})") from None
    if versions and (type(v := obj.get("version")) is not type(versions[0]) or v not in versions):
        raise ZkDataError(path, f"unknown version {v!r:.30}")
    return obj


def _partition_list(
    path: str, data: bytes, with_replicas: bool = False
) -> list[tuple[TopicPartition, list[int]]]:
    out = []
    for item in _get(path, _object(path, data, 1), "partitions", "list"):
        item = _check(path, "partition", item, "object")
        tp = TopicPartition(_get(path, item, "topic", "str"), _get(path, item, "partition", "int"))
        out.append((tp, _get(path, item, "replicas", "ints") if with_replicas else []))
    return out


# ---- ids and paths ----


def uuid_to_base64(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: 22 characters."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def uuid_from_base64(s: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString`` (padding optional); ValueError when malformed."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}(==)?", s):
        raise ValueError(f"not a base64 UUID: {s!r:.40}")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s[:22] + "=="))


def random_uuid() -> uuid.UUID:
    """Kafka's ``Uuid.randomUuid``: never the reserved 0 and 1, never a string starting with '-'."""
    while (u := uuid.uuid4()).int <= 1 or uuid_to_base64(u).startswith("-"):
        pass
    return u


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``, how a config entity's name (a user principal) becomes a
    znode name: ``URLEncoder.encode(name, UTF-8)`` with ``*`` as ``%2A`` and a space as
    ``%20``: letters, digits, ``.``, ``-`` and ``_`` stay, every other UTF-8 byte is ``%XX``."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (``URLDecoder.decode``: ``+`` is a space)."""
    return urllib.parse.unquote_plus(name, errors="strict")


# ZooKeeper's PathUtils.validatePath refuses these characters in a node name.
_INVALID_NODE_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]")


def is_valid_node_name(name: str) -> bool:
    """Whether ``name`` can be one znode's name: not empty, no ``/``, not ``.`` nor ``..``,
    none of the characters ZooKeeper refuses."""
    return (
        bool(name)
        and "/" not in name
        and name not in (".", "..")
        and not _INVALID_NODE_CHARS.search(name)
    )


def split_chroot(connect: str) -> tuple[str, str]:
    """``zookeeper.connect`` as (hosts, chroot); the chroot is "" or an absolute path."""
    i = connect.find("/")
    return (connect, "") if i < 0 else (connect[:i], connect[i:].rstrip("/"))


# ---- znodes ----


class _ZNode:
    PATH = ""

    @classmethod
    def path(cls) -> str:
        return cls.PATH


def _fixed(name: str, path: str) -> type[_ZNode]:
    return type(name, (_ZNode,), {"PATH": path, "__module__": __name__})


BrokersZNode = _fixed("BrokersZNode", "/brokers")
BrokerIdsZNode = _fixed("BrokerIdsZNode", "/brokers/ids")
BrokerSequenceIdZNode = _fixed("BrokerSequenceIdZNode", "/brokers/seqid")
TopicsZNode = _fixed("TopicsZNode", "/brokers/topics")
ConfigZNode = _fixed("ConfigZNode", "/config")
ConfigEntityChangeNotificationZNode = _fixed(
    "ConfigEntityChangeNotificationZNode", "/config/changes"
)
IsrChangeNotificationZNode = _fixed("IsrChangeNotificationZNode", "/isr_change_notification")
AdminZNode = _fixed("AdminZNode", "/admin")
DeleteTopicsZNode = _fixed("DeleteTopicsZNode", "/admin/delete_topics")
ClusterZNode = _fixed("ClusterZNode", "/cluster")


@dataclass(frozen=True)
class ControllerRegistration:
    broker_id: int
    timestamp_ms: int | None = None
    kraft_controller_epoch: int | None = None  # None when not written (v1, or a bare broker id)


class ControllerZNode(_ZNode):
    PATH = "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int, kraft_controller_epoch: int = -1) -> bytes:
        return _dumps(
            {
                "version": 2,
                "brokerid": broker_id,
                "timestamp": str(timestamp_ms),
                "kraftControllerEpoch": kraft_controller_epoch,
            }
        )

    @staticmethod
    def decode(data: bytes) -> int:
        """The controller's broker id (Kafka's ``decode``)."""
        return ControllerZNode.decode_controller(data).broker_id

    @staticmethod
    def decode_controller(data: bytes) -> ControllerRegistration:
        p = ControllerZNode.PATH
        if re.fullmatch(rb"[+-]?[0-9]+", data):  # the oldest form (Kafka 0.8): the broker id alone
            return ControllerRegistration(_check(p, "broker id", data.decode(), "int string"))
        obj = _object(p, data, 1, 2)
        return ControllerRegistration(
            _get(p, obj, "brokerid", "int"),
            _get(p, obj, "timestamp", "long", None),
            _get(p, obj, "kraftControllerEpoch", "int", None),
        )


class ControllerEpochZNode(_ZNode):
    PATH = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(data: bytes) -> int:
        return _check(
            ControllerEpochZNode.PATH, "epoch", data.decode("utf-8", "replace"), "int string"
        )


_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


class BrokerIdZNode:
    @staticmethod
    def path(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        if info.timestamp_ms is None:
            raise ValueError("BrokerInfo.timestamp_ms is required to register")
        plain = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
        protocols = {e.listener_name: e.security_protocol for e in info.endpoints}
        fields: dict[str, Any] = {}
        if info.version >= 5:
            fields["features"] = {
                f: {"min_version": info.features[f][0], "max_version": info.features[f][1]}
                for f in _java_hashmap_order(list(info.features))
            }
        if info.version >= 4:
            fields["listener_security_protocol_map"] = {
                n: protocols[n] for n in _scala_immutable_order(list(protocols))
            }
        fields["endpoints"] = [e.connection_string for e in info.endpoints]
        if info.rack is not None and info.version >= 3:
            fields["rack"] = info.rack
        return _dumps(
            fields
            | {
                "jmx_port": info.jmx_port,
                "port": plain.port if plain else -1,
                "host": plain.host if plain else None,
                "version": info.version,
                "timestamp": str(info.timestamp_ms),
            }
        )

    @staticmethod
    def decode(broker_id: int, data: bytes) -> BrokerInfo:
        p = BrokerIdZNode.path(broker_id)
        obj = _object(p, data)
        if (version := _get(p, obj, "version", "int")) < 1:
            raise ZkDataError(p, f"unknown version {version}")
        if version == 1:
            endpoints = [
                EndPoint(
                    "PLAINTEXT",
                    _get(p, obj, "host", "str"),
                    _get(p, obj, "port", "int"),
                    "PLAINTEXT",
                )
            ]
        else:
            raw = _get(p, obj, "listener_security_protocol_map", "object", None)
            protocols = (
                {n: n for n in SECURITY_PROTOCOLS}
                if raw is None
                else {k: _check(p, "security protocol", v, "str").upper() for k, v in raw.items()}
            )
            if not set(protocols.values()) <= set(SECURITY_PROTOCOLS):
                raise ZkDataError(p, f"unknown security protocol in {raw!r:.80}")
            # Kafka joins the list with commas and parses that as a `listeners` value
            joined = ",".join(
                _check(p, "endpoint", e, "str") for e in _get(p, obj, "endpoints", "list")
            )
            endpoints = []
            for entry in filter(None, re.split(r"\s*,\s*", joined.strip())):
                if not (m := _ENDPOINT.fullmatch(entry)):
                    raise ZkDataError(p, f"endpoint {entry!r:.60} is not LISTENER://host:port")
                if (name := m[1].upper()) not in protocols:
                    raise ZkDataError(p, f"no security protocol for listener {name!r:.40}")
                endpoints.append(
                    EndPoint(
                        name, m[2] or None, _check(p, "port", m[3], "int string"), protocols[name]
                    )
                )
        features = {}
        for name, rng in _get(p, obj, "features", "object", {}).items():
            rng = _check(p, f"feature {name!r:.40}", rng, "object")
            features[name] = lo, hi = (
                _get(p, rng, "min_version", "short"),
                _get(p, rng, "max_version", "short"),
            )
            if not 0 <= lo <= hi:
                raise ZkDataError(p, f"feature {name!r:.40}: bad version range [{lo}, {hi}]")
        return BrokerInfo(
            broker_id,
            endpoints,
            _get(p, obj, "rack", "str", None),
            features,
            _get(p, obj, "jmx_port", "int"),
            _get(p, obj, "timestamp", "long", None),
            version,
        )


class TopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def encode(assignment: TopicAssignment) -> bytes:
        def json_map(m: Mapping[int, Sequence[int]], every: bool = False) -> dict[str, list[int]]:
            by_key = {str(p): list(m[p]) for p in assignment.partitions if every or m.get(p)}
            return {k: by_key[k] for k in _scala_mutable_order(list(by_key))}

        fields: dict[str, Any] = {"partitions": json_map(assignment.partitions, every=True)}
        if assignment.topic_id is not None:
            fields["topic_id"] = uuid_to_base64(assignment.topic_id)
        return _dumps(
            fields
            | {
                "adding_replicas": json_map(assignment.adding),
                "removing_replicas": json_map(assignment.removing),
                "version": 3,
            }
        )

    @staticmethod
    def decode(data: bytes, *, path: str = "/brokers/topics/<topic>") -> TopicAssignment:
        obj = _object(path, data, 1, 2, 3)
        if (topic_id := _get(path, obj, "topic_id", "str", None)) is not None:
            try:
                topic_id = uuid_from_base64(topic_id)
            except ValueError as e:
                raise ZkDataError(path, f"topic_id: {e}") from None
        maps: list[dict[int, list[int]]] = []
        for key in ("partitions", "adding_replicas", "removing_replicas"):
            maps.append({})
            for k, v in _get(path, obj, key, "object", {}).items():
                if not re.fullmatch(r"[0-9]{1,10}", k, re.ASCII) or int(k) >= _INT32:
                    raise ZkDataError(path, f"{key}: bad partition {k!r:.20}")
                maps[-1][int(k)] = _check(path, f"{key}[{k}]", v, "ints")
        parts, adding, removing = maps  # Kafka reads adding/removing of assigned partitions only
        return TopicAssignment(
            topic_id,
            parts,
            {p: r for p, r in adding.items() if p in parts and r},
            {p: r for p, r in removing.items() if p in parts and r},
        )


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}"


class TopicPartitionStateZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}/state"

    @staticmethod
    def encode(state: LeaderIsrAndControllerEpoch) -> bytes:
        fields: dict[str, Any] = {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
        }
        if state.leader_recovery_state != RECOVERED:
            fields["leader_recovery_state"] = state.leader_recovery_state
        return _dumps(fields | {"leader_epoch": state.leader_epoch, "isr": list(state.isr)})

    @staticmethod
    def decode(
        data: bytes,
        partition_epoch: int = -1,
        *,
        path: str = "/brokers/topics/<topic>/partitions/<partition>/state",
    ) -> LeaderIsrAndControllerEpoch:
        obj = _object(path, data, 1)
        if (recovery := _get(path, obj, "leader_recovery_state", "int", RECOVERED)) not in (
            RECOVERED,
            RECOVERING,
        ):
            raise ZkDataError(path, f"unknown leader_recovery_state {recovery}")
        return LeaderIsrAndControllerEpoch(
            _get(path, obj, "leader", "int"),
            _get(path, obj, "leader_epoch", "int"),
            _get(path, obj, "isr", "ints"),
            _get(path, obj, "controller_epoch", "int"),
            recovery,
            partition_epoch,
        )


class ConfigEntityTypeZNode:
    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"


class ConfigEntityZNode:
    @staticmethod
    def path(entity_type: str, entity_name: str) -> str:
        """``entity_name`` sanitized (Kafka's ``Sanitizer``); a user's client is
        "<user>/clients/<client>"."""
        return f"/config/{entity_type}/{entity_name}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return _dumps(
            {"version": 1, "config": {k: config[k] for k in _properties_order(list(config))}}
        )

    @staticmethod
    def decode(data: bytes, *, path: str = "/config/<type>/<name>") -> dict[str, str]:
        config = _get(path, _object(path, data, 1), "config", "object")
        return {k: _check(path, f"config {k!r:.40}", v, "str") for k, v in config.items()}


class ConfigEntityChangeNotificationSequenceZNode:
    SEQUENCE_NUMBER_PREFIX = "config_change_"

    @staticmethod
    def create_path() -> str:
        return "/config/changes/config_change_"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        """``entity_path``: "<type>/<sanitized name>", e.g. "topics/T" or "brokers/<default>"."""
        return _dumps({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data: bytes, *, path: str = "/config/changes/config_change_<n>") -> str:
        """The entity path; version 1's {"entity_type":"topics"|"clients","entity_name":N}
        gives "<type>/N"."""
        obj = _object(path, data, 1, 2)
        if obj["version"] == 2:
            entity_path = _get(path, obj, "entity_path", "str")
        elif (entity_type := obj.get("entity_type")) in ("topics", "clients"):
            entity_path = f"{entity_type}/{_get(path, obj, 'entity_name', 'str')}"
        else:
            raise ZkDataError(path, f"version 1 entity_type {entity_type!r:.40}")
        if entity_path.find("/") <= 0:
            raise ZkDataError(path, f"entity path {entity_path!r:.60} is not <type>/<name>")
        return entity_path


class IsrChangeNotificationSequenceZNode:
    SEQUENCE_NUMBER_PREFIX = "isr_change_"

    @staticmethod
    def path(sequence_number: str = "") -> str:
        return f"/isr_change_notification/isr_change_{sequence_number}"

    @staticmethod
    def sequence_number(path: str) -> str:
        return path[path.rfind("isr_change_") + len("isr_change_") :]

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _dumps(
            {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
        )

    @staticmethod
    def decode(data: bytes) -> set[TopicPartition]:
        return {tp for tp, _ in _partition_list("/isr_change_notification/isr_change_<n>", data)}


LogDirEventNotificationZNode = _fixed("LogDirEventNotificationZNode", "/log_dir_event_notification")


class LogDirEventNotificationSequenceZNode:
    """``/log_dir_event_notification/log_dir_event_<10 digits>``: a broker's log dir failed
    (KIP-112); ``{"version":1,"broker":<id>,"event":1}`` (1: LogDirFailure)."""

    SEQUENCE_NUMBER_PREFIX = "log_dir_event_"
    LOG_DIR_FAILURE = 1

    @staticmethod
    def path(sequence_number: str = "") -> str:
        return f"/log_dir_event_notification/log_dir_event_{sequence_number}"

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _dumps(
            {
                "version": 1,
                "broker": broker_id,
                "event": LogDirEventNotificationSequenceZNode.LOG_DIR_FAILURE,
            }
        )

    @staticmethod
    def decode(data: bytes, *, path: str = "/log_dir_event_notification/<n>") -> int:
        """The broker whose log dir failed."""
        obj = _object(path, data, 1)
        return int(_get(path, obj, "broker", "int"))


class DeleteTopicsTopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/admin/delete_topics/{topic}"  # no data


class ReassignPartitionsZNode(_ZNode):
    PATH = "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
        return _dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": t, "partition": p, "replicas": list(r)}
                    for (t, p), r in reassignment.items()
                ],
            }
        )

    @staticmethod
    def decode(data: bytes) -> dict[TopicPartition, list[int]]:
        return dict(_partition_list(ReassignPartitionsZNode.PATH, data, with_replicas=True))


class PreferredReplicaElectionZNode(_ZNode):
    PATH = "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _dumps(
            {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
        )

    @staticmethod
    def decode(data: bytes) -> set[TopicPartition]:
        return {tp for tp, _ in _partition_list(PreferredReplicaElectionZNode.PATH, data)}


class ClusterIdZNode(_ZNode):
    PATH = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return _get(ClusterIdZNode.PATH, _object(ClusterIdZNode.PATH, data, "1"), "id", "str")


@dataclass(frozen=True)
class ProducerIdsBlock:
    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1


class ProducerIdBlockZNode(_ZNode):
    PATH = "/latest_producer_id_block"
    BLOCK_SIZE = 1000

    @staticmethod
    def encode(block: ProducerIdsBlock) -> bytes:
        return _dumps(
            {
                "version": 1,
                "broker": block.assigned_broker_id,
                "block_start": str(block.first_producer_id),
                "block_end": str(block.last_producer_id),
            }
        )

    @staticmethod
    def decode(data: bytes) -> ProducerIdsBlock:
        p = ProducerIdBlockZNode.PATH
        obj = _object(p, data, 1)
        start = _get(p, obj, "block_start", "long")
        if not 0 < (size := _get(p, obj, "block_end", "long") - start + 1) < _INT32:
            raise ZkDataError(p, f"a block of {size} ids")
        return ProducerIdsBlock(_get(p, obj, "broker", "int"), start, size)


class ConsumerOffsetZNode:
    """An offset committed with OffsetCommit v0 (Kafka's ``ConsumerOffset``)."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"/consumers/{group}/offsets/{topic}/{partition}"

    @staticmethod
    def encode(offset: int) -> bytes:
        return str(offset).encode()

    @staticmethod
    def decode(data: bytes, *, path: str = "/consumers/<group>/offsets/<topic>/<partition>") -> int:
        text = data.decode("utf-8", "replace").strip()
        if not re.fullmatch(r"-?[0-9]{1,19}", text) or not -(2**63) <= int(text) < 2**63:
            raise ZkDataError(path, f"not an offset: {text!r:.30}")
        return int(text)
