"""The schema registry's security on a real broker: an https:// listener with the broker's
PEM keystore and basic authentication against the broker's SCRAM users (confluent-kafka's
SchemaRegistryClient over TLS with basic.auth.user.info; a wrong password or none answers 401
and stores nothing)."""

from __future__ import annotations

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

from tests.integration.conftest import BrokerProcess
from tests.integration.tls import make_pki
from tests.support.ports import free_port
from tests.support.waiting import wait_until


def test_https_with_basic_auth_against_scram_users(tmp_path):
    (tmp_path / "pki").mkdir()
    pki = make_pki(str(tmp_path / "pki"))
    port = free_port()
    b = BrokerProcess(
        str(tmp_path),
        {
            "schema.registry.listeners": f"https://127.0.0.1:{port}",
            "schema.registry.authentication": "basic",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["server.pem"],
        },
    )
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret"
        )
        for fut in admin.alter_user_scram_credentials([upsert]).values():
            fut.result(10)
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
    finally:
        b.kill()
