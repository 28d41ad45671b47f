"""SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256/512, driven by confluent-kafka,
kafka-python, aiokafka and kcat against a broker with a PLAINTEXT and a SASL_PLAINTEXT
listener; and the raw protocol for what no client does on purpose (a request before
authentication, a v0 handshake)."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from logstore.protocol import RequestHeader, decode_response, encode_request
from logstore.protocol.messages.metadata import MetadataRequest
from logstore.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from tests.integration.clients import create_topic, kcat, topic_name
from tests.integration.conftest import BrokerProcess
from tests.support.ports import free_port
from tests.support.waiting import wait_until

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


OAUTH_JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorAllowableClockSkewMs="1000";'
)


def unsecured_jwt(subject: str, lifetime_s: float = 3600) -> str:
    """An unsecured JWT (alg none) as Kafka's and librdkafka's unsecured login modules make."""
    import base64
    import json

    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    now = time.time()
    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': now, 'exp': now + lifetime_s})}."


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("sasl")))
    b.sasl_port = free_port()
    b.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        }
    )
    b.start()
    yield b
    b.stop()


def _sasl(b, mechanism: str, user: str, password: str) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{b.sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _round_trip(conf: dict, topic: str) -> list[bytes]:
    p = Producer(conf)
    for i in range(5):
        p.produce(topic, b"v%d" % i, key=b"k")
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": topic_name("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def _auth_error(conf: dict) -> KafkaError:
    errors: list[KafkaError] = []
    p = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors, "no error reported"
    return errors[0]


def _set_scram(
    b,
    user: str,
    password: bytes,
    mechanisms=(ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512),
):
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    futures = a.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                user,
                ScramCredentialInfo(m, 4096 if m == ScramMechanism.SCRAM_SHA_256 else 8192),
                password,
            )
            for m in mechanisms
        ]
    )
    for f in futures.values():
        assert f.result(15) is None


def test_plain_users_from_the_jaas_config(sasl_broker):
    topic = topic_name("sasl-plain")
    create_topic(sasl_broker.bootstrap, topic)
    assert _round_trip(_sasl(sasl_broker, "PLAIN", "alice", "alice-secret"), topic) == [
        b"v%d" % i for i in range(5)
    ]
    err = _auth_error(_sasl(sasl_broker, "PLAIN", "alice", "wrong"))
    assert err.code() == KafkaError._AUTHENTICATION and "Invalid username or password" in err.str()


def test_scram_credentials_set_described_used_persisted_and_deleted(sasl_broker):
    _set_scram(sasl_broker, "bob", b"bob-secret")
    a = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})
    described = a.describe_user_scram_credentials(["bob"])["bob"].result(15)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096),
        (ScramMechanism.SCRAM_SHA_512, 8192),
    ]
    topic = topic_name("sasl-scram")
    create_topic(sasl_broker.bootstrap, topic)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert _round_trip(_sasl(sasl_broker, mechanism, "bob", "bob-secret"), topic)[:5] == [
            b"v%d" % i for i in range(5)
        ]
        err = _auth_error(_sasl(sasl_broker, mechanism, "bob", "bob-wrong"))
        assert err.code() == KafkaError._AUTHENTICATION and "invalid credentials" in err.str()
    err = _auth_error(_sasl(sasl_broker, "SCRAM-SHA-256", "nobody", "x"))
    assert err.code() == KafkaError._AUTHENTICATION

    sasl_broker.restart()
    p = Producer(_sasl(sasl_broker, "SCRAM-SHA-512", "bob", "bob-secret"))
    p.produce(topic, b"after restart")
    assert p.flush(30) == 0

    a = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})
    for f in a.alter_user_scram_credentials(
        [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]
    ).values():
        assert f.result(15) is None
    assert (
        _auth_error(_sasl(sasl_broker, "SCRAM-SHA-512", "bob", "bob-secret")).code()
        == KafkaError._AUTHENTICATION
    )
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        a.alter_user_scram_credentials(
            [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]
        )["bob"].result(15)
    with pytest.raises(Exception, match="UNACCEPTABLE_CREDENTIAL|Iterations"):
        a.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw"
                )
            ]
        )["carol"].result(15)


def test_kafka_python_and_aiokafka_authenticate(sasl_broker):
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer

    _set_scram(sasl_broker, "dave", b"dave-secret", (ScramMechanism.SCRAM_SHA_256,))
    topic = topic_name("sasl-kp")
    create_topic(sasl_broker.bootstrap, topic)
    common = {
        "bootstrap_servers": f"127.0.0.1:{sasl_broker.sasl_port}",
        "security_protocol": "SASL_PLAINTEXT",
    }
    for mechanism, user, password in (
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-256", "dave", "dave-secret"),
    ):
        auth = {
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
        p = KafkaProducer(**common, **auth)
        p.send(topic, b"from " + mechanism.encode()).get(timeout=30)
        p.close()
    c = KafkaConsumer(
        topic,
        **common,
        sasl_mechanism="PLAIN",
        sasl_plain_username="admin",
        sasl_plain_password="admin-secret",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    assert [m.value for m in c] == [b"from PLAIN", b"from SCRAM-SHA-256"]
    c.close()

    async def aio():
        p = AIOKafkaProducer(
            **common,
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="dave",
            sasl_plain_password="dave-secret",
        )
        await p.start()
        try:
            await p.send_and_wait(topic, b"from aiokafka")
        finally:
            await p.stop()

    asyncio.run(aio())


def test_kcat_authenticates(sasl_broker):
    topic = topic_name("sasl-kcat")
    create_topic(sasl_broker.bootstrap, topic)
    auth = [
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=PLAIN",
        "-X",
        "sasl.username=alice",
        "-X",
        "sasl.password=alice-secret",
    ]
    bootstrap = f"127.0.0.1:{sasl_broker.sasl_port}"
    kcat(bootstrap, *auth, "-P", "-t", topic, input=b"one\ntwo\n")
    assert kcat(bootstrap, *auth, "-C", "-t", topic, "-e", "-q").stdout.split() == [b"one", b"two"]
    bad = kcat(bootstrap, *auth[:-1], "sasl.password=nope", "-L", timeout=30, check=False)
    assert bad.returncode != 0 and b"Invalid username or password" in bad.stderr


class _Wire:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0

    def call(self, body, version: int):
        self.correlation += 1
        header = RequestHeader(
            api_key=int(body.API_KEY),
            api_version=version,
            correlation_id=self.correlation,
            client_id="t",
        )
        self.sock.sendall(encode_request(header, body))
        frame = self.raw()
        correlation_id, response = decode_response(frame, body.API_KEY, version)
        assert correlation_id == self.correlation
        return response

    def raw(self) -> bytes:
        size = int.from_bytes(self._read(4), "big")
        return self._read(size)

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionError:
            return True


def test_the_protocol_around_authentication(sasl_broker):
    # A request other than ApiVersions or SASL before authentication closes the connection.
    w = _Wire(sasl_broker.sasl_port)
    w.sock.sendall(
        encode_request(
            RequestHeader(api_key=3, api_version=1, correlation_id=1, client_id="t"),
            MetadataRequest(topics=None),
        )
    )
    assert w.closed()
    # An unsupported mechanism is answered with the enabled ones, then the connection closes.
    w = _Wire(sasl_broker.sasl_port)
    r = w.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
    assert (r.error_code, r.mechanisms) == (
        33,
        ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"],
    )
    assert w.closed()
    # v1: tokens in SaslAuthenticate; a wrong password gets error 58 and its reason.
    w = _Wire(sasl_broker.sasl_port)
    assert w.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    r = w.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope"), 1)
    assert r.error_code == 58 and "Invalid username or password" in r.error_message
    assert w.closed()
    # v0: the token travels as a bare size-prefixed frame, then requests follow.
    w = _Wire(sasl_broker.sasl_port)
    assert w.call(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
    token = b"\0alice\0alice-secret"
    w.sock.sendall(len(token).to_bytes(4, "big") + token)
    assert w.raw() == b""
    assert w.call(MetadataRequest(topics=None), 1).brokers[0].port == sasl_broker.sasl_port
    # On a PLAINTEXT listener there is nothing to authenticate.
    w = _Wire(sasl_broker.port)
    assert w.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 34


def test_the_jaas_config_is_never_described(sasl_broker):
    a = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})
    (future,) = a.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0")]).values()
    entries = future.result(15)
    assert "alice-secret" not in repr({k: v.value for k, v in entries.items()})
    assert entries["sasl.jaas.config"].is_sensitive and entries["sasl.jaas.config"].value is None
    assert (
        entries["ssl.keystore.password"].is_sensitive
        and not entries["ssl.keystore.location"].is_sensitive
    )


def test_oauthbearer_with_unsecured_jwts(sasl_broker):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import AbstractTokenProvider
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider as KPTokenProvider

    topic = topic_name("oauth")
    create_topic(sasl_broker.bootstrap, topic)
    bootstrap = f"127.0.0.1:{sasl_broker.sasl_port}"
    # librdkafka makes its own unsecured token from sasl.oauthbearer.config.
    rdk = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": "principal=alice",
    }
    assert _round_trip(rdk, topic) == [b"v%d" % i for i in range(5)]
    kcat_auth = [
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=OAUTHBEARER",
        "-X",
        "enable.sasl.oauthbearer.unsecure.jwt=true",
        "-X",
        "sasl.oauthbearer.config=principal=carol",
    ]
    kcat(bootstrap, *kcat_auth, "-P", "-t", topic, input=b"from kcat\n")

    class Token(KPTokenProvider):
        def __init__(self, lifetime_s: float) -> None:
            self.lifetime_s = lifetime_s

        def token(self) -> str:
            return unsecured_jwt("bob", self.lifetime_s)

    common = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
    }
    p = KafkaProducer(**common, sasl_oauth_token_provider=Token(3600))
    p.send(topic, b"from kafka-python").get(timeout=30)
    p.close()
    # An expired token gets RFC 7628's error challenge; the client's %x01 then ends the
    # exchange with the reason, and the connection closes.
    w = _Wire(sasl_broker.sasl_port)
    assert w.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
    first = f"n,,\x01auth=Bearer {Token(-60).token()}\x01\x01".encode()
    r = w.call(SaslAuthenticateRequest(auth_bytes=first), 1)
    assert (r.error_code, bytes(r.auth_bytes)) == (0, b'{"status":"invalid_token"}')
    r = w.call(SaslAuthenticateRequest(auth_bytes=b"\x01"), 1)
    assert r.error_code == 58 and "expired" in r.error_message
    assert w.closed()

    class AioToken(AbstractTokenProvider):
        async def token(self) -> str:
            return unsecured_jwt("dora")

    async def aio() -> list[bytes]:
        c = AIOKafkaConsumer(
            topic, **common, sasl_oauth_token_provider=AioToken(), auto_offset_reset="earliest"
        )
        await c.start()
        try:
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 7 and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=1000)).values():
                    got.extend(r.value for r in records)
            return got
        finally:
            await c.stop()

    assert asyncio.run(aio())[5:] == [b"from kcat", b"from kafka-python"]


def test_reauthentication_kip_368(broker_factory):
    """connections.max.reauth.ms: librdkafka re-authenticates on its own before the
    session ends; a connection that does not is closed at its next request; a
    re-authentication must prove the same principal."""
    from kafka import KafkaAdminClient
    from kafka.admin import AlterConfigOp, ConfigResourceType
    from kafka.admin import ConfigResource as KPConfigResource

    b = broker_factory(start=False)
    sasl_port = b.sasl_port = free_port()
    b.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
            "connections.max.reauth.ms": "1500",
            "listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms": "60000",
        }
    )
    b.start()
    # The request log shows each SaslHandshake.
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    logger = KPConfigResource(
        ConfigResourceType.BROKER_LOGGER,
        "0",
        configs={"kafka.request.logger": (AlterConfigOp.SET, "DEBUG")},
    )
    assert a.alter_configs([logger], incremental=True) == {"broker_logger": {"0": "OK"}}
    a.close()
    topic = topic_name("reauth")
    create_topic(b.bootstrap, topic)

    # librdkafka: the session lasts 1.5 s, the client keeps producing for 5 s.
    conf = _sasl(b, "PLAIN", "alice", "alice-secret")
    errors: list[KafkaError] = []
    p = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 5
    sent = 0
    while time.monotonic() < deadline:
        p.produce(topic, b"%d" % sent)
        sent += 1
        p.poll(0.05)
    assert p.flush(30) == 0 and not errors, errors
    wait_until(
        lambda: b.log_text().count("apiKey:SaslHandshake") >= 4,
        message="re-authentications in the request log",
    )

    def authenticate(w: _Wire, user: str) -> int:
        assert w.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = w.call(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{user}-secret".encode()), 2)
        assert r.error_code == 0, r
        return r.session_lifetime_ms

    # A client that does not re-authenticate: its next request after the session closes it.
    w = _Wire(sasl_port)
    assert authenticate(w, "alice") == 1500
    assert w.call(MetadataRequest(topics=None), 1).brokers
    time.sleep(1.6)
    w.sock.sendall(
        encode_request(
            RequestHeader(api_key=3, api_version=1, correlation_id=99, client_id="t"),
            MetadataRequest(topics=None),
        )
    )
    assert w.closed()
    # Re-authenticating in time keeps the connection; as someone else it fails.
    w = _Wire(sasl_port)
    assert authenticate(w, "alice") == 1500
    time.sleep(1.0)
    assert authenticate(w, "alice") == 1500
    time.sleep(1.0)
    assert w.call(MetadataRequest(topics=None), 1).brokers
    assert w.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    r = w.call(SaslAuthenticateRequest(auth_bytes=b"\0admin\0admin-secret"), 2)
    assert r.error_code == 58 and "Cannot change principals" in r.error_message
    assert w.closed()
    # OAUTHBEARER: the session ends with the token when that is sooner than the mechanism's 60 s.
    w = _Wire(sasl_port)
    assert w.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
    r = w.call(
        SaslAuthenticateRequest(
            auth_bytes=f"n,,\x01auth=Bearer {unsecured_jwt('dora', 20)}\x01\x01".encode()
        ),
        2,
    )
    assert r.error_code == 0 and 15_000 < r.session_lifetime_ms <= 20_000
