"""TLS listeners (SSL, SASL_SSL, and SSL with client certificates required) driven by
confluent-kafka, kafka-python, aiokafka and kcat; keystores as PEM and PKCS12; startup
errors for unusable TLS configs."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from tests.integration.clients import create_topic, kcat, topic_name
from tests.integration.conftest import BrokerProcess
from tests.integration.tls import make_pki
from tests.support.ports import free_port
from tests.support.processes import REPO_ROOT, broker_command

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory, pki):
    b = BrokerProcess(str(tmp_path_factory.mktemp("tls")))
    b.ports = {name: free_port() for name in ("SSL", "MTLS", "SASL_SSL")}
    b.overrides.update(
        {
            "listeners": ",".join(
                [
                    f"PLAINTEXT://127.0.0.1:{b.port}",
                    *(f"{n}://127.0.0.1:{p}" for n, p in b.ports.items()),
                ]
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL"
            ),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["server.pem"],
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.truststore.type": "PEM",
            "listener.name.mtls.ssl.truststore.location": pki["ca.pem"],
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        }
    )
    b.start()
    yield b
    b.stop()


def _conf(b, pki, listener: str, **extra) -> dict:
    protocol = "SASL_SSL" if listener == "SASL_SSL" else "SSL"
    return {
        "bootstrap.servers": f"127.0.0.1:{b.ports[listener]}",
        "security.protocol": protocol,
        "ssl.ca.location": pki["ca.pem"],
        **extra,
    }


def _produce_consume(conf: dict, topic: str, count: int, size: int = 1000) -> int:
    p = Producer({**conf, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, (b"%08d" % i) * (size // 8))
    assert p.flush(60) == 0
    c = Consumer(
        {
            **conf,
            "group.id": topic_name("g"),
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 4 << 20,
        }
    )
    c.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < count and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            assert m.value() == (b"%08d" % seen) * (size // 8)
            seen += 1
    c.close()
    return seen


def test_ssl_round_trip_with_fetches_larger_than_the_write_buffer(tls_broker, pki):
    topic = topic_name("tls")
    create_topic(tls_broker.bootstrap, topic)
    assert _produce_consume(_conf(tls_broker, pki, "SSL"), topic, 5000) == 5000


def test_client_certificates_when_required(tls_broker, pki):
    topic = topic_name("mtls")
    create_topic(tls_broker.bootstrap, topic)
    with_cert = _conf(
        tls_broker,
        pki,
        "MTLS",
        **{"ssl.certificate.location": pki["client.pem"], "ssl.key.location": pki["client.key"]},
    )
    assert _produce_consume(with_cert, topic, 10) == 10
    errors: list[KafkaError] = []
    p = Producer({**_conf(tls_broker, pki, "MTLS"), "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors and errors[0].code() in (
        KafkaError._SSL,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    ), errors


def test_sasl_ssl(tls_broker, pki):
    topic = topic_name("sasl-ssl")
    create_topic(tls_broker.bootstrap, topic)
    conf = _conf(
        tls_broker,
        pki,
        "SASL_SSL",
        **{"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"},
    )
    assert _produce_consume(conf, topic, 20) == 20


def test_kafka_python_aiokafka_and_kcat_over_tls(tls_broker, pki):
    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaProducer

    topic = topic_name("tls-clients")
    create_topic(tls_broker.bootstrap, topic)
    bootstrap = f"127.0.0.1:{tls_broker.ports['SSL']}"
    p = KafkaProducer(
        bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=pki["ca.pem"]
    )
    for i in range(3):
        p.send(topic, b"kp%d" % i).get(timeout=30)
    p.close()

    async def aio() -> list[bytes]:
        ctx = ssl.create_default_context(cafile=pki["ca.pem"])
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            security_protocol="SSL",
            ssl_context=ctx,
            auto_offset_reset="earliest",
        )
        await c.start()
        try:
            return [(await c.getone()).value for _ in range(3)]
        finally:
            await c.stop()

    assert asyncio.run(aio()) == [b"kp0", b"kp1", b"kp2"]
    tls = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki['ca.pem']}"]
    assert kcat(bootstrap, *tls, "-C", "-t", topic, "-e", "-q").stdout.split() == [
        b"kp0",
        b"kp1",
        b"kp2",
    ]


def test_pkcs12_and_encrypted_pem_keystores(broker_factory, pki):
    for overrides in (
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": pki["server.p12"],
            "ssl.keystore.password": "store-secret",
        },
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["server-encrypted.pem"],
            "ssl.key.password": "store-secret",
        },
    ):
        port = free_port()
        b = broker_factory(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:{port}",
                **overrides,
            }
        )
        r = kcat(
            f"127.0.0.1:{port}",
            "-X",
            "security.protocol=ssl",
            "-X",
            f"ssl.ca.location={pki['ca.pem']}",
            "-L",
        )
        assert b"1 brokers" in r.stdout
        b.stop()


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({}, "ssl.keystore.location"),
        ({"ssl.keystore.location": "/x/keystore.jks"}, "ssl.keystore.type"),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/no/such/file.pem"},
            "ssl.keystore.location",
        ),
        (
            {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": "<server.p12>",
                "ssl.keystore.password": "wrong",
            },
            "ssl.keystore.location",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "<server.pem>",
                "ssl.client.auth": "required",
            },
            "ssl.truststore.location",
        ),
    ],
)
def test_unusable_tls_configs_stop_startup_naming_the_key(tmp_path, pki, overrides, key):
    overrides = {k: pki[v[1:-1]] if v.startswith("<") else v for k, v in overrides.items()}
    command = broker_command(
        overrides={"listeners": "SSL://127.0.0.1:0", "log.dirs": str(tmp_path), **overrides}
    )
    r = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert r.returncode == 2, r.stderr
    assert f"for configuration {key}:" in r.stderr, r.stderr
    assert "wrong" not in r.stderr
