"""DescribeCluster: the live brokers and the controller, from the metadata cache."""

from __future__ import annotations

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import CLUSTER_NAME, ResourceType
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.describe_cluster import DescribeClusterResponse


def handle_describe_cluster(apis, request, connection):
    nodes = apis.metadata_cache.alive_nodes(apis.advertised_listener(connection))
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        cluster_id=apis.cluster_id,
        controller_id=apis.metadata_cache.controller_id,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=n.id, host=n.host, port=n.port, rack=n.rack
            )
            for n in nodes
        ],
        cluster_authorized_operations=auth_helper.authorized_operations(
            apis,
            connection,
            ResourceType.CLUSTER,
            CLUSTER_NAME,
            request.body.include_cluster_authorized_operations,
        ),
    )


HANDLERS = {ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster}
