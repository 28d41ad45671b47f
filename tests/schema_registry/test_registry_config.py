"""The registry's pure pieces around the wire: broker keys refused in Kafka's words, the
listener and bootstrap parsers, the primary's election (hypothesis: every member gets the
same assignment naming the lowest eligible URL) and basic auth against SCRAM credentials."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.security.sasl.scram_credentials import ScramCredential as BrokerCredential
from logstore.schema_registry import errors
from logstore.schema_registry.auth import BasicAuthenticator, ScramCredential
from logstore.schema_registry.election_protocol import Assignment, Identity, choose_primary
from logstore.schema_registry.server import ListenerError, parse_bootstrap, parse_listener


@pytest.mark.parametrize(
    "key, value, message",
    [
        (
            "schema.registry.listeners",
            "ftp://h:1",
            "Invalid value ftp://h:1 for configuration schema.registry.listeners: "
            "expected http://HOST:PORT or https://HOST:PORT",
        ),
        (
            "schema.registry.listeners",
            "http://h:70000",
            "Invalid value http://h:70000 for configuration schema.registry.listeners: "
            "port 70000 is out of range",
        ),
        (
            "schema.registry.authentication",
            "digest",
            "Invalid value digest for configuration schema.registry.authentication: "
            "String must be one of (case insensitive): none, basic",
        ),
    ],
)
def test_registry_keys_are_refused_in_kafkas_words(key, value, message):
    with pytest.raises(ConfigError) as e:
        BrokerConfig({key: value})
    assert str(e.value) == message


def test_registry_keys_defaults():
    c = BrokerConfig({})
    assert c["schema.registry.listeners"] is None
    assert c["schema.registry.authentication"] == "none"
    assert c["schema.registry.topic.replication.factor"] == 3
    assert (
        BrokerConfig({"schema.registry.listeners": "https://[::1]:8081"})[
            "schema.registry.listeners"
        ]
        == "https://[::1]:8081"
    )


def test_listener_and_bootstrap_parsers():
    assert parse_listener("http://0.0.0.0:8081") == ("http", "0.0.0.0", 8081)
    assert parse_listener("https://reg.example:443/") == ("https", "reg.example", 443)
    for bad in ("http://h", "tcp://h:1", "http://h:1/path", "http://h:x"):
        with pytest.raises(ListenerError):
            parse_listener(bad)
    assert parse_bootstrap("a:1, SASL_SSL://b:2,[::1]:3") == [("a", 1), ("b", 2), ("::1", 3)]


IDENTITIES = st.builds(
    Identity,
    st.sampled_from(["a", "b", "10.0.0.1"]),
    st.integers(1, 65535),
    st.sampled_from(["http", "https"]),
    st.booleans(),
)


@given(st.lists(st.tuples(st.uuids().map(str), IDENTITIES), min_size=1, max_size=6))
def test_every_member_gets_the_same_primary_the_lowest_eligible_url(members):
    plan = choose_primary([(m, ident.encode()) for m, ident in members])
    assert set(plan) == {m for m, _ in members}
    assert len(set(plan.values())) == 1
    a = Assignment.decode(next(iter(plan.values())))
    eligible = [(i.url, m) for m, i in members if i.eligible] or [(i.url, m) for m, i in members]
    assert (a.primary.url, a.primary_member) == min(eligible)
    assert a.primary == dict(members)[a.primary_member]


def test_member_metadata_is_confluents_json():
    raw = Identity("h", 8081).encode()
    assert raw == (
        b'{"version":1,"host":"h","port":8081,"scheme":"http","master_eligibility":true}'
    )
    assert Identity.decode(b'{"host":"k","port":1,"leader_eligibility":false}') == Identity(
        "k", 1, "http", False
    )


def test_basic_auth_against_scram_credentials():
    stored = BrokerCredential.from_password("SCRAM-SHA-512", "s3cret", 4096)
    creds = {"alice": [ScramCredential("SCRAM-SHA-512", stored.salt, 4096, stored.stored_key)]}
    now = [0.0]
    auth = BasicAuthenticator(lambda u: creds.get(u, []), lambda: now[0], cache_s=60)

    def header(user_pass: str) -> str:
        return "Basic " + base64.b64encode(user_pass.encode()).decode()

    assert auth.authenticate(header("alice:s3cret")) == "alice"
    for bad in (header("alice:wrong"), header("bob:s3cret"), header("nocolon"), "Bearer x", None):
        with pytest.raises(errors.UnauthorizedError):
            auth.authenticate(bad)
    creds.clear()  # a remembered password holds for cache_s, then is checked again
    assert auth.authenticate(header("alice:s3cret")) == "alice"
    now[0] = 61.0
    with pytest.raises(errors.UnauthorizedError):
        auth.authenticate(header("alice:s3cret"))
