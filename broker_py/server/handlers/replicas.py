"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments: where a
partition's replicas live and which one leads, decided by the controller
(:mod:`broker_py.server.replica_admin_manager`), a broker alone included: there every partition
is led by its one, preferred replica, so an election is never needed, a reassignment to
another broker names one that does not exist, and none is ever in progress.

With an authorizer, ElectLeaders and AlterPartitionReassignments need ALTER on the
cluster, ListPartitionReassignments DESCRIBE (CLUSTER_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey


def handle_elect_leaders(apis, request, connection):
    return apis.replica_admin_manager.elect_leaders(apis, request, connection)


def handle_alter_partition_reassignments(apis, request, connection):
    return apis.replica_admin_manager.alter_partition_reassignments(apis, request, connection)


def handle_list_partition_reassignments(apis, request, connection):
    return apis.replica_admin_manager.list_partition_reassignments(apis, request, connection)


HANDLERS = {
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
}
