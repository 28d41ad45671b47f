"""The CLIENT_METRICS config resource and ListClientMetricsResources through the
handlers, in process, over the broker-alone store: DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs with Kafka's codes, the store kept on disk, and authorization
(DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster); pushes through the handlers kept as
series until their instance goes."""

from __future__ import annotations

import json
import os
import uuid
from types import SimpleNamespace

import zstandard

from broker_py.config.config_entity_store import LocalConfigEntityStore
from broker_py.security.authorizer.acl_binding import AclOperation
from broker_py.server.handlers import configs, telemetry
from broker_py.server.telemetry.client_telemetry import ClientTelemetry
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages.configs import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from logstore.protocol.messages.telemetry import (
    GetTelemetrySubscriptionsRequest,
    ListClientMetricsResourcesRequest,
    PushTelemetryRequest,
)
from tests.broker.test_client_telemetry_payload import metrics_data

CLIENT_METRICS = 16


class Authorizer:
    def __init__(self, allowed: set[AclOperation]) -> None:
        self.allowed = allowed

    def authorize(self, principal, host, operation, resource_type, name):
        return operation in self.allowed


def make_apis(log_dir: str, authorizer=None):
    telemetry_ = ClientTelemetry(
        LocalConfigEntityStore(log_dir, "client-metrics.json"), 1024, lambda: 0
    )
    telemetry_.start()
    return SimpleNamespace(client_telemetry=telemetry_, authorizer=authorizer, zk_support=None)


CONNECTION = SimpleNamespace(principal="User:a", host="127.0.0.1")


def incremental(apis, name, *ops, connection=CONNECTION):
    R = IncrementalAlterConfigsRequest
    body = R(
        resources=[
            R.AlterConfigsResource(
                resource_type=CLIENT_METRICS,
                resource_name=name,
                configs=[
                    R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops
                ],
            )
        ],
        validate_only=False,
    )
    r = configs.handle_incremental_alter_configs(apis, SimpleNamespace(body=body), connection)
    return r.responses[0].error_code


def legacy(apis, name, values):
    R = AlterConfigsRequest
    body = R(
        resources=[
            R.AlterConfigsResource(
                resource_type=CLIENT_METRICS,
                resource_name=name,
                configs=[R.AlterableConfig(name=k, value=v) for k, v in values.items()],
            )
        ],
        validate_only=False,
    )
    r = configs.handle_alter_configs(apis, SimpleNamespace(body=body), CONNECTION)
    return r.responses[0].error_code


def describe(apis, name, connection=CONNECTION):
    R = DescribeConfigsRequest
    body = R(
        resources=[
            R.DescribeConfigsResource(
                resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    result = configs.handle_describe_configs(apis, SimpleNamespace(body=body), connection)
    r = result.results[0]
    return r.error_code, {c.name: (c.value, c.config_source, c.config_type) for c in r.configs}


def names(apis, connection=CONNECTION):
    r = telemetry.handle_list_client_metrics_resources(
        apis, SimpleNamespace(body=ListClientMetricsResourcesRequest()), connection
    )
    return r.error_code, [x.name for x in r.client_metrics_resources]


def test_alter_describe_list_and_delete(tmp_path):
    apis = make_apis(str(tmp_path))
    assert incremental(apis, "s", ("metrics", 0, "a."), ("interval.ms", 0, "1000")) == 0
    assert incremental(apis, "s", ("metrics", 2, "b.,a.")) == 0
    assert incremental(apis, "s", ("metrics", 3, "a.")) == 0
    assert describe(apis, "s") == (0, {"interval.ms": ("1000", 7, 3), "metrics": ("b.", 7, 7)})
    assert names(apis) == (0, ["s"])
    assert apis.client_telemetry.manager.subscriptions["s"].metrics == ("b.",)
    stored = json.load(open(os.path.join(tmp_path, "__logstore_metadata", "client-metrics.json")))
    assert stored["resources"] == {"s": {"metrics": "b.", "interval.ms": "1000"}}
    # the legacy AlterConfigs replaces the whole set
    assert legacy(apis, "s", {"match": "client_id=x"}) == 0
    assert describe(apis, "s")[1] == {"match": ("client_id=x", 7, 7)}
    assert legacy(apis, "s", {"interval.ms": "1"}) == ErrorCode.INVALID_REQUEST
    assert incremental(apis, "s", ("match", 1, None)) == 0
    assert names(apis) == (0, [])
    assert "s" not in apis.client_telemetry.manager.subscriptions
    assert describe(apis, "") == (ErrorCode.INVALID_REQUEST, {})
    # a new broker over the same log dir reads the resources back
    assert incremental(apis, "kept", ("metrics", 0, "*")) == 0
    again = make_apis(str(tmp_path))
    assert names(again) == (0, ["kept"])
    assert again.client_telemetry.manager.subscriptions["kept"].metrics == ("*",)


def test_authorization_on_the_cluster(tmp_path):
    apis = make_apis(str(tmp_path), Authorizer(set()))
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert incremental(apis, "s", ("metrics", 0, "*")) == denied
    assert describe(apis, "s")[0] == denied
    assert names(apis)[0] == denied
    apis.authorizer.allowed = {AclOperation.ALTER_CONFIGS}
    assert incremental(apis, "s", ("metrics", 0, "*")) == 0
    assert names(apis)[0] == denied
    apis.authorizer.allowed = {AclOperation.DESCRIBE_CONFIGS}
    assert names(apis) == (0, ["s"])
    assert describe(apis, "s") == (0, {"metrics": ("*", 7, 7)})


def test_pushes_become_series_until_the_instance_goes(tmp_path):
    now = [1_000_000]
    tel = ClientTelemetry(
        LocalConfigEntityStore(str(tmp_path), "client-metrics.json"), 100_000, lambda: now[0]
    )
    tel.start()
    tel.keep_points = True
    tel.manager.max_instances = 1
    apis = SimpleNamespace(client_telemetry=tel, authorizer=None, zk_support=None)
    assert incremental(apis, "all", ("metrics", 0, "*"), ("interval.ms", 0, "1000")) == 0
    client = SimpleNamespace(
        client_id="app", client_software="librdkafka/2.16.0", host="10.0.0.1", peer="10.0.0.1:5"
    )

    def subscribe():
        body = GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0))
        r = telemetry.handle_get_telemetry_subscriptions(apis, SimpleNamespace(body=body), client)
        assert r.error_code == 0 and list(r.requested_metrics) == ["*"]
        return r

    def push(r, payload, compression=4):
        body = PushTelemetryRequest(
            client_instance_id=r.client_instance_id,
            subscription_id=r.subscription_id,
            terminating=False,
            compression_type=compression,
            metrics=payload,
        )
        return telemetry.handle_push_telemetry(apis, SimpleNamespace(body=body), client)

    first = subscribe()
    assert push(first, zstandard.ZstdCompressor().compress(metrics_data())).error_code == 0
    assert [i for i, c, _ in tel.pushed.snapshot()] == [str(first.client_instance_id)]
    assert tel.manager.instances[first.client_instance_id].attributes == {
        "client_id": "app",
        "client_software_name": "librdkafka",
        "client_software_version": "2.16.0",
        "client_source_address": "10.0.0.1",
        "client_source_port": "5",
        "client_instance_id": str(first.client_instance_id),
    }
    # a bomb: past ten times telemetry.max.bytes once decompressed
    bomb = zstandard.ZstdCompressor().compress(b"\0" * 1_000_001)
    now[0] += 1000
    assert push(first, bomb).error_code == ErrorCode.TELEMETRY_TOO_LARGE
    # a second instance pushes the first out of the manager (bound 1): its series go
    second = subscribe()
    now[0] += 1000
    tel.expire()
    assert tel.pushed.instance_ids() == []
    assert push(second, metrics_data(), 0).error_code == 0
    assert tel.pushed.instance_ids() == [str(second.client_instance_id)]
    now[0] += 60_000  # max(60 s, 3 intervals) after its last request
    tel.expire()
    assert tel.pushed.instance_ids() == [] and not tel.manager.instances
