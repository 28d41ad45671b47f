"""An acks=all produce waiting for its records to be committed (Kafka's
``DelayedProduce``).

Each partition that appended waits until its high watermark reaches the produce's last
offset + 1 (``required_offset``); the operation completes when every partition is
done, or when ``timeout_ms`` passes. A partition then answers:

- NONE once the high watermark passed its records;
- NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below ``min.insync.replicas``
  meanwhile (the records are committed all the same);
- NOT_LEADER_OR_FOLLOWER if this broker stopped leading it;
- REQUEST_TIMED_OUT if the timeout came first.

Partitions whose append already failed keep their error and are not waited for.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_py.cluster.partition import Partition
from broker_py.replication.purgatory import DelayedOperation
from logstore.protocol.error_codes import ErrorCode


class ProducePartitionStatus:
    """One partition of a produce: where its records end and its answer so far, in the
    shape ``logstore.encode_produce_response`` takes: ``(index, error_code,
    base_offset, log_append_time_ms, log_start_offset, error_message, record_errors)``."""

    __slots__ = ("acks_pending", "min_insync_replicas", "partition", "required_offset", "result")

    def __init__(self, partition: Partition | None, required_offset: int, min_insync_replicas: int, result: tuple) -> None:
        self.partition = partition
        self.required_offset = required_offset
        self.min_insync_replicas = min_insync_replicas
        self.result = result
        self.acks_pending = partition is not None and result[1] == 0

    def fail(self, error: ErrorCode) -> None:
        index, _, base_offset, append_time, log_start, _, record_errors = self.result
        self.result = (index, int(error), base_offset, append_time, log_start, error.description, record_errors)
        self.acks_pending = False


class DelayedProduce(DelayedOperation):
    def __init__(
        self, timeout_ms: int, status: list[tuple[str, list[ProducePartitionStatus]]],
        response_callback: Callable[[list[tuple[str, list[tuple]]]], None],
    ) -> None:  # fmt: skip
        super().__init__(timeout_ms)
        self.status = status
        self._response_callback = response_callback

    def try_complete(self) -> bool:
        pending = False
        for _, partitions in self.status:
            for s in partitions:
                if not s.acks_pending:
                    continue
                assert s.partition is not None
                done, error = s.partition.check_enough_replicas_reached_offset(s.required_offset, s.min_insync_replicas)
                if not done:
                    pending = True
                elif error != ErrorCode.NONE:
                    s.fail(error)
                else:
                    s.acks_pending = False
        return False if pending else self.force_complete()

    def on_expiration(self) -> None:
        for _, partitions in self.status:
            for s in partitions:
                if s.acks_pending:
                    s.fail(ErrorCode.REQUEST_TIMED_OUT)

    def on_complete(self) -> None:
        self._response_callback([(topic, [s.result for s in partitions]) for topic, partitions in self.status])
