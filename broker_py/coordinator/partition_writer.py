"""What a coordinator sees of the partitions of its internal topic (Kafka's
``PartitionWriter`` and ``CoordinatorLoader`` of the coordinator runtime, in one).

The group and transaction coordinators keep their state in ``__consumer_offsets`` and
``__transaction_state``: they append to the partitions this broker leads, rebuild
their state from those partitions' logs when elected, and drop it on resignation.
:class:`PartitionWriter` is all they know of the broker for that; the server layer
implements it over the replica manager and the metadata cache
(:class:`broker_py.server.coordinator_partition_writer.CoordinatorPartitionWriter`).

Invariants of an implementation:

- :meth:`PartitionWriter.append` writes as the coordinator (no producer-state checks of
  a client's batch) with acks=-1, and calls its callback exactly once, maybe before it
  returns, with NONE once every in-sync replica has the batch, or else the append's
  error and message.
- :meth:`PartitionWriter.append_markers` does the same for COMMIT/ABORT markers and
  answers each marker's error.
- Leadership listeners are called on the event loop with (partitions now led,
  partitions now followed) after each leadership change, the coordinators' cue to load
  or drop a partition's state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from logstore.protocol.error_codes import ErrorCode

TopicPartition = tuple[str, int]
# (key, value) of the records of a compacted internal topic; value None: a tombstone.
KeyedRecords = list[tuple[bytes, bytes | None]]
# (topic, partition, producer id, producer epoch, commit, coordinator epoch)
TxnMarker = tuple[str, int, int, int, bool, int]
# An append's outcome: (error, its message; None when there is none).
AppendCallback = Callable[[ErrorCode, "str | None"], None]
# (partitions now led, partitions now followed)
LeadershipListener = Callable[[list[TopicPartition], list[TopicPartition]], None]


class TopicMetadata(Protocol):
    """A topic as the cluster's metadata has it."""

    @property
    def partitions(self) -> int: ...


class CoordinatorPartition(Protocol):
    """A partition this broker holds, as a coordinator reads it."""

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    def delete_records_on_leader(self, offset: int) -> int:
        """Moves the log start offset up to ``offset`` (at most the high watermark; raises
        KafkaError when this broker does not lead the partition); the new start offset."""
        ...


class PartitionWriter(Protocol):
    # ---- metadata ----

    def topic(self, name: str) -> TopicMetadata | None:
        """The topic as the metadata has it; None before it exists."""
        ...

    def ensure_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMetadata:
        """The internal topic, created with ``partitions`` partitions and ``configs``
        when it does not exist (raises KafkaError while it cannot be)."""
        ...

    def partition_leader(self, tp: TopicPartition) -> int | None:
        """The broker that leads ``tp`` (-1 while none does); None when there is no such
        partition."""
        ...

    # ---- the partitions this broker holds ----

    def partition(self, tp: TopicPartition) -> CoordinatorPartition | None:
        """``tp`` when this broker holds it, else None."""
        ...

    def add_leadership_listener(self, listener: LeadershipListener) -> None: ...

    def remove_leadership_listener(self, listener: LeadershipListener) -> None:
        """Removes ``listener`` if it is registered."""
        ...

    def read_keyed_records(
        self, tp: TopicPartition, buffer_bytes: int
    ) -> Awaitable[tuple[KeyedRecords, dict[int, KeyedRecords]]]:
        """Reads ``tp``'s log from its start to its end as it is when the read starts,
        ``buffer_bytes`` at a time and off the event loop: the committed records with a
        key in offset order (a transaction's at its COMMIT marker), and by producer id
        those of each transaction without a marker yet."""
        ...

    # ---- writes ----

    def append(
        self,
        tp: TopicPartition,
        records: bytes,
        timeout_ms: int,
        callback: AppendCallback,
        transactional: bool = False,
    ) -> None:
        """Appends one record batch (``transactional``: a producer's transactional
        batch) to ``tp`` as its leader with acks=-1; ``callback`` gets the outcome once
        the in-sync replicas have it or ``timeout_ms`` passed."""
        ...

    async def append_markers(
        self, timeout_ms: int, markers: Iterable[TxnMarker]
    ) -> dict[TopicPartition, ErrorCode]:
        """Appends COMMIT/ABORT markers to partitions this broker leads with acks=-1;
        each marker's error once the in-sync replicas have it or ``timeout_ms`` passed."""
        ...

    def verify_transaction(
        self, tp: TopicPartition, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> Awaitable[ErrorCode] | ErrorCode | None:
        """Whether the producer's transaction may write to ``tp`` (KIP-890), asked of its
        transaction coordinator wherever that runs: None when this broker has no such
        verification for ``tp`` (a broker alone: its own transaction coordinator
        decides); NONE when the transaction has already written to ``tp``; else an
        awaitable of the coordinator's answer, INVALID_TXN_STATE when a marker ended
        the transaction while it was asked. The awaitable is a coroutine: awaited, it
        answers without an event-loop turn after the coordinator's answer."""
        ...
