"""Broker configuration under Kafka's own ``server.properties`` key names.

A config is built from a properties file (Java ``.properties`` syntax: ``key=value``
or ``key: value`` lines, ``#``/``!`` comments, backslash line continuations) plus
``--override key=value`` pairs, over Kafka's defaults. Every value is checked when
the broker starts: a bad value raises :class:`ConfigError` naming the key; an unknown
key is returned in ``unknown`` for the caller to warn about, as Kafka warns (and ignores
it), with :func:`unknown_key_warning` naming the nearest known key.

Broker-level ``log.*`` keys are the defaults of the per-topic configs
(``log.segment.bytes`` -> ``segment.bytes`` ...); :meth:`BrokerConfig.topic_defaults`
gives that mapping, which topic configs then override.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from broker_py.config.config_def import (
    LONG_MAX,
    ConfigError,
    ConfigErrors,
    kind_of,
    raise_all,
)
from broker_py.config.config_def import bool_type as _bool
from broker_py.config.config_def import case_insensitive_choice_type as _choice_ci
from broker_py.config.config_def import choice_type as _choice
from broker_py.config.config_def import double_type as _float
from broker_py.config.config_def import int_type as _int
from broker_py.config.config_def import java_trim as _java_trim
from broker_py.config.config_def import list_type as _list
from broker_py.config.config_def import long_type as _long
from broker_py.config.config_def import short_type as _short
from broker_py.config.config_def import str_type as _str
from broker_py.config.share_coordinator_config import SHARE_COORDINATOR_KEYS
from broker_py.config.share_group_config import SHARE_GROUP_KEYS
from logstore.protocol.errors import KafkaException


class PropertiesFileError(ConfigError):
    """The properties file named on the command line cannot be read."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__("server.properties", path, reason)
        KafkaException.__init__(self, f"properties file {path}: {reason}")


class DynamicConfigError(ConfigError):
    """Keys a dynamic config change may not hold, worded as Kafka's DynamicBrokerConfig:
    ``<reason>: Set(<key>, ...)``."""

    def __init__(self, reason: str, keys: Iterable[str], values: Mapping[str, str]) -> None:
        names = sorted(keys)
        super().__init__(names[0], values[names[0]], reason)
        KafkaException.__init__(self, f"{reason}: Set({', '.join(names)})")


def _ip_overrides(key: str, raw: str) -> dict[str, int]:
    """``host:count,host:count`` (Kafka's max.connections.per.ip.overrides): a host name or
    address (IPv6 ones whole, the count after the last ':') mapped to its limit."""
    out: dict[str, int] = {}
    for item in filter(None, (i.strip() for i in raw.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip():
            raise ConfigError(key, raw, f"{item!r} is not host:count")
        try:
            out[host.strip().strip("[]")] = int(count)
        except ValueError:
            raise ConfigError(key, raw, f"the count of {item!r} is not an integer") from None
        if out[host.strip().strip("[]")] < 0:
            raise ConfigError(key, raw, f"the count of {item!r} is negative")
    return out


def _cleanup_policy(key: str, raw: str) -> str:
    """A LIST with Kafka's ``ValidList.in(compact, delete)``: each element checked. Empty is
    allowed: logs are then neither deleted nor compacted."""
    text = _java_trim(raw)
    parts = [p.strip() for p in text.split(",")] if text else []
    for p in parts:
        if p not in ("compact", "delete"):
            raise ConfigError(key, p, "String must be one of: compact, delete")
    return ",".join(parts)


# authorizer.class.name values that name Kafka's ACL authorizers (ZooKeeper and KRaft
# mode); this broker's StandardAuthorizer decides as both do.
AUTHORIZERS = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)


def _authorizer(key: str, raw: str) -> str:
    v = raw.strip()
    if v and v not in AUTHORIZERS:
        raise ConfigError(
            key, raw, f"must be empty (no authorizer) or one of {', '.join(AUTHORIZERS)}"
        )
    return v


def _principals(key: str, raw: str) -> list[str]:
    # super.users: principals separated by semicolons, each Type:name.
    out = []
    for part in (p.strip() for p in raw.split(";")):
        if not part:
            continue
        kind, sep, name = part.partition(":")
        if not sep or not kind or not name:
            raise ConfigError(key, raw, f"{part!r} is not a principal Type:name")
        out.append(part)
    return out


def _registry_listener(key: str, raw: str) -> str:
    """schema.registry.listeners: one http://HOST:PORT or https://HOST:PORT."""
    v = _java_trim(raw)
    m = re.match(r"^(https?)://(\[[^\]]*\]|[^:/]*):(\d+)/?$", v)
    if m is None:
        raise ConfigError(key, v, "expected http://HOST:PORT or https://HOST:PORT")
    if not 0 <= int(m.group(3)) <= 65535:
        raise ConfigError(key, v, f"port {m.group(3)} is out of range")
    return v


@dataclasses.dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` entry of ``listeners`` / ``advertised.listeners``."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>\d+)$")


def _listeners(key: str, raw: str) -> list[Listener]:
    out = []
    for part in _list(key, raw):
        m = _LISTENER.match(part)
        if not m:
            raise ConfigError(
                key,
                raw,
                f"Error creating broker listeners from '{raw}': Unable to parse {part} to a "
                "broker endpoint",
            )
        port = int(m["port"])
        if port > 65535:
            raise ConfigError(key, raw, f"port {port} is out of range")
        out.append(Listener(m["name"].upper(), m["host"].strip("[]"), port))
    if not out:
        raise ConfigError(key, raw, "no listener given")
    names = [listener.name for listener in out]
    if len(set(names)) != len(names):
        raise ConfigError(
            key,
            raw,
            f"requirement failed: Each listener must have a different name, listeners: {raw}",
        )
    return out


# zookeeper.connect: ``host[:port][,host[:port]...][/chroot]`` as ZooKeeper's
# ConnectStringParser reads it (port 2181 when left out; an IPv6 host in brackets); the
# chroot is an absolute path of znode names (none empty, ``.`` or ``..``, and none of the
# characters ZooKeeper refuses). Empty: no ZooKeeper (a broker alone).
_ZK_SERVER = re.compile(r"^(?P<host>\[[^\]]*\]|[^:\[\]]*)(?::(?P<port>.*))?$")
_ZK_INVALID_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]")
_ZK_FORMAT = "expected host:port[,host:port...][/chroot]"


def _zookeeper_connect(key: str, raw: str) -> str:
    value = raw.strip()
    if not value:
        return value
    hosts, slash, chroot = value.partition("/")
    for server in hosts.split(","):
        m = _ZK_SERVER.match(server.strip())
        if m is None or not m["host"].strip("[]"):
            raise ConfigError(key, raw, f"server {server.strip()!r} has no host ({_ZK_FORMAT})")
        port = m["port"]
        if port is None:
            continue
        if not port.isdigit():
            raise ConfigError(
                key, raw, f"port {port!r} of {server.strip()!r} is not a number ({_ZK_FORMAT})"
            )
        if not 1 <= int(port) <= 65535:
            raise ConfigError(key, raw, f"port {port} of {server.strip()!r} is out of range")
    if slash:
        path = "/" + chroot
        names = chroot.rstrip("/").split("/") if chroot.rstrip("/") else []
        for name in names:
            if not name or name in (".", "..") or _ZK_INVALID_CHARS.search(name):
                raise ConfigError(
                    key,
                    raw,
                    f"chroot {path!r} is not a ZooKeeper path (an absolute path of znode names, "
                    "none empty, '.' or '..')",
                )
    return value


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# SASL mechanisms this broker serves (GSSAPI it does not; OAUTHBEARER with unsecured
# JWTs, Kafka's default validator).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# The OAUTHBEARER validator this broker has: Kafka's default.
UNSECURED_VALIDATOR = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured"
    ".OAuthBearerUnsecuredValidatorCallbackHandler"
)


def _protocol_map(key: str, raw: str) -> str:
    for entry in _list(key, raw):
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip() or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                key,
                raw,
                f"{entry!r} is not NAME:PROTOCOL with PROTOCOL one of "
                f"{', '.join(SECURITY_PROTOCOLS)}",
            )
    return raw.strip()


def protocol_map(raw: str) -> dict[str, str]:
    """``listener.security.protocol.map`` as listener name -> security protocol."""
    out = {}
    for entry in _list("listener.security.protocol.map", raw):
        name, _, protocol = entry.partition(":")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


# key -> (parser, default as Kafka writes it). None default: unset.
_KEYS: dict[str, tuple[Callable[[str, str], Any], str | None]] = {
    # A cluster broker without broker.id (or with -1) takes the id its log dirs' meta.properties
    # name, or generates one from ZooKeeper's /brokers/seqid (above reserved.broker.max.id).
    "broker.id": (_int(-1), "0"),
    "broker.id.generation.enable": (_bool, "true"),
    "reserved.broker.max.id": (_int(0), "1000"),
    "node.id": (_int(-1), None),
    "listeners": (_listeners, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (_listeners, None),
    "listener.security.protocol.map": (
        _protocol_map,
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
    ),
    "sasl.enabled.mechanisms": (_list, "GSSAPI"),
    "sasl.jaas.config": (_str, None),
    "authorizer.class.name": (_authorizer, ""),
    "super.users": (_principals, ""),
    "allow.everyone.if.no.acl.found": (_bool, "false"),
    "ssl.keystore.type": (_str, "JKS"),
    "ssl.keystore.location": (_str, None),
    "ssl.keystore.password": (_str, None),
    "ssl.keystore.key": (_str, None),
    "ssl.keystore.certificate.chain": (_str, None),
    "ssl.key.password": (_str, None),
    "ssl.truststore.type": (_str, "JKS"),
    "ssl.truststore.location": (_str, None),
    "ssl.truststore.password": (_str, None),
    "ssl.truststore.certificates": (_str, None),
    "ssl.client.auth": (_str, "none"),
    "ssl.principal.mapping.rules": (_str, "DEFAULT"),
    "ssl.enabled.protocols": (_str, "TLSv1.2,TLSv1.3"),
    "inter.broker.listener.name": (_str, None),
    "security.inter.broker.protocol": (_choice(*SECURITY_PROTOCOLS), "PLAINTEXT"),
    "sasl.mechanism.inter.broker.protocol": (_str, "GSSAPI"),
    "ssl.endpoint.identification.algorithm": (_str, "https"),
    "reconnect.backoff.ms": (_long(0), "50"),
    "reconnect.backoff.max.ms": (_long(0), "1000"),
    "request.timeout.ms": (_int(0), "30000"),
    "controller.socket.timeout.ms": (_int(0), "30000"),
    "log.dirs": (_list, None),
    "log.dir": (_list, "./logstore-data"),
    "num.partitions": (_int(1), "1"),
    "default.replication.factor": (_int(1), "1"),
    "auto.create.topics.enable": (_bool, "true"),
    "delete.topic.enable": (_bool, "true"),
    "log.segment.bytes": (_int(14, (1 << 31) - 1), "1073741824"),
    "log.roll.ms": (_long(1), None),
    "log.roll.hours": (_int(1), "168"),
    "log.roll.jitter.ms": (_long(0), None),
    "log.roll.jitter.hours": (_int(0), "0"),
    "log.retention.ms": (_long(-1), None),
    "log.retention.minutes": (_int(-1), None),
    "log.retention.hours": (_int(-1), "168"),
    "log.retention.bytes": (_long(-1), "-1"),
    "log.retention.check.interval.ms": (_long(1), "300000"),
    "log.index.interval.bytes": (_int(0), "4096"),
    "log.index.size.max.bytes": (_int(4), "10485760"),
    "log.flush.interval.messages": (_long(1), str(LONG_MAX)),
    "log.flush.interval.ms": (_long(0), None),
    "log.flush.scheduler.interval.ms": (_long(0), str(LONG_MAX)),
    "log.flush.offset.checkpoint.interval.ms": (_int(0), "60000"),
    "log.segment.delete.delay.ms": (_long(0), "60000"),
    "log.cleanup.policy": (_cleanup_policy, "delete"),
    "log.message.timestamp.type": (_choice("CreateTime", "LogAppendTime"), "CreateTime"),
    "log.message.timestamp.difference.max.ms": (_long(0), str(LONG_MAX)),
    "log.message.timestamp.before.max.ms": (_long(0), str(LONG_MAX)),
    "log.message.timestamp.after.max.ms": (_long(0), str(LONG_MAX)),
    "log.preallocate": (_bool, "false"),
    "log.cleaner.enable": (_bool, "true"),
    "log.cleaner.threads": (_int(0), "1"),
    "log.cleaner.dedupe.buffer.size": (_long(0), str(128 * 1024 * 1024)),
    "log.cleaner.io.max.bytes.per.second": (_float(), "Infinity"),
    "log.cleaner.backoff.ms": (_long(0), "15000"),
    "log.cleaner.delete.retention.ms": (_long(0), "86400000"),
    "log.cleaner.min.cleanable.ratio": (_float(0, 1), "0.5"),
    "log.cleaner.min.compaction.lag.ms": (_long(0), "0"),
    "log.cleaner.max.compaction.lag.ms": (_long(1), str(LONG_MAX)),
    "compression.type": (
        _choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        "producer",
    ),
    "message.max.bytes": (_int(0), "1048588"),
    "socket.request.max.bytes": (_int(1), "104857600"),
    "max.request.partition.size.limit": (_int(1), "2000"),
    "socket.send.buffer.bytes": (_int(-1), "102400"),
    "socket.receive.buffer.bytes": (_int(-1), "102400"),
    "connections.max.idle.ms": (_long(0), "600000"),
    "max.connections": (_int(0), "2147483647"),
    "max.connections.per.ip": (_int(0), "2147483647"),
    "max.connections.per.ip.overrides": (_ip_overrides, ""),
    "connection.failed.authentication.delay.ms": (_int(0), "100"),
    # Client quotas (KIP-13, KIP-124, KIP-599): the windows their rates are measured in.
    "quota.window.num": (_int(1), "11"),
    "quota.window.size.seconds": (_int(1), "1"),
    "controller.quota.window.num": (_int(1), "11"),
    "controller.quota.window.size.seconds": (_int(1), "1"),
    "queued.max.request.bytes": (_long(-1), "-1"),
    # KIP-578's partition limits; -1: as many as the broker's file descriptors allow
    # (broker_py/network/fd_budget.py).
    "max.broker.partitions": (_int(-1), "-1"),
    "max.partitions": (_int(-1), "-1"),
    "connections.max.reauth.ms": (_long(0), "0"),
    "num.network.threads": (_int(1), "3"),
    "num.io.threads": (_int(1), "8"),
    "num.recovery.threads.per.data.dir": (_int(1), "1"),
    "min.insync.replicas": (_int(1), "1"),
    "unclean.leader.election.enable": (_bool, "false"),
    "log.message.downconversion.enable": (_bool, "true"),
    "replica.lag.time.max.ms": (_long(0), "30000"),
    "replica.fetch.max.bytes": (_int(0), "1048576"),
    "replica.fetch.wait.max.ms": (_int(0), "500"),
    "max.incremental.fetch.session.cache.slots": (_int(0), "1000"),
    "offsets.topic.num.partitions": (_int(1), "50"),
    "offsets.topic.replication.factor": (_short(1), "3"),
    "offsets.topic.segment.bytes": (_int(1), "104857600"),
    "offsets.retention.minutes": (_int(1), "10080"),
    "offsets.commit.timeout.ms": (_int(1), "5000"),
    "offset.metadata.max.bytes": (_int(0), "4096"),
    "group.initial.rebalance.delay.ms": (_int(0), "3000"),
    "group.min.session.timeout.ms": (_int(0), "6000"),
    "group.max.session.timeout.ms": (_int(0), "1800000"),
    "group.max.size": (_int(1), str((1 << 31) - 1)),
    # Consumer groups on the consumer protocol (KIP-848); cross-key bounds in _check.
    "group.consumer.session.timeout.ms": (_int(1), "45000"),
    "group.consumer.min.session.timeout.ms": (_int(1), "45000"),
    "group.consumer.max.session.timeout.ms": (_int(1), "60000"),
    "group.consumer.heartbeat.interval.ms": (_int(1), "5000"),
    "group.consumer.min.heartbeat.interval.ms": (_int(1), "5000"),
    "group.consumer.max.heartbeat.interval.ms": (_int(1), "15000"),
    "group.consumer.max.size": (_int(1), str((1 << 31) - 1)),
    "group.consumer.assignors": (_list, "uniform,range"),
    "group.consumer.regex.refresh.interval.ms": (_int(1), "600000"),
    # Moving groups between the classic and consumer protocols online (Kafka's
    # ConsumerGroupMigrationPolicy, in its order).
    "group.consumer.migration.policy": (
        _choice_ci("bidirectional", "upgrade", "downgrade", "disabled"),
        "bidirectional",
    ),
    # Share groups (KIP-932): the defaults and bounds of the per-group share.* configs.
    "group.share.session.timeout.ms": (_int(1), "45000"),
    "group.share.min.session.timeout.ms": (_int(1), "45000"),
    "group.share.max.session.timeout.ms": (_int(1), "60000"),
    "group.share.heartbeat.interval.ms": (_int(1), "5000"),
    "group.share.min.heartbeat.interval.ms": (_int(1), "5000"),
    "group.share.max.heartbeat.interval.ms": (_int(1), "15000"),
    "group.share.record.lock.duration.ms": (_int(1000, 3600000), "30000"),
    "group.share.min.record.lock.duration.ms": (_int(1000, 30000), "15000"),
    "group.share.max.record.lock.duration.ms": (_int(30000, 3600000), "60000"),
    # Share groups are served unless switched off here: Kafka 4.2 made them generally
    # available (share.version 1 in new clusters); 4.1 needed this switch or the feature.
    "group.share.enable": (_bool, "true"),
    "group.share.max.size": (_short(10, 1000), "200"),
    # A share-partition left initializing this long is initialized again by a heartbeat.
    "group.share.initialize.retry.interval.ms": (_int(1), "30000"),
    "transactional.id.expiration.ms": (_int(1), "604800000"),
    "transaction.state.log.num.partitions": (_int(1), "50"),
    "transaction.max.timeout.ms": (_int(1), "900000"),
    "transaction.state.log.segment.bytes": (_int(1), "104857600"),
    "transaction.state.log.replication.factor": (_short(1), "3"),
    "transaction.state.log.min.isr": (_int(1), "2"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (_int(1), "10000"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (_int(1), "3600000"),
    "transaction.partition.verification.enable": (_bool, "true"),
    "producer.id.expiration.ms": (_int(1), "86400000"),
    "producer.id.expiration.check.interval.ms": (_int(1), "600000"),
    # The Prometheus endpoint (broker_py/server/metrics): off unless metrics.port is set.
    "metrics.port": (_int(0, 65535), None),
    "metrics.host": (_str, "0.0.0.0"),
    # The schema registry (docs/schema-registry.md): off unless schema.registry.listeners is
    # set; basic authentication checks the broker's SCRAM users.
    "schema.registry.listeners": (_registry_listener, None),
    "schema.registry.advertised.host": (_str, None),
    "schema.registry.authentication": (_choice_ci("none", "basic"), "none"),
    "schema.registry.max.request.bytes": (_int(1024), "1048576"),
    "schema.registry.session.timeout.ms": (_int(1000), "10000"),
    "schema.registry.topic.replication.factor": (_short(1), "3"),
    # The largest PushTelemetry payload taken (KIP-714, Kafka's default).
    "telemetry.max.bytes": (_int(1), "1048576"),
    "zookeeper.connect": (_zookeeper_connect, None),
    "zookeeper.session.timeout.ms": (_int(1), "18000"),
    "zookeeper.connection.timeout.ms": (_int(1), None),
    "controlled.shutdown.enable": (_bool, "true"),
    "controlled.shutdown.max.retries": (_int(0), "3"),
    "controlled.shutdown.retry.backoff.ms": (_long(0), "5000"),
    "broker.rack": (_str, None),
    "replica.selector.class": (
        _choice(
            "org.apache.kafka.common.replica.LeaderSelector",
            "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        ),
        None,
    ),
    "auto.leader.rebalance.enable": (_bool, "true"),
    "leader.imbalance.check.interval.seconds": (_long(1), "300"),
    "leader.imbalance.per.broker.percentage": (_int(0), "10"),
    "replica.fetch.backoff.ms": (_int(0), "1000"),
    "replica.fetch.response.max.bytes": (_int(0), "10485760"),
    "replica.fetch.min.bytes": (_int(1), "1"),
    "num.replica.fetchers": (_int(1), "1"),
    "replica.high.watermark.checkpoint.interval.ms": (_long(1), "5000"),
    # Replication throttles (KIP-73): bytes/s for the replicas the topic configs
    # leader/follower.replication.throttled.replicas list; set dynamically.
    "leader.replication.throttled.rate": (_long(0), str(LONG_MAX)),
    "follower.replication.throttled.rate": (_long(0), str(LONG_MAX)),
    "replication.quota.window.num": (_int(1), "11"),
    "replication.quota.window.size.seconds": (_int(1), "1"),
    "sasl.kerberos.min.time.before.relogin": (_long(0), "60000"),
    "sasl.kerberos.ticket.renew.jitter": (_float(0, 1), "0.05"),
    "sasl.kerberos.ticket.renew.window.factor": (_float(0, 1), "0.8"),
    "sasl.kerberos.kinit.cmd": (_str, "/usr/bin/kinit"),
    **SHARE_COORDINATOR_KEYS,
    **SHARE_GROUP_KEYS,
}

# Keys AlterConfigs may change on a BROKER resource while the broker runs (those of
# Kafka's DynamicBrokerConfig this broker knows). Topic defaults apply to every topic
# without its own value at once; the others are read where they are used.
DYNAMIC_KEYS = frozenset(
    {
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.hours",
        "log.roll.jitter.ms",
        "log.roll.jitter.hours",
        "log.index.size.max.bytes",
        "log.index.interval.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
        "log.segment.delete.delay.ms",
        "log.cleanup.policy",
        "log.preallocate",
        "log.message.timestamp.type",
        "log.message.timestamp.difference.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.threads",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.backoff.ms",
        "compression.type",
        "message.max.bytes",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "log.message.downconversion.enable",
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "producer.id.expiration.ms",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.kinit.cmd",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
    }
)

# Dynamic keys a broker id must be named for: Kafka refuses them as the cluster default.
PER_BROKER_KEYS = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map"})

# Dynamic keys outside Kafka's KafkaConfig (its DynamicConfig.Broker quota keys): a broker
# describes them only where they are set.
DESCRIBED_WHEN_SET = frozenset(
    {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}
)

# Broker key -> topic config it defaults (Kafka's LogConfig synonyms).
_TOPIC_SYNONYMS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleanup.policy": "cleanup.policy",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.preallocate": "preallocate",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "compression.type": "compression.type",
    "message.max.bytes": "max.message.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.message.downconversion.enable": "message.downconversion.enable",
}


def _check(values: dict[str, Any]) -> None:
    """Rules across keys; fills the keys that default to another's value."""
    if values["node.id"] is not None:
        values["broker.id"] = values["node.id"]
    if (
        values["broker.id.generation.enable"]
        and values["broker.id"] > values["reserved.broker.max.id"]
    ):
        raise ConfigError(
            "broker.id",
            values["broker.id"],
            f"is above reserved.broker.max.id ({values['reserved.broker.max.id']}), "
            "where generated ids start",
        )
    if values["advertised.listeners"] is None:
        values["advertised.listeners"] = values["listeners"]
    protocols = protocol_map(values["listener.security.protocol.map"])
    for listener in values["listeners"]:
        protocol = protocols.get(listener.name)
        if protocol is None:
            raise ConfigError(
                "listener.security.protocol.map",
                values["listener.security.protocol.map"],
                f"no security protocol for listener {listener.name}",
            )
    names = {listener.name for listener in values["listeners"]}
    for listener in values["advertised.listeners"]:
        if listener.name not in names:
            raise ConfigError(
                "advertised.listeners",
                str(listener),
                f"listener {listener.name} is not in listeners",
            )
    if values["group.min.session.timeout.ms"] > values["group.max.session.timeout.ms"]:
        raise ConfigError(
            "group.min.session.timeout.ms",
            values["group.min.session.timeout.ms"],
            "exceeds group.max.session.timeout.ms",
        )
    _check_consumer_group(values)


def _check_group_bounds(values: dict[str, Any], kind: str, names: Iterable[str]) -> None:
    """Kafka's bounds between group.<kind>.<name>.ms and its min. and max. keys."""
    for name in names:
        key, lo, hi = (f"group.{kind}.{p}{name}.ms" for p in ("", "min.", "max."))
        if values[hi] < values[lo]:
            raise ConfigError(hi, values[hi], f"must be greater than or equal to {lo}")
        if not values[lo] <= values[key] <= values[hi]:
            raise ConfigError(key, values[key], f"must be within {lo} and {hi}")
    interval = values[f"group.{kind}.heartbeat.interval.ms"]
    if interval >= values[f"group.{kind}.session.timeout.ms"]:
        raise ConfigError(
            f"group.{kind}.heartbeat.interval.ms",
            interval,
            f"must be less than group.{kind}.session.timeout.ms",
        )


def _check_consumer_group(values: dict[str, Any]) -> None:
    """Kafka's bounds between the group.consumer.* keys and between the group.share.* ones."""
    _check_group_bounds(values, "consumer", ("session.timeout", "heartbeat.interval"))
    _check_group_bounds(
        values, "share", ("session.timeout", "heartbeat.interval", "record.lock.duration")
    )
    builtin = {
        "uniform": "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
        "range": "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
    }
    assignors = values["group.consumer.assignors"]
    if not assignors:
        raise ConfigError("group.consumer.assignors", "", "at least one assignor is needed")
    for name in assignors:
        if name not in builtin and name not in builtin.values():
            raise ConfigError(
                "group.consumer.assignors", name, "unknown assignor; built-in: uniform, range"
            )


def config_type(key: str) -> str | None:
    """A broker key's ConfigDef type as DescribeConfigs names it (INT, LONG, BOOLEAN, ...);
    None for an unknown key or one with a parser of its own (listeners, maps, classes)."""
    entry = _KEYS.get(key)
    return None if entry is None else kind_of(entry[0])


def unknown_key_warning(key: str) -> str:
    """Kafka's warning for a key it does not know, naming the nearest known keys."""
    text = f"The configuration '{key}' was supplied but isn't a known config (ignored)"
    near = difflib.get_close_matches(key, _KEYS, n=1, cutoff=0.75)
    return f"{text}; did you mean {near[0]}?" if near else text


def parse_properties(text: str) -> dict[str, str]:
    """Parses Java ``.properties`` text (the subset ``server.properties`` uses)."""
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip() if not logical else raw.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        m = re.match(r"^((?:[^=:\s\\]|\\.)+)\s*[=:\s]\s*(.*)$", logical)
        if m:
            props[m[1].replace("\\", "")] = m[2].strip()
        elif logical.strip():
            props[logical.strip()] = ""
        logical = ""
    return props


class BrokerConfig:
    """Validated broker config. Values are reached as ``config["log.segment.bytes"]``.

    Values come in Kafka's layers, the first present winning: the dynamic config of
    this broker, the dynamic cluster-wide default (both set with AlterConfigs on a
    BROKER resource, see :meth:`set_dynamic`), the static ``server.properties`` /
    ``--override`` value, and Kafka's default.
    """

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        props = dict(props or {})
        self.unknown: list[str] = sorted(
            k for k in props if k not in _KEYS and not _is_listener_key(k)
        )
        self.originals = props
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        self._values = self._parse(props)

    @staticmethod
    def _parse(props: Mapping[str, str]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        errors: list[ConfigError] = []
        for key, (parse, default) in _KEYS.items():
            raw = props.get(key, default)
            try:
                values[key] = None if raw is None else parse(key, raw)
            except ConfigError as e:
                errors.append(e)
        raise_all(errors)
        _check(values)
        return values

    def set_dynamic(self, default: Mapping[str, str], per_broker: Mapping[str, str]) -> None:
        """Replaces the dynamic layers. Raises ConfigError in Kafka's words (and changes
        nothing): DynamicConfigError for keys that cannot change at runtime (unknown ones
        included), or a bad value."""
        for layer in (default, per_broker):
            # Kafka refuses a known static key so; an unknown key (no plugin here reads
            # one) is refused the same way rather than stored.
            static = [key for key in layer if key not in DYNAMIC_KEYS]
            if static:
                raise DynamicConfigError("Cannot update these configs dynamically", static, layer)
        per_broker_only = PER_BROKER_KEYS & default.keys()
        if per_broker_only:
            raise DynamicConfigError(
                "Cannot update these configs at default cluster level, broker id must be specified",
                per_broker_only,
                default,
            )
        values = self._parse({**self.originals, **default, **per_broker})
        self._values = values
        self.dynamic_default = dict(default)
        self.dynamic_broker = dict(per_broker)

    def layers(self, key: str) -> list[tuple[str, str | None]]:
        """(source, raw value) of each layer holding ``key``, the effective one first:
        sources are ``dynamic_broker``, ``dynamic_default``, ``static``, ``default``."""
        out: list[tuple[str, str | None]] = []
        if key in self.dynamic_broker:
            out.append(("dynamic_broker", self.dynamic_broker[key]))
        if key in self.dynamic_default:
            out.append(("dynamic_default", self.dynamic_default[key]))
        if key in self.originals:
            out.append(("static", self.originals[key]))
        default = _KEYS[key][1] if key in _KEYS else None
        if default is not None:
            out.append(("default", default))
        return out

    @classmethod
    def load(
        cls, path: str | os.PathLike[str] | None, overrides: Iterable[str] = ()
    ) -> BrokerConfig:
        props: dict[str, str] = {}
        if path is not None:
            try:
                with open(path, encoding="utf-8") as f:
                    props = parse_properties(f.read())
            except FileNotFoundError:
                raise PropertiesFileError(str(path), "no such file") from None
            except IsADirectoryError:
                raise PropertiesFileError(
                    str(path), "is a directory, not a properties file"
                ) from None
            except UnicodeDecodeError as e:
                raise PropertiesFileError(
                    str(path), f"not UTF-8 text ({e.reason} at byte {e.start})"
                ) from None
            except OSError as e:
                raise PropertiesFileError(str(path), f"cannot be read: {e.strerror or e}") from None
        errors: list[ConfigError] = []
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                errors.append(ConfigError("--override", item, "must be key=value"))
                continue
            props[key.strip()] = value.strip()
        try:
            config = cls(props)
        except ConfigError as e:
            errors += e.errors if isinstance(e, ConfigErrors) else [e]
        raise_all(errors)
        return config

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def is_set(self, key: str) -> bool:
        """Whether ``key`` was given: in server.properties, an override, or a dynamic layer."""
        return key in self.originals or key in self.dynamic_broker or key in self.dynamic_default

    @property
    def broker_id(self) -> int:
        return self["broker.id"]

    @property
    def broker_id_given(self) -> bool:
        """Whether ``broker.id`` (or ``node.id``) was given a value of 0 or more: a cluster
        broker without one takes a stored or generated id (:meth:`set_broker_id`)."""
        return (self.is_set("broker.id") or self.is_set("node.id")) and self["broker.id"] >= 0

    def set_broker_id(self, broker_id: int) -> None:
        """The id this broker runs with, once read from meta.properties or generated."""
        self._values["broker.id"] = broker_id

    @property
    def log_dirs(self) -> list[str]:
        return self["log.dirs"] or self["log.dir"]

    @property
    def retention_ms(self) -> int:
        if self["log.retention.ms"] is not None:
            return self["log.retention.ms"]
        if self["log.retention.minutes"] is not None:
            return self["log.retention.minutes"] * 60_000
        return self["log.retention.hours"] * 3_600_000

    @property
    def segment_ms(self) -> int:
        if self["log.roll.ms"] is not None:
            return self["log.roll.ms"]
        return self["log.roll.hours"] * 3_600_000

    @property
    def flush_ms(self) -> int:
        if self["log.flush.interval.ms"] is not None:
            return self["log.flush.interval.ms"]
        return self["log.flush.scheduler.interval.ms"]

    def advertised_listener(self, name: str | None = None) -> Listener:
        listeners = self["advertised.listeners"]
        for listener in listeners:
            if name is None or listener.name == name:
                return listener
        return listeners[0]

    def security_protocol(self, listener_name: str) -> str:
        return protocol_map(self["listener.security.protocol.map"])[listener_name]

    def inter_broker_listener(self) -> tuple[str, str]:
        """(listener name, security protocol) brokers use to reach each other, as Kafka
        reads them: ``inter.broker.listener.name`` if set, else the advertised listener
        named as ``security.inter.broker.protocol`` (default PLAINTEXT) if it has that
        protocol, else the first advertised listener that has it. ConfigError if both
        keys are set or no advertised listener matches."""
        name = self["inter.broker.listener.name"]
        if name is not None and self.is_set("security.inter.broker.protocol"):
            raise ConfigError(
                "inter.broker.listener.name",
                name,
                "only one of inter.broker.listener.name and security.inter.broker.protocol "
                "should be set",
            )
        advertised = [listener.name for listener in self["advertised.listeners"]]
        protocols = protocol_map(self["listener.security.protocol.map"])
        if name is not None:
            name = name.strip().upper()
            if name not in advertised:
                raise ConfigError(
                    "inter.broker.listener.name",
                    name,
                    f"must be a listener name in advertised.listeners ({', '.join(advertised)})",
                )
            return name, protocols[name]
        protocol = self["security.inter.broker.protocol"]
        if protocols.get(protocol) == protocol and protocol in advertised:
            return protocol, protocol
        for candidate in advertised:
            if protocols.get(candidate) == protocol:
                return candidate, protocol
        raise ConfigError(
            "security.inter.broker.protocol",
            protocol,
            f"no advertised listener ({', '.join(advertised)}) uses it",
        )

    def _set(self, key: str) -> str | None:
        """The raw value of ``key`` from the first layer that sets it (not the default)."""
        for layer in (self.dynamic_broker, self.dynamic_default, self.originals):
            if key in layer:
                return layer[key]
        return None

    def listener_value(self, listener_name: str, key: str) -> tuple[str, str | None]:
        """(the key that holds it, raw value) of a listener's own ``listener.name.<name>.<key>``
        if set, else of ``key`` itself (static or dynamic), else ``key``'s default."""
        prefixed = f"listener.name.{listener_name.lower()}.{key}"
        for candidate in (prefixed, key):
            if (raw := self._set(candidate)) is not None:
                return candidate, raw
        return key, (_KEYS[key][1] if key in _KEYS else None)

    def jaas_config(self, listener_name: str, mechanism: str) -> tuple[str, str | None]:
        """(key, raw value) of the JAAS config of ``mechanism`` on a listener: Kafka's
        ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, else ``sasl.jaas.config``
        (the prefixed key and None when neither is set)."""
        prefixed = f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config"
        for candidate in (prefixed, "sasl.jaas.config"):
            if (raw := self._set(candidate)) is not None:
                return candidate, raw
        return prefixed, None

    def sasl_mechanisms(self, listener_name: str) -> list[str]:
        """The SASL mechanisms a SASL listener enables; ConfigError for one not served."""
        key, raw = self.listener_value(listener_name, "sasl.enabled.mechanisms")
        mechanisms = [m.upper() for m in _list(key, raw or "")]
        if not mechanisms:
            raise ConfigError(
                key,
                raw or "",
                f"listener {listener_name} is SASL_PLAINTEXT but enables no mechanism",
            )
        for m in mechanisms:
            if m not in SASL_MECHANISMS:
                raise ConfigError(
                    key, raw or "", f"{m} is not served; use {', '.join(SASL_MECHANISMS)}"
                )
        return mechanisms

    def topic_defaults(self) -> dict[str, str]:
        """Per-topic config defaults under topic config names, as strings."""
        out = {topic: _render(self._values[broker]) for broker, topic in _TOPIC_SYNONYMS.items()}
        out["retention.ms"] = str(self.retention_ms)
        out["segment.ms"] = str(self.segment_ms)
        out["flush.ms"] = str(self.flush_ms)
        out["segment.jitter.ms"] = str(
            self["log.roll.jitter.ms"]
            if self["log.roll.jitter.ms"] is not None
            else self["log.roll.jitter.hours"] * 3_600_000
        )
        return out

    @staticmethod
    def synonyms_of(topic_key: str) -> list[str]:
        """The broker keys whose values default ``topic_key``, the strongest first
        (``log.retention.ms`` before ``log.retention.minutes`` before ``.hours``)."""
        special = {
            "retention.ms": ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
            "segment.ms": ["log.roll.ms", "log.roll.hours"],
            "segment.jitter.ms": ["log.roll.jitter.ms", "log.roll.jitter.hours"],
            "flush.ms": ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
        }
        if topic_key in special:
            return special[topic_key]
        return [broker for broker, topic in _TOPIC_SYNONYMS.items() if topic == topic_key]

    def describe(self) -> dict[str, str | None]:
        """Every known broker key with its effective value rendered as Kafka does (those of
        :data:`DESCRIBED_WHEN_SET` only where set)."""
        return {
            k: (None if v is None else _render(v))
            for k, v in self._values.items()
            if k not in DESCRIBED_WHEN_SET or self.is_set(k)
        }


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(value)
    return str(value)


def _is_listener_key(key: str) -> bool:
    """``listener.name.<listener>.[<mechanism>.]sasl.<...>`` or ``...ssl.<...>``: a
    listener's own value of a SASL or TLS key (``sasl.enabled.mechanisms``,
    ``plain.sasl.jaas.config``, ``ssl.keystore.location``, ...)."""
    return re.match(r"^listener\.name\.[^.]+\.(?:(?:[a-z0-9-]+\.)?sasl\.|ssl\.)", key) is not None
