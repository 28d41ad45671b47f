"""One broker: configuration, topics, partition logs, listeners and background tasks.

A broker alone is its own controller: topic metadata lives in its first log dir
(:mod:`broker_py.controller.topic_metadata`). Each log dir carries Kafka's ``meta.properties``
with ``broker.id`` and ``cluster.id``; a log dir written by another broker id stops
startup with an error naming ``broker.id``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable

import logstore

from broker_py.server import handlers

from broker_py.security.sasl import jaas
from broker_py.config.kafka_config import UNSECURED_VALIDATOR, BrokerConfig, ConfigError, Listener
from broker_py.config.dynamic_broker_config import DynamicBrokerConfigStore
from broker_py.server.fetch_session import FetchSessionCache
from logstore.protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    InvalidReplicationFactorError,
    KafkaStorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from broker_py.log.log_cleaner_manager import LogCleaner
from broker_py.log.log_manager import LogManager, log_config
from broker_py.log.log_dir_mover import LogDirMover
from broker_py.network.socket_server import KafkaServer
from broker_py.cluster.partition import Partition
from broker_py.security.sasl.oauthbearer_sasl_server import OAuthBearerSaslServer, UnsecuredValidatorOptions
from broker_py.security.sasl.plain_sasl_server import PlainSaslServer
from broker_py.coordinator.transaction.producer_id_manager import ProducerIdManager
from broker_py.security.sasl.sasl_authenticator import SaslServerAuthenticator
from broker_py.security.sasl.scram_credentials import ScramCredentialStore
from broker_py.security.ssl.ssl_principal_mapper import SslPrincipalMapper
from broker_py.security.authorizer.standard_authorizer import StandardAuthorizer
from broker_py.security.sasl.scram_sasl_server import ScramSaslServer
from broker_py.security.ssl.ssl_context import server_context
from broker_py.controller.topic_metadata import TopicInfo, TopicMetadataStore, validate_topic_name

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


def _read_meta_properties(path: str) -> dict[str, str]:
    props = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                props[k.strip()] = v.strip()
    return props


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        # First: the log manager locks every log dir (LogDirInUseError if another broker
        # holds one) before this broker reads or writes anything in them.
        self.log_manager = LogManager(config.log_dirs)
        try:
            self._load(config)
        except BaseException:
            self.log_manager.shutdown()
            raise

    def _load(self, config: BrokerConfig) -> None:
        """Reads the broker's state from its (locked) log dirs."""
        self.cluster_id = self._check_log_dirs()
        self.dynamic_configs = DynamicBrokerConfigStore(config.log_dirs[0], config)
        self.dynamic_configs.load()
        self.scram_credentials = ScramCredentialStore(config.log_dirs[0])
        # None without authorizer.class.name: every request is allowed, as in Kafka.
        self.authorizer: StandardAuthorizer | None = None
        if config["authorizer.class.name"]:
            self.authorizer = StandardAuthorizer(
                config.log_dirs[0], config["super.users"], config["allow.everyone.if.no.acl.found"]
            )
        self.metadata = TopicMetadataStore(config.log_dirs[0])
        self.producer_ids = ProducerIdManager(config.log_dirs[0])
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self.log_dir_mover = LogDirMover(self)
        self.servers: list[KafkaServer] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.group_coordinator = None  # set in start(); needs the running loop
        self.transaction_coordinator = None  # set in start(), after the groups are loaded
        self.cleaner: LogCleaner | None = None
        self._topic_defaults: dict[str, str] | None = None
        # topic -> (the TopicInfo.configs dict it was built from, effective config)
        self._effective: dict[str, tuple[dict[str, str], dict[str, str]]] = {}

    # ---- startup and shutdown ----

    def _check_log_dirs(self) -> str:
        """Returns the cluster id, creating ``meta.properties`` where missing."""
        cluster_id = None
        for d in self.config.log_dirs:
            path = os.path.join(d, "meta.properties")
            if os.path.exists(path):
                props = _read_meta_properties(path)
                if props.get("broker.id") not in (None, str(self.broker_id)):
                    raise ConfigError("broker.id", self.broker_id, f"log dir {d} belongs to broker.id {props['broker.id']}")
                if cluster_id is not None and props.get("cluster.id") not in (None, cluster_id):
                    raise ConfigError("log.dirs", d, "log dirs belong to different clusters")
                cluster_id = props.get("cluster.id", cluster_id)
        if cluster_id is None:
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        for d in self.config.log_dirs:
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, "meta.properties")
            if not os.path.exists(path):
                tmp = path + ".tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    f.write(f"#\nversion=0\nbroker.id={self.broker_id}\ncluster.id={cluster_id}\n")
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
        return cluster_id

    async def start(self) -> None:
        from broker_py.coordinator.group.group_coordinator import GroupCoordinator
        from broker_py.coordinator.transaction.transaction_coordinator import TransactionCoordinator

        self.log_manager.set_aside_stray_logs(self.metadata.topics)
        for topic in list(self.metadata.topics.values()):
            for p in range(topic.partitions):
                self._open_partition(topic, p)
        self.group_coordinator = GroupCoordinator(self)
        await self.group_coordinator.start()
        self.transaction_coordinator = TransactionCoordinator(self)
        await self.transaction_coordinator.start()
        for listener in self.config["listeners"]:
            server = self._server_for(listener)
            await server.start()
            self.servers.append(server)
        self._tasks.append(asyncio.create_task(self._retention_loop(), name="log-retention"))
        self._tasks.append(asyncio.create_task(self._producer_expiration_loop(), name="producer-expiration"))
        if self.config["log.cleaner.enable"] and self.config["log.cleaner.threads"] > 0:
            self.cleaner = LogCleaner(self.config, lambda: self._partitions_with_policy("compact"))
            self._tasks.append(asyncio.create_task(self.cleaner.run(), name="log-cleaner"))

    def _server_for(self, listener: Listener) -> KafkaServer:
        """A server for ``listener`` (ConfigError, naming the key, for a SASL listener
        whose mechanisms or JAAS config are not usable or an SSL one whose keystore is
        not)."""
        return KafkaServer(
            listener.host or "0.0.0.0",
            listener.port,
            handlers.registry(self),
            lambda event: handlers.on_unsupported(self, event),
            self.config["socket.request.max.bytes"],
            name=listener.name,
            new_authenticator=self._authenticators(listener.name),
            ssl_context=server_context(self.config, listener.name)
            if self.config.security_protocol(listener.name) in ("SSL", "SASL_SSL")
            else None,
            principal_mapper=SslPrincipalMapper(*reversed(self.config.listener_value(listener.name, "ssl.principal.mapping.rules"))),
        )

    def _authenticators(self, listener_name: str) -> Callable[[], SaslServerAuthenticator] | None:
        if self.config.security_protocol(listener_name) not in ("SASL_PLAINTEXT", "SASL_SSL"):
            return None
        mechanisms = self.config.sasl_mechanisms(listener_name)
        plain_users: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            key, raw = self.config.jaas_config(listener_name, "PLAIN")
            module = jaas.parse(key, raw) if raw else None
            if module is None or not module.class_name.endswith(".PlainLoginModule"):
                raise ConfigError(key, "(hidden)" if raw else "", "PLAIN needs a PlainLoginModule config with user_<name>=\"<password>\" options")
            plain_users = {k[len("user_"):]: v for k, v in module.options.items() if k.startswith("user_")}
        oauth = self._oauthbearer_options(listener_name) if "OAUTHBEARER" in mechanisms else None
        reauth_ms = {m: self._max_reauth_ms(listener_name, m) for m in mechanisms}

        def new_server(mechanism: str):
            if mechanism == "PLAIN":
                return PlainSaslServer(plain_users)
            if mechanism == "OAUTHBEARER":
                assert oauth is not None
                return OAuthBearerSaslServer(oauth)
            return ScramSaslServer(mechanism, self.scram_credentials)

        return lambda: SaslServerAuthenticator(mechanisms, new_server, reauth_ms.__getitem__)

    def _max_reauth_ms(self, listener_name: str, mechanism: str) -> int:
        """``connections.max.reauth.ms`` for a mechanism on a listener, from Kafka's
        ``listener.name.<listener>.<mechanism>.connections.max.reauth.ms`` or the broker
        key; ConfigError naming the key unless it is an integer of at least 0."""
        key = f"listener.name.{listener_name.lower()}.{mechanism.lower()}.connections.max.reauth.ms"
        raw = self.config.listener_value(listener_name, f"{mechanism.lower()}.connections.max.reauth.ms")[1]
        if raw is None:
            return self.config["connections.max.reauth.ms"]
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(key, raw, "not an integer") from None
        if value < 0:
            raise ConfigError(key, raw, "must be at least 0")
        return value

    def _oauthbearer_options(self, listener_name: str) -> UnsecuredValidatorOptions:
        """The unsecured validator's options from the listener's OAuthBearerLoginModule
        config; ConfigError naming the key for a missing module, a bad option or a
        server callback handler other than the unsecured validator (JWKS validation
        is not served)."""
        key, handler = self.config.listener_value(listener_name, "oauthbearer.sasl.server.callback.handler.class")
        if handler is not None and handler.strip() not in ("", UNSECURED_VALIDATOR):
            raise ConfigError(key, handler, f"only {UNSECURED_VALIDATOR} (unsecured JWTs) is served")
        key, raw = self.config.jaas_config(listener_name, "OAUTHBEARER")
        module = jaas.parse(key, raw) if raw else None
        if module is None or not module.class_name.endswith(".OAuthBearerLoginModule"):
            raise ConfigError(key, "(hidden)" if raw else "", "OAUTHBEARER needs an OAuthBearerLoginModule config")
        try:
            return UnsecuredValidatorOptions.from_jaas_options(module.options)
        except ValueError as e:
            raise ConfigError(key, "(hidden)", str(e)) from None

    def _listener_changes(self) -> tuple[list[Listener], list[KafkaServer]]:
        """(listeners to add, servers to remove) for ``listeners`` as configured now,
        matched by name as Kafka's DynamicListenerConfig does. Raises ConfigError for a
        listener whose address would change: that needs a restart or a new name."""
        wanted = {listener.name: listener for listener in self.config["listeners"]}
        running = {server.name: server for server in self.servers}
        for name, server in running.items():
            listener = wanted.get(name)
            if listener is not None and ((listener.host or "0.0.0.0"), listener.port) != (server.host, server.port) and listener.port != 0:
                raise ConfigError(
                    "listeners", str(listener),
                    f"listener {name} is on {server.host}:{server.port}; an existing listener cannot move while the "
                    "broker runs (restart it, or add the address under a new listener name)",
                )
        added = [listener for name, listener in wanted.items() if name not in running]
        removed = [server for name, server in running.items() if name not in wanted]
        return added, removed

    @property
    def bound_port(self) -> int:
        return self.servers[0].port

    def advertised_listener(self, connection=None) -> Listener:
        """The address clients are told to use: the entry of ``advertised.listeners``
        (default: ``listeners``) named as the listener ``connection`` came in on (else
        the first), with host/port taken from the bound socket where it says 0.0.0.0 /
        port 0."""
        server = getattr(connection, "server", None)
        advertised = self.config.advertised_listener(getattr(server, "name", None))
        host, port = advertised.host, advertised.port
        if self.servers and not self.config.is_set("advertised.listeners"):
            bound = next((s for s in self.servers if s.name == advertised.name), self.servers[0])
            port = port or bound.port
            if host in ("", "0.0.0.0", "::"):
                host = "127.0.0.1"
        return Listener(advertised.name, host, port)

    async def stop(self) -> None:
        await self.log_dir_mover.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.cleaner is not None:
            self.cleaner.shutdown()
        for server in self.servers:
            await server.stop()
        if self.transaction_coordinator is not None:
            await self.transaction_coordinator.stop()
        if self.group_coordinator is not None:
            await self.group_coordinator.stop()
        for partition in self.partitions.values():
            try:
                partition.producer_state.write_snapshot()
            except OSError:
                log.exception("producer snapshot of %s-%d", partition.topic, partition.index)
        self.log_manager.shutdown()

    def _partitions_with_policy(self, policy: str) -> list[Partition]:
        """Partitions the cleaner or retention may work on: not those moving to another dir."""
        out = []
        for partition in list(self.partitions.values()):
            if self.log_dir_mover.moving(partition.topic, partition.index):
                continue
            topic = self.metadata.get(partition.topic)
            if topic is not None and policy in self.effective_config(topic).get("cleanup.policy", "delete"):
                out.append(partition)
        return out

    def _enforce_retention(self) -> int:
        """Time and size retention, for topics whose cleanup.policy includes delete."""
        deleted = 0
        for p in self._partitions_with_policy("delete"):
            try:
                deleted += p.log.enforce_retention(max_offset=p.high_watermark)
            except logstore.LogClosedError:
                continue  # deleted, or reopened by a move, meanwhile
        return deleted

    async def _producer_expiration_loop(self) -> None:
        """Every ``producer.id.expiration.check.interval.ms``, forgets the idempotent
        producers of every partition idle for ``producer.id.expiration.ms``."""
        while True:
            await asyncio.sleep(self.config["producer.id.expiration.check.interval.ms"] / 1000)
            now = int(time.time() * 1000)
            expiration_ms = self.config["producer.id.expiration.ms"]
            removed = sum(p.producer_state.remove_expired(now, expiration_ms) for p in list(self.partitions.values()))
            if removed:
                log.info("expired %d idle producer ids", removed)

    async def _retention_loop(self) -> None:
        interval = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                deleted = await asyncio.to_thread(self._enforce_retention)
                if deleted:
                    log.info("retention deleted %d segments", deleted)
                for p in list(self.partitions.values()):
                    p.txn_index.delete_before(p.log_start_offset)
            except logstore.LogStoreError:
                log.exception("retention check")

    # ---- topics ----

    def effective_config(self, topic: TopicInfo) -> dict[str, str]:
        """The topic's configs over the broker's defaults (cached until they change)."""
        cached = self._effective.get(topic.name)
        if cached is None or cached[0] is not topic.configs:
            if self._topic_defaults is None:
                self._topic_defaults = self.config.topic_defaults()
            cached = (topic.configs, {**self._topic_defaults, **topic.configs})
            self._effective[topic.name] = cached
        return cached[1]

    def min_insync_replicas(self, topic: TopicInfo) -> int:
        return int(self.effective_config(topic).get("min.insync.replicas", "1"))

    def _open_partition(self, topic: TopicInfo, index: int) -> Partition:
        plog = self.log_manager.open_log(topic, index, self.effective_config(topic))
        partition = Partition(topic.name, index, plog)
        self.partitions[(topic.name, index)] = partition
        return partition

    def reopen_partition(self, topic: str, index: int, log_dir: str) -> None:
        """Opens a partition's closed log again from ``log_dir`` (a move's last step)."""
        info = self.metadata.get(topic)
        assert info is not None
        plog = self.log_manager.reopen_log(topic, index, log_dir, self.effective_config(info))
        self.partitions[(topic, index)].replace_log(plog)

    def partition(self, topic: str, index: int) -> Partition:
        p = self.partitions.get((topic, index))
        if p is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{index} is not on this broker")
        return p

    def validate_topic_configs(self, configs: dict[str, str]) -> dict[str, str]:
        try:
            logstore.validate_log_config(**{**self.config.topic_defaults(), **configs})
        except logstore.InvalidConfigError as e:
            raise InvalidConfigError(str(e)) from None
        return configs

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        validate_topic_name(name)
        if self.metadata.get(name) is not None:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if num_partitions <= 0:
            raise InvalidPartitionsError(f"number of partitions must be larger than 0, not {num_partitions}")
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if replication_factor <= 0:
            raise InvalidReplicationFactorError("replication factor must be larger than 0")
        if replication_factor > 1:
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the 1 available broker"
            )
        configs = self.validate_topic_configs(dict(configs or {}))
        if validate_only:
            return TopicInfo(name, uuid.UUID(int=0), num_partitions, configs)
        topic = self.metadata.create(name, num_partitions, configs)
        self._open_new_partitions(topic, 0)
        log.info("created topic %s with %d partitions", name, num_partitions)
        return topic

    def _open_new_partitions(self, topic: TopicInfo, first: int) -> None:
        """Creates the logs of partitions ``first`` .. ``topic.partitions - 1``, whose
        count is already persisted. If one cannot be created (KafkaStorageError), those
        created are removed and the persisted count goes back to ``first`` (with
        ``first`` 0, the topic goes), so a failed creation leaves nothing half made."""
        try:
            for p in range(first, topic.partitions):
                self._open_partition(topic, p)
        except KafkaStorageError:
            for p in range(first, topic.partitions):
                if self.partitions.pop((topic.name, p), None) is not None:
                    self.log_manager.delete_log(topic.name, p)
            try:
                if first == 0:
                    self.metadata.delete(topic.name)
                else:
                    self.metadata.set_partitions(topic.name, first)
            except KafkaStorageError as e:
                log.error("%s keeps %d partitions in the topic metadata, to be created at the next start: %s",
                          topic.name, topic.partitions, e)  # fmt: skip
            raise

    def auto_create_topic(self, name: str) -> TopicInfo:
        return self.create_topic(name)

    def delete_topic(self, name: str) -> TopicInfo:
        topic = self.metadata.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        self.metadata.delete(name)  # first: a delete the disk refuses leaves the topic whole
        for p in range(topic.partitions):
            partition = self.partitions.pop((name, p), None)
            if partition is not None:
                partition.notify_append()  # wake long-polls so they see it gone
            self.log_manager.delete_log(name, p)
        if self.group_coordinator is not None:
            self.group_coordinator.on_topic_deleted(name)
        log.info("deleted topic %s", name)
        return topic

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        topic = self.metadata.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        if count < topic.partitions:
            raise InvalidPartitionsError(f"topic {name} has {topic.partitions} partitions; the count can only grow")
        if count == topic.partitions:
            raise InvalidPartitionsError(f"topic {name} already has {count} partitions")
        if validate_only:
            return
        old = topic.partitions
        self.metadata.set_partitions(name, count)
        self._open_new_partitions(topic, old)

    def set_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None:
        topic = self.metadata.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        self.validate_topic_configs(configs)
        if validate_only:
            return
        self.metadata.set_configs(name, configs)
        effective = log_config(self.effective_config(topic))
        for p in range(topic.partitions):
            self.partitions[(name, p)].log.set_config(**effective)

    def set_broker_configs(self, resource: str, configs: dict[str, str], validate_only: bool = False) -> None:
        """Replaces the dynamic configs of BROKER resource ``resource`` (``""``: the
        cluster default, or this broker's id). Topic defaults among them apply at once
        to every partition whose topic does not set its own."""
        if resource not in ("", str(self.broker_id)):
            raise InvalidRequestError(f"broker {resource!r} is not this broker ({self.broker_id}) or the default ('')")

        bound: list[tuple[KafkaServer, socket.socket]] = []
        removed: list[KafkaServer] = []

        def check() -> None:
            nonlocal removed
            self.validate_topic_configs({})  # the new topic defaults, as a topic sees them
            if not self.servers:
                return  # not serving yet: start() listens on what is configured
            added, removed = self._listener_changes()
            for listener in added:
                server = self._server_for(listener)
                try:
                    bound.append((server, server.bind()))
                except OSError as e:
                    raise ConfigError("listeners", str(listener), f"cannot listen on {server.host}:{server.port}: {e.strerror or e}") from None

        try:
            try:
                self.dynamic_configs.set(resource, configs, check, validate_only=validate_only)
            except BaseException:
                for _, sock in bound:
                    sock.close()
                raise
        except ConfigError as e:
            raise InvalidConfigError(str(e)) from None
        if validate_only:
            for _, sock in bound:
                sock.close()
            return
        for server in removed:
            self.servers.remove(server)
            log.info("stopping listener %s on %s:%d", server.name, server.host, server.port)
            self._tasks.append(asyncio.create_task(server.stop(), name=f"stop-listener-{server.name}"))
        for server, sock in bound:
            self.servers.append(server)
            log.info("starting listener %s on %s:%d", server.name, server.host, sock.getsockname()[1])
            self._tasks.append(asyncio.create_task(server.start(sock), name=f"start-listener-{server.name}"))
        self._topic_defaults = None
        self._effective.clear()
        for topic in self.metadata.topics.values():
            effective = log_config(self.effective_config(topic))
            for p in range(topic.partitions):
                partition = self.partitions.get((topic.name, p))
                if partition is not None:
                    partition.log.set_config(**effective)
        log.info("dynamic configs of broker resource %r are now %s", resource, configs)

    def ensure_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicInfo:
        """The topic, created with the given layout if missing (internal topics)."""
        topic = self.metadata.get(name)
        if topic is None:
            topic = self.metadata.create(name, partitions, configs)
            self._open_new_partitions(topic, 0)
        return topic

    def topics(self, names: Iterable[str] | None = None) -> list[TopicInfo]:
        if names is None:
            return list(self.metadata.topics.values())
        return [t for n in names if (t := self.metadata.get(n)) is not None]
