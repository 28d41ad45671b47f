"""Kafka's ``meta.properties`` in each log dir: ``version=0``, ``broker.id`` and
``cluster.id``. Every log dir of a broker names the same broker id and cluster id; a
log dir written by another broker id, or dirs of two clusters, stop startup with a
ConfigError naming the key. Missing files are written (fsynced, then renamed into
place) with the cluster id found, or a new one.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Callable

from broker_py.config.kafka_config import ConfigError


def read_properties(path: str) -> dict[str, str]:
    props = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                props[k.strip()] = v.strip()
    return props


def stored_broker_id(log_dirs: list[str]) -> int | None:
    """The ``broker.id`` the log dirs' ``meta.properties`` name (None if none does);
    dirs naming two ids stop startup."""
    found: dict[int, str] = {}
    for d in log_dirs:
        path = os.path.join(d, "meta.properties")
        if os.path.exists(path):
            raw = read_properties(path).get("broker.id")
            if raw is not None:
                try:
                    found.setdefault(int(raw), d)
                except ValueError:
                    raise ConfigError(
                        "log.dirs", d, f"meta.properties has broker.id {raw!r}, not a number"
                    ) from None
    if len(found) > 1:
        raise ConfigError(
            "log.dirs", ",".join(log_dirs), f"log dirs belong to broker ids {sorted(found)}"
        )
    return next(iter(found), None)


def resolve_broker_id(
    config_id: int, given: bool, stored: int | None, generate: Callable[[], int] | None
) -> int:
    """Kafka's ``getOrGenerateBrokerId``: a given id (which the log dirs must not
    contradict), else the log dirs' id, else a generated one (``generate`` is None when
    generation is off or there is no ZooKeeper: then the configured id, if it is one)."""
    if given:
        if stored is not None and stored != config_id:
            raise ConfigError("broker.id", config_id, f"the log dirs belong to broker.id {stored}")
        return config_id
    if stored is not None:
        return stored
    if generate is not None:
        return generate()
    if config_id < 0:
        raise ConfigError(
            "broker.id",
            config_id,
            "is not set and broker.id.generation.enable is false "
            "(or there is no zookeeper.connect)",
        )
    return config_id


def check_log_dirs(
    log_dirs: list[str], broker_id: int, cluster_id_of: Callable[[str], str] | None = None
) -> str:
    """Returns the cluster id, creating ``meta.properties`` where missing. In a cluster,
    ``cluster_id_of(proposed)`` gives the cluster's id (ZooKeeper's ``/cluster/id``, which
    takes ``proposed``, the log dirs' id or a new one, if it has none); log dirs of
    another cluster stop startup (Kafka's InconsistentClusterIdException)."""
    cluster_id = None
    for d in log_dirs:
        path = os.path.join(d, "meta.properties")
        if os.path.exists(path):
            props = read_properties(path)
            if props.get("broker.id") not in (None, str(broker_id)):
                raise ConfigError(
                    "broker.id", broker_id, f"log dir {d} belongs to broker.id {props['broker.id']}"
                )
            if cluster_id is not None and props.get("cluster.id") not in (None, cluster_id):
                raise ConfigError("log.dirs", d, "log dirs belong to different clusters")
            cluster_id = props.get("cluster.id", cluster_id)
    local = cluster_id
    if cluster_id is None:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if cluster_id_of is not None:
        cluster_id = cluster_id_of(cluster_id)
        if local is not None and local != cluster_id:
            raise ConfigError(
                "log.dirs",
                ",".join(log_dirs),
                f"the log dirs belong to cluster {local}, but ZooKeeper holds cluster {cluster_id}",
            )
    for d in log_dirs:
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "meta.properties")
        if not os.path.exists(path):
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(f"#\nversion=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    return cluster_id
