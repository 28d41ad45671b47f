"""DescribeCluster: this apis, which is also the controller."""

from __future__ import annotations

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import CLUSTER_NAME, ResourceType
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.describe_cluster import DescribeClusterResponse


def handle_describe_cluster(apis, request, connection):
    listener = apis.advertised_listener(connection)
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        cluster_id=apis.cluster_id,
        controller_id=apis.broker_id,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=apis.broker_id, host=listener.host, port=listener.port, rack=None)],
        cluster_authorized_operations=auth_helper.authorized_operations(
            apis, connection, ResourceType.CLUSTER, CLUSTER_NAME, request.body.include_cluster_authorized_operations
        ),
    )


HANDLERS = {ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster}
