"""The offline replicas of topics' partitions, from one Metadata request (v5+) sent through
the sans-IO codec of :mod:`logstore.protocol`: librdkafka's metadata does not carry
Kafka's ``offline_replicas`` (the replicas on a dead broker or in a failed log dir).

The request goes to the first bootstrap server of ``--brokers`` that answers, set up as
the command's other connections are, from the librdkafka configuration of
:meth:`ClientOptions.config` (so ``-X`` overrides count):

- TCP with ``--timeout`` for the connect and for each answer;
- TLS for SSL and SASL_SSL (Python's :mod:`ssl`): ``ssl.ca.location`` (else the
  system's CAs), ``ssl.certificate.location`` / ``ssl.key.location`` /
  ``ssl.key.password`` for a client certificate, the host name checked unless
  ``ssl.endpoint.identification.algorithm=none``, the certificate unless
  ``enable.ssl.certificate.verification=false``;
- ApiVersions (the spark client's connection), then for SASL_PLAINTEXT and SASL_SSL a
  SaslHandshake v1 and SaslAuthenticate exchange: PLAIN (RFC 4616) or
  SCRAM-SHA-256/512 (RFC 5802, RFC 7677);
- Metadata for the topics named (``cluster health``: every topic), at the highest
  version both sides serve, never auto-creating a topic.

:func:`first_answer` runs any such exchange on the first server that answers (``cluster
health`` adds a DescribeConfigs on the same connection).

A broker that serves no Metadata v5 (Kafka before 1.0) cannot say: its topics map to
None (unknown), as do topics its answer lists with an error. A server that cannot be
reached, breaks the protocol or answers without brokers (just started) is skipped for
the next; when none answers the result is :class:`CliError` with exit status 2, and a
refused authentication one with exit status 1.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import socket
import ssl
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from logstore.cli.common import EXIT_FAILED, EXIT_USAGE, CliError
from logstore.cli.connection import ClientOptions
from logstore.protocol import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.metadata import MetadataRequest, MetadataResponse
from logstore.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from logstore.spark.kafka_client.connection import _BrokerConnection
from logstore.spark.kafka_client.errors import (
    BrokerUnavailable,
    KafkaClientError,
    UnsupportedVersion,
)
from logstore.spark.kafka_client.metadata import _parse_bootstrap

FIRST_VERSION_WITH_OFFLINE_REPLICAS = 5
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
SCRAM_MIN_ITERATIONS = 4096  # Kafka's client refuses fewer
DEFAULT_PORT = 9092
_NULL_UUID = uuid.UUID(int=0)
T = TypeVar("T")

OfflineReplicas = dict[str, dict[int, list[int]] | None]
"""topic -> (partition -> broker ids of its offline replicas), None when unknown."""


class AuthenticationFailed(CliError):
    """The broker refused the SASL mechanism or the credentials (exit status 1)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_FAILED)


def offline_replicas(options: ClientOptions, topics: list[str]) -> OfflineReplicas:
    """Each topic's partitions' offline replicas, as one bootstrap server answers."""

    def exchange(connection: _BrokerConnection) -> MetadataResponse | None:
        if connection.versions[ApiKey.METADATA] < FIRST_VERSION_WITH_OFFLINE_REPLICAS:
            return None
        return answered_metadata(connection, topics)

    response = first_answer(options, "offline replicas", exchange, unsupported=None)
    return dict.fromkeys(topics) if response is None else offline_by_topic(response, topics)


def first_answer(
    options: ClientOptions,
    what: str,
    exchange: Callable[[_BrokerConnection], T],
    unsupported: T,
) -> T:
    """``exchange(connection)`` with the first bootstrap server of ``options`` that can be
    reached and answers it; ``unsupported`` when that server serves too old a protocol.
    A server whose exchange fails (KafkaClientError, :class:`NotReady`) is skipped for the
    next; CliError (exit status 2) naming ``what`` (a prefix, may be empty) and every
    failure when none answers."""
    conf = options.config()
    failures: list[str] = []
    for host, port in bootstrap_servers(str(conf["bootstrap.servers"])):
        try:
            connection = connect(conf, host, port, options.timeout)
        except UnsupportedVersion:
            return unsupported
        except KafkaClientError as exc:
            failures.append(str(exc))
            continue
        try:
            return exchange(connection)
        except (KafkaClientError, NotReady) as exc:
            failures.append(str(exc))
        finally:
            connection.close()
    raise CliError(
        f"{what}{': ' if what else ''}no broker of {options.brokers} answered Metadata: "
        + "; ".join(failures),
        EXIT_USAGE,
    )


class NotReady(Exception):
    """A server answered, but not usefully yet (e.g. Metadata without brokers)."""


def answered_metadata(connection: _BrokerConnection, topics: list[str] | None) -> MetadataResponse:
    """Metadata for ``topics`` (None: every topic) at the negotiated version; NotReady
    when the answer lists no brokers (a broker that just started)."""
    response = connection.request(ApiKey.METADATA, metadata_request(topics))
    assert isinstance(response, MetadataResponse)
    if not response.brokers:
        raise NotReady(f"{connection.address} answered Metadata without brokers (just started?)")
    return response


def bootstrap_servers(servers: str) -> list[tuple[str, int]]:
    """librdkafka's ``bootstrap.servers``: ``[proto://]host[:port],...`` (port 9092 when
    left out) as (host, port) pairs; CliError when one is not an address."""
    items = []
    for item in servers.split(","):
        address = item.strip().rpartition("://")[2]
        if address and (":" not in address or address.endswith("]")):
            address = f"{address}:{DEFAULT_PORT}"
        items.append(address)
    try:
        return _parse_bootstrap(",".join(items))
    except ValueError as exc:
        raise CliError(f"--brokers {servers!r}: {exc}") from None


def metadata_request(topics: list[str] | None) -> MetadataRequest:
    """Metadata for ``topics`` (None: every topic), never creating one."""
    return MetadataRequest(
        topics=None
        if topics is None
        else [MetadataRequest.MetadataRequestTopic(topic_id=_NULL_UUID, name=t) for t in topics],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def offline_by_topic(response: MetadataResponse, topics: list[str]) -> OfflineReplicas:
    out: OfflineReplicas = dict.fromkeys(topics)
    for t in response.topics:
        if t.name in out and t.error_code == 0:
            out[t.name] = {p.partition_index: list(p.offline_replicas) for p in t.partitions}
    return out


def connect(conf: dict[str, Any], host: str, port: int, timeout: float) -> _BrokerConnection:
    """A connection to ``host:port`` set up as ``conf`` says (TLS, ApiVersions, SASL);
    BrokerUnavailable when it cannot be made, AuthenticationFailed when refused."""
    protocol = str(conf["security.protocol"]).upper()
    client_id = str(conf.get("client.id", "logstore-cli"))
    sock = None
    if protocol in ("SSL", "SASL_SSL"):
        sock = tls_socket(tls_context(conf), host, port, timeout)
    connection = _BrokerConnection(host, port, client_id, timeout, sock=sock)
    if protocol.startswith("SASL"):
        try:
            authenticate(
                connection,
                str(conf["sasl.mechanism"]).upper(),
                str(conf["sasl.username"]),
                str(conf["sasl.password"]),
            )
        except BaseException:
            connection.close()
            raise
    return connection


def tls_context(conf: dict[str, Any]) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=conf.get("ssl.ca.location"))
        if conf.get("ssl.certificate.location"):
            context.load_cert_chain(
                conf["ssl.certificate.location"],
                conf.get("ssl.key.location"),
                conf.get("ssl.key.password"),
            )
    except (OSError, ssl.SSLError) as exc:
        raise CliError(f"TLS configuration: {exc}") from None
    if str(conf.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        context.check_hostname = False
    if str(conf.get("enable.ssl.certificate.verification", "true")).lower() == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def tls_socket(context: ssl.SSLContext, host: str, port: int, timeout: float) -> ssl.SSLSocket:
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise BrokerUnavailable(f"cannot connect to {host}:{port}: {exc}") from exc
    try:
        return context.wrap_socket(raw, server_hostname=host)
    except OSError as exc:  # ssl.SSLError and its certificate errors included
        raw.close()
        raise BrokerUnavailable(f"TLS handshake with {host}:{port}: {exc}") from exc


def authenticate(
    connection: _BrokerConnection, mechanism: str, username: str, password: str
) -> None:
    """SaslHandshake v1 naming ``mechanism``, then SaslAuthenticate until the exchange
    completes; AuthenticationFailed for a refusal or a server that fails its proof."""
    if mechanism == "PLAIN":
        client: PlainClient | ScramClient = PlainClient(username, password)
    elif mechanism in SCRAM_HASHES:
        client = ScramClient(mechanism, username, password)
    else:
        raise CliError(
            f"sasl.mechanism {mechanism}: offline replicas are read with PLAIN, "
            + ", ".join(SCRAM_HASHES)
        )
    where = f"SASL {mechanism} to {connection.address}"
    handshake = negotiated_version(connection, ApiKey.SASL_HANDSHAKE)
    authenticate_version = negotiated_version(connection, ApiKey.SASL_AUTHENTICATE)
    if handshake < 1 or authenticate_version < 0:
        raise AuthenticationFailed(f"{where}: the broker serves no SaslHandshake v1")
    response = connection.request(
        ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest(mechanism=mechanism), version=handshake
    )
    if response.error_code != 0:
        raise AuthenticationFailed(
            f"{where}: {_code(response.error_code)} "
            f"(the broker enables {', '.join(response.mechanisms) or 'none'})"
        )
    token: bytes | None = client.evaluate(b"")
    while token is not None:
        answer = connection.request(
            ApiKey.SASL_AUTHENTICATE,
            SaslAuthenticateRequest(auth_bytes=token),
            version=authenticate_version,
        )
        if answer.error_code != 0:
            detail = f": {answer.error_message}" if answer.error_message else ""
            raise AuthenticationFailed(f"{where}: {_code(answer.error_code)}{detail}")
        try:
            token = client.evaluate(answer.auth_bytes or b"")
        except ValueError as exc:
            raise AuthenticationFailed(f"{where}: {exc}") from None
    if not client.complete:
        raise AuthenticationFailed(f"{where}: the exchange ended before completing")


def negotiated_version(connection: _BrokerConnection, api_key: ApiKey) -> int:
    """The highest version of ``api_key`` both sides serve, -1 when none."""
    low, high = connection.api_ranges.get(int(api_key), (0, -1))
    version = min(api_key.max_version, high)
    return version if version >= max(low, api_key.min_version) else -1


def _code(code: int) -> str:
    try:
        return f"{ErrorCode(code).name} ({code})"
    except ValueError:
        return f"error code {code}"


class PlainClient:
    """SASL/PLAIN: one message ``NUL user NUL password``, answered with nothing."""

    def __init__(self, username: str, password: str) -> None:
        self._message: bytes | None = f"\0{username}\0{password}".encode()
        self.complete = False

    def evaluate(self, challenge: bytes) -> bytes | None:
        message, self._message = self._message, None
        if message is None:
            self.complete = True
        return message


class ScramClient:
    """One SCRAM exchange (RFC 5802 without channel binding, ``gs2-header`` ``n,,``):

    client-first ``n,,n=<user>,r=<nonce>``; server-first ``r=<nonce+server's>,s=<salt
    b64>,i=<iterations>``; client-final ``c=biws,r=<nonce>,p=<proof b64>`` where
    proof = ClientKey XOR HMAC(H(ClientKey), AuthMessage), ClientKey = HMAC(SaltedPassword,
    "Client Key"), SaltedPassword = PBKDF2(password, salt, iterations); server-final
    ``v=<HMAC(HMAC(SaltedPassword, "Server Key"), AuthMessage) b64>`` or ``e=<error>``.
    Any deviation is a ValueError."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._hash = SCRAM_HASHES[mechanism]
        self._password = password.encode()
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={name},r={secrets.token_urlsafe(24)}"
        self._nonce = self._first_bare.rpartition(",r=")[2]
        self._step = 0
        self._server_signature = b""
        self.complete = False

    def evaluate(self, challenge: bytes) -> bytes | None:
        self._step += 1
        if self._step == 1:
            return ("n,," + self._first_bare).encode()
        try:
            message = challenge.decode()
        except UnicodeDecodeError:
            raise ValueError("SCRAM server message is not UTF-8") from None
        if self._step == 2:
            return self._final(message)
        self._verify(message)
        return None

    def _final(self, server_first: str) -> bytes:
        attrs = dict(part.partition("=")[::2] for part in server_first.split(","))
        nonce = attrs.get("r", "")
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise ValueError("SCRAM server nonce does not extend the client's")
        try:
            salt = base64.b64decode(attrs.get("s", ""), validate=True)
            iterations = int(attrs.get("i", ""))
        except (binascii.Error, ValueError):
            raise ValueError("SCRAM server-first message has a bad salt or count") from None
        if iterations < SCRAM_MIN_ITERATIONS:
            raise ValueError(f"SCRAM iteration count {iterations} < {SCRAM_MIN_ITERATIONS}")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._server_signature = hmac.digest(server_key, auth_message, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, server_final: str) -> None:
        if server_final.startswith("e="):
            raise ValueError(f"SCRAM server error: {server_final[2:]}")
        try:
            signature = base64.b64decode(server_final.removeprefix("v="), validate=True)
        except binascii.Error:
            signature = b""
        if not server_final.startswith("v=") or not hmac.compare_digest(
            signature, self._server_signature
        ):
            raise ValueError("SCRAM server signature does not match: the server is not proven")
        self.complete = True
