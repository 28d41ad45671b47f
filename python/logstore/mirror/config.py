"""The mirror's configuration: MirrorMaker 2's properties file (``connect-mirror-maker``'s
``mm2.properties``) and key names, resolved into one :class:`Flow` per enabled
``source->target`` pair.

File format (Java properties): one ``key = value`` (or ``key: value``) per line, ``#``
and ``!`` start comments, a line ending in an odd number of backslashes continues on the
next, ``\\uXXXX`` and the usual backslash escapes are decoded.

Keys (see :data:`FLOW_DEFAULTS` for the per-flow ones and their defaults):

- ``clusters = A, B``: the aliases.
- ``A.<client property>``: a librdkafka property for every client of cluster ``A``
  (``A.bootstrap.servers`` is required); ``A.consumer.<p>``, ``A.producer.<p>``,
  ``A.admin.<p>`` for one kind of client only.
- ``A->B.enabled = true``: mirror A into B (a flow).
- A per-flow key applies to every flow; ``A->B.<key>`` to that flow only (it wins).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from logstore.mirror import filters, replication_policy


class ConfigError(ValueError):
    """A configuration the mirror cannot run with (the message names the key)."""


# Per-flow keys and their defaults (MirrorMaker 2's, except where noted in
# docs/mirror.md: the internal topics' and remote topics' replication factors default to
# the target broker's default.replication.factor, -1, instead of 2 and 3).
FLOW_DEFAULTS: dict[str, str] = {
    "topics": filters.TOPICS_DEFAULT,
    "topics.exclude": filters.TOPICS_EXCLUDE_DEFAULT,
    "groups": filters.GROUPS_DEFAULT,
    "groups.exclude": filters.GROUPS_EXCLUDE_DEFAULT,
    "config.properties.exclude": filters.CONFIG_PROPERTIES_EXCLUDE_DEFAULT,
    "replication.policy.class": replication_policy.DEFAULT_CLASS,
    "replication.policy.separator": ".",
    "replication.policy.internal.topic.separator.enabled": "true",
    "replication.factor": "-1",
    "offset-syncs.topic.replication.factor": "-1",
    "checkpoints.topic.replication.factor": "-1",
    "heartbeats.topic.replication.factor": "-1",
    "offset-syncs.topic.location": "source",
    "emit.offset-syncs.enabled": "true",
    "offset.lag.max": "100",
    "emit.heartbeats.enabled": "true",
    "emit.heartbeats.interval.seconds": "1",
    "emit.checkpoints.enabled": "true",
    "emit.checkpoints.interval.seconds": "60",
    "sync.group.offsets.enabled": "false",
    "sync.group.offsets.interval.seconds": "60",
    "refresh.topics.enabled": "true",
    "refresh.topics.interval.seconds": "600",
    "refresh.groups.enabled": "true",
    "refresh.groups.interval.seconds": "600",
    "sync.topic.configs.enabled": "true",
    "sync.topic.configs.interval.seconds": "600",
    "exactly.once.source.support": "disabled",
    "offset.flush.interval.ms": "5000",
    "transaction.timeout.ms": "60000",
    # logstore's own: the source consumer group the mirror processes of a flow share;
    # the id of one process among them (each needs its own: it makes the static member
    # id in that group and the exactly-once transactional.id); the port of the
    # Prometheus endpoint (0 = none).
    "mirror.group.id": "",
    "mirror.instance.id": "0",
    "metrics.port": "0",
}

_BOOL = {"true": True, "false": False}
_FLOW_KEY = re.compile(r"^([^.>\s]+)->([^.>\s]+)\.(.+)$")


def parse_properties(text: str) -> dict[str, str]:
    """Java's ``Properties.load`` for the forms config files use (module docstring)."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split(line: str) -> tuple[str, str]:
    j = 0
    while j < len(line) and line[j] not in "=: \t\f":
        j += 2 if line[j] == "\\" else 1
    j = min(j, len(line))
    k = j
    while k < len(line) and line[k] in " \t\f":
        k += 1
    if k < len(line) and line[k] in "=:":
        k += 1
    while k < len(line) and line[k] in " \t\f":
        k += 1
    return line[:j], line[k:]


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        n = s[i + 1]
        if n == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2 : i + 6]):
            out.append(chr(int(s[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(n, n))
        i += 2
    return "".join(out)


@dataclass(frozen=True)
class ClientConfig:
    """librdkafka properties for one cluster's consumers, producers and admin clients."""

    common: Mapping[str, str]
    consumer: Mapping[str, str] = field(default_factory=dict)
    producer: Mapping[str, str] = field(default_factory=dict)
    admin: Mapping[str, str] = field(default_factory=dict)

    def for_consumer(self) -> dict[str, str]:
        return {**self.common, **self.consumer}

    def for_producer(self) -> dict[str, str]:
        return {**self.common, **self.producer}

    def for_admin(self) -> dict[str, str]:
        return {**self.common, **self.admin}


@dataclass(frozen=True)
class Flow:
    """One enabled ``source->target`` pair with its resolved settings."""

    source: str
    target: str
    source_client: ClientConfig
    target_client: ClientConfig
    settings: Mapping[str, str]

    def get(self, key: str) -> str:
        return self.settings[key]

    def flag(self, key: str) -> bool:
        value = self.settings[key].strip().lower()
        if value not in _BOOL:
            raise ConfigError(f"{key} = {self.settings[key]!r}: expected true or false")
        return _BOOL[value]

    def integer(self, key: str) -> int:
        try:
            return int(self.settings[key].strip())
        except ValueError:
            raise ConfigError(f"{key} = {self.settings[key]!r}: expected an integer") from None

    def seconds(self, key: str) -> float:
        return float(self.integer(key))

    def items(self, key: str) -> list[str]:
        return filters.split_list(self.settings[key])

    @property
    def exactly_once(self) -> bool:
        value = self.settings["exactly.once.source.support"].strip().lower()
        if value not in ("enabled", "disabled", "preparing"):
            raise ConfigError(
                f"exactly.once.source.support = {value!r}: expected enabled or disabled"
            )
        return value == "enabled"

    @property
    def group_id(self) -> str:
        return self.settings["mirror.group.id"] or f"logstore-mirror-{self.source}-{self.target}"

    @property
    def instance_member_id(self) -> str:
        """The process's static member id in the source group (``group.instance.id``):
        a restarted process takes its partitions back at once."""
        return f"{self.group_id}-{self.settings['mirror.instance.id']}"

    @property
    def transactional_id(self) -> str:
        return f"{self.group_id}-{self.settings['mirror.instance.id']}"

    def policy(self) -> replication_policy.DefaultReplicationPolicy:
        try:
            return replication_policy.make(
                self.get("replication.policy.class"),
                self.source,
                self.get("replication.policy.separator"),
                self.flag("replication.policy.internal.topic.separator.enabled"),
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def topic_filter(self) -> filters.TopicFilter:
        return filters.TopicFilter(
            self.policy(), self.target, self.items("topics"), self.items("topics.exclude")
        )

    def group_filter(self) -> filters.GroupFilter:
        return filters.GroupFilter(self.items("groups"), self.items("groups.exclude"))

    def config_filter(self) -> filters.ConfigPropertyFilter:
        return filters.ConfigPropertyFilter(self.items("config.properties.exclude"))

    @property
    def offset_syncs_on_target(self) -> bool:
        where = self.get("offset-syncs.topic.location").strip().lower()
        if where not in ("source", "target"):
            raise ConfigError(f"offset-syncs.topic.location = {where!r}: source or target")
        return where == "target"

    def validate(self) -> None:
        """Raises ConfigError naming the first bad setting."""
        for key, default in FLOW_DEFAULTS.items():
            if default in ("true", "false"):
                self.flag(key)
            elif re.fullmatch(r"-?\d+", default):
                self.integer(key)
        _ = self.exactly_once, self.offset_syncs_on_target
        self.policy()
        try:
            self.topic_filter(), self.group_filter(), self.config_filter()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.integer("offset.flush.interval.ms") <= 0:
            raise ConfigError("offset.flush.interval.ms must be positive")
        if "bootstrap.servers" not in self.source_client.common:
            raise ConfigError(f"{self.source}.bootstrap.servers is not set")
        if "bootstrap.servers" not in self.target_client.common:
            raise ConfigError(f"{self.target}.bootstrap.servers is not set")


def _client(props: Mapping[str, str], alias: str, clusters: Iterable[str]) -> ClientConfig:
    prefix = alias + "."
    parts: dict[str, dict[str, str]] = {"": {}, "consumer": {}, "producer": {}, "admin": {}}
    for key, value in props.items():
        if not key.startswith(prefix) or _FLOW_KEY.match(key):
            continue
        rest = key[len(prefix) :]
        kind, _, sub = rest.partition(".")
        if kind in ("consumer", "producer", "admin") and sub:
            parts[kind][sub] = value
        else:
            parts[""][rest] = value
    return ClientConfig(parts[""], parts["consumer"], parts["producer"], parts["admin"])


def flows(props: Mapping[str, str]) -> list[Flow]:
    """The enabled flows of a properties mapping, validated; ConfigError when the file
    names no clusters, a flow names an unknown alias, or a setting is bad."""
    clusters = filters.split_list(props.get("clusters", ""))
    if not clusters:
        raise ConfigError("clusters is not set (e.g. clusters = A, B)")
    out: list[Flow] = []
    for key, value in props.items():
        m = _FLOW_KEY.match(key)
        if not m or m.group(3) != "enabled":
            continue
        source, target = m.group(1), m.group(2)
        for alias in (source, target):
            if alias not in clusters:
                raise ConfigError(f"{key}: {alias!r} is not one of clusters = {clusters}")
        if value.strip().lower() not in _BOOL:
            raise ConfigError(f"{key} = {value!r}: expected true or false")
        if not _BOOL[value.strip().lower()]:
            continue
        if source == target:
            raise ConfigError(f"{key}: a cluster cannot mirror into itself")
        settings = dict(FLOW_DEFAULTS)
        for k in FLOW_DEFAULTS:
            if k in props:
                settings[k] = props[k]
            flow_key = f"{source}->{target}.{k}"
            if flow_key in props:
                settings[k] = props[flow_key]
        flow = Flow(
            source,
            target,
            _client(props, source, clusters),
            _client(props, target, clusters),
            settings,
        )
        flow.validate()
        out.append(flow)
    if not out:
        raise ConfigError("no flow is enabled (e.g. A->B.enabled = true)")
    return out


def from_flags(
    source: str,
    target: str,
    *,
    source_alias: str = "source",
    target_alias: str = "target",
    settings: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The properties that ``--source``/``--target`` (and ``--set key=value``) stand for."""
    props = {
        "clusters": f"{source_alias}, {target_alias}",
        f"{source_alias}.bootstrap.servers": source,
        f"{target_alias}.bootstrap.servers": target,
        f"{source_alias}->{target_alias}.enabled": "true",
    }
    props.update(settings or {})
    return props
