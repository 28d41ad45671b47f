"""Hypothesis drives share-group members (KIP-932) through the ShareGroupHeartbeat rules:
joins, steady heartbeats with right and wrong epochs, subscriptions changing, leaves,
sessions expiring, topics growing. After every step: each answer is one of the
heartbeat's error codes; member epochs never pass the assignment epoch, nor that the
group epoch; a member's assignment holds only existing partitions of topics it
subscribes to; once every member has heartbeated at the latest epoch, every subscribed
partition is assigned to a member; and the records, through their bytes, replay to the
same group."""

from __future__ import annotations

import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker_py.coordinator.group.modern.records import TopicMetadata
from broker_py.coordinator.group.modern.share import record_serde
from broker_py.coordinator.group.modern.share.group import ShareGroup
from broker_py.coordinator.group.modern.share.manager import (
    ShareGroupManager,
    ShareHeartbeatRequest,
)
from broker_py.utils.time import MockTime
from logstore.protocol.error_codes import ErrorCode

GROUP = "g"
MEMBERS = ["m0", "m1", "m2", "m3"]
TOPICS = ["a", "b"]
SESSION_MS = 10_000
ALLOWED = {
    ErrorCode.NONE,
    ErrorCode.FENCED_MEMBER_EPOCH,
    ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.GROUP_ID_NOT_FOUND,
    ErrorCode.GROUP_MAX_SIZE_REACHED,
    ErrorCode.INVALID_REQUEST,
}


class ShareGroupModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.time = MockTime()
        self.manager = ShareGroupManager(self.time, max_size=3)
        self.partitions = {"a": 1, "b": 3}
        self.ids = {"a": uuid.UUID(int=1), "b": uuid.UUID(int=2)}
        self._topics()
        self.records: list = []
        # The epoch each member was last told (members the model believes joined).
        self.known: dict[str, int] = {}

    def _topics(self) -> None:
        self.manager.update_topics(
            TopicMetadata(self.ids[n], n, p) for n, p in self.partitions.items()
        )

    def _beat(self, member: str, epoch: int, topics=None):
        result = self.manager.heartbeat(
            ShareHeartbeatRequest(GROUP, member, epoch, None, topics), SESSION_MS, 1000
        )
        assert result.response.error_code in ALLOWED, result.response
        self.records.extend(result.records)
        if result.response.error_code == ErrorCode.NONE:
            if result.response.member_epoch >= 0:
                self.known[member] = result.response.member_epoch
            else:
                self.known.pop(member, None)
        return result.response

    @rule(
        member=st.sampled_from(MEMBERS),
        topics=st.lists(st.sampled_from(TOPICS), min_size=1, max_size=2, unique=True),
    )
    def join(self, member: str, topics: list[str]) -> None:
        self._beat(member, 0, tuple(topics))

    @rule(member=st.sampled_from(MEMBERS))
    def heartbeat(self, member: str) -> None:
        if member in self.known:
            response = self._beat(member, self.known[member])
            group = self.manager.group(GROUP)
            if response.error_code == ErrorCode.NONE and group is not None:
                assert response.member_epoch == group.assignment_epoch

    @rule(
        member=st.sampled_from(MEMBERS),
        topics=st.lists(st.sampled_from(TOPICS), min_size=1, max_size=2, unique=True),
    )
    def resubscribe(self, member: str, topics: list[str]) -> None:
        if member in self.known:
            self._beat(member, self.known[member], tuple(topics))

    @rule(member=st.sampled_from(MEMBERS), delta=st.integers(min_value=1, max_value=3))
    def wrong_epoch(self, member: str, delta: int) -> None:
        if member in self.known:
            response = self._beat(member, self.known[member] + delta)
            assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        self._beat(member, -1)

    @rule(seconds=st.sampled_from([1.0, 6.0, 11.0]))
    def time_passes(self, seconds: float) -> None:
        self.time.advance(seconds)
        for fired in self.manager.expire():
            self.records.extend(fired.records)
            self.known.pop(fired.member_id, None)

    @rule()
    def topic_grows(self) -> None:
        self.partitions["b"] = min(self.partitions["b"] + 1, 6)
        self._topics()

    @rule()
    def everyone_catches_up(self) -> None:
        group = self.manager.group(GROUP)
        if group is None:
            return
        for member in list(self.known):
            if member in group.members:
                self._beat(member, group.members[member].member_epoch)
        group = self.manager.group(GROUP)
        if group is None or not group.members:
            return
        wanted = {
            (self.ids[n], p)
            for m in group.members.values()
            for n in m.subscribed_topic_names
            for p in range(self.partitions[n])
        }
        held = {
            (t, p)
            for m in group.members.values()
            for t, ps in m.assigned_partitions.items()
            for p in ps
        }
        assert held == wanted

    @invariant()
    def epochs_and_assignments_are_sound(self) -> None:
        group = self.manager.group(GROUP)
        if group is None:
            return
        assert group.assignment_epoch <= group.group_epoch
        assert len(group.members) <= 3
        for m in group.members.values():
            assert 0 < m.member_epoch <= group.assignment_epoch
            subscribed = {self.ids[n] for n in m.subscribed_topic_names}
            for topic_id, parts in m.assigned_partitions.items():
                assert topic_id in subscribed
                name = next(n for n, i in self.ids.items() if i == topic_id)
                assert parts and max(parts) < self.partitions[name]

    @invariant()
    def records_replay_to_the_same_group(self) -> None:
        rebuilt = ShareGroup(GROUP)
        for record in self.records:
            key, value = record_serde.serialize(record)
            again = record_serde.deserialize(key, value)
            assert again == record
            assert again is not None
            rebuilt.replay(again)
        live = self.manager.groups.get(GROUP)
        if live is None:
            assert not rebuilt.members
            return
        assert rebuilt.members == live.members
        assert (rebuilt.group_epoch, rebuilt.assignment_epoch) == (
            live.group_epoch,
            live.assignment_epoch,
        )
        assert rebuilt.target_assignment == live.target_assignment


ShareGroupModel.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_share_group_model = ShareGroupModel.TestCase
