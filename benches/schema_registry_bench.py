"""The schema registry inside a broker (issue 39): registration and lookup latency, lookups per
second by id, and the serializers' cost per record against producing the same bytes.

    python benches/schema_registry_bench.py [--schemas 300] [--lookups 3000]
        [--records 20000] [--workdir /tmp/sr-bench] [--json out.json]

One broker with `schema.registry.listeners`. In order:

- registration: `--schemas` distinct Avro records (one subject each), registered one at a time
  over one keep-alive HTTP connection; the latency runs from request to response (the write,
  its read-back from `_schemas` included);
- lookup by id, uncached: `GET /schemas/ids/{id}` over one keep-alive connection, ids at
  random, `--lookups` times, then the same through confluent-kafka's REST client (httpx);
  and a subject lookup (`POST /subjects/{s}`, parsing the schema on every call);
- lookup by id, cached: `SchemaRegistryClient.get_schema(id)` after a first call (the
  client's cache; what serializers do per record);
- serializer overhead: `--records` records of a 5-field Avro record produced with
  `AvroSerializer` (schema registered once, then cached), against producing the bytes it
  made, without a registry, in the same run; the same for JSONSerializer. Time per record
  = wall time of the produce loop plus flush, over the records.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benches"))
sys.path.insert(0, str(REPO))

from e2e_helpers import BrokerProc, free_port  # noqa: E402

CT = "application/vnd.schemaregistry.v1+json"


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def summary(name: str, xs: list[float]) -> dict[str, Any]:
    return {
        "name": name,
        "n": len(xs),
        "p50_ms": round(pct(xs, 0.50) * 1000, 3),
        "p99_ms": round(pct(xs, 0.99) * 1000, 3),
        "per_s": round(len(xs) / sum(xs), 1),
    }


class Http:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body)
        self.conn.request(method, path, body=data, headers={"Content-Type": CT})
        resp = self.conn.getresponse()
        return resp.status, json.loads(resp.read())


def record_schema(i: int) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": f"Bench{i}",
            "namespace": "bench",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "name", "type": "string"},
                {"name": "score", "type": "double"},
                {"name": "tags", "type": {"type": "array", "items": "string"}},
                {"name": "ok", "type": "boolean"},
            ],
        }
    )


def produce_loop(bootstrap: str, topic: str, values: list[Any], serialize: Any) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.serialization import MessageField, SerializationContext

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    ctx = SerializationContext(topic, MessageField.VALUE)
    start = time.perf_counter()
    for v in values:
        producer.produce(topic, serialize(v, ctx))
        producer.poll(0)
    assert producer.flush(60) == 0
    return (time.perf_counter() - start) / len(values)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", type=int, default=300)
    ap.add_argument("--lookups", type=int, default=3000)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--workdir")
    ap.add_argument("--json")
    args = ap.parse_args()
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="sr-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    broker = BrokerProc(workdir, {"schema.registry.listeners": f"http://127.0.0.1:{port}"})
    broker.start()
    results: list[dict[str, Any]] = []
    try:
        http = Http(port)
        deadline = time.monotonic() + 60
        while http.call("PUT", "/config", {"compatibility": "BACKWARD"})[0] != 200:
            if time.monotonic() > deadline:
                raise SystemExit("the registry did not take writes")
            time.sleep(0.2)
            http = Http(port)

        times, ids = [], []
        for i in range(args.schemas):
            t = time.perf_counter()
            status, doc = http.call(
                "POST", f"/subjects/bench-{i}/versions", {"schema": record_schema(i)}
            )
            times.append(time.perf_counter() - t)
            assert status == 200, doc
            ids.append(doc["id"])
        results.append(summary("register (HTTP, one at a time)", times))

        times = []
        for _ in range(args.lookups):
            sid = random.choice(ids)
            t = time.perf_counter()
            status, _ = http.call("GET", f"/schemas/ids/{sid}")
            times.append(time.perf_counter() - t)
            assert status == 200
        results.append(summary("GET /schemas/ids/{id} (HTTP keep-alive)", times))

        client = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
        rest = client._rest_client  # the client's own HTTP layer (httpx), without its cache
        times = []
        for _ in range(args.lookups):
            sid = random.choice(ids)
            t = time.perf_counter()
            rest.get(f"schemas/ids/{sid}")
            times.append(time.perf_counter() - t)
        results.append(summary("by id, uncached client (confluent-kafka REST)", times))

        times = []
        for _ in range(min(args.lookups, 1000)):
            i = random.randrange(args.schemas)
            t = time.perf_counter()
            status, _ = http.call("POST", f"/subjects/bench-{i}", {"schema": record_schema(i)})
            times.append(time.perf_counter() - t)
            assert status == 200
        results.append(summary("POST /subjects/{s} (lookup, schema parsed)", times))

        for sid in ids:
            client.get_schema(sid)
        times = []
        for _ in range(args.lookups * 10):
            sid = random.choice(ids)
            t = time.perf_counter()
            client.get_schema(sid)
            times.append(time.perf_counter() - t)
        results.append(summary("by id, cached client (get_schema)", times))

        value = {"id": 7, "name": "ada lovelace", "score": 0.5, "tags": ["a", "b"], "ok": True}
        values = [dict(value, id=i) for i in range(args.records)]
        avro = AvroSerializer(client, record_schema(0))
        js = JSONSerializer(
            json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}}), client
        )
        overhead: dict[str, Any] = {}
        for name, ser in (("avro", avro), ("json", js)):
            topic = f"bench-{name}"
            framed = [ser(v, SerializationContext(topic, MessageField.VALUE)) for v in values]
            raw = produce_loop(broker.bootstrap, topic + "-raw", framed, lambda v, _c: v)
            with_sr = produce_loop(broker.bootstrap, topic, values, ser)
            overhead[name] = {
                "raw_us_per_record": round(raw * 1e6, 2),
                "serializer_us_per_record": round(with_sr * 1e6, 2),
                "overhead_us_per_record": round((with_sr - raw) * 1e6, 2),
                "record_bytes": len(framed[0]),
            }
        out = {
            "lookups": results,
            "serializers": overhead,
            "schemas": args.schemas,
            "records": args.records,
        }
        for r in results:
            print(
                f"{r['name']:<48} p50 {r['p50_ms']:8.3f} ms  p99 {r['p99_ms']:8.3f} ms"
                f"  {r['per_s']:10.1f}/s"
            )
        for name, o in overhead.items():
            print(
                f"{name}: produce {o['raw_us_per_record']} us/record raw, "
                f"{o['serializer_us_per_record']} with the serializer "
                f"(+{o['overhead_us_per_record']}), {o['record_bytes']} B/record"
            )
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2))
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
