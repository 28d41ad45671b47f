"""The broker's ZooKeeper client (Kafka's ``KafkaZkClient``): its one kazoo client, through
which every ZooKeeper call of the broker goes. One class composed of the families of its
methods, each in its own module:

- :mod:`~broker_py.zk.zk_session`: the session, the chroot and top-level paths, the
  cluster id;
- :mod:`~broker_py.zk.zk_node_ops`: reads, writes and watches of single znodes, pipelined,
  and the operations of a multi;
- :mod:`~broker_py.zk.zk_broker_registration`: ``/brokers/ids/N`` (the broker epoch is its
  czxid) and ``/brokers/seqid``;
- :mod:`~broker_py.zk.zk_controller_election`: ``/controller`` and ``/controller_epoch``;
- :mod:`~broker_py.zk.zk_controller_writes`: the controller's writes, each a multi behind
  ``check(/controller_epoch, zkVersion)``;
- :mod:`~broker_py.zk.zk_producer_id_block`: ``/latest_producer_id_block``;
- :mod:`~broker_py.zk.zk_consumer_offsets`: OffsetCommit v0's ``/consumers`` offsets;
- :mod:`~broker_py.zk.zk_entity_nodes`: configs, ACLs, credentials and their change
  notifications (versioned reads, conditional writes, sequential nodes).

Failures: :mod:`~broker_py.zk.zk_errors`.
"""

from __future__ import annotations

from broker_py.zk.zk_broker_registration import ZkBrokerRegistration
from broker_py.zk.zk_consumer_offsets import ZkConsumerOffsets
from broker_py.zk.zk_controller_election import ZkControllerElection
from broker_py.zk.zk_controller_writes import ZkControllerWrites
from broker_py.zk.zk_entity_nodes import ZkEntityNodes
from broker_py.zk.zk_producer_id_block import ZkProducerIdBlocks

__all__ = ["KafkaZkClient"]


class KafkaZkClient(
    ZkBrokerRegistration,
    ZkControllerElection,
    ZkControllerWrites,
    ZkProducerIdBlocks,
    ZkConsumerOffsets,
    ZkEntityNodes,
):
    """``KafkaZkClient(connect, session_timeout_ms, connection_timeout_ms, on_state)``:
    see :class:`~broker_py.zk.zk_session.ZkSession`."""
