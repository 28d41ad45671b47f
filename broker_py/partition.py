"""One partition this broker leads: its log, its high watermark and its waiters.

A single broker is the only replica of its partitions, so the high watermark is the
log end offset; replication will move it to the smallest log end offset of the ISR.
Fetches that long-poll wait on :meth:`Partition.wait_for_append`, which wakes on the
next append to this partition.
"""

from __future__ import annotations

import asyncio

import logstore

from broker_py.error_codes import ErrorCode
from broker_py.producer_state import ProducerStateManager


class Partition:
    def __init__(self, topic: str, index: int, log: logstore.Log, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self.producer_state = ProducerStateManager(log)
        # Set by the next append; made only when a long poll asks for it.
        self._appended: asyncio.Event | None = None

    def replace_log(self, log: logstore.Log) -> None:
        """The same partition's log, reopened (after a move to another log dir)."""
        self.log = log
        self.producer_state.moved_to(log)

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def leader_epoch_error(self, current_leader_epoch: int) -> ErrorCode:
        """The error for a request made under ``current_leader_epoch`` (-1: not checked):
        an older epoch is fenced, a newer one is not known here yet."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def notify_append(self) -> None:
        event = self._appended
        if event is not None:
            self._appended = None
            event.set()

    def append_event(self) -> asyncio.Event:
        """An event set by the next append (take it before checking for data)."""
        if self._appended is None:
            self._appended = asyncio.Event()
        return self._appended
