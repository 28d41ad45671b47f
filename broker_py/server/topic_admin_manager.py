"""Topic administration (the topic half of Kafka's ``ZkAdminManager``, with KIP-590
forwarding), the same in a cluster and on a broker alone: topics are created, grown and
deleted through the controller, which the broker alone is itself
(:mod:`broker_py.server.local_support`) and a cluster's broker reaches over the network
(:mod:`broker_py.server.zk_support`). ``support`` is either; its store calls block in a
cluster (they run off the event loop) and take full effect at once on a broker alone.

Flow of an admin request: the broker a client reaches checks the client's rights; a
broker that is not the controller forwards the request, reduced to what the client may
do, to the controller, and answers with the controller's answer. On the controller:
- CreateTopics validates (name, counts, replication factor against the live brokers,
  explicit assignments, configs), places replicas with Kafka's ``assignReplicasToBrokers``
  (rack-aware when racks are set), writes the topic's config then its assignment, and
  answers once every live broker acknowledged metadata with it (REQUEST_TIMED_OUT after
  ``timeout_ms``); on a broker alone, a topic whose logs cannot all be created is deleted
  again and answers KAFKA_STORAGE_ERROR, so a failed creation leaves nothing half made;
- DeleteTopics queues the deletion and answers once the topic is gone from the metadata;
- CreatePartitions writes the grown assignment (continuing Kafka's placement from
  partition 0's first replica) and answers once the metadata has the new partitions.
Internal topics are created on first use, with their configured replication factor (a
broker alone: 1). A new topic's configs are validated and described through
:class:`~broker_py.server.log_config_manager.LogConfigManager`; ElectLeaders and the
reassignment APIs are :mod:`broker_py.server.replica_admin_manager`'s, config writes
:mod:`broker_py.server.config_admin_manager`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from collections.abc import Iterable

from broker_py.common.internal_topics import is_internal_topic
from broker_py.common.topic import TopicInfo, check_collision, validate_topic_name
from broker_py.config.kafka_config import BrokerConfig
from broker_py.controller import controller_events as ev
from broker_py.controller.controller_store import TopicExistsInStoreError
from broker_py.controller.replica_assignment import (
    BrokerMetadata,
    assign_replicas,
    validate_assignment,
)
from broker_py.controller.topic_assignment import TopicAssignment
from broker_py.log.log_manager import LogManager
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server.log_config_manager import LogConfigManager
from broker_py.server.partition_creation import LocalPartitionCreator, PartitionLimits
from broker_py.server.quota.request_throttle import mutation_done, mutation_quota
from broker_py.zk.zk_data import random_uuid
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import (
    CoordinatorNotAvailableError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    KafkaError,
    KafkaStorageError,
    LeaderNotAvailableError,
    NotControllerError,
    PolicyViolationError,
    ThrottlingQuotaExceededError,
    TopicAlreadyExistsError,
    TopicDeletionDisabledError,
    UnknownTopicOrPartitionError,
)
from logstore.protocol.messages.topic_admin import (
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsResponse,
)

# The replication factor of each coordinator's topic.
_TXN_RF = "transaction.state.log.replication.factor"
_REPLICATION_FACTOR_KEYS = {
    "__consumer_offsets": "offsets.topic.replication.factor",
    "__share_group_state": "share.coordinator.state.topic.replication.factor",
}

log = logging.getLogger(__name__)

NULL_UUID = random_uuid().__class__(int=0)
# A topic created on first use (Metadata's auto-creation, an internal topic) is created
# inline on a broker alone: at most this many partitions, and at most
# INLINE_CREATIONS_PER_WINDOW auto-created topics per window.
INLINE_CREATION_MAX_PARTITIONS = 256
INLINE_CREATIONS_PER_WINDOW = 16
INLINE_CREATION_WINDOW_S = 0.1
CONFIG_SOURCE_TOPIC, CONFIG_SOURCE_DEFAULT = 1, 5
POLL_S = 0.05


class TopicAdminManager:
    def __init__(
        self,
        config: BrokerConfig,
        log_manager: LogManager,
        log_configs: LogConfigManager,
        support,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self._log_manager = log_manager
        self.log_configs = log_configs
        self.support = support  # LocalSupport or ZkSupport
        self.on_topic_deleted = []  # callables(topic name), e.g. the group coordinator's
        self._tasks: set[asyncio.Task] = set()
        self._creating: set[str] = set()
        self._limits = PartitionLimits(config, support.metadata_cache)
        self._local_creator = LocalPartitionCreator(self)
        # Auto-creations done inline on a broker alone in the current window (see
        # auto_create_topic): (window start, count).
        self._inline_creations = (0.0, 0)

    @property
    def _metadata(self):
        return self.support.metadata_cache

    # ---- topics ----

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Creates a topic at once (a broker alone; in a cluster topics are created by the
        controller through CreateTopics): its TopicInfo, or the KafkaError refusing it."""
        if not self.support.local:
            raise NotControllerError("in a cluster, topics are created through the controller")
        topic = CreateTopicsRequest.CreatableTopic(
            name=name,
            num_partitions=num_partitions,
            replication_factor=replication_factor,
            assignments=[],
            configs=[
                CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                for k, v in (configs or {}).items()
            ],
        )
        assignment, topic_configs = self._plan(topic)
        if validate_only:
            return TopicInfo(name, NULL_UUID, len(assignment.partitions), topic_configs)
        if len(assignment.partitions) > INLINE_CREATION_MAX_PARTITIONS:
            raise PolicyViolationError(
                f"{len(assignment.partitions)} partitions are more than a topic created on first "
                "use may have "
                f"({INLINE_CREATION_MAX_PARTITIONS}); create it with CreateTopics"
            )
        self._create_here(name, assignment, topic_configs)
        return self._created_here(name, len(assignment.partitions))

    def _create_here(self, name: str, assignment: TopicAssignment, configs: dict[str, str]) -> None:
        """On a broker alone: writes the topic, which its controller creates at once. A
        write the disk refuses part way (the topic in, its partitions not) takes the topic
        out again, which shrinks the file, so a refused creation leaves nothing."""
        store = self.support.store
        try:
            store.create_topic(name, assignment, configs)
        except TopicExistsInStoreError as e:
            raise TopicAlreadyExistsError(str(e)) from None
        except KafkaStorageError:
            if name in store.all_topics():
                try:
                    store.controller_delete_topic(
                        self.support.controller.context.epoch_zk_version, name
                    )
                except KafkaError as e:
                    log.error("topic %s is left without its partitions: %s", name, e)
            raise

    def _created_here(self, name: str, partitions: int) -> TopicInfo:
        """On a broker alone, after the store write: the topic, with every partition's log
        open; one that could not be created takes the topic away again."""
        failure = next(
            (
                f
                for p in range(partitions)
                if (f := self.support.log_failures.get((name, p))) is not None
            ),
            None,
        )
        info = self._metadata.get(name)
        if failure is None and info is not None and info.partitions == partitions:
            return info
        self.support.store.mark_topic_for_deletion(name)
        raise failure or KafkaStorageError(f"the logs of {name} could not be created")

    def auto_create_topic(self, name: str) -> TopicInfo:
        """Metadata's auto-creation: created at once on a broker alone; in a cluster the
        controller is asked and LeaderNotAvailableError (Metadata's answer meanwhile) raised."""
        if self.support.local:
            now = asyncio.get_running_loop().time()
            start, count = self._inline_creations
            if now - start >= INLINE_CREATION_WINDOW_S:
                start, count = now, 0
            if count >= INLINE_CREATIONS_PER_WINDOW:
                # Many names in one Metadata request: the rest wait for a later request,
                # so creating them never holds the event loop for long.
                raise LeaderNotAvailableError(
                    f"topic {name} is not created yet: too many topics are being created at once; "
                    "retry"
                )
            self._inline_creations = (start, count + 1)
            return self.create_topic(name)
        validate_topic_name(name)
        self._create_in_background(name, -1, -1, {})
        raise LeaderNotAvailableError(f"topic {name} is being created")

    def ensure_topic(
        self, name: str, partitions: int, configs: dict[str, str], replication_factor: int = -1
    ) -> TopicInfo:
        """An internal topic: the metadata's, else created (a broker alone: at once, with
        one replica; a cluster: in the background, CoordinatorNotAvailableError meanwhile)."""
        topic = self._metadata.get(name)
        if topic is not None:
            return topic
        if self.support.local:
            try:
                return self.create_topic(name, partitions, 1, configs)
            except TopicAlreadyExistsError:
                return self._metadata.get(name)
        if replication_factor == -1:
            replication_factor = self.config[_REPLICATION_FACTOR_KEYS.get(name, _TXN_RF)]
        live = len(self._metadata.alive_broker_ids())
        if live < replication_factor:
            # As Kafka: not created with fewer replicas than configured (it would stay so).
            raise CoordinatorNotAvailableError(
                f"{name} needs {replication_factor} live brokers (its replication factor) and "
                f"{live} are up"
            )
        self._create_in_background(name, partitions, replication_factor, configs)
        raise CoordinatorNotAvailableError(f"topic {name} is being created")

    def _create_in_background(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        if name in self._creating:
            return
        self._creating.add(name)
        request = CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    assignments=[],
                    configs=[
                        CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                        for k, v in configs.items()
                    ],
                )
            ],
            timeout_ms=self.config["request.timeout.ms"],
            validate_only=False,
        )

        async def create() -> None:
            try:
                response = await self.support.to_controller.send(
                    ApiKey.CREATE_TOPICS, request, self.config["request.timeout.ms"]
                )
                code = response.topics[0].error_code if response.topics else 0
                if code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                    log.warning(
                        "creating topic %s failed: error %d %s",
                        name,
                        code,
                        response.topics[0].error_message,
                    )
            except Exception as e:
                log.warning("creating topic %s failed: %s", name, e)
            finally:
                self._creating.discard(name)

        task = asyncio.get_running_loop().create_task(create())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- forwarding ----

    async def forward(self, api_key: ApiKey, body, timeout_ms: int):
        return await self.support.to_controller.send(api_key, body, timeout_ms)

    def _brokers(self) -> list[BrokerMetadata]:
        cache = self.support.metadata_cache
        return [
            BrokerMetadata(b, cache.alive_broker(b).info.rack) for b in cache.alive_broker_ids()
        ]

    async def _wait_for(self, ready, timeout_ms: int) -> bool:
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        while not ready():
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(POLL_S)
        return True

    # ---- CreateTopics ----

    async def create_topics(self, apis, request, connection):
        body = request.body
        results: dict[str, CreateTopicsResponse.CreatableTopicResult] = {}
        counts: dict[str, int] = {}
        for t in body.topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        allowed = []
        quota = None if body.validate_only else mutation_quota(apis, connection, request)
        for t in body.topics:
            result = CreateTopicsResponse.CreatableTopicResult(
                name=t.name, topic_id=NULL_UUID, error_code=0, error_message=None
            )
            results.setdefault(t.name, result)
            if counts[t.name] > 1:
                result.error_code, result.error_message = (
                    int(ErrorCode.INVALID_REQUEST),
                    f"topic {t.name} appears more than once in the request",
                )
            elif not (
                auth_helper.authorize_cluster(apis, connection, AclOperation.CREATE)
                or auth_helper.authorize(
                    apis, connection, AclOperation.CREATE, ResourceType.TOPIC, t.name
                )
            ):
                result.error_code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                result.error_message = f"CREATE on topic {t.name!r} is not authorized"
            elif quota is not None and not quota.record(
                _partitions_asked(t, self.config["num.partitions"]), apis.time.milliseconds()
            ):
                result.error_code = int(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
                result.error_message = ErrorCode.THROTTLING_QUOTA_EXCEEDED.description
            else:
                allowed.append(t)
        mutation_done(connection, quota)
        if allowed and not self.support.is_controller:
            forwarded = (
                dataclasses.replace(body, topics=allowed)
                if dataclasses.is_dataclass(body)
                else body
            )
            if not dataclasses.is_dataclass(body):
                body.topics = allowed
            try:
                response = await self.forward(
                    ApiKey.CREATE_TOPICS, forwarded, body.timeout_ms + 5000
                )
                for r in response.topics:
                    results[r.name] = r
            except KafkaError as e:
                for t in allowed:
                    results[t.name].error_code, results[t.name].error_message = int(e.errno), str(e)
        elif allowed:
            await self._create_on_controller(apis, connection, body, allowed, results)
        return CreateTopicsResponse(
            throttle_time_ms=0,
            topics=[results[n] for n in dict.fromkeys(t.name for t in body.topics)],
        )

    def _plan(self, t, earlier: Iterable[str] = ()) -> tuple[TopicAssignment, dict[str, str]]:
        """Validates one CreatableTopic and places its replicas. Limits are checked before
        placement, so a count past them costs nothing; ``earlier`` are the names planned
        before it in the same request (a collision with one of them is refused too)."""
        validate_topic_name(t.name)
        cache = self.support.metadata_cache
        if cache.contains(t.name) or t.name in self._local_creator.busy:
            raise TopicAlreadyExistsError(f"Topic '{t.name}' already exists.")
        check_collision(t.name, itertools.chain(cache.topics, self._local_creator.busy, earlier))
        nulls = [c.name for c in t.configs if c.value is None]
        if nulls:
            raise InvalidConfigError(
                f"Null value not supported for topic configs: {','.join(nulls)}"
            )
        live = cache.alive_broker_ids()
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise InvalidRequestError(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time."
                )
            self._limits.check_count(len(t.assignments), 1, live)
            assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            if sorted(assignment) != list(range(len(assignment))):
                raise InvalidReplicaAssignmentError(
                    "partitions should be a consecutive 0-based integer sequence"
                )
            validate_assignment(assignment, live)
        else:
            partitions = (
                self.config["num.partitions"] if t.num_partitions == -1 else t.num_partitions
            )
            rf = (
                self.config["default.replication.factor"]
                if t.replication_factor == -1
                else t.replication_factor
            )
            if partitions <= 0:
                raise InvalidPartitionsError("Number of partitions must be larger than 0.")
            brokers = self._brokers()
            assign_replicas(brokers, 1, rf)  # the replication factor's own checks, at no cost
            self._limits.check_count(partitions, rf, live)
            assignment = assign_replicas(brokers, partitions, rf)
        self._limits.check_assignment(assignment)
        configs = self.log_configs.validate_topic_configs({c.name: c.value for c in t.configs})
        return TopicAssignment(random_uuid(), assignment), configs

    async def _create_on_controller(self, apis, connection, body, topics, results) -> None:
        planned: dict[str, tuple[TopicAssignment, dict[str, str]]] = {}
        for t in topics:
            try:
                planned[t.name] = self._plan(t, planned)
            except KafkaError as e:
                results[t.name].error_code, results[t.name].error_message = int(e.errno), str(e)
        created = []
        if not body.validate_only:
            creator = self._local_creator
            for name, (assignment, _) in planned.items():
                self._limits.reserve(assignment.partitions)
                if self.support.local:
                    creator.busy.add(name)
            try:
                for name, (assignment, configs) in planned.items():
                    try:
                        if self.support.local:
                            await creator.create_topic(name, assignment, configs)
                        else:
                            await self.support.store_call(
                                self.support.store.create_topic, name, assignment, configs
                            )
                    except TopicExistsInStoreError as e:
                        results[name].error_code, results[name].error_message = (
                            int(ErrorCode.TOPIC_ALREADY_EXISTS),
                            str(e),
                        )
                        continue
                    except KafkaError as e:
                        results[name].error_code, results[name].error_message = int(e.errno), str(e)
                        continue
                    created.append(name)
            finally:
                for name, (assignment, _) in planned.items():
                    self._limits.unreserve(assignment.partitions)
                    if self.support.local:
                        creator.busy.discard(name)
        if created:
            log.info("creating topics %s", created)
            try:
                (ready,) = await self.support.ask_controller(
                    lambda reply: ev.CreateTopics(set(created), reply), max(body.timeout_ms, 1)
                )
            except TimeoutError:
                ready = set()
            for name in created:
                if name not in ready:
                    results[name].error_code = int(ErrorCode.REQUEST_TIMED_OUT)
                    results[
                        name
                    ].error_message = (
                        "the topic was created, but not every broker has its metadata yet"
                    )
        for name, (assignment, configs) in planned.items():
            r = results[name]
            if r.error_code:
                continue
            r.topic_id = NULL_UUID if body.validate_only else assignment.topic_id
            r.num_partitions = len(assignment.partitions)
            r.replication_factor = len(assignment.partitions[0])
            if not auth_helper.authorize(
                apis, connection, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name
            ):
                r.topic_config_error_code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            effective = self.log_configs.effective_config(
                TopicInfo(name, assignment.topic_id, len(assignment.partitions), configs)
            )
            r.configs = [
                CreateTopicsResponse.CreatableTopicConfigs(
                    name=k,
                    value=v,
                    read_only=False,
                    is_sensitive=False,
                    config_source=CONFIG_SOURCE_TOPIC if k in configs else CONFIG_SOURCE_DEFAULT,
                )
                for k, v in sorted(effective.items())
            ]

    # ---- DeleteTopics ----

    async def delete_topics(self, apis, request, connection):
        body = request.body
        version = request.api_version
        wanted = (
            [(t.name, t.topic_id) for t in body.topics]
            if version >= 6
            else [(n, None) for n in body.topic_names]
        )
        results = []
        to_delete = []
        cache = self.support.metadata_cache
        quota = mutation_quota(apis, connection, request)
        for name, topic_id in wanted:
            result = DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id or NULL_UUID, error_code=0, error_message=None
            )
            results.append(result)
            try:
                if name is None:
                    topic = cache.by_id(topic_id)
                    if topic is None:
                        result.error_code = int(ErrorCode.UNKNOWN_TOPIC_ID)
                        continue
                    name = result.name = topic.name
                auth_helper.ensure(apis, connection, AclOperation.DELETE, ResourceType.TOPIC, name)
                if is_internal_topic(name):
                    raise InvalidRequestError(f"internal topic {name} cannot be deleted")
                topic = cache.get(name)
                if topic is None:
                    raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
                if not self.config["delete.topic.enable"]:
                    raise TopicDeletionDisabledError(
                        "topic deletion is disabled (delete.topic.enable=false)"
                    )
                result.topic_id = topic.topic_id
                if quota is not None and not quota.record(
                    topic.partitions, apis.time.milliseconds()
                ):
                    raise ThrottlingQuotaExceededError(
                        ErrorCode.THROTTLING_QUOTA_EXCEEDED.description
                    )
                to_delete.append(name)
            except KafkaError as e:
                result.error_code, result.error_message = int(e.errno), str(e)
        mutation_done(connection, quota)
        for name in to_delete:
            await self.support.store_call(self.support.store.mark_topic_for_deletion, name)
        if to_delete and not await self._wait_for(
            lambda: not any(cache.contains(n) for n in to_delete), body.timeout_ms
        ):
            for r in results:
                if r.name in to_delete and cache.contains(r.name):
                    r.error_code, r.error_message = (
                        int(ErrorCode.REQUEST_TIMED_OUT),
                        "the deletion is under way",
                    )
        return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

    # ---- CreatePartitions ----

    async def create_partitions(self, apis, request, connection):
        body = request.body
        results = []
        cache = self.support.metadata_cache
        goals: dict[str, int] = {}
        quota = None if body.validate_only else mutation_quota(apis, connection, request)
        for t in body.topics:
            result = CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=t.name, error_code=0, error_message=None
            )
            results.append(result)
            try:
                auth_helper.ensure(apis, connection, AclOperation.ALTER, ResourceType.TOPIC, t.name)
                topic = cache.get(t.name)
                if topic is None:
                    raise UnknownTopicOrPartitionError(f"topic {t.name!r} does not exist")
                assignment = (
                    await self.support.store_call(self.support.store.topic_assignments, [t.name])
                ).get(t.name)
                if assignment is None:
                    raise UnknownTopicOrPartitionError(f"topic {t.name!r} does not exist")
                current = len(assignment.partitions)
                if self.support.local and t.name in self._local_creator.busy:
                    raise InvalidRequestError(
                        f"topic {t.name!r} is already being created or given partitions; "
                        "retry once that is done"
                    )
                if t.count < current:
                    raise InvalidPartitionsError(
                        f"Topic currently has {current} partitions, which is higher than the "
                        f"requested {t.count}."
                    )
                if t.count == current:
                    raise InvalidPartitionsError(f"Topic already has {current} partitions.")
                rf = len(assignment.partitions[0])
                if t.assignments is not None:  # null: placed by the broker; [] is 0 assignments
                    if len(t.assignments) != t.count - current:
                        raise InvalidReplicaAssignmentError(
                            f"Attempted to add {t.count - current} additional partition(s), "
                            f"but only {len(t.assignments)} assignment(s) were specified."
                        )
                    self._limits.check_count(len(t.assignments), 1, cache.alive_broker_ids())
                    added = {current + i: list(a.broker_ids) for i, a in enumerate(t.assignments)}
                    validate_assignment(added, cache.alive_broker_ids(), first_partition=current)
                else:
                    self._limits.check_count(t.count - current, rf, cache.alive_broker_ids())
                    order = sorted(b.id for b in self._brokers())
                    first = assignment.partitions[0][0]
                    start = order.index(first) if first in order else -1
                    added = assign_replicas(
                        self._brokers(),
                        t.count - current,
                        rf,
                        fixed_start_index=start,
                        start_partition_id=current,
                    )
                self._limits.check_assignment(added)
                if quota is not None and not quota.record(len(added), apis.time.milliseconds()):
                    raise ThrottlingQuotaExceededError(
                        ErrorCode.THROTTLING_QUOTA_EXCEEDED.description
                    )
                if not body.validate_only:
                    await self._grow(t.name, assignment, added)
                    goals[t.name] = t.count
            except KafkaError as e:
                result.error_code, result.error_message = int(e.errno), str(e)
        mutation_done(connection, quota)
        if goals and not await self._wait_for(
            lambda: all(
                (i := cache.get(n)) is not None and i.partitions >= c for n, c in goals.items()
            ),
            body.timeout_ms,
        ):
            for r in results:
                if r.name in goals and not r.error_code:
                    r.error_code, r.error_message = (
                        int(ErrorCode.REQUEST_TIMED_OUT),
                        "the new partitions are not yet everywhere",
                    )
        return CreatePartitionsResponse(throttle_time_ms=0, results=results)

    async def _grow(
        self, name: str, assignment: TopicAssignment, added: dict[int, list[int]]
    ) -> None:
        """Writes the grown assignment: a broker alone opens the new logs first, in steps
        (``partition_creation``); in a cluster the controller has the brokers open them."""
        self._limits.reserve(added)
        try:
            if self.support.local:
                self._local_creator.claim(name)
                try:
                    await self._local_creator.grow(name, assignment, added)
                finally:
                    self._local_creator.busy.discard(name)
            else:
                grown = dataclasses.replace(
                    assignment, partitions={**assignment.partitions, **added}
                )
                await self.support.store_call(self.support.store.set_topic_assignment, name, grown)
        finally:
            self._limits.unreserve(added)


def _partitions_asked(t, default: int) -> int:
    """The partitions a CreatableTopic creates, as its controller mutation cost."""
    if t.assignments:
        return len(t.assignments)
    return t.num_partitions if t.num_partitions > 0 else default
