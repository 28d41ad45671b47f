"""Where a topic's replicas go (Kafka's ``AdminUtils.assignReplicasToBrokers``), and
the checks an explicit assignment must pass. Pure: brokers in, assignment out.

Without racks, brokers are taken in id order. Partition ``p``'s first replica (its
preferred leader) is broker ``(p + start) % n``; replica ``j + 1`` of it is broker
``(first + 1 + (shift + j) % (n - 1)) % n``, where ``shift`` grows by one every ``n``
partitions, so the followers of one broker's partitions spread over the others.
``start`` and the initial ``shift`` are random unless fixed.

With racks (every broker must have one), the same walk runs over the brokers
alternated by rack (racks sorted; within a rack, ids sorted: rack1's first, rack2's
first, ..., rack1's second, ...), with the shift scaled by the rack count, and a
follower candidate is skipped while some rack has no replica of the partition and its
rack has one, or while some broker has none and it has one.

Invariants of every assignment made here: each partition has ``replication_factor``
distinct brokers; partitions ``first .. first + count - 1`` are assigned; with racks,
each partition spans ``min(replication_factor, racks)`` racks.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from logstore.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)


@dataclass(frozen=True)
class BrokerMetadata:
    id: int
    rack: str | None = None


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Broker ids alternated by rack: racks sorted, each rack's brokers by id."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    columns = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    out: list[int] = []
    for row in range(max(len(c) for c in columns)):
        out.extend(c[row] for c in columns if row < len(c))
    return out


def assign_replicas(
    brokers: Iterable[BrokerMetadata],
    partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Partition id -> replica ids, preferred leader first, for ``partitions``
    partitions from ``start_partition_id`` (0 when negative)."""
    brokers = list(brokers)
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    with_rack = [b for b in brokers if b.rack is not None]
    if with_rack and len(with_rack) != len(brokers):
        raise InvalidReplicationFactorError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    rng = rng or random.Random()
    if not with_rack:
        order = sorted(b.id for b in brokers)
        racks: dict[int, str] = {}
        rack_count = 1
    else:
        racks = {b.id: b.rack for b in brokers}  # type: ignore[misc]
        order = rack_alternated(racks)
        rack_count = len(set(racks.values()))
    n = len(order)
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    out: dict[int, list[int]] = {}
    partition = max(0, start_partition_id)
    for _ in range(partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [order[first]]
        if not racks:
            replicas += [
                order[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
        else:
            racks_used = {racks[order[first]]}
            k = 0
            while len(replicas) < replication_factor:
                broker = order[_replica_index(first, shift * rack_count, k, n)]
                k += 1
                if (racks[broker] not in racks_used or len(racks_used) == rack_count) and (
                    broker not in replicas or len(replicas) == n
                ):
                    replicas.append(broker)
                    racks_used.add(racks[broker])
        out[partition] = replicas
        partition += 1
    return out


def validate_assignment(
    assignment: Mapping[int, Sequence[int]], live_brokers: Iterable[int], first_partition: int = 0
) -> None:
    """Checks an assignment a client gave (CreateTopics, CreatePartitions): partition
    ids ``first_partition`` onwards without gaps, every list the same non-zero length,
    no broker twice in one list, every broker live. InvalidReplicaAssignmentError
    names the first problem."""
    live = set(live_brokers)
    if not assignment:
        raise InvalidReplicaAssignmentError("the replica assignment is empty")
    expected = list(range(first_partition, first_partition + len(assignment)))
    if sorted(assignment) != expected:
        raise InvalidReplicaAssignmentError(
            f"partitions must be numbered {expected[0]}..{expected[-1]} without gaps, "
            f"not {sorted(assignment)}"
        )
    lengths = {len(r) for r in assignment.values()}
    if 0 in lengths:
        raise InvalidReplicaAssignmentError("a partition has no replicas")
    if len(lengths) > 1:
        raise InvalidReplicaAssignmentError(
            f"partitions have different replication factors: {sorted(lengths)}"
        )
    for partition, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"partition {partition} lists a broker twice: {list(replicas)}"
            )
        unknown = [r for r in replicas if r not in live]
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"partition {partition} names broker {unknown[0]}, which is not live"
            )
