"""Cluster (ZooKeeper mode) benchmark: controller failover and partition-state creation
against a real ZooKeeper, CreateTopics latency and a leadership move under controlled
shutdown against three real broker processes.

    python benches/cluster_bench.py [--partitions 1000,10000] [--quick] [--json out.json]

Parts (``--parts controller,create,move`` picks some; all by default):

1. ``controller``: a real ZooKeeper (``tests/cluster/zookeeper.py``) and the controller
   driven directly, no broker processes. Per N: three brokers registered (each its own
   session), N/10 topics of 10 partitions with replication factor 3 written through
   ``ZkControllerStore.create_topic``, a first controller (its own session, broker id 1)
   that creates the N partition states on a ``TopicChange`` (timed), then failovers:
   the active controller's session is closed and a controller on the next broker, its
   session and watches already set up, processes ``Startup`` (timed: election, reading
   every broker, topic, config and partition state, and handing UpdateMetadata and
   LeaderAndIsr to a channel that only counts). The controllers' sessions are not the
   brokers' registration sessions, so every broker stays live across the rounds. Each
   failover round is paired with the physical floor: a raw kazoo read (``get_async``,
   pipelined 1,000 at a time like the store) of every ``/brokers/topics/T`` and every
   partition state node right after it; "x floor" is failover time / floor time. Also
   reported: what ``to_wire`` of the handed-over requests costs (the broker's real
   channel does that on the controller's thread), the time per step (store calls,
   building the requests), one more failover where the old controller's broker dies with
   it (elections and ISR writes), and a cProfile of one failover at the largest N.
2. ``create``: ``tests/cluster/harness`` (ZooKeeper + 3 brokers on loopback, through the
   harness's proxies); ``AdminClient.create_topics([NewTopic(name, P, 3)])`` until its
   result, for P=1 (paired with a Metadata round trip) and P=1000.
3. ``move``: the same harness; a producer (acks=1, linger.ms=0) sends every 2 ms to a
   1-partition topic (RF 3) while the partition's leader gets SIGTERM (controlled
   shutdown); gaps between delivery acks. A fresh topic each round (the ISR does not
   grow back yet: no replication), the broker started again between rounds.

Every loop is bounded; a part that fails prints its error and the others still run.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import json
import logging
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import NoNodeError  # noqa: E402

from broker_py.controller import controller_events as ev  # noqa: E402
from broker_py.controller.broker_info import BrokerInfo, EndPoint  # noqa: E402
from broker_py.controller.controller_request_batch import (  # noqa: E402
    ControllerRequestBatch,
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    UpdateMetadataRequestData,
)
from broker_py.controller.controller_requests import to_wire  # noqa: E402
from broker_py.controller.kafka_controller import ControllerConfig, KafkaController  # noqa: E402
from broker_py.controller.replica_assignment import BrokerMetadata, assign_replicas  # noqa: E402
from broker_py.controller.topic_assignment import TopicAssignment  # noqa: E402
from broker_py.zk.kafka_zk_client import KafkaZkClient  # noqa: E402
from broker_py.zk.zk_controller_store import ZkControllerStore  # noqa: E402
from broker_py.zk.zk_data import random_uuid  # noqa: E402
from broker_py.zk.zk_node_ops import PIPELINE  # noqa: E402

sys.path.insert(0, str(REPO_ROOT / "benches"))
from cluster_report import ms, print_report  # noqa: E402

PARTITIONS_PER_TOPIC = 10
RF = 3
BROKERS = (1, 2, 3)
SESSION_MS = 30_000  # long enough that no session of part 1 expires on a busy host


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


# ---------------------------------------------------------------------------
# Part 1: the controller against a real ZooKeeper
# ---------------------------------------------------------------------------


class CountingChannel:
    """A ControllerChannel that only counts (and keeps) what it is handed."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests: list = []
        self.by_type: Counter = Counter()
        self.states_by_type: Counter = Counter()

    def add_broker(self, registration) -> None:
        pass

    def remove_broker(self, broker_id: int) -> None:
        pass

    def send(self, broker_id, request, on_response=None) -> None:
        kind = {
            LeaderAndIsrRequestData: "LeaderAndIsr",
            UpdateMetadataRequestData: "UpdateMetadata",
            StopReplicaRequestData: "StopReplica",
        }[type(request)]
        self.requests.append(request)
        self.by_type[kind] += 1
        self.states_by_type[kind] += len(request.partitions)

    def summary(self) -> str:
        return ", ".join(
            f"{k} {self.by_type[k]} req / {self.states_by_type[k]:,} states"
            for k in sorted(self.by_type)
        )


class StepTimer:
    """Wall time per step of a controller event: the store's methods (ZooKeeper I/O plus
    decoding), ``ControllerRequestBatch.send`` (building the requests), the rest being the
    controller's own bookkeeping. The wrapped calls do not nest."""

    STORE_METHODS = (
        "controller_id",
        "elect_controller",
        "live_brokers",
        "all_topics",
        "topic_assignments",
        "topic_configs",
        "watch_topic",
        "partition_states",
        "topics_to_delete",
        "reassignment_request",
        "preferred_election_request",
        "controller_create_partition_states",
        "controller_update_partition_states",
        "controller_set_topic_assignment",
    )

    def __init__(self) -> None:
        self.seconds: Counter = Counter()
        self.calls: Counter = Counter()

    def _wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t
                self.calls[name] += 1

        return timed

    @contextlib.contextmanager
    def around(self, store: ZkControllerStore):
        originals = {}  # name -> (was an instance attribute, value)
        for name in self.STORE_METHODS:
            originals[name] = (name in vars(store), getattr(store, name))
            setattr(store, name, self._wrap(f"store.{name}", originals[name][1]))
        batch_send = ControllerRequestBatch.send
        ControllerRequestBatch.send = self._wrap("batch.send (build requests)", batch_send)
        try:
            yield self
        finally:
            ControllerRequestBatch.send = batch_send
            for name, (own, value) in originals.items():
                if own:
                    setattr(store, name, value)
                else:
                    delattr(store, name)  # back to the class's method


@dataclasses.dataclass
class ControllerSession:
    broker_id: int
    zk: KafkaZkClient
    store: ZkControllerStore
    channel: CountingChannel
    controller: KafkaController

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.store.unwatch()
        self.zk.close()


def new_zk(connect: str) -> KafkaZkClient:
    zk = KafkaZkClient(connect, session_timeout_ms=SESSION_MS, connection_timeout_ms=30_000)
    zk.start()
    return zk


def new_controller_session(connect: str, broker_id: int) -> ControllerSession:
    """A controller as a broker has it before its Startup: connected, watches armed."""
    zk = new_zk(connect)
    store = ZkControllerStore(zk, broker_id)
    store.watch(lambda change: None)  # the bench drives the events itself
    channel = CountingChannel()
    controller = KafkaController(
        broker_id, store, channel, ControllerConfig(auto_leader_rebalance_enable=False)
    )
    return ControllerSession(broker_id, zk, store, channel, controller)


def raw_read_floor(zk: KazooClient) -> tuple[float, int]:
    """Seconds to read every topic node and every partition state node with raw kazoo,
    pipelined like the store (PIPELINE requests in flight); returns (seconds, nodes)."""

    def pipelined(paths: list[str]) -> list:
        out = []
        for at in range(0, len(paths), PIPELINE):
            pending = [zk.get_async(p) for p in paths[at : at + PIPELINE]]
            for p in pending:
                try:
                    out.append(p.get())
                except NoNodeError:
                    out.append(None)
        return out

    t = time.perf_counter()
    topics = sorted(zk.get_children("/brokers/topics"))
    topic_data = pipelined([f"/brokers/topics/{t}" for t in topics])
    state_paths = [
        f"/brokers/topics/{topic}/partitions/{p}/state"
        for topic, got in zip(topics, topic_data)
        if got is not None
        for p in json.loads(got[0])["partitions"]
    ]
    states = pipelined(state_paths)
    elapsed = time.perf_counter() - t
    assert all(s is not None for s in states)
    return elapsed, len(topics) + len(states)


def populate_topics(
    admin: ZkControllerStore, n_partitions: int, rng: random.Random, deadline: float
) -> int:
    """N/10 topics of 10 partitions, RF 3, through the admin path; returns how many were made."""
    brokers = [BrokerMetadata(b) for b in BROKERS]
    made = 0
    for i in range(n_partitions // PARTITIONS_PER_TOPIC):
        if time.monotonic() > deadline:
            log(f"  population stopped at {made} topics: past the deadline")
            break
        assignment = assign_replicas(brokers, PARTITIONS_PER_TOPIC, RF, rng=rng)
        admin.create_topic(f"bench-{i:05d}", TopicAssignment(random_uuid(), assignment), {})
        made += 1
        if made % 200 == 0:
            log(f"  {made} topics written")
    return made


def timed_event(session: ControllerSession, event) -> tuple[float, StepTimer]:
    session.channel.reset()
    steps = StepTimer()
    with steps.around(session.store):
        t = time.perf_counter()
        session.controller.process(event)
        elapsed = time.perf_counter() - t
    return elapsed, steps


def to_wire_seconds(requests: list) -> float:
    """What the broker's real channel adds on the controller's thread: to_wire of each request."""
    t = time.perf_counter()
    for r in requests:
        to_wire(r)
    return time.perf_counter() - t


def run_controller_part(args, results: dict) -> None:
    from tests.cluster.zookeeper import ZooKeeperServer

    workdir = Path(tempfile.mkdtemp(prefix="cluster-bench-zk-", dir=args.workdir))
    server = ZooKeeperServer(workdir)
    server.start()
    log(f"ZooKeeper on {server.connect} ({workdir})")
    out = results.setdefault("controller", {})
    try:
        largest = max(args.partitions)
        for n in args.partitions:
            out[str(n)] = controller_case(
                server.connect, n, args, profile=args.profile and n == largest
            )
    finally:
        server.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def controller_case(zk_host: str, n: int, args, profile: bool) -> dict:
    connect = f"{zk_host}/bench-{n}-{uuid.uuid4().hex[:8]}"
    rng = random.Random(n)
    res: dict = {"partitions_requested": n}
    sessions: list[ControllerSession] = []
    brokers: dict[int, KafkaZkClient] = {}
    admin_zk = new_zk(connect)
    raw = KazooClient(hosts=connect, timeout=SESSION_MS / 1000)
    raw.start(timeout=30)
    try:
        for b in BROKERS:
            brokers[b] = new_zk(connect)
            ZkControllerStore(brokers[b], b).register_broker(
                BrokerInfo(
                    b,
                    [EndPoint("PLAINTEXT", "127.0.0.1", 9090 + b, "PLAINTEXT")],
                    timestamp_ms=int(time.time() * 1000),
                )
            )
        first = new_controller_session(connect, 1)
        sessions.append(first)
        first.controller.process(ev.Startup())
        assert first.controller.active, "the first controller was not elected"

        log(
            f"N={n}: writing {n // PARTITIONS_PER_TOPIC} topics of {PARTITIONS_PER_TOPIC} "
            f"partitions (RF {RF})"
        )
        t = time.perf_counter()
        topics = populate_topics(
            ZkControllerStore(admin_zk, -1), n, rng, time.monotonic() + args.populate_limit_s
        )
        res["populate_s"] = time.perf_counter() - t
        n_real = topics * PARTITIONS_PER_TOPIC
        res["partitions"] = n_real
        res["topics"] = topics
        log(f"  topics written in {res['populate_s']:.1f} s")

        # The first controller creates every partition state (as after CreateTopics).
        elapsed, steps = timed_event(first, ev.TopicChange())
        created = len(first.controller.context.leadership)
        assert created == n_real, f"{created} partition states for {n_real} partitions"
        res["create_states_s"] = elapsed
        res["create_requests"] = dict(first.channel.by_type)
        res["create_states_sent"] = dict(first.channel.states_by_type)
        res["create_steps"] = dict(steps.seconds)
        log(
            f"  first controller created {created:,} partition states in {elapsed:.2f} s "
            f"({first.channel.summary()})"
        )

        # Failovers: the active controller's session ends, the next broker's controller takes over.
        rounds = []
        active = first
        for r in range(args.failover_rounds):
            nxt = new_controller_session(
                connect, BROKERS[(BROKERS.index(active.broker_id) + 1) % len(BROKERS)]
            )
            sessions.append(nxt)
            active.close()
            elapsed, steps = timed_event(nxt, ev.Startup())
            c = nxt.controller
            assert c.active and len(c.context.leadership) == n_real, (
                "the failover did not load every partition"
            )
            wire = to_wire_seconds(nxt.channel.requests)
            floor, nodes = raw_read_floor(raw)
            rounds.append(
                {
                    "failover_s": elapsed,
                    "floor_s": floor,
                    "ratio": elapsed / floor,
                    "to_wire_s": wire,
                    "requests": dict(nxt.channel.by_type),
                    "states_sent": dict(nxt.channel.states_by_type),
                    "steps": dict(steps.seconds),
                    "floor_nodes": nodes,
                }
            )
            log(
                f"  failover {r + 1}: broker {nxt.broker_id} took over in {elapsed:.3f} s; "
                f"raw read floor {floor:.3f} s "
                f"({nodes:,} nodes): ratio {elapsed / floor:.1f}; to_wire {wire:.3f} s; "
                f"{nxt.channel.summary()}"
            )
            active = nxt
        res["failover_rounds"] = rounds
        res["failover_median_s"] = median([x["failover_s"] for x in rounds])
        res["floor_median_s"] = median([x["floor_s"] for x in rounds])
        res["ratio_median"] = median([x["ratio"] for x in rounds])
        res["to_wire_median_s"] = median([x["to_wire_s"] for x in rounds])
        mid = sorted(rounds, key=lambda x: x["failover_s"])[(len(rounds) - 1) // 2]
        res["median_round_failover_s"] = mid["failover_s"]
        res["median_round_steps_s"] = mid["steps"]

        if profile:
            nxt = new_controller_session(
                connect, BROKERS[(BROKERS.index(active.broker_id) + 1) % len(BROKERS)]
            )
            sessions.append(nxt)
            active.close()
            prof = cProfile.Profile()
            t = time.perf_counter()
            prof.enable()
            nxt.controller.process(ev.Startup())
            prof.disable()
            elapsed = time.perf_counter() - t
            assert nxt.controller.active
            path = Path(args.workdir or tempfile.gettempdir()) / f"cluster_bench_failover_{n}.prof"
            prof.dump_stats(path)
            res["profile"] = {
                "path": str(path),
                "elapsed_s": elapsed,
                "top_tottime": top_functions(prof, "tottime"),
                "top_cumtime": top_functions(prof, "cumulative"),
            }
            log(
                f"  profiled failover: {elapsed:.3f} s under cProfile (main thread only), "
                f"stats in {path}"
            )
            active = nxt

        # The controller's broker dies with it: the successor also elects leaders for the
        # partitions it led and takes it out of every ISR.
        dead = active.broker_id
        nxt = new_controller_session(connect, BROKERS[(BROKERS.index(dead) + 1) % len(BROKERS)])
        sessions.append(nxt)
        active.close()
        brokers.pop(dead).close()
        writes = Counter()
        update = nxt.store.controller_update_partition_states

        def counted(epoch_zk_version, states, update=update):
            writes["partition state writes"] += len(states)
            return update(epoch_zk_version, states)

        nxt.store.controller_update_partition_states = counted
        elapsed, steps = timed_event(nxt, ev.Startup())
        del nxt.store.controller_update_partition_states
        ctx = nxt.controller.context
        led_by_dead = sum(1 for s in ctx.leadership.values() if s.leader == dead)
        in_isr = sum(1 for s in ctx.leadership.values() if dead in s.isr)
        assert nxt.controller.active and led_by_dead == 0 and in_isr == 0, (led_by_dead, in_isr)
        res["failover_broker_dead"] = {
            "failover_s": elapsed,
            "writes": writes["partition state writes"],
            "requests": dict(nxt.channel.by_type),
            "states_sent": dict(nxt.channel.states_by_type),
            "steps": dict(steps.seconds),
        }
        log(
            f"  failover with broker {dead} dead too: {elapsed:.3f} s, "
            f"{writes['partition state writes']:,} state writes; {nxt.channel.summary()}"
        )
    finally:
        for s in sessions:
            with contextlib.suppress(Exception):
                s.close()
        for zk in brokers.values():
            with contextlib.suppress(Exception):
                zk.close()
        with contextlib.suppress(Exception):
            raw.stop()
            raw.close()
        with contextlib.suppress(Exception):
            admin_zk.close()
    return res


def top_functions(prof: cProfile.Profile, key: str, limit: int = 20) -> list[dict]:
    stats = pstats.Stats(prof)
    rows = []
    for (filename, line, name), (_cc, nc, tt, ct, _callers) in stats.stats.items():
        rows.append(
            {
                "function": f"{Path(filename).name}:{line}({name})",
                "ncalls": nc,
                "tottime": tt,
                "cumtime": ct,
            }
        )
    rows.sort(key=lambda r: r["tottime" if key == "tottime" else "cumtime"], reverse=True)
    return rows[:limit]


# ---------------------------------------------------------------------------
# Parts 2 and 3: three broker processes (tests/cluster/harness)
# ---------------------------------------------------------------------------


class ClientLog(logging.Handler):
    """librdkafka's log lines (connection closed, connect refused, ...), kept instead of printed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.logger = logging.Logger(f"rdkafka-{id(self)}")
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


def start_cluster(workdir: Path):
    from confluent_kafka.admin import AdminClient

    from tests.cluster.harness.cluster import Cluster, wait_until

    c = Cluster(workdir, n_brokers=3, zk_session_timeout_ms=6000)
    c.__enter__()
    try:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers}, logger=ClientLog().logger)
        wait_until(
            lambda: len(admin.list_topics(timeout=5).brokers) == 3,
            60,
            0.1,
            "three brokers in metadata",
        )
    except BaseException:
        c.__exit__(*sys.exc_info())
        raise
    return c, admin


def run_create_part(args, results: dict) -> None:
    from confluent_kafka.admin import NewTopic

    workdir = Path(tempfile.mkdtemp(prefix="cluster-bench-create-", dir=args.workdir))
    out = results.setdefault("create_topics", {})
    c, admin = start_cluster(workdir)
    try:

        def create(name: str, partitions: int) -> float:
            t = time.perf_counter()
            admin.create_topics(
                [NewTopic(name, partitions, RF)], operation_timeout=60, request_timeout=90
            )[name].result(120)
            elapsed = time.perf_counter() - t
            md = admin.list_topics(name, timeout=10).topics[name]
            assert md.error is None and len(md.partitions) == partitions, md
            assert all(
                len(p.replicas) == RF and p.leader in BROKERS for p in md.partitions.values()
            )
            return elapsed

        create("warm-up", 1)
        for _ in range(3):
            admin.list_topics("warm-up", timeout=10)
        p1 = []
        for r in range(args.create_rounds):
            t = time.perf_counter()
            admin.list_topics("warm-up", timeout=10)
            metadata_s = time.perf_counter() - t
            elapsed = create(f"p1-{r}", 1)
            p1.append(
                {"create_s": elapsed, "metadata_s": metadata_s, "ratio": elapsed / metadata_s}
            )
            log(
                f"CreateTopics 1 partition: {elapsed * 1000:.1f} ms (Metadata round trip "
                f"{metadata_s * 1000:.2f} ms)"
            )
        out["p1"] = {
            "rounds": p1,
            "median_s": median([x["create_s"] for x in p1]),
            "max_s": max(x["create_s"] for x in p1),
            "metadata_median_s": median([x["metadata_s"] for x in p1]),
            "ratio_median": median([x["ratio"] for x in p1]),
        }
        big = []
        for r in range(args.create_big_rounds):
            elapsed = create(f"p{args.create_big}-{r}", args.create_big)
            big.append(elapsed)
            log(f"CreateTopics {args.create_big} partitions: {elapsed:.2f} s")
        out["big"] = {
            "partitions": args.create_big,
            "rounds_s": big,
            "median_s": median(big),
            "max_s": max(big) if big else None,
        }
    finally:
        c.__exit__(None, None, None)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def leader_of(admin, topic: str) -> int:
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader


def run_move_part(args, results: dict) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    from tests.cluster.harness.cluster import wait_until

    workdir = Path(tempfile.mkdtemp(prefix="cluster-bench-move-", dir=args.workdir))
    out = results.setdefault("leadership_move", {"rounds": []})
    c, admin = start_cluster(workdir)
    try:
        for r in range(args.move_rounds):
            topic = f"move-{r}"
            admin.create_topics([NewTopic(topic, 1, RF)], operation_timeout=60)[topic].result(60)
            wait_until(
                lambda topic=topic: leader_of(admin, topic) in BROKERS,
                20,
                0.1,
                f"a leader for {topic}",
            )
            leader = leader_of(admin, topic)
            was_controller = admin.list_topics(timeout=10).controller_id == leader
            out["rounds"].append(
                move_round(c, admin, Producer, topic, leader, was_controller, args)
            )
            c.broker(leader).start()
            wait_until(
                lambda: len(admin.list_topics(timeout=5).brokers) == 3,
                60,
                0.1,
                "the stopped broker back",
            )
            # The ISR does not grow back (no replication yet): the stopped broker stays out of
            # this topic's ISR, so a later round could find a partition it cannot move. Delete it.
            admin.delete_topics([topic], operation_timeout=30)[topic].result(60)
            wait_until(
                lambda topic=topic: topic not in admin.list_topics(timeout=5).topics,
                60,
                0.1,
                f"{topic} deleted",
            )
        rounds = out["rounds"]
        out["max_gap_s"] = [x["max_gap_s"] for x in rounds]
        out["median_gap_before_s"] = median([x["median_gap_before_s"] for x in rounds])
    finally:
        c.__exit__(None, None, None)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def move_round(c, admin, Producer, topic: str, leader: int, was_controller: bool, args) -> dict:
    errors: list[str] = []
    client_errors: list[str] = []
    acks: list[float] = []
    latencies: list[float] = []
    client_log = ClientLog()
    producer = Producer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "acks": "1",
            "linger.ms": 0,
            "message.timeout.ms": 30000,
            "error_cb": lambda e: client_errors.append(f"{e.name()}: {e.str()}"),
            **({"debug": args.client_debug} if args.client_debug else {}),
        },
        logger=logging.getLogger("rdkafka") if args.client_debug else client_log.logger,
    )

    def report(err, msg, sent: float) -> None:
        now = time.monotonic()
        if err is not None:
            errors.append(f"{err.name()}: {err.str()}")
        else:
            acks.append(now)
            latencies.append(now - sent)

    period = 0.002
    stop = {"sigterm": None, "exited": None, "code": None, "metadata_moved": None, "zk_moved": None}

    survivor = next(b for b in BROKERS if b != leader)
    zk = KazooClient(hosts=c.zk_connect, timeout=10)
    zk.start(timeout=10)

    def on_state(data, _stat, _event=None):
        """ZooKeeper's partition state: when the controller wrote the new leader."""
        if data is not None and stop["zk_moved"] is None and stop["sigterm"] is not None:
            if json.loads(data)["leader"] not in (leader, -1):
                stop["zk_moved"] = time.monotonic()

    zk.DataWatch(f"/brokers/topics/{topic}/partitions/0/state", on_state)

    def watch_metadata() -> None:
        """When the survivor's metadata cache first names another leader: raw Metadata
        requests to that broker only, every 5 ms (a client library would pick any broker)."""
        import asyncio

        from broker_py.network.network_client import NetworkClient
        from logstore.protocol.api_keys import ApiKey
        from logstore.protocol.messages.metadata import MetadataRequest

        async def poll() -> None:
            host, port = c.bootstrap(survivor).split(":")
            client = NetworkClient(host, int(port), "cluster-bench-watch")
            request = MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False,
            )
            try:
                await client.send(
                    ApiKey.METADATA, request, 5000
                )  # connected before the clock starts
                ready.set()
                deadline = time.monotonic() + 120
                while stop["sigterm"] is None and time.monotonic() < deadline:
                    await asyncio.sleep(0.001)
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline:
                    with contextlib.suppress(Exception):
                        r = await client.send(ApiKey.METADATA, request, 2000)
                        now_leader = r.topics[0].partitions[0].leader_id
                        if now_leader >= 0 and now_leader != leader:
                            stop["metadata_moved"] = time.monotonic()
                            return
                    await asyncio.sleep(0.005)
            finally:
                await client.close()

        asyncio.run(poll())

    def terminate() -> None:
        stop["sigterm"] = time.monotonic()
        stop["code"] = c.broker(leader).terminate()
        stop["exited"] = time.monotonic()

    ready = threading.Event()
    watcher = threading.Thread(target=watch_metadata, name="metadata-watch", daemon=True)
    watcher.start()
    ready.wait(10)
    killer = threading.Thread(target=terminate, name="sigterm-leader", daemon=True)
    start = time.monotonic()
    hard_end = start + args.move_before_s + 60
    next_t = start
    sent = 0
    while True:
        now = time.monotonic()
        if killer.ident is None and now - start >= args.move_before_s:
            killer.start()
        if stop["exited"] is not None and now - stop["exited"] >= args.move_after_s:
            break
        if now > hard_end:
            errors.append("round cut at its time limit")
            break
        sent_at = time.monotonic()
        producer.produce(
            topic, b"x" * 100, on_delivery=lambda err, msg, s=sent_at: report(err, msg, s)
        )
        sent += 1
        next_t = max(next_t + period, time.monotonic())  # no catch-up burst after a stall
        for _ in range(
            1000
        ):  # poll returns after each callback: serve them until the next send is due
            wait = next_t - time.monotonic()
            if wait <= 0:
                break
            producer.poll(wait)
    left = producer.flush(30)
    killer.join(60)
    watcher.join(20)
    zk.stop()
    zk.close()
    sigterm = stop["sigterm"]
    gaps = [(b - a, a) for a, b in zip(acks, acks[1:])]
    before = [g for g, at in gaps if at < sigterm]
    after = [(g, at) for g, at in gaps if at + g >= sigterm]
    worst, worst_at = max(after) if after else (float("nan"), sigterm)
    new_leader = None
    with contextlib.suppress(Exception):
        new_leader = leader_of(admin, topic)
    res = {
        "topic": topic,
        "leader": leader,
        "leader_was_controller": was_controller,
        "new_leader": new_leader,
        "sent": sent,
        "acked": len(acks),
        "not_flushed": left,
        "delivery_errors": errors,
        "client_errors": client_errors,
        "client_log": client_log.lines,
        "median_gap_before_s": median(before),
        "max_gap_s": worst,
        "max_gap_starts_after_sigterm_s": worst_at - sigterm,
        "sigterm_to_exit_s": stop["exited"] - sigterm,
        "metadata_moved_after_sigterm_s": None
        if stop["metadata_moved"] is None
        else stop["metadata_moved"] - sigterm,
        "zk_moved_after_sigterm_s": None
        if stop["zk_moved"] is None
        else stop["zk_moved"] - sigterm,
        "exit_code": stop["code"],
        "max_latency_s": max(latencies) if latencies else None,
    }
    log(
        f"leader move {topic}: broker {leader}{' (controller)' if was_controller else ''} -> "
        f"{new_leader}: longest ack gap "
        f"{worst * 1000:.0f} ms (from {(worst_at - sigterm) * 1000:+.0f} ms after SIGTERM), "
        f"median before {median(before) * 1000:.2f} ms, "
        f"SIGTERM to exit {res['sigterm_to_exit_s']:.2f} s, "
        f"new leader in ZooKeeper {ms(res['zk_moved_after_sigterm_s'])} "
        f"and in broker {survivor}'s metadata "
        f"{ms(res['metadata_moved_after_sigterm_s'])} after SIGTERM, {len(acks)}/{sent} acked, "
        f"errors {errors or 'none'}, client errors "
        f"{Counter(e.split(':')[0] for e in client_errors) or 'none'}, "
        f"{len(client_log.lines)} client log lines"
    )
    return res


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--partitions", default="1000,10000", help="comma-separated partition counts for part 1"
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="fewer rounds, 1000 partitions for part 1, 100 for the big CreateTopics",
    )
    p.add_argument("--parts", default="controller,create,move")
    p.add_argument("--failover-rounds", type=int, default=None)
    p.add_argument("--move-rounds", type=int, default=None, help="leadership moves (default 3)")
    p.add_argument("--no-profile", dest="profile", action="store_false")
    p.add_argument(
        "--populate-limit-s", type=float, default=600.0, help="stop writing topics after this long"
    )
    p.add_argument("--json", help="write every figure to this file")
    p.add_argument("--workdir", default=os.environ.get("LOGSTORE_BENCH_DIR"))
    p.add_argument("--keep", action="store_true", help="keep the data directories")
    p.add_argument(
        "--client-debug",
        default="",
        help="librdkafka debug contexts for the move part's producer (logged to stderr)",
    )
    args = p.parse_args()
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    if args.client_debug:
        logging.getLogger("rdkafka").setLevel(logging.DEBUG)
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    args.partitions = sorted(int(x) for x in args.partitions.split(",") if x)
    if args.quick and args.partitions == [1000, 10000]:
        args.partitions = [1000]
    args.failover_rounds = args.failover_rounds or (3 if args.quick else 5)
    args.create_rounds = 5 if args.quick else 15
    args.create_big = 100 if args.quick else 1000
    args.create_big_rounds = 1 if args.quick else 2
    args.move_rounds = args.move_rounds or 3
    args.move_before_s = 1.0 if args.quick else 2.0
    args.move_after_s = 3.0
    parts = set(args.parts.split(","))

    results: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "argv": sys.argv[1:],
        "loadavg_start": os.getloadavg(),
    }
    runners = [
        ("controller", run_controller_part),
        ("create", run_create_part),
        ("move", run_move_part),
    ]
    failed = False
    for name, runner in runners:
        if name not in parts:
            continue
        t = time.perf_counter()
        try:
            runner(args, results)
        except Exception:
            failed = True
            traceback.print_exc()
            results.setdefault("errors", {})[name] = traceback.format_exc()
        log(f"part {name} took {time.perf_counter() - t:.0f} s")
    results["loadavg_end"] = os.getloadavg()
    print_report(results)
    print(
        f"\nload average at start {results['loadavg_start'][0]:.2f}, at end "
        f"{results['loadavg_end'][0]:.2f} ({os.cpu_count()} CPUs)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
