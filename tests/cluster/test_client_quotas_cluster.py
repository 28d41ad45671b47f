"""Client quotas across two real brokers and a real ZooKeeper: a quota altered through
broker 1 is kept in Kafka's layout (``/config/users/<default>/clients/<client>``),
described and enforced by broker 2 once the change notification reaches it, and gone
from both when removed."""

from __future__ import annotations

import json

from kazoo.client import KazooClient

from logstore.protocol.messages.api_versions import ApiVersionsRequest
from tests.cluster.harness.cluster import Cluster
from tests.integration.clients import wire_call
from tests.integration.test_client_quotas import alter, describe
from tests.support.waiting import wait_until

CLIENT_ID = "logstore-tests"  # wire_call's
ENTITY = [("user", None), ("client-id", CLIENT_ID)]


def test_quota_reaches_the_other_broker(tmp_path) -> None:
    with Cluster(tmp_path, n_brokers=2, zk_session_timeout_ms=6000) as c:
        b1, b2 = c.bootstrap(1), c.bootstrap(2)
        wait_until(lambda: describe(b2, 1) == {}, 30, message="broker 2 serving")
        assert wire_call(b2, ApiVersionsRequest(), 2).throttle_time_ms == 0
        assert alter(b1, 1, ENTITY, [("request_percentage", 1e-7, False)]) == [(0, None)]
        wanted = {(("user", None), ("client-id", CLIENT_ID)): {"request_percentage": 1e-7}}
        wait_until(lambda: describe(b2, 1) == wanted, 10, message="the quota on broker 2")
        # Enforced there: each request of this client goes over it (throttle <= 1 window).
        assert 0 < wire_call(b2, ApiVersionsRequest(), 2).throttle_time_ms <= 1000
        zk = KazooClient(hosts=c.zk_connect)
        zk.start(10)
        try:
            data, _ = zk.get(f"/config/users/<default>/clients/{CLIENT_ID}")
            assert json.loads(data) == {"version": 1, "config": {"request_percentage": "1e-07"}}
        finally:
            zk.stop()
            zk.close()
        assert alter(b2, 1, ENTITY, [("request_percentage", 0, True)]) == [(0, None)]
        wait_until(lambda: describe(b1, 1) == {}, 10, message="the removal on broker 1")
        assert wire_call(b1, ApiVersionsRequest(), 2).throttle_time_ms == 0
