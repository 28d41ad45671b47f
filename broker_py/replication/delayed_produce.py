"""An acks=all produce waiting for its records to be committed (Kafka's
``DelayedProduce``).

Each partition that appended waits until its high watermark reaches the produce's last
offset + 1 (``required_offset``); the operation completes when every partition is
done, or when ``timeout_ms`` passes. A partition then answers:

- NONE once the high watermark passed its records;
- NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below ``min.insync.replicas``
  meanwhile (the records are committed all the same);
- NOT_LEADER_OR_FOLLOWER if this broker stopped leading it;
- REQUEST_TIMED_OUT if the timeout came first, or the operation was forced to end
  (broker shutdown) before its high watermark passed.

Partitions whose append failed, or that were done at once, keep their answer and are
not waited for.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_py.cluster.partition import Partition
from broker_py.replication.produce_result import ProducePartitionResult
from broker_py.replication.purgatory import DelayedOperation
from logstore.protocol.error_codes import ErrorCode


class ProducePartitionStatus:
    """One waiting partition of a produce: where its records end (``required_offset``),
    and its answer in the response (``result``), which a failed wait overwrites."""

    __slots__ = ("acks_pending", "min_insync_replicas", "partition", "required_offset", "result")

    def __init__(
        self,
        result: ProducePartitionResult,
        partition: Partition,
        required_offset: int,
        min_insync_replicas: int | None = None,
    ) -> None:
        self.result = result
        self.partition = partition
        self.required_offset = required_offset
        self.min_insync_replicas = min_insync_replicas
        self.acks_pending = True

    def answer(self, error: ErrorCode) -> None:
        self.acks_pending = False
        if error != ErrorCode.NONE:
            self.result.fail(error)


class DelayedProduce(DelayedOperation):
    def __init__(
        self,
        timeout_ms: int,
        results: list[tuple[str, list[ProducePartitionResult]]],
        waiting: list[ProducePartitionStatus],
        response_callback: Callable[[list[tuple[str, list[ProducePartitionResult]]]], None],
    ) -> None:
        super().__init__(timeout_ms)
        self.results = results
        self.waiting = waiting
        self._response_callback = response_callback

    def try_complete(self) -> bool:
        pending = False
        for s in self.waiting:
            if s.acks_pending:
                done, error = s.partition.check_enough_replicas_reached_offset(
                    s.required_offset, s.min_insync_replicas
                )
                if done:
                    s.answer(error)
                else:
                    pending = True
        return False if pending else self.force_complete()

    def on_complete(self) -> None:
        # A partition not yet satisfied when the operation ends (its timeout, or a forced
        # completion at shutdown) answers REQUEST_TIMED_OUT, as Kafka's start out: a
        # forced completion never reads as an acknowledgement.
        for s in self.waiting:
            if s.acks_pending:
                s.answer(ErrorCode.REQUEST_TIMED_OUT)
        self._response_callback(self.results)
