"""The broker's inter-broker networking against real broker processes and real
sockets: NetworkClient (version negotiation, pipelining, disconnects, timeouts, TLS,
SASL), the controller's ControllerChannelManager and the BrokerToControllerChannelManager.

Where the real broker cannot yet play a part (answering NOT_CONTROLLER, serving lower
versions, answering out of order) a small asyncio server speaks real Kafka frames
through the protocol codec (:class:`FakeBroker`). Every wait is bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.controller.controller_channel_manager import ControllerChannelManager
from broker_py.network.network_client import (
    DisconnectError,
    InterBrokerChannelBuilder,
    NetworkClient,
    RequestTimeoutError,
)
from broker_py.server.broker_to_controller_channel import (
    BrokerToControllerChannelManager,
    has_error,
)
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import SaslAuthenticationFailedError, UnsupportedVersionError
from logstore.protocol.frame import Request, RequestDecoder, encode_response
from logstore.protocol.messages.api_versions import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    api_versions_response,
)
from logstore.protocol.messages.describe_cluster import (
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from logstore.protocol.messages.fetch import FetchRequest
from logstore.protocol.messages.metadata import MetadataRequest, MetadataResponse
from logstore.protocol.messages.topic_admin import CreateTopicsRequest
from logstore.protocol.schema import Message
from tests.integration.clients import topic_name
from tests.integration.conftest import BrokerProcess
from tests.integration.tls import make_pki
from tests.support.ports import free_port

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="bob" password="bob-secret";'
)


def plain_jaas(user: str = "admin", password: str = "admin-secret") -> str:
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{password}" '
        'user_admin="admin-secret" user_alice="alice-secret";'
    )


def run(coro: Awaitable, timeout: float = 60.0):
    """Runs ``coro`` on a fresh event loop, failing the test after ``timeout`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def metadata(*topics: str) -> MetadataRequest:
    return MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
    )


def create_topics(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(name=n, num_partitions=1, replication_factor=-1)
            for n in names
        ],
        timeout_ms=10000,
    )


def long_fetch(topic: str, wait_ms: int) -> FetchRequest:
    """A Fetch (v12, topics by name) at the end of an empty topic: the broker holds it
    ``wait_ms``."""
    partition = FetchRequest.FetchPartition(
        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
    )
    return FetchRequest(
        max_wait_ms=wait_ms,
        min_bytes=1,
        session_id=0,
        session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[partition])],
    )


def plaintext_client(b: BrokerProcess, **kw) -> NetworkClient:
    return NetworkClient("127.0.0.1", b.port, "broker-9-test", **kw)


class FakeBroker:
    """A real listening socket answering Kafka frames through the protocol codec.

    ApiVersions is answered with the codec's ranges, narrowed by ``ranges``
    (api key -> (min, max)); a request above ``ranges[API_VERSIONS]`` gets
    UNSUPPORTED_VERSION in the v0 body, as Kafka answers. Every other request goes to
    ``handler(request)``, each in its own task, and its response (None: no answer) is
    written when the handler returns."""

    def __init__(
        self,
        handler: Callable[[Request], Awaitable[Message | None]],
        ranges: dict[ApiKey, tuple[int, int]] | None = None,
    ) -> None:
        self.handler = handler
        self.ranges = ranges or {}
        self.requests: list[Request] = []
        self.connections = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return "127.0.0.1", self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def _api_versions(self, request: Request) -> bytes:
        low, high = self.ranges.get(
            ApiKey.API_VERSIONS, (ApiKey.API_VERSIONS.min_version, ApiKey.API_VERSIONS.max_version)
        )
        response = api_versions_response(
            error_code=0 if request.api_version <= high else ErrorCode.UNSUPPORTED_VERSION
        )
        for entry in response.api_keys:
            key = ApiKey(entry.api_key)
            if key in self.ranges:
                entry.min_version, entry.max_version = self.ranges[key]
        return encode_response(
            request.correlation_id, ApiKey.API_VERSIONS, request.api_version, response
        )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        decoder = RequestDecoder()
        tasks: set[asyncio.Task] = set()

        async def answer(request: Request) -> None:
            response = await self.handler(request)
            if response is not None and not writer.is_closing():
                writer.write(
                    encode_response(
                        request.correlation_id, request.api_key, request.api_version, response
                    )
                )

        try:
            while data := await reader.read(65536):
                decoder.receive_data(data)
                while (request := decoder.next_request()) is not None:
                    assert isinstance(request, Request), request
                    self.requests.append(request)
                    if request.api_key is ApiKey.API_VERSIONS:
                        writer.write(self._api_versions(request))
                    else:
                        task = asyncio.create_task(answer(request))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
        except ConnectionError:
            pass
        finally:
            for task in tasks:
                task.cancel()
            writer.close()


# ---- NetworkClient against a real broker ----


def test_api_versions_negotiation_and_metadata_round_trip(broker):
    async def main():
        client = plaintext_client(broker)
        try:
            response = await client.send(ApiKey.METADATA, MetadataRequest(topics=None), 10000)
            assert isinstance(response, MetadataResponse)
            assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
                (0, "127.0.0.1", broker.port)
            ]
            versions = await client.send(ApiKey.API_VERSIONS, ApiVersionsRequest(), 10000)
            assert isinstance(versions, ApiVersionsResponse) and versions.error_code == 0
            for entry in versions.api_keys:
                key = ApiKey.lookup(entry.api_key)
                if key is not None and max(key.min_version, entry.min_version) <= min(
                    key.max_version, entry.max_version
                ):
                    assert client.api_version(key) == min(key.max_version, entry.max_version)
            assert client.api_version(ApiKey.METADATA) == ApiKey.METADATA.max_version
            old = await client.send(ApiKey.METADATA, MetadataRequest(topics=None), 10000, version=1)
            assert (
                old.cluster_id is None and old.brokers[0].port == broker.port
            )  # v1 carries no cluster id
            with pytest.raises(UnsupportedVersionError):
                await client.send(
                    ApiKey.METADATA,
                    MetadataRequest(topics=None),
                    10000,
                    version=ApiKey.METADATA.max_version + 1,
                )
            assert client.connected  # a version refused on our side keeps the connection
        finally:
            await client.close()
        with pytest.raises(DisconnectError):
            await client.send(ApiKey.METADATA, MetadataRequest(topics=None), 1000)

    run(main())


def test_pipelined_requests_are_matched_by_correlation_id(broker):
    async def main():
        client = plaintext_client(broker)
        names = [topic_name(f"pipe{i}") for i in range(40)]
        try:
            await client.send(ApiKey.API_VERSIONS, ApiVersionsRequest(), 10000)
            sends = [
                asyncio.ensure_future(client.send(ApiKey.METADATA, metadata(n), 10000))
                for n in names
            ]
            await asyncio.sleep(0)  # every send has written its request
            assert len(client._conn.inflight) > 1, "requests were not pipelined"
            responses = await asyncio.gather(*sends)
            assert [r.topics[0].name for r in responses] == names
            assert {r.topics[0].error_code for r in responses} == {
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            }
        finally:
            await client.close()

    run(main())


def test_responses_out_of_order_and_a_peer_with_lower_versions():
    """A peer serving ApiVersions 0-2 and Metadata 0-5 answers v4 ApiVersions with
    UNSUPPORTED_VERSION; the client asks again at v2 and sends Metadata v5. The peer
    answers five pipelined requests in reverse order; each caller gets its own."""

    async def handler(request: Request) -> Message:
        assert request.api_key is ApiKey.METADATA and request.api_version == 5
        index = int(request.body.topics[0].name)
        await asyncio.sleep((5 - index) * 0.05)
        topic = MetadataResponse.MetadataResponseTopic(
            name=str(index), error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        return MetadataResponse(topics=[topic])

    async def main():
        fake = FakeBroker(handler, {ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (0, 5)})
        host, port = await fake.start()
        client = NetworkClient(host, port, "broker-1-fetcher-0")
        try:
            responses = await asyncio.gather(
                *(client.send(ApiKey.METADATA, metadata(str(i)), 5000) for i in range(5))
            )
            assert [r.topics[0].name for r in responses] == ["0", "1", "2", "3", "4"]
            api_versions = [
                r.api_version for r in fake.requests if r.api_key is ApiKey.API_VERSIONS
            ]
            assert api_versions == [ApiKey.API_VERSIONS.max_version, 2]
            assert client.api_version(ApiKey.METADATA) == 5
            assert {r.client_id for r in fake.requests} == {"broker-1-fetcher-0"}
        finally:
            await client.close()
            await fake.stop()

    run(main())


def test_broker_killed_fails_in_flight_requests_and_restart_reconnects(broker):
    async def main():
        client = plaintext_client(broker, reconnect_backoff_ms=50, reconnect_backoff_max_ms=400)
        topic = topic_name("kill")
        try:
            created = await client.send(ApiKey.CREATE_TOPICS, create_topics(topic), 10000)
            assert created.topics[0].error_code == 0
            in_flight = [
                asyncio.ensure_future(
                    client.send(ApiKey.FETCH, long_fetch(topic, 20000), 30000, version=12)
                )
                for _ in range(3)
            ]
            await asyncio.sleep(0.3)
            assert not any(f.done() for f in in_flight)
            started = time.monotonic()
            await asyncio.to_thread(broker.kill)
            results = await asyncio.gather(*in_flight, return_exceptions=True)
            assert all(isinstance(r, DisconnectError) for r in results), results
            assert time.monotonic() - started < 5
            assert not client.connected
            with pytest.raises(DisconnectError, match="cannot connect"):
                await client.send(ApiKey.METADATA, metadata(topic), 5000)
            await asyncio.to_thread(broker.start)
            response = await client.send(ApiKey.METADATA, metadata(topic), 10000)
            assert response.topics[0].error_code == 0 and client.connected
        finally:
            await client.close()

    run(main())


def test_request_timeout_closes_the_connection_and_the_next_send_reconnects(broker):
    async def main():
        client = plaintext_client(broker)
        topic = topic_name("timeout")
        try:
            await client.send(ApiKey.CREATE_TOPICS, create_topics(topic), 10000)
            # The broker answers in order, so the Metadata behind the held Fetch waits too.
            fetch = asyncio.ensure_future(
                client.send(ApiKey.FETCH, long_fetch(topic, 5000), 300, version=12)
            )
            behind = asyncio.ensure_future(client.send(ApiKey.METADATA, metadata(topic), 10000))
            started = time.monotonic()
            with pytest.raises(RequestTimeoutError, match="no response within 300 ms"):
                await fetch
            assert 0.25 < time.monotonic() - started < 2
            with pytest.raises(DisconnectError):
                await behind
            assert not client.connected
            response = await client.send(ApiKey.METADATA, metadata(topic), 10000)
            assert response.topics[0].error_code == 0
        finally:
            await client.close()

    run(main())


def test_connect_timeout_and_unreachable_peer():
    async def main():
        # Nothing listens: each attempt is refused, and the backoff grows between them.
        client = NetworkClient(
            "127.0.0.1",
            free_port(),
            "broker-1-test",
            reconnect_backoff_ms=50,
            reconnect_backoff_max_ms=200,
        )
        with pytest.raises(DisconnectError, match="cannot connect"):
            await client.send(ApiKey.METADATA, metadata("x"), 1000)
        assert client._failures == 1
        # A peer that accepts but never answers ApiVersions: the send times out while connecting.
        silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = silent.sockets[0].getsockname()[1]
        quiet = NetworkClient("127.0.0.1", port, "broker-1-test")
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            await quiet.send(ApiKey.METADATA, metadata("x"), 300)
        assert time.monotonic() - started < 2
        await quiet.close()
        await client.close()
        silent.close()

    run(main())


# ---- TLS and SASL ----


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory, pki):
    """A broker with PLAINTEXT, SSL, MTLS (client certificates required), SASL_SSL
    (PLAIN), SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256/512) and ALT (SSL) listeners, configured as
    test_tls.py and test_sasl.py configure theirs; user bob has SCRAM credentials."""
    from tests.integration.test_sasl import _set_scram

    b = BrokerProcess(str(tmp_path_factory.mktemp("secure")))
    b.ports = {name: free_port() for name in ("SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT")}
    b.alt_port = free_port()  # SSL on 127.0.0.2, an address the certificate does not name
    b.overrides.update(
        {
            "listeners": ",".join(
                [
                    f"PLAINTEXT://127.0.0.1:{b.port}",
                    *(f"{n}://127.0.0.1:{p}" for n, p in b.ports.items()),
                    f"ALT://127.0.0.2:{b.alt_port}",
                ]
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,"
                "SASL_PLAINTEXT:SASL_PLAINTEXT,ALT:SSL"
            ),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["server.pem"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": pki["ca.pem"],
            "listener.name.mtls.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(),
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        }
    )
    b.start()
    _set_scram(b, "bob", b"bob-secret")
    yield b
    b.stop()


def inter_broker_config(
    b: BrokerProcess, listener: str, mechanism: str | None = None, **extra: str
) -> BrokerConfig:
    """The config another broker of ``b``'s cluster would have, using ``listener``
    between brokers."""
    props = {**b.overrides, "broker.id": "2", "inter.broker.listener.name": listener, **extra}
    if mechanism is not None:
        props["sasl.mechanism.inter.broker.protocol"] = mechanism
    return BrokerConfig(props)


@pytest.mark.parametrize(
    "listener, mechanism",
    [
        ("PLAINTEXT", None),
        ("SSL", None),
        ("MTLS", None),
        ("SASL_SSL", "PLAIN"),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ],
)
def test_inter_broker_security_from_the_broker_config(secure_broker, listener, mechanism):
    builder = InterBrokerChannelBuilder(inter_broker_config(secure_broker, listener, mechanism))
    assert builder.listener_name == listener
    port = secure_broker.port if listener == "PLAINTEXT" else secure_broker.ports[listener]

    async def main():
        client = builder.client(
            "localhost" if "SSL" in builder.security_protocol else "127.0.0.1",
            port,
            "broker-2-to-controller",
        )
        try:
            response = await client.send(ApiKey.METADATA, MetadataRequest(topics=None), 10000)
            assert response.brokers and response.brokers[0].node_id == 0
            assert client.api_version(ApiKey.SASL_AUTHENTICATE) is not None
        finally:
            await client.close()

    run(main())


def test_security_inter_broker_protocol_picks_the_listener(secure_broker):
    config = inter_broker_config(secure_broker, "SSL")
    assert config.inter_broker_listener() == ("SSL", "SSL")
    props = {k: v for k, v in config.originals.items() if k != "inter.broker.listener.name"}
    assert BrokerConfig(props).inter_broker_listener() == ("PLAINTEXT", "PLAINTEXT")
    assert BrokerConfig(
        {**props, "security.inter.broker.protocol": "SASL_SSL"}
    ).inter_broker_listener() == ("SASL_SSL", "SASL_SSL")
    renamed = {
        **props,
        "listener.security.protocol.map": props["listener.security.protocol.map"].replace(
            "SSL:SSL,", "SSL:SASL_PLAINTEXT,"
        ),
    }
    assert BrokerConfig(
        {**renamed, "security.inter.broker.protocol": "SSL"}
    ).inter_broker_listener() == ("MTLS", "SSL")
    with pytest.raises(
        ConfigError,
        match="only one of inter.broker.listener.name and security.inter.broker.protocol",
    ):
        BrokerConfig(
            {**config.originals, "security.inter.broker.protocol": "SSL"}
        ).inter_broker_listener()
    with pytest.raises(ConfigError, match="advertised.listeners"):
        BrokerConfig({**props, "inter.broker.listener.name": "NOPE"}).inter_broker_listener()
    with pytest.raises(ConfigError) as e:
        InterBrokerChannelBuilder(
            BrokerConfig({**props, "security.inter.broker.protocol": "SASL_SSL"})
        )  # GSSAPI by default
    assert e.value.key == "sasl.mechanism.inter.broker.protocol"
    scram_without_jaas = {
        **props,
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
    }
    with pytest.raises(ConfigError) as e:
        InterBrokerChannelBuilder(BrokerConfig(scram_without_jaas))
    assert e.value.key == "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"


def test_authentication_and_certificate_failures(secure_broker, pki):
    async def main():
        wrong = InterBrokerChannelBuilder(
            inter_broker_config(
                secure_broker,
                "SASL_PLAINTEXT",
                "PLAIN",
                **{
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(
                        "admin", "nope"
                    )
                },
            )
        ).client("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"], "broker-2-test")
        with pytest.raises(SaslAuthenticationFailedError, match="Invalid username or password"):
            await wrong.send(ApiKey.METADATA, MetadataRequest(topics=None), 10000)
        await wrong.close()
        scram = InterBrokerChannelBuilder(
            inter_broker_config(
                secure_broker,
                "SASL_PLAINTEXT",
                "SCRAM-SHA-256",
                **{
                    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
                        SCRAM_JAAS.replace("bob-secret", "nope")
                    )
                },
            )
        ).client("127.0.0.1", secure_broker.ports["SASL_PLAINTEXT"], "broker-2-test")
        with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
            await scram.send(ApiKey.METADATA, MetadataRequest(topics=None), 10000)
        await scram.close()
        # No truststore: the system CAs do not know the test CA.
        untrusted = {
            k: v for k, v in secure_broker.overrides.items() if not k.startswith("ssl.truststore")
        }
        props = {**untrusted, "broker.id": "2", "inter.broker.listener.name": "SSL"}
        client = InterBrokerChannelBuilder(BrokerConfig(props)).client(
            "127.0.0.1", secure_broker.ports["SSL"], "broker-2-test"
        )
        with pytest.raises(DisconnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.send(ApiKey.METADATA, MetadataRequest(topics=None), 10000)
        await client.close()
        # A host name the certificate does not name fails, unless the check is off.
        for check in ("https", ""):
            config = inter_broker_config(
                secure_broker, "ALT", **{"ssl.endpoint.identification.algorithm": check}
            )
            client = InterBrokerChannelBuilder(config).client(
                "127.0.0.2", secure_broker.alt_port, "broker-2-test"
            )
            try:
                if check:
                    with pytest.raises(DisconnectError, match="CERTIFICATE_VERIFY_FAILED"):
                        await client.send(ApiKey.METADATA, MetadataRequest(topics=None), 10000)
                else:
                    assert (
                        await client.send(ApiKey.METADATA, MetadataRequest(topics=None), 10000)
                    ).brokers
            finally:
                await client.close()

    run(main())


def test_sasl_session_lifetime_moves_requests_to_a_reauthenticated_connection(broker_factory):
    port = free_port()
    b = broker_factory(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(),
            "connections.max.reauth.ms": "1000",
        }
    )

    async def main():
        builder = InterBrokerChannelBuilder(inter_broker_config(b, "SASL_PLAINTEXT", "PLAIN"))
        client = builder.client("127.0.0.1", port, "broker-2-test")
        seen = set()
        try:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                response = await client.send(ApiKey.METADATA, MetadataRequest(topics=None), 5000)
                assert response.brokers
                seen.add(id(client._conn))
                await asyncio.sleep(0.2)
        finally:
            await client.close()
        assert len(seen) >= 2, "the connection was not renewed before its session ended"

    run(main())


# ---- ControllerChannelManager ----


class ConcurrencyProbe:
    """Makes NetworkClients whose sends record, per client id, the most sends in
    progress at once."""

    def __init__(self, **client_kw) -> None:
        self.client_kw = client_kw
        self.active: dict[str, int] = {}
        self.most: dict[str, int] = {}

    def __call__(self, host: str, port: int, client_id: str) -> NetworkClient:
        probe = self

        class Probed(NetworkClient):
            async def send(self, *args, **kwargs):
                probe.active[client_id] = probe.active.get(client_id, 0) + 1
                probe.most[client_id] = max(probe.most.get(client_id, 0), probe.active[client_id])
                try:
                    return await super().send(*args, **kwargs)
                finally:
                    probe.active[client_id] -= 1

        return Probed(host, port, client_id, **self.client_kw)


async def wait_for_condition(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


def test_controller_channel_sends_in_order_one_at_a_time_per_broker(broker_factory):
    brokers = [broker_factory(), broker_factory()]

    async def main():
        probe = ConcurrencyProbe()
        manager = ControllerChannelManager(9, probe, request_timeout_ms=10000)
        for broker_id, b in enumerate(brokers, start=1):
            manager.add_broker(broker_id, ("127.0.0.1", b.port))
        await manager.start()
        got: dict[int, list[str]] = {1: [], 2: []}
        names = {
            1: [topic_name("order1") for _ in range(15)],
            2: [topic_name("order2") for _ in range(15)],
        }
        try:
            for i in range(15):
                for broker_id in (1, 2):
                    name = names[broker_id][i]
                    # Create, then look up: the lookup finds the topic only if the create went
                    # first.
                    manager.send(
                        broker_id,
                        ApiKey.CREATE_TOPICS,
                        create_topics(name),
                        lambda r, b=broker_id: got[b].append(
                            ("c", r.topics[0].name, r.topics[0].error_code)
                        ),
                    )
                    manager.send(
                        broker_id,
                        ApiKey.METADATA,
                        metadata(name),
                        lambda r, b=broker_id: got[b].append(
                            ("m", r.topics[0].name, r.topics[0].error_code)
                        ),
                    )
            await wait_for_condition(
                lambda: all(len(v) == 30 for v in got.values()), 30, "every callback"
            )
        finally:
            await manager.stop()
        for broker_id in (1, 2):
            expected = [(kind, n, 0) for n in names[broker_id] for kind in ("c", "m")]
            assert got[broker_id] == expected
        assert probe.most == {
            "broker-9-controller-to-broker-1": 1,
            "broker-9-controller-to-broker-2": 1,
        }

    run(main())


def test_controller_channel_retries_across_a_broker_restart(broker):
    async def main():
        manager = ControllerChannelManager(
            2,
            lambda h, p, c: NetworkClient(h, p, c, reconnect_backoff_max_ms=200),
            request_timeout_ms=5000,
            retry_backoff_ms=50,
        )
        manager.add_broker(1, ("127.0.0.1", broker.port))
        await manager.start()
        got: list[tuple[str, int]] = []
        names = [topic_name("restart") for _ in range(5)]
        try:
            await asyncio.to_thread(broker.kill)
            for name in names:
                manager.send(
                    1,
                    ApiKey.CREATE_TOPICS,
                    create_topics(name),
                    lambda r: got.append((r.topics[0].name, r.topics[0].error_code)),
                )
            await asyncio.sleep(1.0)  # the first request is being retried against the dead broker
            assert got == [] and manager.queue_size(1) == 4
            await asyncio.to_thread(broker.start)
            await wait_for_condition(lambda: len(got) == 5, 30, "the requests after the restart")
            assert got == [(n, 0) for n in names]
            # A broker that is removed stops being retried; its callbacks never run.
            await asyncio.to_thread(broker.kill)
            manager.send(
                1,
                ApiKey.CREATE_TOPICS,
                create_topics(topic_name("never")),
                lambda r: got.append(("never", -1)),
            )
            await asyncio.sleep(0.3)
            manager.remove_broker(1)
            assert manager.broker_ids == set()
            manager.send(1, ApiKey.METADATA, metadata("x"), lambda r: got.append(("offline", -1)))
            await asyncio.sleep(0.3)
            assert len(got) == 5
        finally:
            await manager.stop()

    run(main())


# ---- BrokerToControllerChannelManager ----


def test_to_controller_waits_for_a_controller_then_times_out_cleanly(broker):
    async def main():
        known_after = time.monotonic() + 0.5
        endpoint = lambda: ("127.0.0.1", broker.port) if time.monotonic() >= known_after else None  # noqa: E731
        channel = BrokerToControllerChannelManager(
            3, endpoint, lambda h, p, c: NetworkClient(h, p, c), retry_backoff_ms=50
        )
        try:
            started = time.monotonic()
            response = await channel.send(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest(), 10000)
            assert isinstance(response, DescribeClusterResponse) and response.error_code == 0
            assert 0.45 < time.monotonic() - started < 5
        finally:
            await channel.close()

        nobody = BrokerToControllerChannelManager(
            3, lambda: None, lambda h, p, c: NetworkClient(h, p, c), retry_backoff_ms=50
        )
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError, match="no controller is known"):
            await nobody.send(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest(), 500)
        assert 0.45 < time.monotonic() - started < 1.5
        await nobody.close()

        # A controller address where nothing listens: disconnects are retried until it moves.
        dead = ("127.0.0.1", free_port())
        moves_at = time.monotonic() + 0.5
        channel = BrokerToControllerChannelManager(
            3,
            lambda: dead if time.monotonic() < moves_at else ("127.0.0.1", broker.port),
            lambda h, p, c: NetworkClient(h, p, c, reconnect_backoff_max_ms=100),
            retry_backoff_ms=50,
        )
        try:
            response = await channel.send(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest(), 10000)
            assert response.error_code == 0
        finally:
            await channel.close()

    run(main())


def test_to_controller_retries_not_controller_until_the_controller_answers(broker):
    async def not_controller(request: Request) -> Message:
        assert request.api_key is ApiKey.DESCRIBE_CLUSTER
        return DescribeClusterResponse(
            error_code=ErrorCode.NOT_CONTROLLER, error_message="not the controller"
        )

    async def main():
        fake = FakeBroker(not_controller)
        fake_address = await fake.start()
        answered = lambda: sum(r.api_key is ApiKey.DESCRIBE_CLUSTER for r in fake.requests)  # noqa: E731
        endpoint = lambda: fake_address if answered() < 3 else ("127.0.0.1", broker.port)  # noqa: E731
        channel = BrokerToControllerChannelManager(
            1, endpoint, lambda h, p, c: NetworkClient(h, p, c), retry_backoff_ms=20
        )
        try:
            response = await channel.send(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest(), 10000)
            assert response.error_code == 0 and answered() == 3
            assert {r.client_id for r in fake.requests} == {"broker-1-to-controller"}

            stuck = BrokerToControllerChannelManager(
                1,
                lambda: fake_address,
                lambda h, p, c: NetworkClient(h, p, c),
                purpose="to-controller-forwarding",
                retry_backoff_ms=50,
            )
            started = time.monotonic()
            with pytest.raises(RequestTimeoutError, match="is not the controller"):
                await stuck.send(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest(), 400)
            assert 0.35 < time.monotonic() - started < 1.5
            assert fake.requests[-1].client_id == "broker-1-to-controller-forwarding"
            await stuck.close()
        finally:
            await channel.close()
            await fake.stop()

    run(main())


def test_not_controller_is_found_in_nested_error_codes():
    from logstore.protocol.messages.topic_admin import CreateTopicsResponse

    nested = CreateTopicsResponse(
        topics=[
            CreateTopicsResponse.CreatableTopicResult(name="a", error_code=0),
            CreateTopicsResponse.CreatableTopicResult(
                name="b", error_code=ErrorCode.NOT_CONTROLLER
            ),
        ]
    )
    assert has_error(nested, ErrorCode.NOT_CONTROLLER)
    assert not has_error(
        CreateTopicsResponse(topics=[CreateTopicsResponse.CreatableTopicResult(name="a")]),
        ErrorCode.NOT_CONTROLLER,
    )
    assert has_error(
        DescribeClusterResponse(error_code=ErrorCode.NOT_CONTROLLER), ErrorCode.NOT_CONTROLLER
    )
