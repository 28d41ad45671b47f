"""``logstore cluster quotas alter|describe`` against a real broker: quotas set on a named
and a default entity, refused values answered with the broker's message (exit 1), a
dry run that writes nothing, rpk's describe text, JSON with filters, and removal."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli
from tests.integration.conftest import BrokerProcess


@pytest.fixture(scope="module")
def logstore(tmp_path_factory: pytest.TempPathFactory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("cli-quotas")))
    b.start()
    yield Cli(b.bootstrap)
    assert b.stop() == 0, b.log_text()[-4000:]


def test_quotas_alter_and_describe(logstore: Cli) -> None:
    logstore(
        "cluster", "quotas", "alter", "--default", "client-id",
        "--add", "consumer_byte_rate=200000", "--add", "request_percentage=12.5",
    )  # fmt: skip
    logstore(
        "cluster", "quotas", "alter", "--name", "user=alice", "--add", "producer_byte_rate=1024"
    )
    bad = logstore(
        "cluster", "quotas", "alter", "--name", "user=bob", "--add", "producer_byte_rate=1.5",
        check=False,
    )  # fmt: skip
    assert bad.returncode == 1 and "producer_byte_rate cannot be a fractional value" in bad.stdout
    dry = logstore.json(
        "cluster", "quotas", "alter", "--name", "user=carol", "--add", "request_percentage=5",
        "--dry",
    )  # fmt: skip
    assert dry == {"entity": "user=carol", "dry": True, "error": None}
    text = logstore("cluster", "quotas", "describe").stdout
    assert text.splitlines() == [
        "client-id=<default>",
        "  consumer_byte_rate=200000",
        "  request_percentage=12.5",
        "user=alice",
        "  producer_byte_rate=1024",
    ]
    assert logstore.json("cluster", "quotas", "describe", "--any", "client-id", "--strict") == [
        {
            "entity": [{"type": "client-id", "name": None}],
            "values": {"consumer_byte_rate": 200000, "request_percentage": 12.5},
        }
    ]
    logstore("cluster", "quotas", "alter", "--name", "user=alice", "--delete", "producer_byte_rate")
    assert logstore.json("cluster", "quotas", "describe", "--name", "user=alice") == []
