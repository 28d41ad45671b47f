"""The appends of the modern group coordinators (group_record_writes): what is persisted,
appends in flight together, a failed one rebuilding the group once none is in flight, a
record that cannot be serialized, and an append answered after resigning."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from broker_py.coordinator.group.group_record_writes import GroupRecordWrites, KeyValue
from logstore.protocol.error_codes import ErrorCode


@dataclass(frozen=True)
class Rec:
    group_id: str
    value: str  # "" tombstones the group; "bad" cannot be serialized


@dataclass
class Toy:
    group_id: str
    values: list[str] = field(default_factory=list)
    deleted: bool = False

    def replay(self, record: Rec) -> None:
        if record.value:
            self.values.append(record.value)
        else:
            self.deleted = True


def serialize(record: Rec) -> KeyValue:
    if record.value == "bad":
        raise ValueError("too long")
    return record.group_id.encode(), record.value.encode() or None


class Log:
    """The group metadata manager's side: appends answered when the test says."""

    def __init__(self) -> None:
        self.pending: list[tuple[list[KeyValue], Callable[[ErrorCode], None]]] = []
        self.coordinating = True

    def store_records(self, group_id, data, callback) -> None:
        self.pending.append((data, callback))

    def coordinator_error(self, group_id):
        return None if self.coordinating else ErrorCode.NOT_COORDINATOR

    def answer(self, i: int, error: ErrorCode) -> None:
        self.pending[i][1](error)


def _writes() -> tuple[GroupRecordWrites[Rec, Toy], Log, list[str]]:
    log, reloads = Log(), []
    writes: GroupRecordWrites[Rec, Toy] = GroupRecordWrites(
        "toy group", log, serialize, Toy, reloads.append
    )
    return writes, log, reloads


def test_a_failed_append_reloads_the_group_once_none_is_in_flight() -> None:
    writes, log, reloads = _writes()
    answers: list[ErrorCode] = []
    writes.append("g", [Rec("g", "a")], answers.append)
    log.answer(0, ErrorCode.NONE)
    writes.append("g", [Rec("g", "b")], answers.append, head=[(b"h", b"1")], tail=[(b"t", None)])
    writes.append("g", [Rec("g", "c")], answers.append)
    assert log.pending[1][0] == [(b"h", b"1"), (b"g", b"b"), (b"t", None)]
    log.answer(1, ErrorCode.NOT_ENOUGH_REPLICAS)
    assert reloads == []  # "c" is still in flight
    log.answer(2, ErrorCode.NONE)
    assert reloads == ["g"]
    assert answers == [ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NONE]
    assert writes.persisted["g"].values == ["a", "c"]


def test_a_record_that_cannot_be_serialized_fails_its_append() -> None:
    writes, log, reloads = _writes()
    answers: list[ErrorCode] = []
    writes.append("g", [Rec("g", "bad")], answers.append)
    assert log.pending == []
    assert answers == [ErrorCode.UNKNOWN_SERVER_ERROR] and reloads == ["g"]
    assert "g" not in writes.persisted


def test_appends_answered_after_resigning_are_not_kept_and_tombstones_forget() -> None:
    writes, log, _reloads = _writes()
    writes.append("g", [Rec("g", "a")], lambda _e: None)
    log.coordinating = False
    log.answer(0, ErrorCode.NONE)
    assert "g" not in writes.persisted
    log.coordinating = True
    writes.loading("g")
    writes.replayed(Rec("g", "x"))
    assert writes.persisted["g"].values == ["x"]
    writes.append("g", [Rec("g", "")], lambda _e: None)
    log.answer(1, ErrorCode.NONE)
    assert "g" not in writes.persisted
    writes.replayed(Rec("h", "y"))
    writes.forget("h")
    assert writes.persisted == {}
