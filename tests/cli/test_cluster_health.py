"""``logstore cluster health`` against a real three-broker cluster with a real ZooKeeper:
healthy (exit status 0) first; after one broker is SIGKILLed, unhealthy (exit status 1)
naming it down, its partitions under-replicated with offline replicas, and those of a
topic with ``min.insync.replicas=3`` under min ISR. ``--watch`` prints the healthy
report, then the unhealthy one, never the same report twice in a row, and exits 130 on
Ctrl-C. No broker answering is exit status 2."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading

from tests.cli.conftest import Cli, table_rows, unique
from tests.cluster.harness.cluster import Cluster
from tests.support.ports import free_port
from tests.support.processes import repo_env
from tests.support.waiting import wait_until

SESSION_MS = 4000


class Watch:
    """``logstore cluster health --watch`` as a subprocess, its stdout lines collected."""

    def __init__(self, bootstrap: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "logstore", "cluster", "health", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=repo_env(LOGSTORE_BROKERS=bootstrap),
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def reports(self) -> list[dict]:
        return [json.loads(line) for line in list(self.lines) if line.strip()]

    def interrupt(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(10)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


def test_health_of_a_cluster_with_a_broker_killed(tmp_path) -> None:
    with Cluster(tmp_path, n_brokers=3, zk_session_timeout_ms=SESSION_MS) as c:
        logstore = Cli(c.bootstrap_servers)
        wait_until(
            lambda: len(logstore.json("cluster", "info")["brokers"]) == 3, 30, 0.5, "3 brokers"
        )
        topic, strict = unique("health"), unique("strict")
        c.create_topic(topic, 3, 3)
        c.create_topic(strict, 1, 3, config={"min.insync.replicas": "3"})

        healthy = wait_until(
            lambda: (
                (r := logstore("cluster", "health", "--format", "json", check=False))
                and r.returncode == 0
                and json.loads(r.stdout)
            ),
            30,
            0.5,
            "a healthy report",
        )
        assert healthy["healthy"] is True and healthy["unhealthy_reasons"] == []
        assert healthy["brokers"] == [1, 2, 3] and healthy["brokers_down"] == []
        assert healthy["controller"] in (1, 2, 3)
        assert healthy["topics"] >= 2 and healthy["partitions"] >= 4
        assert healthy["offline_replicas"] == [] and healthy["under_min_isr_partitions"] == []
        assert table_rows(logstore("cluster", "health").stdout)[0] == ["HEALTHY", "true"]

        victim = next(i for i in (1, 2, 3) if i != healthy["controller"])
        # The victim's address first: every ask moves on to the next bootstrap server.
        bootstrap = ",".join(
            [c.bootstrap(victim), *(c.bootstrap(i) for i in (1, 2, 3) if i != victim)]
        )
        logstore = Cli(bootstrap)
        watch = Watch(bootstrap, "--watch", "0.3", "--format", "json", "--timeout", "3")
        wait_until(lambda: watch.reports(), 30, 0.1, "the first --watch report")

        c.broker(victim).kill()

        ours = (topic, strict)

        def unhealthy() -> dict | None:
            r = logstore("cluster", "health", "--format", "json", "--timeout", "3", check=False)
            data = json.loads(r.stdout) if r.returncode == 1 else None
            offline = [p for p in (data or {}).get("offline_replicas") or [] if p["topic"] in ours]
            return data if len(offline) == 4 else None

        sick = wait_until(unhealthy, SESSION_MS / 1000 + 40, 0.5, f"broker {victim} down")
        assert sick["healthy"] is False
        assert sick["brokers_down"] == [victim]
        assert victim not in sick["brokers"] and sick["controller"] in sick["brokers"]
        assert {"brokers_down", "under_replicated_partitions", "offline_replicas"} <= set(
            sick["unhealthy_reasons"]
        )
        under = [p for p in sick["under_replicated_partitions"] if p["topic"] in ours]
        assert len(under) == 4
        assert all(victim in p["replicas"] and victim not in p["isr"] for p in under)
        assert all(p["offline_replicas"] == [victim] for p in sick["offline_replicas"])
        assert sick["under_min_isr_partitions"] == [
            {
                "topic": strict,
                "partition": 0,
                "isr": sick_isr(sick, strict),
                "min_insync_replicas": 3,
            }
        ]
        assert "under_min_isr_partitions" in sick["unhealthy_reasons"]

        table = logstore("cluster", "health", "--timeout", "3", check=False)
        assert table.returncode == 1, table.stderr
        rows = table_rows(table.stdout)
        assert ["HEALTHY", "false"] in rows and ["BROKERS DOWN", str(victim)] in rows
        header = rows.index(
            ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE", "MIN-ISR"]
        )
        strict_row = next(r for r in rows[header + 1 :] if r[0] == strict)
        assert strict_row[5] == str(victim) and strict_row[6] == "3"

        wait_until(
            lambda: any(r["brokers_down"] == [victim] for r in watch.reports()),
            30,
            0.1,
            "--watch reporting the broker down",
        )
        code, stderr = watch.interrupt()
        assert code == 130, stderr
        reports = watch.reports()
        assert reports[0]["healthy"] is True and reports[-1]["healthy"] is False
        plain = [{k: v for k, v in r.items() if k != "time"} for r in reports]
        assert all(a != b for a, b in zip(plain, plain[1:], strict=False)), plain

    nowhere = Cli(f"127.0.0.1:{free_port()}")("cluster", "health", "--timeout", "1", check=False)
    assert nowhere.returncode == 2 and "cannot connect" in nowhere.stderr


def sick_isr(report: dict, topic: str) -> list[int]:
    (p,) = [p for p in report["under_replicated_partitions"] if p["topic"] == topic]
    return p["isr"]
