"""How the broker shares its file descriptors between storage and client connections.

The soft ``RLIMIT_NOFILE`` is raised to the hard one first (as the JVM does for Kafka).
Of that limit ``L``:

- ``headroom`` (``min(256, L // 8)``) is left for descriptors held briefly or by no one
  part in particular: checkpoint and metadata writes, the cleaner's output, ZooKeeper,
  the event loop's own, a sendfile's duplicate of a socket;
- ``storage`` is half of the rest: the storage engine keeps at most that many segment
  files open and closes the least recently used one beyond it (segment and index files
  of idle partitions are opened again on their next use, ``rust/src/file_cache.rs``);
- ``connections`` is the other half: the listeners accept at most that many connections
  at once (with ``max.connections`` lower still when set), so idle sockets can never
  take the descriptors storage needs to roll a segment.

The partition limit (``max.broker.partitions`` when it is -1) follows from the same
budget: a partition holds no descriptor while idle, but opening one briefly needs a few
and its memory and startup time grow with the count, so a broker takes at most
``PARTITIONS_PER_DESCRIPTOR`` partitions per descriptor of its storage share, and no
more than its memory maps allow: each partition's active segment maps its two index
files, and ``vm.max_map_count`` caps a process's maps (``MAP_RESERVE`` are left for the
interpreter, libraries and inactive segments' indexes).
"""

from __future__ import annotations

import dataclasses
import logging
import resource

log = logging.getLogger(__name__)

MAX_HEADROOM = 256
PARTITIONS_PER_DESCRIPTOR = 4
MAP_RESERVE = 8192
MAPS_PER_PARTITION = 2


@dataclasses.dataclass(frozen=True)
class FdBudget:
    limit: int
    headroom: int
    storage: int
    connections: int

    @classmethod
    def for_limit(cls, limit: int) -> FdBudget:
        headroom = min(MAX_HEADROOM, max(limit // 8, 16))
        rest = max(limit - headroom, 2)
        storage = rest // 2
        return cls(limit, headroom, storage, rest - storage)

    @property
    def max_partitions(self) -> int:
        by_maps = max(max_map_count() - MAP_RESERVE, MAP_RESERVE) // MAPS_PER_PARTITION
        return min(self.storage * PARTITIONS_PER_DESCRIPTOR, by_maps)


def max_map_count() -> int:
    """``vm.max_map_count`` (Linux's default where it cannot be read)."""
    try:
        with open("/proc/sys/vm/max_map_count", encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 65530


def raise_soft_limit() -> int:
    """Raises the soft RLIMIT_NOFILE to the hard limit where it is lower; returns the soft
    limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.info("cannot raise the open file limit from %d to %d: %s", soft, target, e)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


_budget: FdBudget | None = None


def current() -> FdBudget:
    """The process's budget (computed on first use, from the limit then in force)."""
    global _budget
    if _budget is None:
        _budget = FdBudget.for_limit(raise_soft_limit())
    return _budget


def apply() -> FdBudget:
    """Computes the budget and caps the storage engine's open files at its share."""
    global _budget
    _budget = FdBudget.for_limit(raise_soft_limit())
    import logstore

    set_limit = getattr(logstore, "set_max_open_files", None)
    if set_limit is not None:
        set_limit(_budget.storage)
    log.info(
        "file descriptors: limit %d; storage keeps at most %d open, "
        "connections at most %d, %d spare",
        _budget.limit,
        _budget.storage,
        _budget.connections,
        _budget.headroom,
    )
    return _budget
