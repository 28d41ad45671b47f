"""The broker's Prometheus endpoint scraped by a real Prometheus server (Debian's
``prometheus`` package, installed by scripts/test.sh) while clients load the broker;
the series are read back through Prometheus's HTTP API (/api/v1/query). The Grafana
dashboard in docs/grafana is checked against the same broker: every metric its queries
name is served, and Prometheus evaluates every query."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import BrokerProcess
from tests.support.ports import free_port
from tests.support.waiting import wait_until

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "logstore-dashboard.json"


class PrometheusServer:
    def __init__(self, workdir: Path, target: str) -> None:
        if not os.path.exists(PROMETHEUS):
            raise RuntimeError(
                "Prometheus is not installed: run scripts/test.sh (apt-get install prometheus)"
            )
        self.workdir = workdir
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: logstore\n    static_configs:\n"
            f"      - targets: ['{target}']\n"
        )
        self.log = open(workdir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": expr}
        )
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, expr: str) -> float | None:
        """The value of a query giving one series, None while it gives none."""
        try:
            result = self.query(expr)
        except OSError:
            return None
        return float(result[0]["value"][1]) if result else None

    def wait_value(self, expr: str, ok, timeout: float = 30.0) -> float:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.value(expr)
            if last is not None and ok(last):
                return last
            time.sleep(0.5)
        raise AssertionError(
            f"{expr}: last value {last}\n{(self.workdir / 'prometheus.log').read_text()[-2000:]}"
        )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def test_prometheus_scrapes_a_broker_under_load(tmp_path: Path) -> None:
    metrics_port = free_port()
    broker = BrokerProcess(
        str(tmp_path / "broker"),
        {
            "metrics.port": str(metrics_port),
            "metrics.host": "127.0.0.1",
            "offsets.topic.num.partitions": "4",
        },
    )
    os.makedirs(broker.workdir, exist_ok=True)
    broker.start()
    prometheus = PrometheusServer(tmp_path, f"127.0.0.1:{metrics_port}")
    topic, group = "metered", "metered-group"
    stop = threading.Event()
    produced = [0]
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)

        def load() -> None:
            p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
            deadline = time.monotonic() + 120
            while not stop.is_set() and time.monotonic() < deadline:
                for _ in range(50):
                    p.produce(topic, value=b"x" * 100, partition=produced[0] % 2)
                    produced[0] += 1
                p.flush(10)
                time.sleep(0.05)
            p.flush(10)

        loader = threading.Thread(target=load, daemon=True)
        loader.start()

        assert prometheus.wait_value('up{job="logstore"}', lambda v: v == 1) == 1
        first = prometheus.wait_value(
            f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{topic}"}}', lambda v: v > 0
        )
        # The counter moves between scrapes while the load runs.
        prometheus.wait_value(
            f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{topic}"}}',
            lambda v: v > first + 100,
        )
        prometheus.wait_value(
            f'rate(kafka_server_brokertopicmetrics_bytesin_total{{topic="{topic}"}}[5s])',
            lambda v: v > 0,
        )
        prometheus.wait_value(
            'kafka_network_requestmetrics_requests_total{request="Produce"}', lambda v: v > 0
        )
        prometheus.wait_value(
            'sum(kafka_network_requestmetrics_totaltime_seconds_bucket{request="Produce",le="+Inf"})',
            lambda v: v > 0,
        )
        prometheus.wait_value(
            'kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}',
            lambda v: v >= 0,
        )
        prometheus.wait_value(f'sum(kafka_log_log_size{{topic="{topic}"}})', lambda v: v > 0)
        prometheus.wait_value(
            'kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"}',
            lambda v: v >= 1,
        )
        assert prometheus.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert prometheus.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert prometheus.value("kafka_server_replicamanager_leadercount") >= 2
        assert (
            prometheus.value(
                'kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Produce"}'
            )
            is not None
        )

        # A consumer reads some records and commits: bytes out move, and the lag is there.
        c = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        read = 0
        deadline = time.monotonic() + 30
        while read < 100 and time.monotonic() < deadline:
            read += sum(1 for m in c.consume(100, 0.5) if m.error() is None)
        assert read >= 100
        committed = {
            0: 30,
            1: 20,
        }  # both partitions hold more: the load wrote 50 to each before any read
        c.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False
        )
        c.close()
        prometheus.wait_value(
            f'kafka_server_brokertopicmetrics_bytesout_total{{topic="{topic}"}}', lambda v: v > 0
        )

        stop.set()
        loader.join(30)
        ends = {}
        for p in (0, 1):
            probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
            ends[p] = probe.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            probe.close()
        assert sum(ends.values()) == produced[0]
        for p in (0, 1):
            lag = (
                f'kafka_consumergroup_lag{{consumergroup="{group}",'
                f'topic="{topic}",partition="{p}"}}'
            )
            assert (
                prometheus.wait_value(lag, lambda v, p=p: v == ends[p] - committed[p])
                == ends[p] - committed[p]
            )
        total = prometheus.wait_value(
            f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{topic}"}}',
            lambda v: v == produced[0],
        )
        assert total == produced[0]

        # kafka_exporter's series, from the partitions' leader (and this broker is the
        # controller): offsets as a client reads them.
        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        assert prometheus.wait_value("kafka_brokers", lambda v: v == 1) == 1
        assert prometheus.value(f'kafka_topic_partitions{{topic="{topic}"}}') == 2
        for p in (0, 1):
            at = f'{{topic="{topic}",partition="{p}"}}'
            assert prometheus.wait_value(
                f"kafka_topic_partition_current_offset{at}", lambda v, p=p: v == ends[p]
            ) == float(ends[p])
            assert prometheus.value(f"kafka_topic_partition_oldest_offset{at}") == 0
            assert prometheus.value(f"kafka_topic_partition_leader{at}") == leader
            assert prometheus.value(f"kafka_topic_partition_leader_is_preferred{at}") == 1
            assert prometheus.value(f"kafka_topic_partition_replicas{at}") == 1
            assert prometheus.value(f"kafka_topic_partition_in_sync_replica{at}") == 1
            assert prometheus.value(f"kafka_topic_partition_under_replicated_partition{at}") == 0

        _failed_requests(broker.bootstrap, admin, prometheus)
        _broker_wide_and_loop_series(prometheus, topic)
        _check_dashboard(prometheus, metrics_port)
    finally:
        stop.set()
        prometheus.stop()
        broker.kill()


def _failed_requests(bootstrap: str, admin: AdminClient, prometheus: PrometheusServer) -> None:
    """A record too large for its topic and a fetch past the log end: each counts as a
    failed request of its topic and broker-wide, and as its error code."""
    tiny = "tiny"
    admin.create_topics([NewTopic(tiny, 1, 1, config={"max.message.bytes": "200"})])[tiny].result(
        30
    )
    delivered: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 100000, "retries": 0})
    p.produce(tiny, value=b"y" * 2000, on_delivery=lambda err, msg: delivered.append(err))
    p.flush(30)
    assert delivered and delivered[0] is not None, delivered
    assert delivered[0].name() == "MSG_SIZE_TOO_LARGE"
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "past-the-end", "auto.offset.reset": "error"}
    )
    c.assign([TopicPartition(tiny, 0, 1_000_000)])
    errors = []
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is not None:
            errors.append(m.error())
    c.close()
    assert errors, "the fetch past the log end was answered with an error"
    for expr in (
        f'kafka_server_brokertopicmetrics_failedproducerequests_total{{topic="{tiny}"}}',
        'kafka_server_brokertopicmetrics_failedproducerequests_total{topic=""}',
        'kafka_network_requestmetrics_errors_total{request="Produce",error="MESSAGE_TOO_LARGE"}',
        f'kafka_server_brokertopicmetrics_failedfetchrequests_total{{topic="{tiny}"}}',
        'kafka_server_brokertopicmetrics_failedfetchrequests_total{topic=""}',
        'kafka_network_requestmetrics_errors_total{request="Fetch",error="OFFSET_OUT_OF_RANGE"}',
    ):
        assert prometheus.wait_value(expr, lambda v: v >= 1) >= 1
    assert prometheus.wait_value(
        'kafka_network_requestmetrics_errors_total{request="Produce",error="NONE"}',
        lambda v: v > 0,
    )


def _broker_wide_and_loop_series(prometheus: PrometheusServer, topic: str) -> None:
    """Broker-wide meters (no topic label) are the sums of the topics'; queue time, idle
    ratios, the fetcher and election series (0 on a broker alone) and the process's."""
    for name in ("messagesin", "bytesin", "bytesout", "totalproducerequests"):
        series = f"kafka_server_brokertopicmetrics_{name}_total"
        wide = prometheus.wait_value(f'{series}{{topic=""}}', lambda v: v > 0)
        per_topic = prometheus.value(f'sum({series}{{topic!=""}})')
        assert wide == per_topic, (name, wide, per_topic)
    assert (
        prometheus.wait_value(
            'kafka_network_requestmetrics_requestqueuetimems_count{request="Produce"}',
            lambda v: v > 0,
        )
        > 0
    )
    assert (
        prometheus.value(
            'kafka_network_requestmetrics_requestqueuetime_seconds_count{request="Produce"}'
        )
        > 0
    )
    for idle in (
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
        "kafka_network_socketserver_networkprocessoravgidlepercent",
    ):
        value = prometheus.wait_value(idle, lambda v: 0 <= v <= 1)
        assert 0 < value <= 1, (idle, value)
    assert prometheus.value('kafka_server_replicafetchermanager_maxlag{clientId="Replica"}') == 0
    # No replica is throttled on a broker alone (KIP-73's byte rates).
    assert prometheus.value("kafka_server_leaderreplication_byte_rate") == 0
    assert prometheus.value("kafka_server_followerreplication_byte_rate") == 0
    assert (
        prometheus.value("kafka_controller_controllerstats_leaderelectionrateandtimems_count") == 0
    )
    assert prometheus.value("process_cpu_seconds_total") > 0
    assert prometheus.value("process_resident_memory_bytes") > 10_000_000
    assert prometheus.value("process_open_fds") > 0


# A metric name in a PromQL expression (label names, functions and keywords do not
# start so).
_METRIC = re.compile(r"\b(?:kafka|process)_[a-z0-9_]+")


def _check_dashboard(prometheus: PrometheusServer, metrics_port: int) -> None:
    """Every query of the dashboard names only series the broker serves, and Prometheus
    evaluates each to at least one series."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [
        t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", ()) if "expr" in t
    ]
    assert len(exprs) >= 20
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    served = {
        line.split("{", 1)[0].split(" ", 1)[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    for expr in exprs:
        names = _METRIC.findall(expr)
        assert names, expr
        missing = [n for n in names if n not in served]
        assert not missing, f"{expr}: {missing} not served"
        query = expr.replace("$__rate_interval", "30s")
        # A rate needs two scrapes of a series that may have just appeared.
        wait_until(lambda q=query: prometheus.query(q), 15, 0.5, f"a series for {query}")


def test_metrics_are_off_by_default_and_a_busy_port_names_metrics_port(tmp_path: Path) -> None:
    import socket

    broker = BrokerProcess(str(tmp_path / "plain"))
    os.makedirs(broker.workdir, exist_ok=True)
    broker.start()
    try:
        assert "Prometheus metrics" not in broker.log_text()
    finally:
        broker.kill()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = BrokerProcess(
            str(tmp_path / "busy"),
            {"metrics.port": str(taken.getsockname()[1]), "metrics.host": "127.0.0.1"},
        )
        os.makedirs(busy.workdir, exist_ok=True)
        with pytest.raises(RuntimeError):
            busy.start(timeout=30)
        busy.proc.wait(30)
        assert busy.proc.returncode == 2
        assert "configuration metrics.port" in busy.log_text()
