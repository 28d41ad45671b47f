"""The client telemetry subscription manager (KIP-714), sans-IO with an injected clock:
Kafka's rules case by case, then a hypothesis model of gets, pushes, subscription
changes, time and expiry."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker_py.server.telemetry import client_metrics_manager as m
from logstore import crc32c
from logstore.protocol.error_codes import ErrorCode as E

ZERO = uuid.UUID(int=0)
ATTRS = {"client_id": "app-1", "client_software_name": "librdkafka"}


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def manager(clock=None, **kw):
    ids = iter(uuid.UUID(int=0x1000 + i) for i in range(1_000_000))
    return m.ClientMetricsManager(1024, clock or Clock(), new_uuid=lambda: next(ids), **kw)


def test_java_uuid_hash_and_subscription_id():
    u = uuid.UUID("00000001-0000-0002-0000-000300000004")
    # msb ^ lsb = 0x00000001_00000002 ^ 0x00000003_00000004 = 0x2_00000006
    assert m.java_uuid_hash(u) == 0x2 ^ 0x6
    expected = crc32c(b"[a, b]5000") ^ 4
    expected = expected - (1 << 32) if expected >= 1 << 31 else expected
    assert m.subscription_id(("b", "a"), 5000, u) == expected


def test_new_instance_and_matching_subscriptions():
    mg = manager()
    got = mg.get_subscriptions(ZERO, ATTRS)
    assert got.error == E.NONE and got.instance_id != ZERO
    assert got.requested_metrics == () and got.push_interval_ms == 300_000
    assert got.accepted_compression_types == (4, 3, 1, 2) and got.delta_temporality
    assert got.telemetry_max_bytes == 1024
    mg.update_subscription("p", {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000"})
    mg.update_subscription("c", {"metrics": "x.", "interval.ms": "2000", "match": "client_id=c.*"})
    mg.update_subscription("all", {"metrics": "*", "match": "client_software_name=java"})
    again = mg.get_subscriptions(got.instance_id, ATTRS)  # remade: subscriptions changed
    assert again.error == E.NONE
    assert again.requested_metrics == ("org.apache.kafka.producer.",)
    assert again.push_interval_ms == 5000
    assert again.subscription_id == m.subscription_id(
        ("org.apache.kafka.producer.",), 5000, got.instance_id
    )
    java = mg.get_subscriptions(ZERO, {"client_software_name": "java", "client_id": "c1"})
    assert java.requested_metrics == ("*",) and java.push_interval_ms == 2000
    mg.update_subscription("p", {})
    assert mg.subscription_names() == ["all", "c"]


def test_get_throttled_within_interval():
    clock = Clock()
    mg = manager(clock)
    mg.update_subscription("p", {"metrics": "*", "interval.ms": "1000"})
    first = mg.get_subscriptions(ZERO, ATTRS)
    clock.ms += 999
    assert mg.get_subscriptions(first.instance_id, ATTRS).error == E.THROTTLING_QUOTA_EXCEEDED
    clock.ms += 1
    assert mg.get_subscriptions(first.instance_id, ATTRS).error == E.NONE


def test_push_errors_in_kafkas_order():
    clock = Clock()
    mg = manager(clock)
    mg.update_subscription("p", {"metrics": "*", "interval.ms": "1000"})
    g = mg.get_subscriptions(ZERO, ATTRS)
    iid, sid = g.instance_id, g.subscription_id
    assert mg.push(ZERO, ATTRS, sid, False, 0, 1).error == E.INVALID_REQUEST
    assert mg.push(iid, ATTRS, sid + 1, False, 0, 1).error == E.UNKNOWN_SUBSCRIPTION_ID
    # the failed push counted as the last push: the next within the interval is early
    assert mg.push(iid, ATTRS, sid, False, 0, 1).error == E.THROTTLING_QUOTA_EXCEEDED
    # an UNKNOWN_SUBSCRIPTION_ID lets the client ask again at once
    assert mg.push(iid, ATTRS, sid + 1, False, 0, 1).error == E.THROTTLING_QUOTA_EXCEEDED
    clock.ms += 1000
    assert mg.push(iid, ATTRS, sid, False, 9, 1).error == E.UNSUPPORTED_COMPRESSION_TYPE
    # allowed after that error, though early (so it does not count as a get)
    assert mg.get_subscriptions(iid, ATTRS).error == E.NONE
    assert mg.push(iid, ATTRS, sid, False, 4, 1).error == E.THROTTLING_QUOTA_EXCEEDED
    clock.ms += 1000
    assert mg.push(iid, ATTRS, sid, False, 4, 1025).error == E.TELEMETRY_TOO_LARGE
    clock.ms += 1000
    assert mg.push(iid, ATTRS, sid, False, 4, 1024).error == E.NONE
    # terminating: accepted even early, then nothing more
    assert mg.push(iid, ATTRS, sid, True, 4, 10).error == E.NONE
    clock.ms += 5000
    assert mg.push(iid, ATTRS, sid, False, 4, 10).error == E.INVALID_REQUEST


def test_changed_subscription_is_unknown_id():
    mg = manager()
    mg.update_subscription("p", {"metrics": "a.", "interval.ms": "1000"})
    g = mg.get_subscriptions(ZERO, ATTRS)
    mg.update_subscription("p", {"metrics": "b.", "interval.ms": "1000"})
    assert mg.push(g.instance_id, ATTRS, g.subscription_id, False, 0, 1).error == (
        E.UNKNOWN_SUBSCRIPTION_ID
    )
    again = mg.get_subscriptions(g.instance_id, ATTRS)
    assert again.error == E.NONE and again.requested_metrics == ("b.",)


def test_expiry_and_lru_bound():
    clock = Clock()
    mg = manager(clock, max_instances=3)
    mg.update_subscription("p", {"metrics": "*", "interval.ms": "30000"})
    ids = [mg.get_subscriptions(ZERO, ATTRS).instance_id for _ in range(4)]
    assert list(mg.instances) == ids[1:]
    clock.ms += 89_999  # 3 intervals (90 s) beat the 60 s floor
    assert mg.expire() == []
    clock.ms += 1
    assert sorted(mg.expire()) == sorted(ids[1:])
    assert not mg.instances


class TelemetryModel(RuleBasedStateMachine):
    """Clients ask, push (right or wrong subscription ids, compressions, sizes, early or
    late, terminating) while subscriptions change and time passes. The model keeps what
    Kafka's rules depend on and predicts every answer."""

    CLIENTS = ({"client_id": "app-1"}, {"client_id": "app-2"}, {"client_id": "other"})

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.mg = manager(self.clock, max_instances=2)
        self.ids: list[uuid.UUID | None] = [None, None, None]
        # instance id -> (version made at, last get, last accepted push, terminating, error)
        self.model: dict[uuid.UUID, dict] = {}

    def _state(self, iid: uuid.UUID) -> dict:
        """The model's instance as the manager will see it (made or remade)."""
        inst = self.mg.instances.get(iid)
        st_ = self.model.get(iid)
        if inst is None or st_ is None or inst.subscription_version < self.mg.version:
            st_ = {"get": None, "push": None, "term": False, "err": E.NONE}
            self.model[iid] = st_
        return st_

    @rule(ms=st.integers(0, 200_000))
    def advance(self, ms):
        self.clock.ms += ms

    @rule(
        name=st.sampled_from(["s1", "s2"]),
        metrics=st.sampled_from(["", "*", "a.,b.", "c."]),
        interval=st.sampled_from([100, 1000, 60_000]),
        match=st.sampled_from(["", "client_id=app-.*", "client_id=other"]),
    )
    def subscribe(self, name, metrics, interval, match):
        self.mg.update_subscription(
            name, {"metrics": metrics, "interval.ms": str(interval), "match": match}
        )

    @rule(name=st.sampled_from(["s1", "s2"]))
    def unsubscribe(self, name):
        self.mg.update_subscription(name, {})

    @rule(c=st.integers(0, 2))
    def get(self, c):
        iid = self.ids[c]
        if iid is None:
            got = self.mg.get_subscriptions(ZERO, self.CLIENTS[c])
            assert got.error == E.NONE
            self.ids[c] = got.instance_id
            self.model[got.instance_id] = {
                "get": self.clock.ms,
                "push": None,
                "term": False,
                "err": E.NONE,
            }
            return
        s = self._state(iid)
        got = self.mg.get_subscriptions(iid, self.CLIENTS[c])
        inst = self.mg.instances[iid]
        last = max(s["get"] or 0, s["push"] or 0)
        on_time = (s["get"] is None and s["push"] is None) or (
            self.clock.ms - last >= inst.push_interval_ms
        )
        if on_time:
            s["get"] = self.clock.ms
        if on_time or s["err"] in (E.UNKNOWN_SUBSCRIPTION_ID, E.UNSUPPORTED_COMPRESSION_TYPE):
            assert got.error == E.NONE
            assert got.subscription_id == inst.subscription_id
            s["err"] = E.NONE
        else:
            assert got.error == E.THROTTLING_QUOTA_EXCEEDED

    @precondition(lambda self: any(self.ids))
    @rule(
        c=st.integers(0, 2),
        right_id=st.booleans(),
        terminating=st.booleans(),
        compression=st.sampled_from([0, 4, 7]),
        size=st.sampled_from([0, 1024, 1025]),
    )
    def push(self, c, right_id, terminating, compression, size):
        iid = self.ids[c]
        if iid is None:
            return
        s = self._state(iid)
        inst_before = self.mg.instances.get(iid)
        version_ok = inst_before is not None and inst_before.subscription_version == self.mg.version
        sub_id = inst_before.subscription_id if version_ok else 0
        if not right_id:
            sub_id ^= 1
        d = self.mg.push(iid, self.CLIENTS[c], sub_id, terminating, compression, size)
        inst = self.mg.instances[iid]
        if s["term"]:
            expected = E.INVALID_REQUEST
        else:
            accept = (
                s["push"] is None
                or (s["get"] is not None and s["get"] > s["push"])
                or self.clock.ms - s["push"] >= inst.push_interval_ms
            )
            if accept:
                s["push"] = self.clock.ms
            if not accept and not terminating:
                expected = E.THROTTLING_QUOTA_EXCEEDED
            elif sub_id != inst.subscription_id:
                expected = E.UNKNOWN_SUBSCRIPTION_ID
            elif compression == 7:
                expected = E.UNSUPPORTED_COMPRESSION_TYPE
            elif size > 1024:
                expected = E.TELEMETRY_TOO_LARGE
            else:
                expected = E.NONE
        assert d.error == expected
        s["term"], s["err"] = terminating, expected

    @rule()
    def expire(self):
        gone = self.mg.expire()
        for iid in gone:
            self.model.pop(iid, None)
        assert all(i.expires_at_ms > self.clock.ms for i in self.mg.instances.values())

    @invariant()
    def bounded_and_consistent(self):
        assert len(self.mg.instances) <= 2
        for iid, inst in self.mg.instances.items():
            assert inst.subscription_id == m.subscription_id(
                inst.metrics, inst.push_interval_ms, iid
            )
            if inst.subscription_version == self.mg.version:
                fresh = self.mg._make(iid, inst.attributes)
                assert (fresh.metrics, fresh.push_interval_ms) == (
                    inst.metrics,
                    inst.push_interval_ms,
                )


TelemetryModel.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestTelemetryModel = TelemetryModel.TestCase
