"""The transaction coordinator (Kafka's ``TransactionCoordinator``, transaction
protocol version 1) for the transactional ids of this broker.

A transactional producer:

1. InitProducerId(transactional_id): gets its producer id and a new epoch, which
   fences older instances; a transaction the id left ongoing is aborted first.
2. AddPartitionsToTxn / AddOffsetsToTxn: names the partitions (and the group's
   ``__consumer_offsets`` partition) it will write; the transaction is Ongoing.
3. Produce with the transactional attribute, TxnOffsetCommit.
4. EndTxn(commit or abort): the coordinator writes PrepareCommit/PrepareAbort to
   ``__transaction_state``, appends a COMMIT/ABORT marker to every partition of the
   transaction, then writes CompleteCommit/CompleteAbort.

The markers go to each partition's leader (this broker's own partitions through its
:class:`~broker_py.coordinator.partition_writer.PartitionWriter`, the others by
WriteTxnMarkers: :mod:`.transaction_marker_channel_manager`),
each appended with acks=all. EndTxn answers once they are all written, or after at most
a third of ``request.timeout.ms`` while some leader is unreachable; the transaction then
stays Prepare* (its producer gets CONCURRENT_TRANSACTIONS) until the markers are
delivered in the background. A coordinator elected for a ``__transaction_state``
partition finds any Prepare* state in its log and writes its markers again (a second
marker for an ended transaction changes nothing).

The transactional ids of a ``__transaction_state`` partition are this broker's while it
leads that partition; requests for others get NOT_COORDINATOR.

A transaction still Ongoing ``transaction.timeout.ms`` after it started is aborted
with the producer's epoch bumped, so the producer is fenced. Transactional ids idle
for ``transactional.id.expiration.ms`` are removed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_py.common.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from broker_py.coordinator.transaction.transaction_marker_channel_manager import (
    BrokerClients,
    TransactionMarkerChannelManager,
)
from broker_py.coordinator.transaction.transaction_metadata import (
    MAX_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
)
from broker_py.coordinator.transaction.transaction_state_manager import TransactionStateManager
from broker_py.utils.time import SYSTEM_TIME, Time
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError

if TYPE_CHECKING:
    from broker_py.config.kafka_config import BrokerConfig
    from broker_py.coordinator.partition_writer import PartitionWriter

log = logging.getLogger(__name__)

EMPTY = TransactionState.EMPTY
ONGOING = TransactionState.ONGOING
PREPARE_COMMIT = TransactionState.PREPARE_COMMIT
PREPARE_ABORT = TransactionState.PREPARE_ABORT
COMPLETE_COMMIT = TransactionState.COMPLETE_COMMIT
COMPLETE_ABORT = TransactionState.COMPLETE_ABORT
PREPARE_EPOCH_FENCE = TransactionState.PREPARE_EPOCH_FENCE
COMPLETE_ATTEMPTS = 50  # writes of Complete* after the markers, every retry backoff


class TransactionCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        writer: PartitionWriter,
        *,
        broker_id: int,
        cluster: bool,
        next_producer_id: Callable[[], int],
        offsets_partition: Callable[[str], int],
        broker_clients: BrokerClients,
        on_offsets_marker: Callable[[int, int, bool], None] | None = None,
        time: Time = SYSTEM_TIME,
    ) -> None:
        """``writer``: the partitions of ``__transaction_state`` and those markers go to;
        ``cluster``: this broker is one of a cluster; ``next_producer_id``: a producer id
        never handed out before; ``offsets_partition(group id)``: the group's
        ``__consumer_offsets`` partition, the topic created first (raises KafkaError);
        ``broker_clients``: connections to the other brokers, for their markers;
        ``on_offsets_marker``: see
        :class:`~.transaction_marker_channel_manager.TransactionMarkerChannelManager`."""
        self.config = config
        self.time = time
        self._writer = writer
        self._next_producer_id = next_producer_id
        self._offsets_partition = offsets_partition
        self.state = TransactionStateManager(config, writer, cluster=cluster, time=time)
        # producer id -> transactional id, for checking transactional produce requests
        self._by_producer_id: dict[int, str] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._finishing: dict[
            str, asyncio.Task[None]
        ] = {}  # transactional id -> its markers' delivery
        self._loading: dict[int, asyncio.Task[None]] = {}
        self.active = False
        self.markers = TransactionMarkerChannelManager(
            broker_id,
            writer,
            broker_clients,
            self.config["request.timeout.ms"],
            on_offsets_marker=on_offsets_marker,
        )

    # ---- lifecycle ----

    async def start(self) -> None:
        self._writer.add_leadership_listener(self._leadership_changed)
        for p in self.state.led_partitions():
            await self._load_partition(p)
        finishing = list(self._finishing.values())
        if finishing:  # prepared transactions found in the log: give their markers a moment
            await asyncio.wait(finishing, timeout=self.config["request.timeout.ms"] / 3000)
        self._tasks.append(asyncio.create_task(self._abort_timed_out_loop(), name="txn-timeouts"))
        self._tasks.append(asyncio.create_task(self._expiration_loop(), name="txn-id-expiration"))
        self.active = True

    async def stop(self) -> None:
        self.active = False
        self._writer.remove_leadership_listener(self._leadership_changed)
        tasks = [*self._tasks, *self._finishing.values(), *self._loading.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        await self.markers.close()

    # ---- leadership of __transaction_state partitions ----

    async def _load_partition(self, p: int) -> None:
        """Loads partition ``p``'s ids and completes their prepared transactions."""
        for txn in await self.state.load_partition(p):
            self._by_producer_id[txn.producer_id] = txn.transactional_id
            if txn.state.is_prepare:
                self._finish_in_background(txn, commit=txn.state == PREPARE_COMMIT)

    def _leadership_changed(
        self, leaders: list[tuple[str, int]], followers: list[tuple[str, int]]
    ) -> None:
        """Kafka's ``onLeadershipChange`` for ``__transaction_state``'s partitions."""
        for topic, index in leaders:
            if topic == TRANSACTION_STATE_TOPIC:
                self.on_election(index)
        for topic, index in followers:
            if topic == TRANSACTION_STATE_TOPIC:
                self.on_resignation(index)

    def on_election(self, p: int) -> None:
        """This broker became the leader of ``__transaction_state`` partition ``p``."""
        if p in self.state.owned or p in self._loading:
            return
        partition = self._writer.partition((TRANSACTION_STATE_TOPIC, p))
        if partition is not None and partition.log_end_offset == partition.log_start_offset:
            self.state.owned.add(p)  # nothing to load
            return
        self.state.loading.add(p)
        task = asyncio.get_running_loop().create_task(
            self._load_partition(p), name=f"load-txn-state-{p}"
        )
        self._loading[p] = task
        task.add_done_callback(lambda _t, p=p: self._loading.pop(p, None))

    def on_resignation(self, p: int) -> None:
        """This broker no longer leads ``__transaction_state`` partition ``p``: its ids go
        (the new coordinator completes their transactions)."""
        task = self._loading.pop(p, None)
        if task is not None:
            task.cancel()
        gone = {t for t in self.state.transactions if self.state.partition_of(t) == p}
        for tid in gone:
            finishing = self._finishing.pop(tid, None)
            if finishing is not None:
                finishing.cancel()
        self._by_producer_id = {
            pid: tid for pid, tid in self._by_producer_id.items() if tid not in gone
        }
        if self.state.drop_partition(p):
            log.info(
                "dropped %d transactional ids of partition %d: this broker no longer leads it",
                len(gone),
                p,
            )

    def ensure_topic(self) -> None:
        self.state.ensure_topic()

    @property
    def transactions(self) -> dict[str, TransactionMetadata]:
        return self.state.transactions

    async def _store(self, txn: TransactionMetadata) -> None:
        await self.state.store(txn)
        self._by_producer_id[txn.producer_id] = txn.transactional_id

    # ---- InitProducerId ----

    async def init_producer_id(
        self,
        transactional_id: str,
        txn_timeout_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_epoch: int = -1,
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional producer starting up."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, NO_PRODUCER_ID, -1
        if (error := self.state.coordinator_error(transactional_id)) is not None:
            return error, NO_PRODUCER_ID, -1
        if not 0 < txn_timeout_ms <= self.config["transaction.max.timeout.ms"]:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, -1
        if transactional_id in self.state.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, -1
        try:
            txn = self.state.transactions.get(transactional_id)
            if txn is None:
                now = self.time.milliseconds()
                txn = TransactionMetadata(
                    transactional_id,
                    self._next_producer_id(),
                    0,
                    txn_timeout_ms,
                    EMPTY,
                    set(),
                    -1,
                    now,
                )
                await self._store(txn)
                return ErrorCode.NONE, txn.producer_id, txn.producer_epoch
            if expected_producer_id != NO_PRODUCER_ID:
                if (expected_producer_id, expected_epoch) == (
                    txn.last_producer_id,
                    txn.last_producer_epoch,
                ) and txn.state == EMPTY:
                    # A retry of the InitProducerId that made the current epoch.
                    return ErrorCode.NONE, txn.producer_id, txn.producer_epoch
                if not txn.owned_by(expected_producer_id, expected_epoch):
                    return ErrorCode.PRODUCER_FENCED, NO_PRODUCER_ID, -1
            if txn.state.is_prepare:
                return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, -1
            if txn.state == ONGOING:
                await self._fence_and_abort(txn)
                txn = self.state.transactions.get(transactional_id)
                if txn is None or txn.state.is_prepare:
                    return (
                        ErrorCode.CONCURRENT_TRANSACTIONS,
                        NO_PRODUCER_ID,
                        -1,
                    )  # its markers are still on their way
            new = txn.copy()
            new.last_producer_id, new.last_producer_epoch = txn.producer_id, txn.producer_epoch
            if txn.producer_epoch >= MAX_EPOCH - 1:
                new.producer_id, new.producer_epoch = self._next_producer_id(), 0
            else:
                new.producer_epoch = txn.producer_epoch + 1
            new.txn_timeout_ms = txn_timeout_ms
            new.state = EMPTY
            new.partitions = set()
            new.txn_start_timestamp = -1
            new.txn_last_update_timestamp = self.time.milliseconds()
            await self._store(new)
            return ErrorCode.NONE, new.producer_id, new.producer_epoch
        except KafkaError as e:
            return e.errno, NO_PRODUCER_ID, -1

    # ---- adding partitions ----

    def _owned(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        if (error := self.state.coordinator_error(transactional_id)) is not None:
            return error, None
        txn = self.state.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if txn.state.is_prepare or transactional_id in self.state.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return ErrorCode.NONE, txn

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """The error of each partition: all NONE once they are in the transaction."""
        error, txn = self._owned(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return dict.fromkeys(partitions, error)
        unknown = {tp for tp in partitions if not self._exists(*tp)}
        if unknown:
            return {
                tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if tp in unknown
                else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in partitions
            }
        if txn.state == ONGOING and txn.partitions.issuperset(partitions):
            return dict.fromkeys(partitions, ErrorCode.NONE)
        new = txn.copy()
        now = self.time.milliseconds()
        if txn.state != ONGOING:
            new.partitions = set()
            new.txn_start_timestamp = now
        new.state = ONGOING
        new.partitions.update(partitions)
        new.txn_last_update_timestamp = now
        try:
            await self._store(new)
        except KafkaError as e:
            return dict.fromkeys(partitions, e.errno)
        return dict.fromkeys(partitions, ErrorCode.NONE)

    def _exists(self, topic: str, index: int) -> bool:
        info = self._writer.topic(topic)
        return info is not None and 0 <= index < info.partitions

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        try:
            tp = (OFFSETS_TOPIC, self._offsets_partition(group_id))
        except KafkaError as e:
            return e.errno
        return (await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp]))[tp]

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn v4 with ``verify_only`` (KIP-890), what a partition leader
        asks before the first transactional batch of a producer: NONE for each
        partition in the producer's ongoing transaction, INVALID_TXN_STATE for the
        others; for all, the coordinator's refusal (NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
        CONCURRENT_TRANSACTIONS while it ends one)."""
        error, txn = self._owned(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return dict.fromkeys(partitions, error)
        return {
            tp: ErrorCode.NONE
            if txn.state == ONGOING and tp in txn.partitions
            else ErrorCode.INVALID_TXN_STATE
            for tp in partitions
        }

    def coordinates(self, transactional_id: str) -> bool:
        """Whether this broker coordinates the id now (its partition led and loaded here)."""
        return bool(transactional_id) and self.state.coordinator_error(transactional_id) is None

    def verify_partition(
        self, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        """Whether a transactional batch of this producer may go to this partition: its
        transaction is Ongoing and includes the partition (Kafka's produce-side
        verification, ``transaction.partition.verification.enable``). An older epoch
        of the id's producer is fenced."""
        if not self.config["transaction.partition.verification.enable"]:
            return ErrorCode.NONE
        txn = self.state.transactions.get(self._by_producer_id.get(producer_id, ""))
        if txn is None and self.state.cluster:
            return ErrorCode.NONE  # another broker coordinates it: not verified here
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_TXN_STATE
        if producer_epoch < txn.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if (
            producer_epoch == txn.producer_epoch
            and txn.state == ONGOING
            and (topic, partition) in txn.partitions
        ):
            return ErrorCode.NONE
        return ErrorCode.INVALID_TXN_STATE

    # ---- ending transactions ----

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        error, txn = self._owned(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return error
        try:
            if txn.state == ONGOING:
                await self._prepare_and_finish(txn, commit)
                return ErrorCode.NONE
        except KafkaError as e:
            return e.errno
        if txn.state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT):
            return ErrorCode.NONE  # a retry of the EndTxn that ended it
        return ErrorCode.INVALID_TXN_STATE

    async def _prepare_and_finish(self, txn: TransactionMetadata, commit: bool) -> None:
        prepared = txn.copy()
        prepared.state = PREPARE_COMMIT if commit else PREPARE_ABORT
        prepared.txn_last_update_timestamp = self.time.milliseconds()
        await self._store(prepared)
        task = self._finish_in_background(prepared, commit)
        try:
            await asyncio.wait_for(asyncio.shield(task), self.config["request.timeout.ms"] / 3000)
        except TimeoutError:
            log.info(
                "markers of %r still being delivered; EndTxn answers now", txn.transactional_id
            )

    def _finish_in_background(self, txn: TransactionMetadata, commit: bool) -> asyncio.Task[None]:
        tid = txn.transactional_id
        running = self._finishing.get(tid)
        if running is not None and not running.done():
            return running
        task = asyncio.get_running_loop().create_task(
            self._finish_logged(txn, commit), name=f"txn-markers-{tid}"
        )
        self._finishing[tid] = task
        task.add_done_callback(
            lambda t: self._finishing.pop(tid, None) if self._finishing.get(tid) is t else None
        )
        return task

    async def _finish_logged(self, txn: TransactionMetadata, commit: bool) -> None:
        try:
            await self._finish(txn, commit)
        except KafkaError as e:
            log.error(
                "transaction of %r left in %s: %s", txn.transactional_id, txn.state.display_name, e
            )

    async def _finish(self, txn: TransactionMetadata, commit: bool) -> None:
        """Delivers the markers of a prepared transaction, then writes its Complete* state."""
        tid = txn.transactional_id
        await self.markers.write_markers(
            txn.producer_id,
            txn.producer_epoch,
            commit,
            self.state.coordinator_epoch(tid),
            set(txn.partitions),
            lambda: self.state.coordinator_error(tid) is None,
        )
        log.info(
            "%s markers of %r (producer %d, epoch %d) written to %d partitions",
            "COMMIT" if commit else "ABORT",
            tid,
            txn.producer_id,
            txn.producer_epoch,
            len(txn.partitions),
        )
        done = txn.copy()
        done.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        done.partitions = set()
        done.txn_last_update_timestamp = self.time.milliseconds()
        for attempt in range(COMPLETE_ATTEMPTS):
            try:
                await self._store(done)
                return
            except KafkaError as e:
                if (
                    attempt == COMPLETE_ATTEMPTS - 1
                    or self.state.coordinator_error(tid) is not None
                    or e.errno == ErrorCode.NOT_COORDINATOR
                ):
                    raise
                await asyncio.sleep(
                    self.markers.retry_backoff_ms / 1000
                )  # a transient append error

    async def _fence_and_abort(self, txn: TransactionMetadata) -> None:
        """Aborts an Ongoing transaction under a bumped epoch, fencing its producer."""
        fenced = txn.copy()
        if txn.producer_epoch < MAX_EPOCH - 1:
            fenced.producer_epoch = txn.producer_epoch + 1
        fenced.state = PREPARE_EPOCH_FENCE
        fenced.txn_last_update_timestamp = self.time.milliseconds()
        await self._store(fenced)
        await self._prepare_and_finish(fenced, commit=False)

    # ---- background work ----

    async def abort_timed_out(self, now: int | None = None) -> int:
        """Aborts every transaction Ongoing past its timeout; how many."""
        now = self.time.milliseconds() if now is None else now
        aborted = 0
        for txn in list(self.state.transactions.values()):
            if txn.state == ONGOING and txn.txn_start_timestamp + txn.txn_timeout_ms < now:
                log.info(
                    "aborting the transaction of %r: it passed its %d ms timeout",
                    txn.transactional_id,
                    txn.txn_timeout_ms,
                )
                try:
                    await self._fence_and_abort(txn)
                    aborted += 1
                except KafkaError as e:
                    log.error(
                        "timed-out transaction of %r not aborted: %s", txn.transactional_id, e
                    )
        return aborted

    async def expire_transactional_ids(self, now: int | None = None) -> int:
        """Removes the ids with no transaction in progress idle for
        ``transactional.id.expiration.ms``; how many."""
        now = self.time.milliseconds() if now is None else now
        expiration_ms = self.config["transactional.id.expiration.ms"]
        removed = 0
        for txn in list(self.state.transactions.values()):
            if (
                txn.state == EMPTY or txn.state.is_complete
            ) and txn.txn_last_update_timestamp + expiration_ms <= now:
                try:
                    await self.state.remove(txn.transactional_id)
                except KafkaError as e:
                    log.error("transactional id %r not expired: %s", txn.transactional_id, e)
                    continue
                if self._by_producer_id.get(txn.producer_id) == txn.transactional_id:
                    del self._by_producer_id[txn.producer_id]
                removed += 1
        return removed

    async def _abort_timed_out_loop(self) -> None:
        while True:
            await self.time.sleep(
                self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000
            )
            await self.abort_timed_out()

    async def _expiration_loop(self) -> None:
        while True:
            await self.time.sleep(
                self.config["transaction.remove.expired.transaction.cleanup.interval.ms"] / 1000
            )
            removed = await self.expire_transactional_ids()
            if removed:
                log.info(
                    "removed %d expired transactional ids from %s", removed, TRANSACTION_STATE_TOPIC
                )
