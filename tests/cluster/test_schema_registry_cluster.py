"""The schema registry in a three-broker cluster (every broker with
``schema.registry.listeners``): one instance is the primary, elected through the group
``schema-registry``; registrations sent to every broker go on while the primary's broker is
SIGKILLed. A new primary takes over, no acknowledged id is lost or names another schema, and
every surviving broker serves the same schemas."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.cluster.harness.cluster import Cluster, logs_on_failure
from tests.support.ports import free_port
from tests.support.waiting import wait_until

CT = "application/vnd.schemaregistry.v1+json"


def _call(url: str, method: str = "GET", body: Any = None, timeout: float = 15.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": CT})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


@pytest.fixture
def cluster(request, tmp_path):
    ports = {i: free_port() for i in (1, 2, 3)}
    c = Cluster(
        tmp_path,
        n_brokers=3,
        zk_session_timeout_ms=4000,
        overrides={
            "offsets.topic.num.partitions": "3",
            "offsets.topic.replication.factor": "3",
            "replica.lag.time.max.ms": "3000",
            # the primary's death is noticed after the group session (Kafka's floor is 6 s)
            "group.min.session.timeout.ms": "3000",
            "schema.registry.session.timeout.ms": "3000",
        },
        broker_overrides={
            i: {"schema.registry.listeners": f"http://127.0.0.1:{p}"} for i, p in ports.items()
        },
    )
    c.registry_urls = {i: f"http://127.0.0.1:{p}" for i, p in ports.items()}
    with c, logs_on_failure(request, c, 60):
        yield c


def test_primary_killed_during_registrations(cluster):
    urls = cluster.registry_urls

    def writable() -> bool:
        try:
            _call(urls[1] + "/config", "PUT", {"compatibility": "NONE"})
            return True
        except (urllib.error.URLError, OSError):
            return False

    wait_until(writable, 60, message="a primary takes writes")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    assert (
        len(admin.list_topics("_schemas", timeout=10).topics["_schemas"].partitions[0].replicas)
        == 3
    )
    # the primary: the eligible member with the lowest URL (election_protocol.choose_primary)
    primary = min(urls, key=lambda i: urls[i])
    acked: dict[str, int] = {}
    stop = threading.Event()
    alive = set(urls)

    def register_all() -> None:
        n = 0
        while not stop.is_set():
            subject = f"s{n}"
            schema = json.dumps({"type": "record", "name": f"R{n}", "fields": []})
            target = sorted(alive)[n % len(alive)]
            try:
                got = _call(
                    f"{urls[target]}/subjects/{subject}/versions", "POST", {"schema": schema}
                )
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
                continue  # retried: registering the same schema again is idempotent
            acked[subject] = got["id"]
            n += 1

    worker = threading.Thread(target=register_all, daemon=True)
    worker.start()
    wait_until(lambda: len(acked) >= 10, 30, message="registrations before the kill")
    cluster.broker(primary).kill()
    alive.discard(primary)
    before = len(acked)
    wait_until(lambda: len(acked) >= before + 10, 60, message="registrations after the kill")
    stop.set()
    worker.join(20)

    # the killed broker's registry was the primary, and a survivor's took over
    took_over = "(this instance: True)"
    assert took_over in cluster.broker(primary).log_text()
    assert any(took_over in cluster.broker(i).log_text() for i in alive)
    # no acknowledged id lost, none names two schemas, ids never reused
    assert len(set(acked.values())) == len(acked)
    expected = sorted(
        [
            {
                "subject": s,
                "version": 1,
                "id": i,
                "schema": json.dumps(
                    {"type": "record", "name": f"R{s[1:]}", "fields": []}, separators=(",", ":")
                ),
            }
            for s, i in acked.items()
        ],
        key=lambda d: d["subject"],
    )
    for i in sorted(alive):

        def caught_up(i: int = i) -> bool:
            return len(_call(urls[i] + "/schemas")) >= len(acked)

        wait_until(caught_up, 20, message=f"broker {i}'s registry has every schema")
    answers = [_call(urls[i] + "/schemas") for i in sorted(alive)]
    assert answers[0] == answers[1]
    served = {d["subject"]: d for d in answers[0]}
    assert [served[d["subject"]] for d in expected] == expected
