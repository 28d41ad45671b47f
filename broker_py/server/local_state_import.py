"""What a broker that ran alone brings into a cluster.

A broker alone keeps its metadata in ``<first log dir>/__logstore_metadata/``:
``cluster-metadata.json`` (topics: Kafka's topic, partition-state and topic-config
znodes as JSON), ``scram-credentials.json`` (SCRAM users), ``acls.json`` (ACLs) and
``broker-configs.json`` (dynamic broker configs), ``client-metrics.json``
(CLIENT_METRICS resources) and ``client-quotas.json`` (client quotas, by entity path);
a data dir from before
``cluster-metadata.json`` has ``topics.json`` instead, whose topics are first taken
over into a ``cluster-metadata.json`` as a broker alone would. A cluster keeps them in
ZooKeeper.
When such a broker first starts with ``zookeeper.connect``, before it registers (so
before any controller can act on it), :func:`import_local_state` writes each of them to
ZooKeeper, then renames the file ``<name>.imported``: the import runs once, and the old
state stays on disk.

Rules:
- A topic is written whole, in one multi: ``/config/topics/T``, ``/brokers/topics/T``
  with its topic id (so the partitions' logs, whose ``partition.metadata`` names that
  id, are served again with their data) and each partition's state with its leader
  epoch (so the leader-epoch caches of the logs stay ahead of nothing); the states'
  ``controller_epoch`` is 0, older than any controller of the cluster. A topic marked
  for deletion is not imported; one that ZooKeeper already has is left as ZooKeeper has
  it (its local logs are then strays, set aside as any stray log).
- Users, ACLs and configs go through the cluster's own stores, so every broker is
  notified. ZooKeeper wins: a user's mechanism, or a config key, that ZooKeeper already
  holds is kept as it is there; only what it lacks is added. ACLs are a set: the union
  is kept.
- ACLs are imported only when the broker has an authorizer (``authorizer.class.name``);
  without one ``acls.json`` stays where it is, and a warning says so.
- A file whose import fails (ZooKeeper unreachable, a value ZooKeeper refuses) is left
  in place and tried again at the next start; the broker starts anyway.
- Dynamic configs are validated as an AlterConfigs request would validate them; a
  resource whose merged configs are invalid is skipped with an error in the log. So are
  CLIENT_METRICS resources (merged key by key, ZooKeeper winning).
- Client quotas are merged key by key into their entity's node, ZooKeeper winning; a
  user's node keeps its SCRAM credentials beside them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os

from broker_py.common.topic_partition import TopicPartition
from broker_py.config.dynamic_broker_config import DEFAULT, validate_configs
from broker_py.config.kafka_config import ConfigError
from broker_py.security.authorizer.standard_authorizer import StandardAuthorizer
from broker_py.security.sasl.scram_credentials import ScramCredentialStore
from broker_py.server.local_controller_store import LocalControllerStore
from broker_py.server.local_support import STORE_FILE, take_over_topics_json
from broker_py.utils import metadata_file
from broker_py.utils.metadata_file import METADATA_DIR
from broker_py.zk.zk_data import (
    ConfigEntityZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
)
from broker_py.zk.zk_node_ops import CreateOp
from logstore.protocol.errors import InvalidConfigError, InvalidRequestError, KafkaException

log = logging.getLogger(__name__)

TOPICS_FILE = STORE_FILE
OLD_TOPICS_FILE = (
    "topics.json"  # before cluster-metadata.json (broker_py.server.topic_metadata_store)
)
USERS_FILE = "scram-credentials.json"
ACLS_FILE = "acls.json"
BROKER_CONFIGS_FILE = "broker-configs.json"
CLIENT_METRICS_FILE = "client-metrics.json"
CLIENT_QUOTAS_FILE = "client-quotas.json"
IMPORTED_SUFFIX = ".imported"


async def import_local_state(log_dir: str, apis) -> None:
    """Imports every local state file of ``log_dir`` that exists (see the module)."""
    _take_over_old_topics_file(log_dir, apis.broker_id)
    steps = (
        (TOPICS_FILE, _import_topics),
        (USERS_FILE, _import_users),
        (ACLS_FILE, _import_acls),
        (BROKER_CONFIGS_FILE, _import_broker_configs),
        (CLIENT_METRICS_FILE, _import_client_metrics),
        (CLIENT_QUOTAS_FILE, _import_client_quotas),
    )
    for name, step in steps:
        path = os.path.join(log_dir, METADATA_DIR, name)
        if not os.path.exists(path):
            continue
        try:
            done = await step(log_dir, path, apis)
        except (KafkaException, OSError) as e:
            log.error(
                "importing %s into ZooKeeper failed "
                "(left in place, tried again at the next start): %s",
                path,
                e,
            )
            continue
        if not done:
            continue
        renamed = [path] + (
            [old]
            if name == TOPICS_FILE
            and os.path.exists(old := os.path.join(log_dir, METADATA_DIR, OLD_TOPICS_FILE))
            else []
        )
        try:
            for done_path in renamed:
                os.replace(done_path, done_path + IMPORTED_SUFFIX)
            metadata_file.sync_dir(os.path.dirname(path))
        except OSError as e:
            log.error(
                "imported %s into ZooKeeper, but renaming it failed "
                "(imported again at the next start): %s",
                path,
                e,
            )
            continue
        for done_path in renamed:
            log.info(
                "imported %s into ZooKeeper; the file is now %s%s",
                done_path,
                os.path.basename(done_path),
                IMPORTED_SUFFIX,
            )


def _take_over_old_topics_file(log_dir: str, broker_id: int) -> None:
    """A data dir from before ``cluster-metadata.json`` has only ``topics.json``: its
    topics are first written into a ``cluster-metadata.json``, as a broker alone takes
    them over, so that they are imported with it (and both files then renamed)."""
    metadata_dir = os.path.join(log_dir, METADATA_DIR)
    topics_path = os.path.join(metadata_dir, TOPICS_FILE)
    if not os.path.exists(os.path.join(metadata_dir, OLD_TOPICS_FILE)) or os.path.exists(
        topics_path
    ):
        return
    if os.path.exists(topics_path + IMPORTED_SUFFIX):
        return  # imported before (a broker alone keeps topics.json beside cluster-metadata.json)
    try:
        take_over_topics_json(LocalControllerStore(broker_id, path=topics_path), log_dir)
    except (KafkaException, OSError, ValueError) as e:
        log.error(
            "the topics of %s could not be read for the import into ZooKeeper: %s",
            os.path.join(metadata_dir, OLD_TOPICS_FILE),
            e,
        )


async def _import_topics(log_dir: str, path: str, apis) -> bool:
    local = LocalControllerStore(apis.broker_id, path=path)
    zk = apis.zk_support.zk

    def write_all() -> list[str]:
        present = set(zk.list_children(TopicsZNode.PATH))
        deleting = local.topics_to_delete()
        imported = []
        for topic in sorted(local.all_topics() - deleting):
            if topic in present:
                log.warning(
                    "topic %s is not imported from %s: ZooKeeper already has a topic of that name",
                    topic,
                    path,
                )
                continue
            assignment = local.topic_assignments([topic])[topic]
            states = local.partition_states(TopicPartition(topic, p) for p in assignment.partitions)
            ops = [
                CreateOp(
                    ConfigEntityZNode.path("topics", topic),
                    ConfigEntityZNode.encode(local.topic_configs(topic)),
                ),
                CreateOp(TopicZNode.path(topic), TopicZNode.encode(assignment)),
                CreateOp(TopicPartitionsZNode.path(topic)),
            ]
            for tp, state in sorted(states.items()):
                ops.append(CreateOp(TopicPartitionZNode.path(*tp)))
                ops.append(
                    CreateOp(
                        TopicPartitionStateZNode.path(*tp),
                        TopicPartitionStateZNode.encode(
                            dataclasses.replace(state, controller_epoch=0)
                        ),
                    )
                )
            if zk.create_all(ops):
                imported.append(topic)
            else:
                log.warning(
                    "topic %s is not imported from %s: ZooKeeper got a node of it meanwhile",
                    topic,
                    path,
                )
        return imported

    imported = await asyncio.to_thread(write_all)
    log.info(
        "topics from %s: %d imported into ZooKeeper (%s)",
        path,
        len(imported),
        ", ".join(imported[:20]),
    )
    return True


async def _import_users(log_dir: str, path: str, apis) -> bool:
    local = ScramCredentialStore(log_dir)
    shared = apis.scram_credentials
    present = await shared.describe_shared()
    upserts = [
        (user, mechanism, local.get(user, mechanism))
        for user, mechanisms in local.describe().items()
        for mechanism in mechanisms
        if mechanism not in present.get(user, {})
    ]
    if upserts:
        failed = await shared.apply(upserts, [])
        if failed:
            raise next(iter(failed.values()))
    log.info("SCRAM users from %s: %d credential(s) added to ZooKeeper", path, len(upserts))
    return True


async def _import_acls(log_dir: str, path: str, apis) -> bool:
    if apis.authorizer is None:
        log.warning(
            "%s holds ACLs but authorizer.class.name is not set: not imported into ZooKeeper", path
        )
        return False
    bindings = StandardAuthorizer(log_dir).bindings
    if bindings:
        errors = await apis.authorizer.create(bindings)
        failure = next((e for e in errors if e is not None), None)
        if failure is not None:
            raise failure
    log.info("ACLs from %s: %d binding(s) in ZooKeeper", path, len(bindings))
    return True


async def _import_broker_configs(log_dir: str, path: str, apis) -> bool:
    default, brokers = metadata_file.load(
        path,
        lambda doc: (
            dict(doc.get("default", {})),
            {k: dict(v) for k, v in doc.get("brokers", {}).items()},
        ),
    ) or ({}, {})
    store = apis.dynamic_configs
    for resource, local in ((DEFAULT, default), *brokers.items()):
        if not local:
            continue
        shared = await store.read(resource)
        merged = {**local, **shared}
        if merged == shared:
            continue
        try:
            validate_configs(apis.config, resource, merged)
        except ConfigError as e:
            log.error(
                "not importing the dynamic configs of broker resource %r from %s: %s",
                resource,
                path,
                e,
            )
            continue
        await store.write(resource, merged)
    return True


async def _import_client_metrics(log_dir: str, path: str, apis) -> bool:
    resources = (
        metadata_file.load(
            path, lambda doc: {str(k): dict(v) for k, v in doc.get("resources", {}).items()}
        )
        or {}
    )
    for name, local in resources.items():
        try:
            await apis.client_telemetry.alter(
                name, lambda shared, local=local: {**local, **shared}, False
            )
        except (InvalidConfigError, InvalidRequestError) as e:
            log.error("not importing client metrics resource %r from %s: %s", name, path, e)
    return True


async def _import_client_quotas(log_dir: str, path: str, apis) -> bool:
    entities = (
        metadata_file.load(
            path, lambda doc: {str(k): dict(v) for k, v in doc.get("resources", {}).items()}
        )
        or {}
    )
    for entity_path, local in entities.items():
        pending = apis.client_quotas.merge(entity_path, local)
        if pending is not None:
            await pending
    return True
