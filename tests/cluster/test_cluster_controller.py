"""Three real brokers and a real ZooKeeper (through the harness's proxies): membership,
the controller, topic administration through any broker, and leadership moving when
brokers die, stop or pause."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kazoo.client import KazooClient

from tests.cluster.harness.cluster import Cluster
from tests.support.waiting import wait_until

SESSION_MS = 4000


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(
        tmp_path,
        n_brokers=3,
        zk_session_timeout_ms=SESSION_MS,
        overrides={
            "controlled.shutdown.retry.backoff.ms": "200",
            "auto.leader.rebalance.enable": "false",
        },
    )
    with c:
        a = admin(c)
        wait_until(
            lambda: len(a.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
        yield c


def admin(c: Cluster, i: int | None = None) -> AdminClient:
    return AdminClient({"bootstrap.servers": c.bootstrap(i) if i else c.bootstrap_servers})


def leaders(a: AdminClient, topic: str) -> dict[int, int]:
    md = a.list_topics(topic, timeout=5).topics[topic]
    return {p.id: p.leader for p in md.partitions.values()}


def partitions(a: AdminClient, topic: str):
    return a.list_topics(topic, timeout=5).topics[topic].partitions


def controller_id(a: AdminClient) -> int:
    return a.list_topics(timeout=5).controller_id


def zk_json(c: Cluster, path: str):
    zk = KazooClient(hosts=c.zk_connect)
    zk.start(timeout=10)
    try:
        data, _ = zk.get(path)
        return json.loads(data)
    finally:
        zk.stop()
        zk.close()


def zk_exists(c: Cluster, path: str) -> bool:
    zk = KazooClient(hosts=c.zk_connect)
    zk.start(timeout=10)
    try:
        return zk.exists(path) is not None
    finally:
        zk.stop()
        zk.close()


def test_three_brokers_a_controller_and_topics_created_through_each(cluster):
    c = cluster
    a = admin(c)
    wait_until(
        lambda: len(a.list_topics(timeout=5).brokers) == 3, 20, message="three brokers in metadata"
    )
    controller = controller_id(a)
    assert controller in (1, 2, 3)
    assert zk_json(c, "/controller")["brokerid"] == controller
    for i in (1, 2, 3):
        through = admin(c, i)
        through.create_topics([NewTopic(f"via{i}", 3, 3)])[f"via{i}"].result(20)
    for i in (1, 2, 3):
        # every broker answers the same metadata, with leaders spread over the brokers
        for j in (1, 2, 3):
            parts = partitions(admin(c, j), f"via{i}")
            assert sorted(p.leader for p in parts.values()) == [1, 2, 3]
            assert all(
                sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3]
                for p in parts.values()
            )
    state = zk_json(c, "/brokers/topics/via2/partitions/0/state")
    assert state["leader_epoch"] == 0 and sorted(state["isr"]) == [1, 2, 3]
    assert sorted(zk_json(c, "/brokers/topics/via2")["partitions"]) == ["0", "1", "2"]


def test_kcat_and_clients_see_the_cluster(cluster):
    c = cluster
    c.create_topic("seen", 3, 3)
    out = subprocess.run(
        ["kcat", "-b", c.bootstrap(2), "-L", "-J"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    md = json.loads(out)
    assert sorted(b["id"] for b in md["brokers"]) == [1, 2, 3]
    topic = next(t for t in md["topics"] if t["topic"] == "seen")
    assert sorted(p["leader"] for p in topic["partitions"]) == [1, 2, 3]
    from kafka import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=c.bootstrap(3), request_timeout_ms=10000)
    try:
        described = kp.describe_cluster()
        brokers = described["brokers"]
        assert sorted(b["broker_id"] for b in brokers) == [1, 2, 3], brokers
        assert described["controller_id"] in (1, 2, 3)
    finally:
        kp.close()

    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient

    async def aiokafka_view():
        client = AIOKafkaAdminClient(bootstrap_servers=c.bootstrap(1))
        await client.start()
        try:
            cluster = await client.describe_cluster()
            topics = await client.describe_topics(["seen"])
            return cluster, topics
        finally:
            await client.close()

    cluster, topics = asyncio.run(aiokafka_view())
    assert sorted(b["node_id"] for b in cluster["brokers"]) == [1, 2, 3], cluster
    assert cluster["controller_id"] in (1, 2, 3)
    assert sorted(p["leader"] for p in topics[0]["partitions"]) == [1, 2, 3], topics


def test_partitions_added_and_topic_deleted_through_a_broker_that_is_not_the_controller(cluster):
    c = cluster
    a = admin(c)
    c.create_topic("grow", 2, 2)
    other = next(i for i in (1, 2, 3) if i != controller_id(a))
    through = admin(c, other)
    through.create_partitions([NewPartitions("grow", 5)])["grow"].result(20)
    wait_until(lambda: len(partitions(a, "grow")) == 5, 10, 0.1, "five partitions in the metadata")
    through.delete_topics(["grow"])["grow"].result(20)
    wait_until(lambda: "grow" not in a.list_topics(timeout=5).topics, 20, message="topic gone")
    wait_until(
        lambda: not any(b.partition_dir("grow", p).exists() for b in c.brokers for p in range(5)),
        30,
        message="logs deleted",
    )


def test_a_killed_leader_loses_its_leaderships_and_rejoins(cluster):
    c = cluster
    c.create_topic("t", 3, 3)
    a = admin(c)
    victim = leaders(a, "t")[0]
    survivor = next(i for i in (1, 2, 3) if i != victim)
    watcher = admin(c, survivor)
    killed_at = time.monotonic()
    c.broker(victim).kill()
    # (a partition whose dead leader the metadata already lacks, before its new leader is
    # elected, answers LEADER_NOT_AVAILABLE with leader -1, as Kafka's does)
    wait_until(
        lambda: all(leader not in (victim, -1) for leader in leaders(watcher, "t").values()),
        SESSION_MS / 1000 + 2 + 3,
        0.1,
        "leaderships moved",
    )
    moved_after = time.monotonic() - killed_at
    assert (
        moved_after < SESSION_MS / 1000 + 2 + 1
    )  # the session timeout + 2 s (+1 s of polling slack)
    for p in partitions(watcher, "t").values():
        assert victim not in p.isrs and p.leader in p.isrs
    c.broker(victim).start()
    wait_until(
        lambda: victim in admin(c, survivor).list_topics(timeout=5).brokers,
        20,
        message="broker back",
    )


def test_sigterm_moves_leadership_away_before_the_broker_stops(cluster):
    c = cluster
    c.create_topic("cs", 1, 3)
    a = admin(c)
    leader = leaders(a, "cs")[0]
    errors = []
    delivered = []
    producer = Producer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "acks": "1",
            "linger.ms": 0,
            "retries": 1_000_000,
            "retry.backoff.ms": 50,
            "message.timeout.ms": 30000,
        }
    )

    def report(err, msg):
        (errors if err else delivered).append(err or msg.offset())

    for n in range(50):
        producer.produce("cs", str(n).encode(), on_delivery=report)
        producer.poll(0.01)
    assert c.broker(leader).terminate() == 0
    for n in range(50, 100):
        producer.produce("cs", str(n).encode(), on_delivery=report)
        producer.poll(0.01)
    assert producer.flush(30) == 0
    assert errors == [] and len(delivered) == 100
    assert "controlled shutdown of broker" in c.broker(leader).log_text()
    assert leaders(admin(c, next(i for i in (1, 2, 3) if i != leader)), "cs")[0] != leader


def test_a_killed_controller_is_replaced_within_the_session_timeout(cluster):
    c = cluster
    a = admin(c)
    c.create_topic("k", 3, 3)
    old = controller_id(a)
    before = zk_json(c, "/controller_epoch")
    c.broker(old).kill()
    started = time.monotonic()
    survivor = next(i for i in (1, 2, 3) if i != old)
    wait_until(
        lambda: controller_id(admin(c, survivor)) not in (old, -1),
        SESSION_MS / 1000 + 5,
        0.1,
        "a new controller",
    )
    assert time.monotonic() - started < SESSION_MS / 1000 + 2
    assert zk_json(c, "/controller_epoch") == before + 1
    wait_until(
        lambda: old not in leaders(admin(c, survivor), "k").values(),
        10,
        message="leaderships moved",
    )


def test_a_paused_controller_is_fenced_when_it_wakes(cluster):
    c = cluster
    a = admin(c)
    c.create_topic("p", 3, 3)
    old = controller_id(a)
    survivor = next(i for i in (1, 2, 3) if i != old)
    c.broker(old).pause()
    try:
        wait_until(
            lambda: controller_id(admin(c, survivor)) not in (old, -1),
            SESSION_MS / 1000 + 10,
            0.2,
            "a new controller",
        )
    finally:
        c.broker(old).resume()
    new = controller_id(admin(c, survivor))
    wait_until(
        lambda: "resigns as controller" in c.broker(old).log_text(),
        15,
        message="the old controller resigns",
    )
    assert zk_json(c, "/controller")["brokerid"] == new
    # it registers again with a new session and serves as an ordinary broker
    wait_until(
        lambda: old in admin(c, survivor).list_topics(timeout=5).brokers,
        20,
        message="the old controller is back",
    )
    assert controller_id(admin(c, old)) == new


def test_deletion_completes_after_a_controller_failover(cluster):
    c = cluster
    a = admin(c)
    c.create_topic("gone", 2, 3)
    controller = controller_id(a)
    replica = next(i for i in (1, 2, 3) if i != controller)
    c.broker(replica).kill()  # a dead replica pauses the deletion
    survivor = next(i for i in (1, 2, 3) if i not in (controller, replica))
    wait_until(
        lambda: replica not in admin(c, survivor).list_topics(timeout=5).brokers,
        SESSION_MS / 1000 + 5,
        0.1,
        "replica gone",
    )
    through = admin(c, survivor)
    through.delete_topics(["gone"], operation_timeout=1)
    wait_until(lambda: zk_exists(c, "/admin/delete_topics/gone"), 10, message="deletion queued")
    time.sleep(0.5)
    assert zk_exists(c, "/brokers/topics/gone")  # paused by the dead replica
    c.broker(controller).kill()  # the controller dies in the middle
    c.broker(replica).start()
    wait_until(
        lambda: "gone" not in admin(c, survivor).list_topics(timeout=5).topics,
        SESSION_MS / 1000 + 20,
        0.2,
        "deletion done",
    )
    wait_until(
        lambda: (
            not any(
                c.broker(i).partition_dir("gone", p).exists()
                for i in (replica, survivor)
                for p in range(2)
            )
        ),
        30,  # the restarted replica deletes them once the new controller tells it
        message="logs deleted",
    )


def test_only_the_leader_serves_and_leader_epochs_are_checked(cluster):
    import asyncio

    from broker_py.network.network_client import NetworkClient
    from logstore.protocol.api_keys import ApiKey
    from logstore.protocol.messages.delete_records import DeleteRecordsRequest
    from logstore.protocol.messages.fetch import FetchRequest
    from logstore.protocol.messages.list_offsets import ListOffsetsRequest
    from logstore.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest

    c = cluster
    c.create_topic("lo", 1, 3)
    parts = partitions(admin(c), "lo")
    leader = parts[0].leader
    follower = next(r for r in parts[0].replicas if r != leader)
    epoch = zk_json(c, "/brokers/topics/lo/partitions/0/state")["leader_epoch"]

    def requests(current_epoch: int):
        return [
            (
                ApiKey.LIST_OFFSETS,
                ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=0,
                    topics=[
                        ListOffsetsRequest.ListOffsetsTopic(
                            name="lo",
                            partitions=[
                                ListOffsetsRequest.ListOffsetsPartition(
                                    partition_index=0,
                                    current_leader_epoch=current_epoch,
                                    timestamp=-1,
                                )
                            ],
                        )
                    ],
                ),
                lambda r: r.topics[0].partitions[0].error_code,
            ),
            (
                ApiKey.OFFSET_FOR_LEADER_EPOCH,
                OffsetForLeaderEpochRequest(
                    topics=[
                        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                            topic="lo",
                            partitions=[
                                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                                    partition=0, current_leader_epoch=current_epoch, leader_epoch=0
                                )
                            ],
                        )
                    ]
                ),
                lambda r: r.topics[0].partitions[0].error_code,
            ),
            (
                ApiKey.FETCH,
                FetchRequest(
                    max_wait_ms=0,
                    min_bytes=0,
                    isolation_level=0,
                    session_id=0,
                    topics=[
                        FetchRequest.FetchTopic(
                            topic="lo",
                            topic_id=parts_topic_id(c),
                            partitions=[
                                FetchRequest.FetchPartition(
                                    partition=0,
                                    current_leader_epoch=current_epoch,
                                    fetch_offset=0,
                                    partition_max_bytes=1024,
                                )
                            ],
                        )
                    ],
                    forgotten_topics_data=[],
                    rack_id="",
                ),
                lambda r: r.responses[0].partitions[0].error_code,
            ),
        ]

    async def ask(broker: int, current_epoch: int) -> list[int]:
        host, port = c.bootstrap(broker).split(":")
        client = NetworkClient(host, int(port), "leader-only-test")
        try:
            return [
                pick(await client.send(key, request, 10000))
                for key, request, pick in requests(current_epoch)
            ]
        finally:
            await client.close()

    async def delete_records(broker: int) -> int:
        host, port = c.bootstrap(broker).split(":")
        client = NetworkClient(host, int(port), "leader-only-test")
        try:
            r = await client.send(
                ApiKey.DELETE_RECORDS,
                DeleteRecordsRequest(
                    topics=[
                        DeleteRecordsRequest.DeleteRecordsTopic(
                            name="lo",
                            partitions=[
                                DeleteRecordsRequest.DeleteRecordsPartition(
                                    partition_index=0, offset=0
                                )
                            ],
                        )
                    ],
                    timeout_ms=5000,
                ),
                10000,
            )
            return r.topics[0].partitions[0].error_code
        finally:
            await client.close()

    NOT_LEADER, FENCED, UNKNOWN_EPOCH = 6, 74, 75
    # a consumer's Fetch v11+ may read from a follower (KIP-392); the other two are the leader's
    assert asyncio.run(ask(follower, -1)) == [NOT_LEADER, NOT_LEADER, 0]
    assert asyncio.run(delete_records(follower)) == NOT_LEADER
    assert asyncio.run(ask(leader, -1)) == [0, 0, 0]
    assert asyncio.run(ask(leader, epoch)) == [0, 0, 0]
    assert asyncio.run(ask(leader, epoch + 1)) == [UNKNOWN_EPOCH] * 3
    c.broker(follower).kill()  # the controller takes it out of the ISR: a new leader epoch
    wait_until(
        lambda: zk_json(c, "/brokers/topics/lo/partitions/0/state")["leader_epoch"] > epoch,
        SESSION_MS / 1000 + 5,
        0.1,
        "a new epoch",
    )
    wait_until(
        lambda: asyncio.run(ask(leader, epoch)) == [FENCED] * 3, 10, 0.2, "the old epoch fenced"
    )


def parts_topic_id(c: Cluster):
    import base64
    import uuid

    raw = zk_json(c, "/brokers/topics/lo")["topic_id"]
    return uuid.UUID(bytes=base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))


def test_brokers_talk_over_a_sasl_inter_broker_listener_with_acls(tmp_path):
    """With an authorizer on, the controller's requests and the brokers' requests to it
    authenticate on the SASL_PLAINTEXT inter-broker listener as User:admin, a super user
    (clients use the PLAINTEXT listener); that listener lets no one in without SASL."""
    import asyncio

    from broker_py.network.network_client import NetworkClient
    from logstore.protocol.api_keys import ApiKey
    from logstore.protocol.errors import KafkaError
    from logstore.protocol.messages.controller import ControlledShutdownRequest

    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret";'
    )
    overrides = {
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "auto.leader.rebalance.enable": "false",
    }
    with Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=SESSION_MS, overrides=overrides) as c:
        a = admin(c)
        wait_until(
            lambda: len(a.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
        c.create_topic("secure", 3, 3)
        assert sorted(leaders(a, "secure").values()) == [1, 2, 3]
        assert not any("Authentication failed" in b.log_text() for b in c.brokers)
        # a client on the INTERNAL listener without credentials is not let in
        host, port = c.internal_proxies[1].address.split(":")

        async def unauthenticated():
            client = NetworkClient(host, int(port), "intruder")
            try:
                return await client.send(
                    ApiKey.CONTROLLED_SHUTDOWN,
                    ControlledShutdownRequest(broker_id=1, broker_epoch=-1),
                    5000,
                )
            finally:
                await client.close()

        with pytest.raises(KafkaError):
            asyncio.run(unauthenticated())


def test_a_leader_whose_followers_do_not_fetch_shrinks_its_isr_through_the_controller(tmp_path):
    """Followers that show no progress for replica.lag.time.max.ms (paused) leave the ISR: the
    leader proposes it (AlterPartition), the controller writes it conditionally, and the
    high watermark then follows the leader alone (min.insync.replicas 1)."""
    overrides = {"replica.lag.time.max.ms": "1500", "auto.leader.rebalance.enable": "false"}
    with Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=SESSION_MS, overrides=overrides) as c:
        a = admin(c)
        wait_until(
            lambda: len(a.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
        c.create_topic("shrink", 1, 3)
        leader = leaders(a, "shrink")[0]
        before = zk_json(c, "/brokers/topics/shrink/partitions/0/state")
        # Followers other than the controller (which must answer the AlterPartition) stop
        # fetching: paused briefly, their ZooKeeper sessions stay.
        ctl = controller_id(a)
        followers = [b for b in (1, 2, 3) if b not in (leader, ctl)]
        expected = sorted({leader, ctl})
        for b in followers:
            c.broker(b).pause()
        p = Producer({"bootstrap.servers": c.bootstrap(leader), "acks": "1"})
        for i in range(5):
            p.produce("shrink", b"v%d" % i)
        assert p.flush(30) == 0
        try:
            wait_until(
                lambda: (
                    sorted(zk_json(c, "/brokers/topics/shrink/partitions/0/state")["isr"])
                    == expected
                ),
                15,
                0.2,
                "the ISR shrunk",
            )
            after = zk_json(c, "/brokers/topics/shrink/partitions/0/state")
            assert (
                after["leader"] == leader and after["leader_epoch"] == before["leader_epoch"]
            )  # the leader's change keeps the epoch
            live = admin(c, leader)
            wait_until(
                lambda: sorted(partitions(live, "shrink")[0].isrs) == expected,
                10,
                0.2,
                "metadata shows the ISR",
            )
        finally:
            for b in followers:
                c.broker(b).resume()
        # the records are committed now (read without a group: group coordinators are per
        # broker until the coordinators follow the cluster)
        out = subprocess.run(
            [
                "kcat",
                "-C",
                "-b",
                c.bootstrap_servers,
                "-t",
                "shrink",
                "-o",
                "beginning",
                "-e",
                "-q",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        assert out.split() == [f"v{i}" for i in range(5)]


def test_every_broker_names_the_same_group_coordinator_the_leader_of_its_offsets_partition(cluster):
    import asyncio

    from broker_py.coordinator.group.group_metadata_records import partition_for
    from broker_py.network.network_client import NetworkClient
    from logstore.protocol.api_keys import ApiKey
    from logstore.protocol.messages.find_coordinator import FindCoordinatorRequest

    c = cluster

    async def find(broker: int) -> tuple[int, int]:
        host, port = c.bootstrap(broker).split(":")
        client = NetworkClient(host, int(port), "coordinator-test")
        try:
            r = await client.send(
                ApiKey.FIND_COORDINATOR,
                FindCoordinatorRequest(key="g", key_type=0, coordinator_keys=["g"]),
                10000,
            )
            return r.coordinators[0].error_code, r.coordinators[0].node_id
        finally:
            await client.close()

    wait_until(lambda: asyncio.run(find(1))[0] == 0, 30, 0.3, "the offsets topic created")
    leader = leaders(admin(c), "__consumer_offsets")[partition_for("g", 50)]
    assert [asyncio.run(find(b)) for b in (1, 2, 3)] == [(0, leader)] * 3


def zk_assignment(c: Cluster, topic: str) -> dict[int, list[int]]:
    """The replica lists of ``/brokers/topics/<topic>`` (preference order: the head is
    the preferred leader)."""
    return {int(p): r for p, r in zk_json(c, f"/brokers/topics/{topic}")["partitions"].items()}


def read_all(c: Cluster, topic: str) -> dict[int, list[tuple[int, str]]]:
    """Every record of ``topic`` from the beginning, per partition as (offset, value)
    (kcat, no consumer group)."""
    out = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            c.bootstrap_servers,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%p %o %s\n",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    records: dict[int, list[tuple[int, str]]] = {}
    for line in out.splitlines():
        p, o, v = line.split(" ", 2)
        records.setdefault(int(p), []).append((int(o), v))
    return {p: sorted(rs) for p, rs in records.items()}


def produce_acks_all(
    c: Cluster, topic: str, values: list[tuple[int, str]]
) -> dict[int, list[tuple[int, str]]]:
    """Produces (partition, value) pairs with acks=all; returns what was acknowledged,
    per partition as (offset, value). Every record must be acknowledged."""
    errors: list = []
    acked: dict[int, list[tuple[int, str]]] = {}

    def report(err, msg):
        if err:
            errors.append(err)
        else:
            acked.setdefault(msg.partition(), []).append((msg.offset(), msg.value().decode()))

    producer = Producer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 30000,
        }
    )
    for partition, value in values:
        producer.produce(topic, value.encode(), partition=partition, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []
    assert sum(len(v) for v in acked.values()) == len(values)
    return acked


def test_preferred_leaders_return_after_a_restart(tmp_path):
    """With auto.leader.rebalance.enable and no tolerated imbalance, a broker stopped
    cleanly hands its leaderships over (controlled shutdown); started again it catches up,
    rejoins every ISR, and the controller's periodic check makes each partition's first
    replica its leader again. Records acknowledged with acks=all before the stop and while
    the broker was down are all readable afterwards."""
    overrides = {
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": "2",
        "leader.imbalance.per.broker.percentage": "0",
        "controlled.shutdown.retry.backoff.ms": "200",
    }
    topic = "pref"
    with Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=SESSION_MS, overrides=overrides) as c:
        a = admin(c)
        wait_until(
            lambda: len(a.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
        c.create_topic(topic, 3, 3)
        assignment = zk_assignment(c, topic)
        preferred = {p: replicas[0] for p, replicas in assignment.items()}
        assert sorted(preferred) == [0, 1, 2] and all(
            sorted(r) == [1, 2, 3] for r in assignment.values()
        )
        # a new partition's leader is its first live replica
        wait_until(lambda: leaders(a, topic) == preferred, 30, 0.2, "the preferred leaders lead")
        acked = produce_acks_all(c, topic, [(n % 3, f"before-{n}") for n in range(300)])

        # Stop a broker that is not the controller (the controller stays put), cleanly.
        victim = next(b for b in sorted(set(preferred.values())) if b != controller_id(a))
        survivor = next(b for b in (1, 2, 3) if b != victim)
        assert c.broker(victim).terminate() == 0
        watcher = admin(c, survivor)
        wait_until(
            lambda: (
                victim not in leaders(watcher, topic).values()
                and all(victim not in p.isrs for p in partitions(watcher, topic).values())
            ),
            30,
            0.2,
            "the victim's leaderships and ISR memberships moved",
        )
        for p, more in produce_acks_all(
            c, topic, [(n % 3, f"during-{n}") for n in range(300)]
        ).items():
            acked.setdefault(p, []).extend(more)

        c.broker(victim).start()
        wait_until(
            lambda: all(sorted(p.isrs) == [1, 2, 3] for p in partitions(watcher, topic).values()),
            30,
            0.2,
            "the victim back in every ISR",
        )

        def preferred_everywhere() -> bool:
            try:
                if any(leaders(admin(c, b), topic) != preferred for b in (1, 2, 3)):
                    return False
            except Exception:  # noqa: BLE001 - a broker answering late; ask again
                return False
            return all(
                zk_json(c, f"/brokers/topics/{topic}/partitions/{p}/state")["leader"] == leader
                for p, leader in preferred.items()
            )

        wait_until(preferred_everywhere, 30, 0.2, "every partition led by its first replica again")
        assert "auto leader rebalance: preferred election" in "".join(
            c.broker(b).log_text() for b in (1, 2, 3)
        )
        assert zk_assignment(c, topic) == assignment  # the preference order never changed
        assert read_all(c, topic) == {p: sorted(rs) for p, rs in acked.items()}


def test_reassignment_adding_replicas_completes_across_a_controller_failover(tmp_path):
    """A partition with one replica is reassigned (AlterPartitionReassignments, KIP-455) to
    three; the controller is SIGKILLed while the new replicas are still being added (one of
    them paused so that it cannot be in sync yet) and started again. The next controller
    resumes from the topic znode's adding_replicas: the assignment becomes the three
    targets, all of them in the ISR, no reassignment is left, and the three copies are
    byte-identical below the high watermark."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition

    from tests.cluster.harness.faults import high_watermarks, replica_check

    overrides = {
        "controlled.shutdown.retry.backoff.ms": "200",
        "auto.leader.rebalance.enable": "false",
    }
    topic = "moving"
    with Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=SESSION_MS, overrides=overrides) as c:
        a = admin(c)
        wait_until(
            lambda: len(a.list_topics(timeout=5).brokers) == 3,
            20,
            message="three brokers registered",
        )
        controller = controller_id(a)
        leader = next(
            b for b in (1, 2, 3) if b != controller
        )  # the only replica, off the controller
        third = next(b for b in (1, 2, 3) if b not in (controller, leader))
        a.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[leader]])])[
            topic
        ].result(20)
        wait_until(
            lambda: leaders(a, topic) == {0: leader}, 20, 0.1, "the topic led by its only replica"
        )
        value = "x" * 1000
        acked = produce_acks_all(c, topic, [(0, f"{n}-{value}") for n in range(2000)])
        assert [o for o, _ in acked[0]] == list(range(2000))

        target = [leader, controller, third]
        epoch_before = zk_json(c, "/controller_epoch")
        kp = KafkaAdminClient(bootstrap_servers=c.bootstrap(leader), request_timeout_ms=20000)
        try:
            assert kp.list_partition_reassignments() == {}  # kafka-python knows the controller now
            # The third broker cannot join the ISR while it is paused (briefly: its
            # ZooKeeper session outlives the pause), so the reassignment is still in
            # progress when the controller dies.
            c.broker(third).pause()
            try:
                assert kp.alter_partition_reassignments(
                    {KTopicPartition(topic, 0): target}, timeout_ms=15000
                ) == {KTopicPartition(topic, 0): None}
                znode = zk_json(c, f"/brokers/topics/{topic}")
                assert sorted(znode["adding_replicas"]["0"]) == sorted([controller, third]), znode
                c.broker(controller).kill()
            finally:
                c.broker(third).resume()
        finally:
            kp.close()
        c.broker(controller).start()

        def done() -> bool:
            znode = zk_json(c, f"/brokers/topics/{topic}")
            state = zk_json(c, f"/brokers/topics/{topic}/partitions/0/state")
            return (
                znode["partitions"] == {"0": target}
                and not znode.get("adding_replicas")
                and not znode.get("removing_replicas")
                and sorted(state["isr"]) == [1, 2, 3]
            )

        wait_until(done, 30, 0.2, "the reassignment to three replicas complete in ZooKeeper")
        assert not zk_exists(c, "/admin/reassign_partitions")
        assert zk_json(c, f"/brokers/topics/{topic}/partitions/0/state")["leader"] == leader
        assert zk_json(c, "/controller_epoch") > epoch_before  # another controller finished it
        kp = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers, request_timeout_ms=20000)

        def none_listed() -> bool:
            try:
                return kp.list_partition_reassignments() == {}
            except Exception:  # noqa: BLE001 - the client still looking for the controller
                return False

        try:
            wait_until(none_listed, 30, 0.2, "no reassignment listed")
        finally:
            kp.close()

        def metadata_in_sync() -> bool:
            try:
                return all(
                    sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3]
                    for b in (1, 2, 3)
                    for p in partitions(admin(c, b), topic).values()
                )
            except Exception:  # noqa: BLE001 - a broker answering late; ask again
                return False

        wait_until(
            metadata_in_sync, 30, 0.2, "every broker's metadata shows three replicas in sync"
        )
        assert high_watermarks(c, topic, 1) == {0: 2000}
        comparison = replica_check(c, topic, 1)[0]
        assert comparison.identical, comparison.detail
        assert comparison.end_offsets == {"b1": 2000, "b2": 2000, "b3": 2000}, comparison
        assert comparison.batches_compared > 0
