"""The nemesis: seeded schedules (pure, property-tested) and their execution on a
cluster of independent brokers, which must end with every process running and the
network healed."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cluster.harness.cluster import Cluster
from tests.cluster.harness.nemesis import KINDS, PROCESS_KINDS, Fault, Nemesis, schedule

NODES = ["zk", "b1", "b2", "b3"]


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    seconds=st.floats(0, 600),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, unique=True),
    max_faults=st.integers(0, 50),
    nodes=st.lists(st.sampled_from(NODES), min_size=1, max_size=4, unique=True),
)
def test_a_schedule_is_deterministic_bounded_and_sequential(
    seed, seconds, kinds, max_faults, nodes
):
    faults = schedule(seed, seconds, nodes, kinds, max_faults=max_faults)
    assert faults == schedule(seed, seconds, nodes, kinds, max_faults=max_faults)
    assert len(faults) <= max_faults
    for f in faults:
        assert f.kind in kinds and 0 < f.start and f.end <= seconds and f.duration > 0
        assert set(f.targets) | set(f.others) <= set(nodes)
        if f.kind in PROCESS_KINDS or f.kind in ("isolate", "delay"):
            assert len(f.targets) == 1 and not f.others
        if f.kind == "isolate":
            assert f.targets[0] != "zk"
        if f.kind.startswith("partition"):
            assert f.targets and f.others and not set(f.targets) & set(f.others)
            assert sorted(f.targets + f.others) == sorted(nodes)
        if f.kind == "delay":
            assert f.ms > 0
    for a, b in zip(faults, faults[1:], strict=False):
        assert a.end < b.start  # one fault at a time, with a quiet gap


def test_schedules_differ_by_seed_and_reject_unknown_kinds():
    assert schedule(1, 300, NODES) != schedule(2, 300, NODES)
    assert len(schedule(1, 300, NODES)) > 5
    assert schedule(1, 0.5, NODES) == [] and schedule(1, 300, []) == []
    assert schedule(1, 300, ["zk"], ["isolate"]) == []  # no broker to isolate
    with pytest.raises(ValueError):
        schedule(1, 10, NODES, ["flood"])


def test_the_nemesis_applies_and_undoes_faults_on_real_processes(tmp_path):
    faults = [
        Fault(0.0, 0.3, "kill", ("b1",)),
        Fault(0.4, 0.3, "pause", ("b2",)),
        Fault(0.8, 0.3, "partition", ("b1",), ("b2", "client")),
        Fault(1.2, 0.3, "delay", ("b2",), ms=100),
        Fault(1.6, 0.3, "terminate", ("b2",)),
        Fault(2.0, 0.3, "isolate", ("b1",)),
        Fault(2.4, 30.0, "partition-one-way", ("client",), ("b1",)),  # cut short by stop
    ]
    seen: list[str] = []
    with Cluster(tmp_path, n_brokers=2, zookeeper=False) as c:
        nemesis = Nemesis(c)
        stop = threading.Event()
        original = nemesis.apply

        def apply(f: Fault) -> None:
            original(f)
            if f.kind in PROCESS_KINDS:
                b = c.node(f.targets[0])
                seen.append(
                    f"{f.kind}:{'alive' if b.alive() else 'dead'}:{'paused' if b.paused else '-'}"
                )
            else:
                seen.append(f"{f.kind}:{len(c.net.blocked)}:{len(c.net.delays)}")
            if f.kind == "partition-one-way":
                stop.set()

        nemesis.apply = apply  # type: ignore[method-assign]
        nemesis.run(faults, stop)
        assert seen == [
            "kill:dead:-",
            "pause:alive:paused",
            "partition:4:0",
            "delay:0:4",
            "terminate:dead:-",
            "isolate:4:0",
            "partition-one-way:1:0",
        ]
        assert all(b.alive() and not b.paused for b in c.brokers)
        assert c.net.blocked == frozenset() and c.net.delays == {}
        assert [b.exit_codes for b in c.brokers] == [[-9], [0]]
        assert len(nemesis.log) == 2 * len(faults)
