"""The schema registry served by a real broker process (`schema.registry.listeners`), driven by
confluent-kafka's SchemaRegistryClient and its serializers, plain HTTP and `logstore registry`:
Avro, JSON Schema and Protobuf records produced and consumed through the broker, BACKWARD
evolution, soft and permanent deletes, bad input answered with Confluent's codes and nothing
stored, the Prometheus series, `_schemas` holding Confluent's records, and `logstore
schema-registry --bootstrap` sharing `_schemas` and the election with the broker's own
registry (writes forwarded to whichever is the primary)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import api_pb2, timestamp_pb2, type_pb2

from tests.integration.conftest import BrokerProcess
from tests.support import processes
from tests.support.ports import free_port
from tests.support.waiting import wait_until

CT = "application/vnd.schemaregistry.v1+json"


class Registry:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", CT)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert resp.headers["Content-Type"].startswith(CT) or path.endswith("/schema")
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            assert exc.headers["Content-Type"].startswith(CT)
            return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    port, metrics = free_port(), free_port()
    b = BrokerProcess(
        str(tmp_path_factory.mktemp("sr")),
        {
            "schema.registry.listeners": f"http://127.0.0.1:{port}",
            "metrics.port": str(metrics),
            "metrics.host": "127.0.0.1",
        },
    )
    b.start()
    b.registry = Registry(f"http://127.0.0.1:{port}")
    b.metrics_url = f"http://127.0.0.1:{metrics}/metrics"
    # ready once the registry has read _schemas and is primary: a write answers
    wait_until(
        lambda: b.registry.call("PUT", "/config", {"compatibility": "BACKWARD"})[0] == 200,
        timeout=60,
    )
    yield b
    b.kill()


def _round_trip(broker, serializer, deserializer, values: list[Any]) -> list[Any]:
    topic = TOPICS[len(TOPICS)] = f"sr-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for v in values:
        ctx = SerializationContext(topic, MessageField.VALUE)
        producer.produce(topic, value=serializer(v, ctx))
    assert producer.flush(10) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    got: list[Any] = []
    try:
        for _ in range(60):
            for m in consumer.consume(10, 0.5):
                assert m.error() is None
                got.append(deserializer(m.value(), SerializationContext(topic, MessageField.VALUE)))
            if len(got) == len(values):
                break
    finally:
        consumer.close()
    return got


TOPICS: dict[int, str] = {}  # the round trips' topics, in order: Avro, JSON, Protobuf
USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "t",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}


def test_avro_json_and_protobuf_serializers_through_the_broker(registry_broker):
    client = SchemaRegistryClient({"url": registry_broker.registry.url})
    avro = json.dumps(USER_V1)
    users = [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}]
    got = _round_trip(
        registry_broker,
        AvroSerializer(client, avro),
        AvroDeserializer(client),
        users,
    )
    assert got == users
    js = json.dumps(
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "tag": {"type": "string"}},
            "required": ["id"],
        }
    )
    docs = [{"id": 1, "tag": "a"}, {"id": 2}]
    assert _round_trip(registry_broker, JSONSerializer(js, client), JSONDeserializer(js), docs) == (
        docs
    )
    stamps = [timestamp_pb2.Timestamp(seconds=s, nanos=7) for s in (1, 2)]
    got = _round_trip(
        registry_broker,
        ProtobufSerializer(timestamp_pb2.Timestamp, client, {"use.deprecated.format": False}),
        ProtobufDeserializer(timestamp_pb2.Timestamp, {"use.deprecated.format": False}),
        stamps,
    )
    assert got == stamps
    # a message importing other .proto files (well-known ones, which the serializer does not
    # register as references)
    apis = [api_pb2.Api(name="svc", options=[type_pb2.Option(name="o")], version="1")]
    got = _round_trip(
        registry_broker,
        ProtobufSerializer(api_pb2.Api, client, {"use.deprecated.format": False}),
        ProtobufDeserializer(api_pb2.Api, {"use.deprecated.format": False}),
        apis,
    )
    assert got == apis
    # identical schemas share an id across subjects
    ids = {client.register_schema(s, Schema(avro, "AVRO")) for s in ("same-a", "same-b")}
    assert len(ids) == 1
    subjects = registry_broker.registry.call("GET", f"/schemas/ids/{ids.pop()}/subjects")[1]
    assert {"same-a", "same-b"} <= set(subjects) and any(s.endswith("-value") for s in subjects)


def test_consume_decode_prints_values_through_the_registry(registry_broker):
    from logstore.cli.app import cli

    env = {"LOGSTORE_REGISTRY_URL": registry_broker.registry.url}
    decoded = []
    for i in range(3):
        result = CliRunner().invoke(
            cli,
            ["consume", TOPICS[i], "--decode", "-e", "-b", registry_broker.bootstrap],
            env=env,
        )
        assert result.exit_code == 0, result.output
        decoded.append([json.loads(line) for line in result.output.splitlines()])
    assert decoded == [
        [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}],
        [{"id": 1, "tag": "a"}, {"id": 2}],
        ["1970-01-01T00:00:01.000000007Z", "1970-01-01T00:00:02.000000007Z"],  # proto3 JSON
    ]


def test_backward_evolution_and_soft_delete(registry_broker):
    client = SchemaRegistryClient({"url": registry_broker.registry.url})
    subject = f"evolve-{uuid.uuid4().hex[:6]}"
    v1 = client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    with_default = {
        **USER_V1,
        "fields": [*USER_V1["fields"], {"name": "email", "type": "string", "default": ""}],
    }
    v2 = client.register_schema(subject, Schema(json.dumps(with_default), "AVRO"))
    assert v2 != v1
    without_default = {
        **with_default,
        "fields": [*with_default["fields"], {"name": "phone", "type": "string"}],
    }
    with pytest.raises(SchemaRegistryError) as err:
        client.register_schema(subject, Schema(json.dumps(without_default), "AVRO"))
    assert err.value.http_status_code == 409 and err.value.error_code == 409
    assert client.get_versions(subject) == [1, 2]
    ok, verbose = registry_broker.registry.call(
        "POST",
        f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
        {"schema": json.dumps(without_default)},
    )
    assert ok == 200 and verbose["is_compatible"] is False
    assert any("READER_FIELD_MISSING_DEFAULT_VALUE" in m for m in verbose["messages"])

    # soft delete of a version, then of the subject; ids stay resolvable; then permanent
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    reg = registry_broker.registry
    assert reg.call("GET", f"/subjects/{subject}/versions?deleted=true") == (200, [1, 2])
    assert reg.call("GET", f"/subjects/{subject}/versions/2")[1]["error_code"] == 40402
    assert reg.call("GET", f"/schemas/ids/{v2}")[0] == 200
    assert reg.call("DELETE", f"/subjects/{subject}/versions/2")[1]["error_code"] == 40406
    assert client.delete_subject(subject) == [1]
    assert subject not in client.get_subjects()
    status, body = reg.call("DELETE", f"/subjects/{subject}")
    assert (status, body["error_code"]) == (404, 40404)
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    assert reg.call("GET", f"/subjects/{subject}/versions?deleted=true")[1]["error_code"] == 40401


def _raw_request(port: int, head: bytes, body: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head + body)
        out = b""
        while b"\r\n\r\n" not in out or not out.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


def test_bad_input_gets_confluents_codes_and_stores_nothing(registry_broker):
    reg = registry_broker.registry
    before = reg.call("GET", "/schemas?deleted=true")[1]
    subject = "bad-input"
    cases = [
        (b'{"schema": "{\\"type\\": ', 400, 400),  # malformed JSON
        (json.dumps({"schema": '{"type":"record","name":"X"}'}).encode(), 422, 42201),
        (json.dumps({"schema": '"int"', "schemaType": "YAML"}).encode(), 422, 42201),
        (
            json.dumps(
                {
                    "schema": '{"type":"record","name":"C","fields":[{"name":"r","type":"R"}]}',
                    "references": [{"name": "R", "subject": subject, "version": 1}],
                }
            ).encode(),
            422,
            42201,
        ),
    ]
    for raw, status, code in cases:
        got = reg.call("POST", f"/subjects/{subject}/versions", raw=raw)
        assert (got[0], got[1]["error_code"]) == (status, code), got
    assert reg.call("GET", "/subjects/bad-input/versions/7")[1]["error_code"] == 40401
    ok = reg.call("POST", "/subjects/bad-input/versions", {"schema": '"string"'})
    assert ok[0] == 200
    assert reg.call("GET", "/subjects/bad-input/versions/7")[1]["error_code"] == 40402
    assert reg.call("GET", "/subjects/bad-input/versions/abc")[1]["error_code"] == 42202
    # a reference to a version that would be the schema itself (a cycle) is refused
    cyc = reg.call(
        "POST",
        "/subjects/bad-input/versions",
        {
            "schema": '{"type":"record","name":"Z","fields":[{"name":"z","type":"Z2"}]}',
            "references": [{"name": "Z2", "subject": "bad-input", "version": 2}],
        },
    )
    assert (cyc[0], cyc[1]["error_code"]) == (422, 42201)
    # 100 MB announced: refused from the headers, after a few KB were sent
    port = int(reg.url.rsplit(":", 1)[1])
    head = (
        f"POST /subjects/{subject}/versions HTTP/1.1\r\nHost: x\r\nContent-Type: {CT}\r\n"
        f"Content-Length: {100 * 1024 * 1024}\r\n\r\n"
    ).encode()
    answer = _raw_request(port, head, b"{" + b" " * 4096)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error_code"] == 413
    after = reg.call("GET", "/schemas?deleted=true")[1]
    assert [s for s in after if s not in before] == [
        {"subject": "bad-input", "version": 1, "id": ok[1]["id"], "schema": '"string"'}
    ]


def test_references_across_subjects_with_slashes(registry_broker):
    reg = registry_broker.registry
    base = '{"type":"record","name":"Base","namespace":"r","fields":[{"name":"a","type":"int"}]}'
    status, doc = reg.call("POST", "/subjects/refs%2Fbase/versions", {"schema": base})
    assert status == 200
    user = {
        "schema": '{"type":"record","name":"User","namespace":"r",'
        '"fields":[{"name":"b","type":"r.Base"}]}',
        "references": [{"name": "r.Base", "subject": "refs/base", "version": 1}],
    }
    status, got = reg.call("POST", "/subjects/refs-user/versions", user)
    assert status == 200
    assert reg.call("GET", "/subjects/refs%2Fbase/versions/1/referencedby") == (200, [got["id"]])
    assert reg.call("GET", f"/schemas/ids/{got['id']}")[1]["references"] == user["references"]
    assert reg.call("DELETE", "/subjects/refs%2Fbase/versions/1")[1]["error_code"] == 42206
    assert reg.call("POST", "/subjects/refs-user", user)[1]["id"] == got["id"]


def test_import_mode_keeps_ids_and_a_slow_client_stalls_nobody(registry_broker):
    reg = registry_broker.registry
    schema = '{"type":"fixed","name":"F","size":4}'
    body = {"schema": schema, "id": 9000, "version": 3}
    assert reg.call("POST", "/subjects/imported/versions", body)[1]["error_code"] == 42205
    assert reg.call("PUT", "/mode/imported", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert reg.call("POST", "/subjects/imported/versions", body) == (200, {"id": 9000})
    got = reg.call("GET", "/subjects/imported/versions/3")[1]
    assert (got["id"], got["version"]) == (9000, 3)
    other = {"schema": '"boolean"', "id": 9000}
    assert reg.call("POST", "/subjects/imported/versions", other)[1]["error_code"] == 42205
    assert reg.call("DELETE", "/mode/imported") == (200, {"mode": "IMPORT"})
    # ids continue above the imported one
    assert (
        reg.call("POST", "/subjects/after-import/versions", {"schema": '"float"'})[1]["id"] == 9001
    )

    # a client that sends half a body holds only its own connection: the registry and the
    # broker's Kafka traffic answer meanwhile
    port = int(reg.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
        slow.sendall(
            f"POST /subjects/slow/versions HTTP/1.1\r\nHost: x\r\nContent-Type: {CT}\r\n"
            'Content-Length: 1000\r\n\r\n{"schema": '.encode()
        )
        assert reg.call("GET", "/subjects/after-import/versions") == (200, [1])
        producer = Producer({"bootstrap.servers": registry_broker.bootstrap})
        producer.produce("while-slow", b"v")
        assert producer.flush(10) == 0
        del producer  # destroyed now, not after the module's broker is gone
        assert "slow" not in reg.call("GET", "/subjects")[1]


def test_a_large_protobuf_schema_is_parsed_off_the_brokers_loop(registry_broker):
    """A .proto of 5,000 fields (~170 KB) takes seconds of the pure-Python grammar: while it
    is registered, each produce round trip on the same broker stays under the broker's 1 s
    rule (parsed on the loop, the first would wait for the whole parse)."""
    lines = ['syntax = "proto3";', "package hostile;", "message Big {"]
    lines += [f"  string field_number_{i} = {i + 1};" for i in range(5000)]
    body = {"schemaType": "PROTOBUF", "schema": "\n".join([*lines, "}"])}
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap, "linger.ms": 0})
    producer.produce("while-parsing", b"warm")
    assert producer.flush(10) == 0
    result: list[Any] = []
    registering = threading.Thread(
        target=lambda: result.append(
            registry_broker.registry.call("POST", "/subjects/big-proto/versions", body)
        )
    )
    registering.start()
    round_trips: list[float] = []
    while registering.is_alive():
        start = time.monotonic()
        producer.produce("while-parsing", b"v")
        assert producer.flush(10) == 0
        round_trips.append(time.monotonic() - start)
    registering.join(10)
    del producer
    assert result[0][0] == 200 and isinstance(result[0][1]["id"], int)
    assert len(round_trips) >= 2 and max(round_trips) < 1.0, round_trips


def test_schemas_topic_holds_confluents_records_and_metrics_are_served(registry_broker):
    reg = registry_broker.registry
    reg.call("POST", "/subjects/format-check/versions", {"schema": '"bytes"'})
    consumer = Consumer(
        {
            "bootstrap.servers": registry_broker.bootstrap,
            "group.id": f"dump-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["_schemas"])
    records = {}
    try:
        for _ in range(40):
            for m in consumer.consume(100, 0.3):
                records[m.key()] = m.value()
            if b'{"keytype":"SCHEMA","subject":"format-check","version":1,"magic":1}' in records:
                break
    finally:
        consumer.close()
    value = json.loads(
        records[b'{"keytype":"SCHEMA","subject":"format-check","version":1,"magic":1}']
    )
    assert list(value) == ["subject", "version", "id", "schema", "deleted"]
    assert value["schema"] == '"bytes"' and value["deleted"] is False
    assert records[b'{"keytype":"CONFIG","subject":null,"magic":0}'] == (
        b'{"compatibilityLevel":"BACKWARD"}'
    )
    with urllib.request.urlopen(registry_broker.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    assert 'logstore_schema_registry_requests_total{endpoint="/subjects/{subject}/versions"' in text
    assert "logstore_schema_registry_is_primary 1.0" in text
    assert "logstore_schema_registry_schemas " in text


def test_the_registry_cli(registry_broker, tmp_path):
    from logstore.cli.app import cli

    schema = tmp_path / "s.avsc"
    schema.write_text(json.dumps(USER_V1))
    env = {"LOGSTORE_REGISTRY_URL": registry_broker.registry.url}
    runner = CliRunner()

    def run(*args: str) -> Any:
        result = runner.invoke(cli, ["registry", *args, "--format", "json"], env=env)
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    registered = run("schema", "register", "cli-subject", "--schema", str(schema))
    assert run("schema", "get", "--id", str(registered["id"]))["schema"] == json.dumps(
        USER_V1, separators=(",", ":")
    )
    assert "cli-subject" in run("subject", "list")
    assert run("subject", "describe", "cli-subject")["versions"][0]["id"] == registered["id"]
    assert run("schema", "check", "cli-subject", "--schema", str(schema))["is_compatible"]
    assert run("config", "cli-subject", "--set", "full")["compatibilityLevel"] == "FULL"
    assert run("mode", "cli-subject")["mode"] == "READWRITE"
    assert run("subject", "delete", "cli-subject")["deleted_versions"] == [1]


def test_standalone_registry_shares_schemas_and_forwards_writes(registry_broker):
    b = registry_broker
    port = free_port()
    standalone = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "logstore",
            "schema-registry",
            "--bootstrap",
            b.bootstrap,
            "--listen",
            f"http://127.0.0.1:{port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=processes.repo_env(),
    )
    try:
        ready, out = processes.wait_for_output(standalone, b"schema registry listening", 30)
        assert ready, out
        urls = [b.registry.url, f"http://127.0.0.1:{port}"]
        clients = [SchemaRegistryClient({"url": u}) for u in urls]

        def both_registered() -> bool:
            try:
                ids = [
                    c.register_schema(
                        f"via-{i}",
                        Schema(json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]})),
                    )
                    for i, c in enumerate(clients)
                ]
            except SchemaRegistryError:
                return False
            return ids[0] == ids[1]

        # one of the two is the primary; the other forwards to it
        wait_until(both_registered, 40, message="writes through both instances")

        def subjects(url: str) -> list[str]:
            with urllib.request.urlopen(url + "/subjects", timeout=10) as resp:
                return json.loads(resp.read())

        wait_until(
            lambda: {"via-0", "via-1"} <= set(subjects(urls[0])) == set(subjects(urls[1])),
            15,
            message="both instances serve the same subjects",
        )
    finally:
        processes.terminate(standalone, 10)
