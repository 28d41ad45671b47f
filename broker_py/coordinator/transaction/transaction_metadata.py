"""The state of one transactional id, as the transaction coordinator keeps it.

States and the transitions the coordinator makes (Kafka's ``TransactionState``)::

    Empty ─AddPartitions/AddOffsets─▶ Ongoing
    Ongoing ─EndTxn(commit)─▶ PrepareCommit ─markers─▶ CompleteCommit
    Ongoing ─EndTxn(abort)──▶ PrepareAbort  ─markers─▶ CompleteAbort
    Ongoing ─timeout / InitProducerId─▶ PrepareEpochFence ─▶ PrepareAbort
    Complete* ─AddPartitions─▶ Ongoing;   Empty / Complete* ─InitProducerId─▶ Empty (epoch + 1)
    Empty / Complete* ─transactional.id.expiration.ms─▶ Dead (tombstone)

The status ids are those of ``TransactionLogValue.transaction_status``. Every change
is written to ``__transaction_state`` before the coordinator acts on it, so a
restart finds Prepare* states and finishes them.
"""

from __future__ import annotations

import dataclasses
from enum import IntEnum

NO_PRODUCER_ID = -1
NO_EPOCH = -1
MAX_EPOCH = 32767


class TransactionState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def is_prepare(self) -> bool:
        return self in (
            TransactionState.PREPARE_COMMIT,
            TransactionState.PREPARE_ABORT,
            TransactionState.PREPARE_EPOCH_FENCE,
        )

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


@dataclasses.dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: set[tuple[str, int]] = dataclasses.field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # The id and epoch handed out before the last InitProducerId, so a producer
    # retrying it (KIP-360) is recognised.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_EPOCH

    def copy(self) -> TransactionMetadata:
        return dataclasses.replace(self, partitions=set(self.partitions))

    def owned_by(self, producer_id: int, producer_epoch: int) -> bool:
        return producer_id == self.producer_id and producer_epoch == self.producer_epoch
