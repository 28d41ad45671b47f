"""The queue checker, pure: hand-written histories for each anomaly, and
hypothesis-generated histories of a correct log (no anomaly) into which one anomaly
is injected at a time."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cluster.harness.checker import (
    FAIL,
    INFO,
    OK,
    Poll,
    ReplicaRead,
    Reset,
    Send,
    check,
    longest_ack_gap,
)


def send(value, partition=0, outcome=OK, offset=None, process=None, completed=None):
    return Send(
        process or value.rsplit("-", 1)[0], value, partition, outcome, offset, 0.0, completed
    )


def poll(process, records, partition=0):
    return Poll(process, partition, tuple(records))


# ---------------------------------------------------------------- hand-written


def test_a_clean_history_is_ok():
    h = [
        send("p-0", offset=0),
        send("p-1", offset=1),
        send("p-2", outcome=INFO),
        poll("c", [(0, "p-0"), (1, "p-1")]),
    ]
    r = check(h, final_reads_complete=True)
    assert r.ok, r.summary()
    assert (r.sends, r.acked, r.unknown, r.records_read, r.values_read) == (3, 2, 1, 2, 2)


def test_an_acknowledged_write_not_read_below_what_was_read_is_lost():
    h = [
        send("p-0", offset=0),
        send("p-1", offset=1),
        send("p-2", offset=2),
        poll("c", [(0, "p-0")]),
        poll("c", [(2, "p-2")]),
    ]
    r = check(h)
    assert r.lost == 1 and r.examples["lost"] == [("p-1", 0, 1)]
    assert r.poll_skips == 1  # the consumer also jumped over the acknowledged offset 1
    assert not r.ok


def test_an_acknowledged_write_beyond_the_reads_is_unseen_and_counts_only_after_complete_reads():
    h = [send("p-0", offset=0), send("p-1", offset=1), poll("c", [(0, "p-0")])]
    assert check(h).unseen == 1 and check(h).ok
    r = check(h, final_reads_complete=True)
    assert r.unseen == 1 and r.lost == 0 and not r.ok
    assert (
        check([send("p-0", offset=None)], final_reads_complete=True).unseen == 1
    )  # no offset: unseen


def test_a_value_at_two_offsets_is_a_duplicate():
    h = [send("p-0", offset=0), poll("c", [(0, "p-0"), (1, "p-0")])]
    r = check(h)
    assert r.duplicates == 1 and r.examples["duplicates"] == [("p-0", [(0, 0), (0, 1)])]
    assert r.ok_ignoring("duplicates") and not r.ok
    # Across partitions too.
    assert (
        check(
            [send("p-0", offset=0), poll("c", [(0, "p-0")]), poll("c", [(0, "p-0")], partition=1)]
        ).duplicates
        == 1
    )


def test_one_offset_with_two_values_is_inconsistent_across_consumers_acks_and_replicas():
    base = [send("p-0", offset=0), send("p-1", offset=1)]
    r = check([*base, poll("c1", [(0, "p-0"), (1, "p-1")]), poll("c2", [(0, "p-1")])])
    assert r.inconsistent_offsets == 1 and r.examples["inconsistent_offsets"] == [
        (0, 0, ["p-0", "p-1"])
    ]
    # The acknowledgement disagrees with what was read.
    r = check([send("p-0", offset=5), poll("c", [(0, "p-0")])])
    assert r.inconsistent_offsets == 0 and r.duplicates == 1
    r = check([send("p-0", offset=0), send("p-1", offset=0), poll("c", [(0, "p-0")])])
    assert r.inconsistent_offsets == 1
    # A replica holding another value at a committed offset.
    r = check(
        [*base, poll("c", [(0, "p-0"), (1, "p-1")]), ReplicaRead("b2", 0, ((0, "p-0"), (1, "p-0")))]
    )
    assert r.inconsistent_offsets == 1 and r.duplicates == 1
    assert check(
        [*base, poll("c", [(0, "p-0"), (1, "p-1")]), ReplicaRead("b2", 0, ((0, "p-0"), (1, "p-1")))]
    ).ok


def test_reading_backwards_without_a_reset_is_nonmonotonic():
    h = [
        send("p-0", offset=0),
        send("p-1", offset=1),
        poll("c", [(0, "p-0"), (1, "p-1")]),
        poll("c", [(1, "p-1")]),
    ]
    r = check(h)
    assert r.nonmonotonic_polls == 1 and r.examples["nonmonotonic_polls"] == [("c", 0, 1, 1)]
    reset = [*h[:3], Reset("c", (0,)), h[3]]
    assert check(reset).nonmonotonic_polls == 0
    assert check([*h[:3], Reset("c"), h[3]]).nonmonotonic_polls == 0
    assert (
        check([*h[:3], Reset("c", (1,)), h[3]]).nonmonotonic_polls == 1
    )  # another partition's reset
    # Within one poll, and per consumer only.
    assert check([h[0], h[1], poll("c", [(1, "p-1"), (0, "p-0")])]).nonmonotonic_polls == 1
    assert (
        check([h[0], h[1], poll("c", [(1, "p-1")]), poll("d", [(0, "p-0")])]).nonmonotonic_polls
        == 0
    )


def test_a_skip_counts_only_over_offsets_known_to_hold_data():
    sends = [
        send(f"p-{i}", offset=o) for i, o in enumerate([0, 1, 3, 4])
    ]  # offset 2: a transaction marker
    full = poll("a", [(0, "p-0"), (1, "p-1"), (3, "p-2"), (4, "p-3")])
    assert check([*sends, full]).ok
    r = check([*sends, full, poll("b", [(0, "p-0")]), poll("b", [(3, "p-2"), (4, "p-3")])])
    assert r.poll_skips == 1 and r.examples["poll_skips"] == [("b", 0, 0, 3, [1])]
    assert r.lost == 0  # consumer a read p-1
    assert (
        check(
            [*sends, full, poll("b", [(0, "p-0")]), poll("b", [(3, "p-2")])], skippable={(0, 1)}
        ).poll_skips
        == 0
    )
    # Known only from another consumer's read, not from an acknowledgement.
    h = [send("p-0", outcome=INFO), send("p-1", outcome=INFO), send("p-2", outcome=INFO)]
    r = check(
        [*h, poll("a", [(0, "p-0"), (1, "p-1"), (2, "p-2")]), poll("b", [(0, "p-0"), (2, "p-2")])]
    )
    assert r.poll_skips == 1 and r.unacked_landed == 3 and r.failed_landed == 0


def test_writes_without_acknowledgement_that_landed():
    h = [
        send("p-0", outcome=INFO),
        send("p-1", outcome=FAIL),
        send("p-2", outcome=FAIL),
        poll("c", [(0, "p-0"), (1, "p-1")]),
    ]
    r = check(h)
    assert r.unacked_landed == 2 and r.failed_landed == 1
    assert r.examples["failed_landed"] == [("p-1", None)]
    assert not r.ok and r.ok_ignoring("failed_landed")
    assert check([h[0], poll("c", [(0, "p-0")])]).ok  # an unknown outcome that landed: fine


def test_values_never_sent_are_unexpected():
    r = check([send("p-0", offset=0), poll("c", [(0, "p-0"), (1, "ghost")])])
    assert r.unexpected == 1 and r.examples["unexpected"] == ["ghost"]


def test_a_producers_acknowledged_offsets_must_increase():
    r = check([send("p-0", offset=1), send("p-1", offset=0), poll("c", [(0, "p-1"), (1, "p-0")])])
    assert r.nonmonotonic_sends == 1
    assert check(
        [send("p-0", offset=1), send("q-0", offset=0), poll("c", [(0, "q-0"), (1, "p-0")])]
    ).ok


def test_longest_ack_gap():
    sends = [send(f"p-{i}", offset=i, completed=t) for i, t in enumerate([1.0, 1.5, 4.0, 4.2])]
    sends += [
        send("q-0", offset=9, completed=0.0),
        send("q-1", offset=10, completed=0.2),
        send("q-2", outcome=INFO),
    ]
    assert longest_ack_gap(sends, "p") == pytest.approx(2.5)
    assert longest_ack_gap(sends, "q") == pytest.approx(0.2)
    assert longest_ack_gap(sends) == pytest.approx(2.5)
    assert longest_ack_gap(sends[:1]) == 0.0


def test_send_outcomes_and_anomaly_names_are_validated():
    with pytest.raises(ValueError):
        Send("p", "p-0", 0, "maybe")
    r = check([send("p-0", offset=0), poll("c", [(0, "p-0"), (0, "p-0")])])
    with pytest.raises(ValueError):
        r.ok_ignoring("nonsense")


# ---------------------------------------------------------------- generated


@dataclass
class Generated:
    ops: list
    complete: bool
    logs: dict[int, list[tuple[int, str]]]  # what the "broker" holds per partition
    sends: list[Send]


@st.composite
def correct_histories(draw) -> Generated:
    """A broker that never errs: sends land in order (ok always, info sometimes, fail
    never) at increasing offsets with occasional marker gaps; consumers read prefixes
    of each partition in order, in random chunks, sometimes resetting and re-reading."""
    partitions = draw(st.integers(1, 3))
    producers = [f"p{i}" for i in range(draw(st.integers(1, 3)))]
    n = draw(st.integers(0, 40))
    next_offset = dict.fromkeys(range(partitions), 0)
    logs: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    counters = dict.fromkeys(producers, 0)
    sends: list[Send] = []
    for _ in range(n):
        proc = draw(st.sampled_from(producers))
        value = f"{proc}-{counters[proc]}"
        counters[proc] += 1
        part = draw(st.integers(0, partitions - 1))
        outcome = draw(st.sampled_from([OK, OK, OK, INFO, FAIL]))
        lands = outcome == OK or (outcome == INFO and draw(st.booleans()))
        offset = None
        if lands:
            next_offset[part] += draw(st.sampled_from([0, 0, 0, 1]))  # a marker before it
            offset = next_offset[part]
            next_offset[part] += 1
            logs[part].append((offset, value))
        sends.append(Send(proc, value, part, outcome, offset if outcome == OK else None))
    complete = draw(st.booleans())
    ops: list = list(sends)
    for ci in range(draw(st.integers(1, 3))):
        name = f"c{ci}"
        ops.append(Reset(name))
        for p in range(partitions):
            rounds = draw(st.integers(1, 2))
            for r in range(rounds):
                upto = (
                    len(logs[p])
                    if complete and r == rounds - 1
                    else draw(st.integers(0, len(logs[p])))
                )
                i = 0
                while i < upto:
                    k = draw(st.integers(1, max(1, upto - i)))
                    ops.append(Poll(name, p, tuple(logs[p][i : i + k])))
                    i += k
                if r < rounds - 1:
                    ops.append(Reset(name, (p,)))
    return Generated(ops, complete, logs, sends)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(correct_histories())
def test_a_correct_history_has_no_anomaly(g):
    r = check(g.ops, final_reads_complete=g.complete)
    assert r.ok, r.summary()
    assert r.lost == 0 and r.duplicates == 0 and r.failed_landed == 0
    if g.complete:
        assert r.unseen == 0
        assert r.values_read == sum(len(v) for v in g.logs.values())


def _read_values(g: Generated) -> set[str]:
    return {v for op in g.ops if isinstance(op, Poll) for _o, v in op.records}


@SETTINGS
@given(correct_histories(), st.data())
def test_an_acknowledged_value_dropped_from_every_read_is_lost(g, data):
    read = _read_values(g)
    candidates = [
        s
        for s in g.sends
        if s.outcome == OK
        and s.value in read
        and any(o > s.offset for o, v in g.logs[s.partition] if v in read)
    ]
    if not candidates:
        return
    victim = data.draw(st.sampled_from(candidates))
    ops = [
        Poll(op.process, op.partition, tuple((o, v) for o, v in op.records if v != victim.value))
        if isinstance(op, Poll)
        else op
        for op in g.ops
    ]
    r = check(ops, final_reads_complete=g.complete)
    assert r.lost == 1 and r.examples["lost"][0][0] == victim.value and not r.ok


@SETTINGS
@given(correct_histories(), st.data())
def test_a_value_read_again_at_a_later_offset_is_a_duplicate(g, data):
    polls = [op for op in g.ops if isinstance(op, Poll)]
    if not polls:
        return
    first = data.draw(st.sampled_from(polls))
    offset, value = first.records[0]
    end = max(o for o, _ in g.logs[first.partition]) + 1
    r = check([*g.ops, Reset(first.process), Poll(first.process, first.partition, ((end, value),))])
    assert r.duplicates == 1 and r.nonmonotonic_polls == 0 and not r.ok


@SETTINGS
@given(correct_histories(), st.data())
def test_another_value_at_a_read_offset_is_inconsistent(g, data):
    polls = [op for op in g.ops if isinstance(op, Poll)]
    if not polls:
        return
    first = data.draw(st.sampled_from(polls))
    offset, _ = first.records[0]
    r = check(
        [
            *g.ops,
            Poll("intruder", first.partition, ((offset, "intruder-0"),)),
            Send("intruder", "intruder-0", first.partition, INFO),
        ]
    )
    assert r.inconsistent_offsets == 1 and r.unacked_landed >= 1 and not r.ok


@SETTINGS
@given(correct_histories(), st.data())
def test_a_reread_without_reset_is_nonmonotonic_and_a_jump_is_a_skip(g, data):
    p = data.draw(st.sampled_from(sorted(g.logs)))
    log = g.logs[p]
    if len(log) < 3:
        return
    i = data.draw(st.integers(0, len(log) - 3))
    back = [Reset("z"), Poll("z", p, tuple(log[: i + 2])), Poll("z", p, (log[i],))]
    assert check([*g.ops, *back]).nonmonotonic_polls == 1
    jump = [Reset("z"), Poll("z", p, (log[i],)), Poll("z", p, (log[i + 2],))]
    r = check([*g.ops, *jump])
    skipped = log[i + 1][0]
    known = {s.offset for s in g.sends if s.outcome == OK and s.partition == p}
    known |= {
        o for op in g.ops if isinstance(op, Poll) and op.partition == p for o, _v in op.records
    }
    if skipped in known:
        assert r.poll_skips == 1 and r.examples["poll_skips"][0][4] == [skipped]
    else:  # an unacknowledged write nobody read: nothing says it is there
        assert r.poll_skips == 0
