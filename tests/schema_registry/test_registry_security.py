"""The schema registry's security on a real broker: an https:// listener with the broker's
PEM keystore and basic authentication against the broker's SCRAM users (confluent-kafka's
SchemaRegistryClient over TLS with basic.auth.user.info; a wrong password or none answers 401
and stores nothing); and the election client on the broker's SASL_PLAINTEXT listener (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512; a wrong password refused), with a registry that reaches the
cluster only over SASL becoming the primary and taking a write."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from broker_py.config.kafka_config import BrokerConfig
from broker_py.server.schema_registry_service import _client_config
from logstore.schema_registry.election import GroupElector, _Connection
from logstore.schema_registry.election_protocol import Identity
from logstore.schema_registry.election_sasl import SaslCredentials, SaslFailed
from logstore.schema_registry.registry import SchemaRequest
from logstore.schema_registry.server import RegistryConfig, RegistryServer
from tests.integration.conftest import BrokerProcess
from tests.integration.tls import make_pki
from tests.support.ports import free_port
from tests.support.waiting import wait_until

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret";'
)


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sr-secure")
    (tmp / "pki").mkdir()
    pki = make_pki(str(tmp / "pki"))
    port = free_port()
    b = BrokerProcess(str(tmp))
    b.sasl_port = free_port()
    b.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "schema.registry.listeners": f"https://127.0.0.1:{port}",
            "schema.registry.authentication": "basic",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["server.pem"],
        }
    )
    b.start()
    b.pki, b.registry_port = pki, port
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    upserts = [
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(m, 4096), b"alice-secret")
        for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    for fut in admin.alter_user_scram_credentials(upserts).values():
        fut.result(10)
    yield b
    b.kill()


def test_https_with_basic_auth_against_scram_users(secure_broker):
    pki, port = secure_broker.pki, secure_broker.registry_port
    url = f"https://127.0.0.1:{port}"

    def client(user_info: str | None) -> SchemaRegistryClient:
        conf = {"url": url, "ssl.ca.location": pki["ca.pem"]}
        if user_info:
            conf["basic.auth.user.info"] = user_info
        return SchemaRegistryClient(conf)

    alice = client("alice:alice-secret")

    def registered() -> bool:
        try:
            return alice.register_schema("secure", Schema('"string"', "AVRO")) > 0
        except SchemaRegistryError:
            return False

    wait_until(registered, 60, message="the registry takes alice's writes")
    for bad in ("alice:wrong", None):
        with pytest.raises(SchemaRegistryError) as err:
            client(bad).register_schema("intruder", Schema('"int"', "AVRO"))
        assert (err.value.http_status_code, err.value.error_code) == (401, 401)
    assert alice.get_subjects() == ["secure"]
    # plain http is not served on the https listener
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/subjects", timeout=5).read()


def _sasl_conf(port: int, mechanism: str, user: str, password: str) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def test_the_election_speaks_sasl_and_a_sasl_only_registry_becomes_primary(secure_broker):
    sasl_port = secure_broker.sasl_port

    async def elected(creds: SaslCredentials) -> bool:
        chosen = asyncio.Event()
        elector = GroupElector(
            [("127.0.0.1", sasl_port)],
            Identity("127.0.0.1", 1, "http", True),
            lambda url, primary: chosen.set() if primary else None,
            group=f"sr-{creds.mechanism.lower()}",
            sasl=creds,
        )
        elector.start()
        try:
            await asyncio.wait_for(chosen.wait(), 30)
        finally:
            await elector.stop()
        return True

    async def refused(creds: SaslCredentials) -> str:
        with pytest.raises(SaslFailed) as err:
            await _Connection.open("127.0.0.1", sasl_port, None, 10, creds)
        return str(err.value)

    async def registry_over_sasl() -> int:
        conf = _sasl_conf(sasl_port, "SCRAM-SHA-512", "alice", "alice-secret")
        server = RegistryServer(
            RegistryConfig(
                listener=f"http://127.0.0.1:{free_port()}",
                client_config=conf,
                group="sr-sasl-only",
                topic="_schemas_sasl",
            )
        )
        await server.start()
        try:
            await server.wait_ready(60)
            for _ in range(600):  # the election over SCRAM makes it the primary
                if server.registry.is_primary:
                    break
                await asyncio.sleep(0.1)
            assert server.registry.is_primary
            return await server.registry.register("over-sasl", SchemaRequest('"long"'), None)
        finally:
            await server.stop()

    async def scenario() -> None:
        for mechanism, user, password in (
            ("PLAIN", "admin", "admin-secret"),
            ("SCRAM-SHA-256", "alice", "alice-secret"),
        ):
            assert await elected(SaslCredentials(mechanism, user, password))
        assert "authentication" in await refused(SaslCredentials("SCRAM-SHA-256", "alice", "x"))
        assert "authentication" in await refused(SaslCredentials("PLAIN", "admin", "x"))
        assert await registry_over_sasl() > 0

    asyncio.run(scenario())


def test_a_broker_registry_on_a_sasl_listener_uses_the_listeners_credentials():
    """The broker's registry reaches a SASL-only broker as the broker reaches its peers."""
    scram_jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="broker" password="broker-secret";'
    )
    config = BrokerConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scram_jaas,
            "schema.registry.listeners": "http://127.0.0.1:8081",
        }
    )
    conf, tls = _client_config(config)
    assert tls is None
    assert conf == _sasl_conf(9093, "SCRAM-SHA-512", "broker", "broker-secret")
    assert SaslCredentials.from_client_config(conf) == SaslCredentials(
        "SCRAM-SHA-512", "broker", "broker-secret"
    )
