"""SASL on the broker side: PLAIN and SCRAM servers, the authenticator's states, the
JAAS parser, the SCRAM credential store and the listener configs."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.security.sasl import jaas, scram_sasl_server
from broker_py.security.sasl.plain_sasl_server import PlainSaslServer
from broker_py.security.sasl.sasl_authenticator import SaslServerAuthenticator
from broker_py.security.sasl.scram_credentials import HASHES, ScramCredential, ScramCredentialStore
from broker_py.security.sasl.scram_sasl_server import ScramSaslServer
from logstore.protocol.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)


def _store(
    tmp_path, mechanism="SCRAM-SHA-256", user="user", password="pencil", salt=None, iterations=4096
):
    store = ScramCredentialStore(str(tmp_path))
    store.apply(
        [(user, mechanism, ScramCredential.from_password(mechanism, password, iterations, salt))],
        [],
    )
    return store


def test_scram_sha_256_matches_the_rfc_7677_exchange(tmp_path, monkeypatch):
    store = _store(tmp_path, salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    monkeypatch.setattr(
        scram_sasl_server.secrets, "token_urlsafe", lambda n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    server = ScramSaslServer("SCRAM-SHA-256", store)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert (
        first
        == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"
    with pytest.raises(SaslAuthenticationFailedError):
        server.evaluate(b"n,,n=user,r=again")


def _client_final(mechanism, password, client_first_bare, server_first, gs2=b"n,,"):
    attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
    h = HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(
        h, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", h)
    without_proof = f"c={base64.b64encode(gs2).decode()},r={attrs['r']}"
    auth_message = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.digest(hashlib.new(h, client_key).digest(), auth_message, h)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_accepts_the_password_and_refuses_others(tmp_path, mechanism):
    store = _store(tmp_path, mechanism, user="a,b=c", password="s3cret")
    bare = "n=a=2Cb=3Dc,r=nonce1"
    ok = ScramSaslServer(mechanism, store)
    server_first = ok.evaluate(f"n,,{bare}".encode())
    assert ok.evaluate(_client_final(mechanism, "s3cret", bare, server_first)).startswith(b"v=")
    assert ok.authorization_id == "a,b=c"
    bad = ScramSaslServer(mechanism, store)
    server_first = bad.evaluate(f"n,,{bare}".encode())
    with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
        bad.evaluate(_client_final(mechanism, "wrong", bare, server_first))
    assert not bad.complete


@pytest.mark.parametrize(
    "first",
    [
        b"n,,n=nobody,r=x",  # no credential
        b"p=tls-unique,,n=user,r=x",  # channel binding
        b"n,a=other,n=user,r=x",  # authorization id of another user
        b"n,,n=user,r=x,tokenauth=true",  # delegation token
        b"n,,r=x",  # no user
        b"\xff",
    ],
)
def test_scram_refuses_bad_first_messages(tmp_path, first):
    with pytest.raises(SaslAuthenticationFailedError):
        ScramSaslServer("SCRAM-SHA-256", _store(tmp_path)).evaluate(first)


def test_scram_refuses_a_final_message_with_another_nonce_or_binding(tmp_path):
    store = _store(tmp_path)
    for tamper in (lambda m: m.replace(b"r=", b"r=X"), lambda m: m.replace(b"c=biws", b"c=eSws")):
        server = ScramSaslServer("SCRAM-SHA-256", store)
        server_first = server.evaluate(b"n,,n=user,r=abc")
        with pytest.raises(SaslAuthenticationFailedError):
            server.evaluate(
                tamper(_client_final("SCRAM-SHA-256", "pencil", "n=user,r=abc", server_first))
            )


def test_plain_checks_user_password_and_authorization_id():
    users = {"alice": "alice-secret"}
    ok = PlainSaslServer(users)
    assert ok.evaluate(b"\0alice\0alice-secret") == b"" and ok.authorization_id == "alice"
    assert PlainSaslServer(users).evaluate(b"alice\0alice\0alice-secret") == b""
    for bad in (
        b"\0alice\0nope",
        b"\0bob\0alice-secret",
        b"bob\0alice\0alice-secret",
        b"alice-secret",
        b"\0\0x",
        b"\0alice\0",
    ):
        with pytest.raises(SaslAuthenticationFailedError):
            PlainSaslServer(users).evaluate(bad)


def test_authenticator_states():
    auth = SaslServerAuthenticator(["PLAIN"], lambda m: PlainSaslServer({"u": "p"}))
    with pytest.raises(IllegalSaslStateError):
        auth.authenticate(b"\0u\0p")
    auth.handshake("PLAIN")
    with pytest.raises(IllegalSaslStateError):
        auth.handshake("PLAIN")
    assert auth.authenticate(b"\0u\0p") == b"" and auth.authenticated and auth.principal == "u"
    other = SaslServerAuthenticator(["PLAIN"], lambda m: PlainSaslServer({}))
    with pytest.raises(UnsupportedSaslMechanismError):
        other.handshake("GSSAPI")
    raw = SaslServerAuthenticator(["PLAIN"], lambda m: PlainSaslServer({"u": "p"}))
    raw.handshake("PLAIN", version=0)
    assert raw.raw_tokens
    raw.authenticate(b"\0u\0p")
    assert raw.authenticated and not raw.raw_tokens


def test_jaas_parses_kafkas_login_module_lines():
    m = jaas.parse(
        "k",
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="a\\"b" user_admin="x" user_bob=y;',
    )
    assert m.class_name.endswith("PlainLoginModule") and m.flag == "required"
    assert m.options == {"username": "admin", "password": 'a"b', "user_admin": "x", "user_bob": "y"}
    for bad in ("PlainLoginModule", "X required a=;", "X sometimes a=b;", 'X required a="b"'):
        with pytest.raises(ConfigError) as e:
            jaas.parse("listener.name.x.plain.sasl.jaas.config", bad)
        assert e.value.key == "listener.name.x.plain.sasl.jaas.config"
        assert bad not in str(e.value)  # the value may hold passwords


def test_scram_credentials_persist_and_delete(tmp_path):
    store = _store(tmp_path, "SCRAM-SHA-512", user="u")
    again = ScramCredentialStore(str(tmp_path))
    assert again.get("u", "SCRAM-SHA-512") == store.get("u", "SCRAM-SHA-512")
    assert again.describe() == {"u": {"SCRAM-SHA-512": 4096}}
    again.apply([], [("u", "SCRAM-SHA-512")])
    assert ScramCredentialStore(str(tmp_path)).describe() == {}


def test_listener_security_configs_are_checked_at_startup():
    sasl = {"listeners": "SASL_PLAINTEXT://127.0.0.1:9093"}
    assert BrokerConfig(sasl).security_protocol("SASL_PLAINTEXT") == "SASL_PLAINTEXT"
    assert BrokerConfig({"listeners": "SSL://127.0.0.1:9093"}).security_protocol("SSL") == "SSL"
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"listeners": "INTERNAL://127.0.0.1:9093"})
    assert e.value.key == "listener.security.protocol.map"
    with pytest.raises(ConfigError) as e:
        BrokerConfig(sasl).sasl_mechanisms(
            "SASL_PLAINTEXT"
        )  # Kafka's default, GSSAPI, is not served
    assert e.value.key == "sasl.enabled.mechanisms"
    c = BrokerConfig(
        {
            **sasl,
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "scram-sha-512",
            "sasl.enabled.mechanisms": "PLAIN",
        }
    )
    assert c.sasl_mechanisms("SASL_PLAINTEXT") == ["SCRAM-SHA-512"]
    assert "listener.name.sasl_plaintext.sasl.enabled.mechanisms" not in c.unknown
    c = BrokerConfig({**sasl, "sasl.jaas.config": "X required;"})
    assert c.jaas_config("SASL_PLAINTEXT", "PLAIN") == ("sasl.jaas.config", "X required;")
    c = BrokerConfig(
        {
            **sasl,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": "Y required;",
            "sasl.jaas.config": "X required;",
        }
    )
    assert c.jaas_config("SASL_PLAINTEXT", "PLAIN") == (
        "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        "Y required;",
    )


def test_alter_user_scram_credentials_checks_each_user_alone(tmp_path):
    from types import SimpleNamespace

    from broker_py.server.handlers.sasl import (
        handle_alter_user_scram_credentials,
        handle_describe_user_scram_credentials,
    )
    from logstore.protocol.messages.scram import AlterUserScramCredentialsRequest as Alter
    from logstore.protocol.messages.scram import DescribeUserScramCredentialsRequest as Describe

    def up(name, mechanism=1, iterations=4096):
        return Alter.ScramCredentialUpsertion(
            name=name,
            mechanism=mechanism,
            iterations=iterations,
            salt=b"s",
            salted_password=b"p" * 32,
        )

    broker = SimpleNamespace(scram_credentials=ScramCredentialStore(str(tmp_path)))
    body = Alter(
        deletions=[Alter.ScramCredentialDeletion(name="gone", mechanism=1)],
        upsertions=[
            up("twice"),
            up("twice"),
            up(""),
            up("odd", mechanism=9),
            up("few", iterations=10),
            up("ok", mechanism=2, iterations=8192),
        ],
    )
    r = handle_alter_user_scram_credentials(broker, SimpleNamespace(body=body), None)
    assert {x.user: x.error_code for x in r.results} == {
        "gone": 91,
        "twice": 92,
        "": 93,
        "odd": 33,
        "few": 93,
        "ok": 0,
    }
    assert broker.scram_credentials.describe() == {"ok": {"SCRAM-SHA-512": 8192}}
    d = handle_describe_user_scram_credentials(
        broker,
        SimpleNamespace(
            body=Describe(users=[Describe.UserName(name="ok"), Describe.UserName(name="nobody")])
        ),
        None,
    )
    assert [
        (x.user, x.error_code, [(c.mechanism, c.iterations) for c in x.credential_infos])
        for x in d.results
    ] == [
        ("ok", 0, [(2, 8192)]),
        ("nobody", 91, []),
    ]


# ---- OAUTHBEARER (unsecured JWTs) ----


def _jwt(claims: dict, header: dict | None = None) -> str:
    import json

    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part(header or {'alg': 'none'})}.{part(claims)}."


def _first_message(token: str, authzid: str = "", extensions: str = "") -> bytes:
    gs2_header = f"n,{'a=' + authzid if authzid else ''},"
    return f"{gs2_header}\x01auth=Bearer {token}\x01{extensions}\x01".encode()


NOW = 1_800_000_000.0


def _oauth(**options):
    from broker_py.security.sasl.oauthbearer_sasl_server import (
        OAuthBearerSaslServer,
        UnsecuredValidatorOptions,
    )

    return OAuthBearerSaslServer(
        UnsecuredValidatorOptions.from_jaas_options(options), clock=lambda: NOW
    )


def test_oauthbearer_accepts_an_unsecured_token_and_its_principal():
    server = _oauth()
    token = _jwt({"sub": "alice", "exp": NOW + 60, "iat": NOW - 1})
    assert server.evaluate(_first_message(token, extensions="traceId=abc\x01")) == b""
    assert server.complete and server.authorization_id == "alice"
    server = _oauth(unsecuredValidatorPrincipalClaimName="user")
    assert (
        server.evaluate(_first_message(_jwt({"user": "bob", "exp": NOW + 60}), authzid="bob"))
        == b""
    )
    assert server.authorization_id == "bob"


@pytest.mark.parametrize(
    "claims,header,reason",
    [
        ({"sub": "alice", "exp": NOW - 1}, None, "expired"),
        ({"sub": "alice"}, None, "no 'exp'"),
        ({"sub": "alice", "exp": "soon"}, None, "not a number"),
        ({"sub": "alice", "exp": NOW + 60, "iat": NOW + 60}, None, "in the future"),
        ({"exp": NOW + 60}, None, "principal claim"),
        ({"sub": "alice", "exp": NOW + 60}, {"alg": "HS256"}, "alg none"),
    ],
)
def test_oauthbearer_refuses_an_invalid_token_after_an_error_challenge(claims, header, reason):
    server = _oauth()
    challenge = server.evaluate(_first_message(_jwt(claims, header)))
    assert challenge == b'{"status":"invalid_token"}' and not server.complete
    with pytest.raises(SaslAuthenticationFailedError, match=reason):
        server.evaluate(b"\x01")


def test_oauthbearer_required_scope_clock_skew_and_malformed_messages():
    server = _oauth(unsecuredValidatorRequiredScope="read write")
    challenge = server.evaluate(
        _first_message(_jwt({"sub": "a", "exp": NOW + 60, "scope": "read"}))
    )
    assert challenge == b'{"status":"insufficient_scope","scope":"read write"}'
    assert (
        _oauth(unsecuredValidatorRequiredScope="read").evaluate(
            _first_message(_jwt({"sub": "a", "exp": NOW + 60, "scope": ["read", "x"]}))
        )
        == b""
    )
    assert (
        _oauth(unsecuredValidatorAllowableClockSkewMs="5000").evaluate(
            _first_message(_jwt({"sub": "a", "exp": NOW - 2}))
        )
        == b""
    )
    with pytest.raises(SaslAuthenticationFailedError, match="authorization id"):
        _oauth().evaluate(
            _first_message(_jwt({"sub": "alice", "exp": NOW + 60}), authzid="mallory")
        )
    for bad in (
        b"",
        b"\xff",
        b"n,,auth=Bearer x\x01\x01",
        b"y,,\x01auth=Bearer x\x01\x01",
        b"n,,\x01auth=Basic x\x01\x01",
        b"n,,\x01novalue\x01\x01",
    ):
        with pytest.raises(SaslAuthenticationFailedError):
            _oauth().evaluate(bad)
    with pytest.raises(ValueError, match="unsecuredValidatorAllowableClockSkewMs"):
        _oauth(unsecuredValidatorAllowableClockSkewMs="soon")


def test_oauthbearer_listener_needs_its_login_module(tmp_path):
    from broker_py.security.sasl.authenticator_factory import authenticators

    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER"}
    with pytest.raises(ConfigError) as e:
        authenticators(
            BrokerConfig({**base, "log.dirs": str(tmp_path / "a")}), "SASL_PLAINTEXT", None
        )
    assert e.value.key == "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
    module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
    with pytest.raises(ConfigError) as e:
        authenticators(
            BrokerConfig(
                {
                    **base,
                    "log.dirs": str(tmp_path / "b"),
                    "sasl.jaas.config": module,
                    (
                        "listener.name.sasl_plaintext.oauthbearer."
                        "sasl.server.callback.handler.class"
                    ): "com.example.JwksValidator",
                }
            ),
            "SASL_PLAINTEXT",
            None,
        )
    assert (
        e.value.key == "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
    )
