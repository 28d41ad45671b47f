"""``logstore topic describe`` shows each partition's offline replicas (Metadata v5+
``offline_replicas``, read through the protocol codec): a broker SIGKILLed in a
three-broker cluster with a real ZooKeeper shows up under OFFLINE once the controller
noticed; the probe authenticates over SASL (SCRAM, PLAIN) and TLS as the command's other
connections do, and names what failed when it cannot."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from logstore.cli.common import EXIT_FAILED, EXIT_USAGE, CliError
from logstore.cli.connection import ClientOptions
from logstore.cli.metadata_probe import AuthenticationFailed, offline_replicas
from tests.cli.conftest import Cli, table_rows, unique
from tests.cluster.harness.cluster import Cluster
from tests.integration.conftest import BrokerProcess
from tests.integration.tls import make_pki
from tests.support.ports import free_port
from tests.support.waiting import wait_until

SESSION_MS = 4000
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
)


def test_a_killed_broker_is_listed_offline_for_each_of_its_partitions(tmp_path) -> None:
    with Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=SESSION_MS) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        wait_until(
            lambda: len(admin.list_topics(timeout=5).brokers) == 3, 20, message="three brokers"
        )
        topic = unique("offline")
        c.create_topic(topic, 3, 3)
        controller = admin.list_topics(timeout=5).controller_id
        victim = next(i for i in (1, 2, 3) if i != controller)
        # The victim's address first: the probe moves on to the next bootstrap server.
        bootstrap = ",".join(
            [c.bootstrap(victim), *(c.bootstrap(i) for i in (1, 2, 3) if i != victim)]
        )
        options = ClientOptions(brokers=bootstrap, timeout=5)
        assert offline_replicas(options, [topic]) == {topic: {0: [], 1: [], 2: []}}

        c.broker(victim).kill()
        wait_until(
            lambda: (
                offline_replicas(options, [topic]) == {topic: dict.fromkeys(range(3), [victim])}
            ),
            SESSION_MS / 1000 + 30,
            0.2,
            f"broker {victim} offline in Metadata",
        )

        logstore = Cli(bootstrap)
        (described,) = logstore.json("topic", "describe", topic, "-p")
        for p in described["partitions"]:
            assert p["offline_replicas"] == [victim] and victim in p["replicas"]
            assert p["leader"] not in (None, victim)
        rows = table_rows(logstore("topic", "describe", topic, "-p").stdout)
        header = rows.index(
            [
                "PARTITION",
                "LEADER",
                "REPLICAS",
                "ISR",
                "OFFLINE",
                "LOG-START-OFFSET",
                "HIGH-WATERMARK",
                "ERROR",
            ]
        )
        partition_rows = rows[header + 1 : header + 4]
        assert [r[0] for r in partition_rows] == ["0", "1", "2"]
        assert all(r[4] == str(victim) for r in partition_rows), partition_rows


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, str]:
    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory, pki) -> BrokerProcess:
    """One broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners (PLAIN users from
    JAAS, SCRAM users from the broker's credential store)."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("secure")))
    b.sasl_port, b.sasl_ssl_port = free_port(), free_port()
    b.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{b.sasl_port},SASL_SSL://127.0.0.1:{b.sasl_ssl_port}",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["server.pem"],
        }
    )
    b.start()
    yield b
    b.kill()


def test_describe_over_sasl_scram_and_tls(secure_broker, pki) -> None:
    b = secure_broker
    plain = Cli(b.bootstrap)
    user = unique("carol")
    plain("user", "create", user, "--new-password", "carol-secret", "--mechanism", "SCRAM-SHA-512")
    plain("user", "create", user, "--new-password", "carol-secret", "--mechanism", "SCRAM-SHA-256")
    topic = unique("secure")
    plain("topic", "create", topic, "-p", "2")

    over_sasl = Cli(f"127.0.0.1:{b.sasl_port}")
    login = ("--user", user, "--password", "carol-secret")
    (described,) = over_sasl.json(
        "topic", "describe", topic, "-p", *login, "--sasl-mechanism", "SCRAM-SHA-512"
    )
    # [] (not null): the probe authenticated and the broker answered Metadata v5+.
    assert [p["offline_replicas"] for p in described["partitions"]] == [[], []]

    over_tls = Cli(f"127.0.0.1:{b.sasl_ssl_port}")
    (described,) = over_tls.json(
        "topic",
        "describe",
        topic,
        "-p",
        *login,
        "--sasl-mechanism",
        "SCRAM-SHA-256",
        "--tls-ca",
        pki["ca.pem"],
    )
    assert [p["offline_replicas"] for p in described["partitions"]] == [[], []]

    sasl = f"127.0.0.1:{b.sasl_port}"
    alice = ClientOptions(
        brokers=sasl, sasl_mechanism="PLAIN", user="alice", password="alice-secret"
    )
    assert offline_replicas(alice, [topic]) == {topic: {0: [], 1: []}}
    wrong = ClientOptions(brokers=sasl, sasl_mechanism="SCRAM-SHA-512", user=user, password="x")
    with pytest.raises(AuthenticationFailed, match="SASL_AUTHENTICATION_FAILED"):
        offline_replicas(wrong, [topic])


def test_refused_and_unreachable_are_named(secure_broker, pki) -> None:
    b = secure_broker
    topic = unique("refused")
    Cli(b.bootstrap)("topic", "create", topic)
    sasl = f"127.0.0.1:{b.sasl_port}"
    for mechanism, user in (("PLAIN", "alice"), ("SCRAM-SHA-256", "nobody")):
        options = ClientOptions(brokers=sasl, sasl_mechanism=mechanism, user=user, password="x")
        with pytest.raises(AuthenticationFailed) as refused:
            offline_replicas(options, [topic])
        assert refused.value.exit_code == EXIT_FAILED
        assert "SASL_AUTHENTICATION_FAILED (58)" in str(refused.value)

    # The broker's certificate is signed by the test CA, not one of the system's.
    untrusted = ClientOptions(
        brokers=f"127.0.0.1:{b.sasl_ssl_port}",
        tls=True,
        sasl_mechanism="PLAIN",
        user="alice",
        password="alice-secret",
    )
    with pytest.raises(CliError) as tls:
        offline_replicas(untrusted, [topic])
    assert tls.value.exit_code == EXIT_USAGE and "TLS handshake" in str(tls.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(tls.value)

    nowhere = ClientOptions(brokers=f"127.0.0.1:{free_port()}", timeout=1)
    with pytest.raises(CliError) as unreachable:
        offline_replicas(nowhere, [topic])
    assert unreachable.value.exit_code == EXIT_USAGE
    assert "no broker of" in str(unreachable.value) and "cannot connect" in str(unreachable.value)
