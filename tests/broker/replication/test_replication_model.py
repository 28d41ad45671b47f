"""Replication as a whole, sans IO: three replicas of one partition, each a real
``Partition`` over a real log in a temporary directory, driven by a model controller and
a model network in one hypothesis state machine, with an explicit clock.

The brokers do what the broker does, through the same calls in the same order:
- a LeaderAndIsr is applied as ``ReplicaManager.become_leader_or_follower`` does (stale
  ones ignored, the partition epoch set, ``make_leader`` / ``make_follower``; a new
  follower fetches from its log end with its log's latest epoch);
- a follower's fetch is the replica manager's read for a follower on the leader (epoch
  check, ``read_for_follower``, ``update_follower_fetch_state`` unless diverging) and
  the fetcher thread's ``_process_partition_data`` / ``_truncate_on_diverging`` /
  ``_handle_out_of_range`` on the follower;
- ISR changes go to the controller as AlterPartition requests (``alter_isr``), which the
  model controller checks as ``KafkaController._alter_partition`` does; its answers are
  delivered later, or at once;
- elections are clean only: a leader moves to another live ISR member, or a broker
  crashes, restarts, loses its ZooKeeper session while running (a zombie that keeps
  leading until it hears of it) or registers again; each bumps the leader epoch, and the
  LeaderAndIsr requests arrive at once or later, one by one.

After every step:
- on every broker that believes it leads: HW <= its LEO; once the HW moved in this
  leadership, HW <= the LEO each counted replica (``maximal_isr``) showed; HW <= the real
  log end of every counted replica; the HW never goes down within a leadership;
- everything ever committed (below some leader's HW) is, byte for byte, a prefix of every
  leader's committed range, of the controller's current leader's log and of the log of
  every replica in the controller's ISR (so a clean election never loses it);
- epoch caches are increasing and within the log.
At the end every broker is brought back and the followers fetch until nothing changes:
then every log equals the leader's byte for byte, the ISR is whole and every high
watermark is the log end.

Two histories it found are replayed below as plain tests: a pending ISR addition the
high watermark must count while the ISR is the leader alone, and a broker that became
leader and lost leadership before writing anything, whose epoch entry at its log end
truncation must drop (``test_a_leader_that_wrote_nothing_rejoins_as_follower``).
REPLICATION_MODEL_EMPTY_EPOCHS=0 makes each new leader write one batch (acks=1) as soon
as it leads, so no epoch stays empty; by default epochs may stay empty.
REPLICATION_EXAMPLES sets the number of examples (default 50).
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import logstore
from broker_py.cluster.partition import Partition
from broker_py.cluster.truncation import EpochEndOffset, offset_truncation_state
from broker_py.log.unified_log import UnifiedLog
from broker_py.replication.leader_end_point import PartitionFetchState
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import NotEnoughReplicasError, OffsetOutOfRangeError

BROKERS = (1, 2, 3)
TOPIC = "t"
LAG_MS = 30_000  # replica.lag.time.max.ms
EMPTY_EPOCHS = os.environ.get("REPLICATION_MODEL_EMPTY_EPOCHS", "1") == "1"


def _note(message: str) -> None:
    """A hypothesis event (shown with --hypothesis-show-statistics); ignored outside a test."""
    try:
        event(message)
    except InvalidArgument:
        pass


def _latest_epoch(partition: Partition) -> int:
    latest = partition.log.latest_epoch
    return -1 if latest is None else latest


def _bytes(plog, end: int | None = None) -> bytes:
    """The log's batches below ``end`` (default: all)."""
    end = plog.log_end_offset if end is None else end
    if end <= plog.log_start_offset:
        return b""
    return plog.read(plog.log_start_offset, 1 << 30, max_offset=end)


# ---- two histories the machine found, replayed on their own ----


def _partition(d: str, broker_id: int, min_isr: int = 1) -> Partition:
    plog = logstore.Log.open(f"{d}/{broker_id}/{TOPIC}-0")
    return Partition(
        TOPIC, 0, UnifiedLog(TOPIC, 0, plog), broker_id, min_insync_replicas=lambda: min_isr
    )


def _batch(tag: str, n: int = 1) -> bytes:
    return logstore.encode_batch(
        [(b"k", f"{tag}-{i}".encode(), [], 1_700_000_000_000) for i in range(n)]
    )


def _follow(
    follower: Partition, leader: Partition, follower_id: int, now_ms: int = 0, rounds: int = 6
) -> list[tuple[int, int]]:
    """The fetcher's loop for one follower until the leader has nothing more; the
    (fetch offset, last fetched epoch) of each fetch."""
    fetches = []
    for _ in range(rounds):
        offset, last = follower.log_end_offset, _latest_epoch(follower)
        fetches.append((offset, last))
        diverging, slice_ = leader.read_for_follower(offset, last, 1 << 20, True)
        if diverging is not None:
            follower.truncate_to(
                offset_truncation_state(
                    diverging,
                    lambda e: EpochEndOffset(*follower.log.end_offset_for_epoch(e)),
                    follower.log.log_end_offset,
                ).offset
            )
            continue
        leader.update_follower_fetch_state(follower_id, offset, follower.log_start_offset, now_ms)
        if slice_ is not None:
            follower.append_records_to_follower(slice_.read())
        follower.update_follower_high_watermark(leader.high_watermark, leader.log_start_offset)
        if slice_ is None:
            break
    return fetches


def test_a_pending_addition_holds_the_high_watermark_of_a_leader_alone():
    """min.insync.replicas=1, the ISR is the leader alone, a follower caught up and was
    proposed back: the HW must wait for it from then on (Kafka counts the maximal ISR),
    else the controller commits an ISR holding a replica below the HW, which a clean
    election may then pick, losing committed records. (Fixed in
    ``Partition.maybe_increment_leader_hw``, which skipped every follower while the
    committed ISR was the leader alone.)"""
    with tempfile.TemporaryDirectory() as d:
        p = _partition(d, 1)
        proposals = []
        p.alter_isr = lambda partition, change: proposals.append(change)
        try:
            p.make_leader(1, [1], [1, 2, 3], now_ms=0)
            p.append_records_to_leader(_batch("a", 2), -1)
            assert p.high_watermark == 2
            p.update_follower_fetch_state(2, 2, 0, now_ms=10)
            assert [c.proposed_isr for c in proposals] == [{1, 2}]
            p.append_records_to_leader(_batch("b", 3), -1)
            assert p.high_watermark == 2  # replica 2 showed only 2
            p.on_isr_change_result(proposals[0], ErrorCode.NONE, 1, [1, 2], p.partition_epoch + 1)
            assert p.isr == {1, 2} and p.high_watermark == 2
            p.update_follower_fetch_state(2, 5, 0, now_ms=20)
            assert p.high_watermark == 5
        finally:
            p.log.local_log.close()


def test_a_leader_that_wrote_nothing_rejoins_as_follower():
    """Broker 2 leads epoch 2 (its cache gets (2, 1)) and loses leadership before
    writing; as a follower it fetches with last epoch 2 at offset 1, the leader answers
    DivergingEpoch (1, 1), the cut to 1 is at its log end and changes nothing, and its
    cache still ends with epoch 2: every later fetch gets the same answer."""
    with tempfile.TemporaryDirectory() as d:
        a, b = _partition(d, 1), _partition(d, 2)
        for p in (a, b):
            p.alter_isr = lambda partition, change: None
        try:
            a.make_leader(1, [1, 2], [1, 2], now_ms=0)
            b.make_follower(1, 1, [1, 2], [1, 2])
            a.append_records_to_leader(_batch("one"), 1)
            _follow(b, a, 2)
            b.make_leader(2, [1, 2], [1, 2], now_ms=0)  # leads epoch 2, writes nothing
            assert b.log.local_log.epoch_entries() == [(1, 0), (2, 1)]
            a.make_leader(3, [1, 2], [1, 2], now_ms=0)
            b.make_follower(1, 3, [1, 2], [1, 2])
            a.append_records_to_leader(_batch("three"), 1)
            fetches = _follow(b, a, 2)
            assert b.log_end_offset == a.log_end_offset == 2, fetches
            assert _bytes(b.log.local_log) == _bytes(a.log.local_log)
        finally:
            a.log.local_log.close()
            b.log.local_log.close()


class Broker:
    """One running broker's replica: its log, its Partition and its fetcher's state."""

    def __init__(
        self, machine: ReplicationMachine, broker_id: int, incarnation: int, checkpointed_hw: int
    ) -> None:
        self.id = broker_id
        self.incarnation = incarnation
        self.plog = logstore.Log.open(f"{machine.dir.name}/{broker_id}/{TOPIC}-0")
        self.partition = Partition(
            TOPIC,
            0,
            UnifiedLog(TOPIC, 0, self.plog),
            broker_id,
            min_insync_replicas=lambda: machine.min_isr,
        )
        self.partition.alter_isr = lambda partition, change: machine.alter_isr(
            self, partition, change
        )
        # as ReplicaManager does with the replication-offset-checkpoint
        self.partition.high_watermark = min(checkpointed_hw, self.partition.log_end_offset)
        self.fetch: PartitionFetchState | None = None
        self.broker_epoch = -1  # as this broker knows it (set when it registers)


class ReplicationMachine(RuleBasedStateMachine):
    # ---- setup ----

    @initialize(min_isr=st.sampled_from([1, 2]), first_leader=st.sampled_from(BROKERS))
    def setup(self, min_isr, first_leader):
        self.dir = tempfile.TemporaryDirectory()
        self.min_isr = min_isr
        self.now = 1_000
        self.seq = 0
        self.incarnations = 0
        self.brokers: dict[int, Broker | None] = {}
        self.crashed: dict[int, tuple[int, bytes]] = {}  # a crashed broker's (LEO, log bytes)
        self.hw_checkpoint = dict.fromkeys(BROKERS, 0)
        # the controller's view
        self.c_alive: set[int] = set()
        self.c_broker_epoch = dict.fromkeys(BROKERS, 0)
        self.c_leader, self.c_epoch, self.c_isr, self.c_pepoch = first_leader, 0, list(BROKERS), 0
        # the network
        self.lai: dict[int, list[tuple[int, int, list[int], int]]] = {b: [] for b in BROKERS}
        self.alter_requests: list[tuple] = []
        self.alter_answers: list[tuple] = []
        # what the invariants remember
        self.committed = b""
        self.committed_end = 0
        self.leaderships: dict[
            int, tuple[int, int, int, int]
        ] = {}  # broker -> (incarnation, epoch, start HW, last HW)
        for b in BROKERS:
            self._start(b)
        for b in BROKERS:
            self._register(b)
        self._send_lai(BROKERS)
        self._deliver_all_lai()

    def teardown(self):
        if not hasattr(self, "dir"):
            return
        try:
            self._heal_and_check()
        finally:
            for br in self.brokers.values():
                if br is not None and not br.plog.closed:
                    br.plog.close()
            self.dir.cleanup()

    # ---- brokers ----

    def _start(self, b: int) -> None:
        self.incarnations += 1
        self.brokers[b] = Broker(self, b, self.incarnations, self.hw_checkpoint[b])
        self.crashed.pop(b, None)

    def _running(self) -> list[int]:
        return [b for b in BROKERS if self.brokers.get(b) is not None]

    def _leaders(self) -> list[int]:
        """The running brokers that believe they lead (a zombie included)."""
        return [b for b in self._running() if self.brokers[b].partition.is_leader]

    def _log_state(self, b: int) -> tuple[int, bytes]:
        br = self.brokers.get(b)
        if br is None:
            return self.crashed[b]
        return br.plog.log_end_offset, _bytes(br.plog)

    def _batch(self, n: int) -> bytes:
        self.seq += 1
        return logstore.encode_batch(
            [
                (b"k%d" % self.seq, b"v%d-%d" % (self.seq, i), [], 1_700_000_000_000 + self.seq)
                for i in range(n)
            ]
        )

    # ---- the controller ----

    def _register(self, b: int) -> None:
        self.c_broker_epoch[b] += 1
        self.brokers[b].broker_epoch = self.c_broker_epoch[b]
        self.c_alive.add(b)

    def _bump(self, leader: int, isr: list[int]) -> None:
        self.c_leader, self.c_isr = leader, sorted(isr)
        self.c_epoch += 1
        self.c_pepoch += 1
        self._send_lai([b for b in BROKERS if b in self.c_alive])

    def _send_lai(self, brokers) -> None:
        for b in brokers:
            self.lai[b].append((self.c_leader, self.c_epoch, list(self.c_isr), self.c_pepoch))

    def _broker_down(self, b: int, choose) -> None:
        """The controller learns ``b`` is gone (ZooKeeper session lost)."""
        self.c_alive.discard(b)
        self.lai[b].clear()
        if b == self.c_leader:
            live = [r for r in self.c_isr if r in self.c_alive]
            if live:
                self._bump(choose(live), live)
            else:  # no live ISR member: no leader; the ISR keeps its last member
                self._bump(
                    -1, self.c_isr if len(self.c_isr) == 1 else [r for r in self.c_isr if r != b]
                )
        elif b in self.c_isr and len(self.c_isr) > 1:
            self._bump(self.c_leader, [r for r in self.c_isr if r != b])

    def _broker_up(self, b: int, choose) -> None:
        """``b`` registered: a leaderless partition elects a live ISR member; ``b`` gets
        the partition's state."""
        self._register(b)
        self.lai[b].clear()
        if self.c_leader == -1:
            live = [r for r in self.c_isr if r in self.c_alive]
            if live:
                self._bump(choose(live), self.c_isr)
                return
        self._send_lai([b])

    def alter_isr(self, br: Broker, partition: Partition, change) -> None:
        """A leader's AlterPartition, with what the AlterPartitionManager puts in it."""
        self.alter_requests.append(
            (
                br.id,
                br.broker_epoch,
                partition,
                change,
                partition.leader_epoch,
                partition.partition_epoch,
            )
        )

    def _handle_alter(self, request) -> None:
        """``KafkaController._alter_partition`` on the model's state."""
        b, broker_epoch, partition, change, leader_epoch, partition_epoch = request
        proposed = sorted(change.proposed_isr)
        if b not in self.c_alive or broker_epoch != self.c_broker_epoch[b]:
            error = ErrorCode.STALE_BROKER_EPOCH
        elif self.c_leader != b:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif leader_epoch != self.c_epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
        elif proposed == self.c_isr:
            error = ErrorCode.NONE  # already applied
        elif partition_epoch != self.c_pepoch:
            error = ErrorCode.INVALID_UPDATE_VERSION
        elif any(r not in self.c_alive for r in proposed) or b not in proposed:
            error = ErrorCode.INELIGIBLE_REPLICA
        else:
            error = ErrorCode.NONE
            self.c_isr = proposed
            self.c_pepoch += 1
            _note("ISR change committed: " + ("expand" if change.expanding else "shrink"))
        self.alter_answers.append(
            (b, partition, change, error, self.c_epoch, list(self.c_isr), self.c_pepoch)
        )

    def _deliver_answer(self, answer) -> None:
        b, partition, change, error, leader_epoch, isr, partition_epoch = answer
        br = self.brokers.get(b)
        if br is None or br.partition is not partition:
            return  # the broker restarted: the connection is gone
        if error == ErrorCode.NONE:
            partition.on_isr_change_result(change, error, leader_epoch, isr, partition_epoch)
        else:
            partition.on_isr_change_result(change, error)

    # ---- LeaderAndIsr on a broker ----

    def _apply_lai(self, b: int, state) -> None:
        br = self.brokers[b]
        p = br.partition
        leader, epoch, isr, partition_epoch = state
        if epoch < p.leader_epoch or (
            epoch == p.leader_epoch and partition_epoch <= p.partition_epoch
        ):
            return  # stale
        p.partition_epoch = partition_epoch
        if leader == b:
            was_leader_in = p.leader_epoch if p.is_leader else None
            p.make_leader(epoch, isr, list(BROKERS), self.now)
            br.fetch = None
            if not EMPTY_EPOCHS and was_leader_in != epoch:
                p.append_records_to_leader(self._batch(1), 1)  # REPLICATION_MODEL_EMPTY_EPOCHS=0
        else:
            changed = p.make_follower(leader, epoch, isr, list(BROKERS))
            if changed or br.fetch is None:
                br.fetch = (
                    PartitionFetchState(p.log_end_offset, p.leader_epoch, _latest_epoch(p))
                    if leader >= 0
                    else None
                )

    def _deliver_all_lai(self) -> None:
        for b in BROKERS:
            while self.brokers.get(b) is not None and self.lai[b]:
                self._apply_lai(b, self.lai[b].pop(0))

    # ---- one follower fetch, end to end ----

    def _fetch(self, b: int, max_bytes: int) -> None:
        br = self.brokers[b]
        p, state = br.partition, br.fetch
        leader_br = self.brokers.get(p.leader_id)
        if leader_br is None:
            return  # the connection fails; the fetcher backs off
        lp = leader_br.partition
        # the leader: replication/local_log_read.py _read_for_follower
        error = lp.leader_epoch_error(state.current_leader_epoch)
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            _note("fetch: fenced")
            br.fetch = None  # the partition leaves the fetcher until the next LeaderAndIsr
            return
        if error != ErrorCode.NONE:
            _note(f"fetch: {error.name}")
            return  # back off and retry
        try:
            diverging, slice_ = lp.read_for_follower(
                state.fetch_offset, state.last_fetched_epoch, max_bytes, True
            )
        except OffsetOutOfRangeError:
            _note("fetch: out of range")
            self._out_of_range(br, lp)
            return
        if diverging is None:
            lp.update_follower_fetch_state(b, state.fetch_offset, p.log_start_offset, self.now)
        records = b"" if slice_ is None else slice_.read()
        hw, log_start = lp.high_watermark, lp.log_start_offset
        # the follower: replica_fetcher_thread._process_partition_data
        if p.is_leader or p.leader_epoch != state.current_leader_epoch:
            return
        if diverging is not None and (diverging.epoch != -1 or diverging.end_offset != -1):
            target = offset_truncation_state(
                EpochEndOffset(diverging.epoch, diverging.end_offset),
                lambda e: EpochEndOffset(*p.log.end_offset_for_epoch(e)),
                p.log.log_end_offset,
            )
            _note(
                "fetch: diverging, truncated"
                if target.offset < p.log_end_offset
                else "fetch: diverging, nothing to cut"
            )
            p.truncate_to(target.offset)
            state.fetch_offset = p.log_end_offset
            state.last_fetched_epoch = -1 if diverging.epoch == -1 else _latest_epoch(p)
            return
        if records:
            p.append_records_to_follower(records)
            state.fetch_offset = p.log_end_offset
            state.last_fetched_epoch = _latest_epoch(p)
        p.update_follower_high_watermark(hw, log_start)

    def _out_of_range(self, br: Broker, lp: Partition) -> None:
        """replica_fetcher_thread._handle_out_of_range (ListOffsets to the same leader)."""
        p, state = br.partition, br.fetch
        if lp.leader_epoch_error(state.current_leader_epoch) != ErrorCode.NONE:
            return
        leader_end = lp.log_end_offset
        if leader_end < p.log_end_offset:
            p.truncate_to(leader_end)
        elif lp.log_start_offset > p.log_end_offset:
            p.truncate_fully_and_start_at(lp.log_start_offset)
        state.fetch_offset = p.log_end_offset
        state.last_fetched_epoch = _latest_epoch(p)

    # ---- rules ----

    @precondition(lambda self: self._leaders())
    @rule(data=st.data(), n=st.integers(1, 3), acks=st.sampled_from([-1, 1]))
    def produce(self, data, n, acks):
        b = data.draw(st.sampled_from(self._leaders()), label="leader")
        if b != self.c_leader or self.brokers[b].partition.leader_epoch != self.c_epoch:
            _note("produce: to a deposed leader")
        try:
            self.brokers[b].partition.append_records_to_leader(self._batch(n), acks)
        except NotEnoughReplicasError:
            _note("produce: NOT_ENOUGH_REPLICAS")

    def _fetchers(self) -> list[int]:
        return [
            b
            for b in self._running()
            if (br := self.brokers[b]).fetch is not None
            and not br.partition.is_leader
            and br.partition.leader_id >= 0
        ]

    @precondition(lambda self: self._fetchers())
    @rule(data=st.data(), max_bytes=st.sampled_from([1, 200, 1 << 20]))
    def follower_fetches(self, data, max_bytes):
        self._fetch(data.draw(st.sampled_from(self._fetchers()), label="follower"), max_bytes)

    @rule(ms=st.sampled_from([100, 10_000, LAG_MS + 1]))
    def time_passes(self, ms):
        self.now += ms

    @precondition(lambda self: self._leaders())
    @rule(data=st.data(), at_once=st.booleans())
    def leader_checks_isr(self, data, at_once):
        b = data.draw(st.sampled_from(self._leaders()), label="leader")
        queued = len(self.alter_requests)
        if self.brokers[b].partition.maybe_shrink_isr(self.now, LAG_MS) and at_once:
            request = self.alter_requests.pop(queued)
            self._handle_alter(request)
            self._deliver_answer(self.alter_answers.pop())

    def _deliverable(self) -> list[str]:
        kinds = []
        if self.alter_requests:
            kinds.append("AlterPartition request")
        if self.alter_answers:
            kinds.append("AlterPartition answer")
        if any(self.lai[b] for b in self._running()):
            kinds.append("LeaderAndIsr")
        return kinds

    @precondition(lambda self: self._deliverable())
    @rule(data=st.data())
    def network_delivers(self, data):
        """The controller handles the oldest AlterPartition, or an answer reaches its
        leader, or a broker gets its oldest LeaderAndIsr."""
        kind = data.draw(st.sampled_from(self._deliverable()), label="delivers")
        if kind == "AlterPartition request":
            self._handle_alter(self.alter_requests.pop(0))
        elif kind == "AlterPartition answer":
            self._deliver_answer(
                self.alter_answers.pop(
                    data.draw(st.integers(0, len(self.alter_answers) - 1), label="answer")
                )
            )
        else:
            b = data.draw(
                st.sampled_from([b for b in self._running() if self.lai[b]]), label="broker"
            )
            self._apply_lai(b, self.lai[b].pop(0))

    def _movable(self) -> list[int]:
        return [
            r
            for r in self.c_isr
            if r in self.c_alive and r != self.c_leader and self.brokers.get(r) is not None
        ]

    @precondition(lambda self: self._movable())
    @rule(data=st.data(), at_once=st.booleans())
    def controller_moves_leadership(self, data, at_once):
        """A preferred / reassignment / controlled-shutdown style election: another
        live ISR member leads, the ISR stays (the old leader keeps its longer log)."""
        self._bump(data.draw(st.sampled_from(self._movable()), label="new leader"), self.c_isr)
        if at_once:
            self._deliver_all_lai()

    @precondition(lambda self: self._running())
    @rule(data=st.data(), at_once=st.booleans())
    def broker_crashes(self, data, at_once):
        b = data.draw(st.sampled_from(self._running()), label="broker")
        br = self.brokers[b]
        self.hw_checkpoint[b] = br.partition.high_watermark
        self.crashed[b] = (br.plog.log_end_offset, _bytes(br.plog))
        br.plog.close()
        self.brokers[b] = None
        self.leaderships.pop(b, None)
        if b in self.c_alive:
            self._broker_down(b, _chooser(data))
        if at_once:
            self._deliver_all_lai()

    def _away(self) -> list[int]:
        return [b for b in BROKERS if self.brokers.get(b) is None or b not in self.c_alive]

    @precondition(lambda self: self._away())
    @rule(data=st.data(), at_once=st.booleans())
    def broker_returns(self, data, at_once):
        """A crashed broker restarts (its log reopened, its HW from the checkpoint), or
        a zombie registers again; either way the controller sends it the state."""
        b = data.draw(st.sampled_from(self._away()), label="broker")
        if self.brokers.get(b) is None:
            self._start(b)
        self._broker_up(b, _chooser(data))
        if at_once:
            self._deliver_all_lai()

    @precondition(lambda self: [b for b in self._running() if b in self.c_alive])
    @rule(data=st.data(), at_once=st.booleans())
    def session_expires(self, data, at_once):
        """The controller thinks ``b`` died; ``b`` runs on unaware (a zombie)."""
        b = data.draw(
            st.sampled_from([b for b in self._running() if b in self.c_alive]), label="broker"
        )
        self._broker_down(b, _chooser(data))
        if at_once:
            self._deliver_all_lai()

    # ---- invariants ----

    @invariant()
    def leaders_high_watermark(self):
        if not hasattr(self, "dir"):
            return
        for b in self._running():
            br = self.brokers[b]
            p = br.partition
            assert p.high_watermark <= p.log_end_offset, (b, p.high_watermark, p.log_end_offset)
            if not p.is_leader:
                self.leaderships.pop(b, None)
                continue
            hw = p.high_watermark
            key = (br.incarnation, p.leader_epoch)
            known = self.leaderships.get(b)
            if known is None or known[:2] != key:
                known = (*key, hw, hw)
            assert hw >= known[3], (
                f"broker {b}'s HW went down from {known[3]} to {hw} in epoch {p.leader_epoch}"
            )
            self.leaderships[b] = (*key, known[2], hw)
            counted = p.maximal_isr - {b}
            if hw > known[2]:  # moved in this leadership: every counted replica showed it
                for r in counted:
                    shown = p.remote_replicas[r].log_end_offset
                    assert hw <= shown, (
                        f"leader {b} HW {hw} > LEO {shown} replica {r} showed "
                        f"(maximal ISR {sorted(p.maximal_isr)})"
                    )
            for r in counted:
                real = self._log_state(r)[0]
                assert hw <= real, (
                    f"leader {b} HW {hw} > replica {r}'s log end {real} "
                    f"(maximal ISR {sorted(p.maximal_isr)})"
                )

    @invariant()
    def committed_records_survive(self):
        if not hasattr(self, "dir"):
            return
        for b in self._leaders():
            br = self.brokers[b]
            mine = _bytes(br.plog, br.partition.high_watermark)
            n = min(len(mine), len(self.committed))
            assert mine[:n] == self.committed[:n], (
                f"leader {b}'s committed records differ from those committed before"
            )
            if br.partition.high_watermark > self.committed_end:
                self.committed, self.committed_end = mine, br.partition.high_watermark
        holders = set(self.c_isr) | ({self.c_leader} if self.c_leader >= 0 else set())
        for r in sorted(holders):
            leo, data = self._log_state(r)
            assert leo >= self.committed_end, (
                f"replica {r} (controller ISR {self.c_isr}, leader {self.c_leader}) ends at "
                f"{leo}, below committed {self.committed_end}"
            )
            assert data[: len(self.committed)] == self.committed, (
                f"replica {r} lost or changed committed records"
            )

    @invariant()
    def epoch_caches_are_sane(self):
        if not hasattr(self, "dir"):
            return
        for b in self._running():
            plog = self.brokers[b].plog
            entries = [tuple(e) for e in plog.epoch_entries()]
            assert all(a[0] < c[0] and a[1] <= c[1] for a, c in zip(entries, entries[1:])), entries
            assert all(start <= plog.log_end_offset for _, start in entries), (
                entries,
                plog.log_end_offset,
            )

    # ---- the end ----

    def _snapshot(self):
        return (
            tuple(
                (
                    b,
                    br.plog.log_end_offset,
                    br.partition.high_watermark,
                    br.partition.leader_epoch,
                    br.partition.pending_isr_change is not None,
                    br.fetch and (br.fetch.fetch_offset, br.fetch.last_fetched_epoch),
                )
                for b in self._running()
                if (br := self.brokers[b])
            ),
            tuple(self.c_isr),
            self.c_leader,
            self.c_pepoch,
        )

    def _heal_and_check(self) -> None:
        """Every broker back and registered, every request delivered; followers fetch
        until nothing changes. Then the logs are equal and the ISR whole."""
        for b in BROKERS:
            if self.brokers.get(b) is None:
                self._start(b)
                self._broker_up(b, _first)
            elif b not in self.c_alive:
                self._broker_up(b, _first)
        self._deliver_all_lai()
        assert self.c_leader >= 0, "every broker is back, yet no leader"
        for _ in range(100):
            before = self._snapshot()
            while self.alter_requests or self.alter_answers:
                while self.alter_requests:
                    self._handle_alter(self.alter_requests.pop(0))
                while self.alter_answers:
                    self._deliver_answer(self.alter_answers.pop(0))
            self._deliver_all_lai()
            for b in self._fetchers():
                self._fetch(b, 1 << 20)
            if self._snapshot() == before and not self.alter_requests:
                break
        else:
            raise AssertionError(f"replication did not settle: {self._snapshot()}")
        leader = self.brokers[self.c_leader]
        assert leader.partition.is_leader and leader.partition.leader_epoch == self.c_epoch
        expected = _bytes(leader.plog)
        for b in BROKERS:
            if b != self.c_leader:
                br = self.brokers[b]
                assert br.fetch is not None, f"follower {b} is not fetching"
                assert _bytes(br.plog) == expected, (
                    f"follower {b}'s log differs from leader {self.c_leader}'s: "
                    f"{br.plog.epoch_entries()} vs {leader.plog.epoch_entries()}"
                )
        assert self.c_isr == list(BROKERS), f"the ISR did not grow back: {self.c_isr}"
        assert leader.partition.high_watermark == leader.plog.log_end_offset
        for b in BROKERS:
            assert self.brokers[b].partition.high_watermark == leader.plog.log_end_offset, b
        self.committed_records_survive()


def _chooser(data):
    return lambda choices: data.draw(st.sampled_from(choices), label="new leader")


def _first(choices):
    return choices[0]  # at the end, where nothing may be drawn


ReplicationMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("REPLICATION_EXAMPLES", "50")),
    stateful_step_count=40,
    deadline=None,
)
TestReplication = ReplicationMachine.TestCase
