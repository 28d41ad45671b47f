"""Offsets committed with OffsetCommit v0: ``/consumers/<group>/offsets/<topic>/<partition>``
(Kafka 3.9's ZooKeeper mode keeps them there)."""

from __future__ import annotations

from broker_py.zk import zk_data
from broker_py.zk.zk_errors import zk_failures
from broker_py.zk.zk_node_ops import ZkNodeOps

__all__ = ["ZkConsumerOffsets"]


class ZkConsumerOffsets(ZkNodeOps):
    @zk_failures
    def set_or_create_consumer_offset(
        self, group: str, topic: str, partition: int, offset: int
    ) -> None:
        self.set_or_create(
            zk_data.ConsumerOffsetZNode.path(group, topic, partition),
            zk_data.ConsumerOffsetZNode.encode(offset),
        )

    @zk_failures
    def get_consumer_offset(self, group: str, topic: str, partition: int) -> int | None:
        """The offset OffsetCommit v0 stored, or None; ZkDataError if it does not read."""
        path = zk_data.ConsumerOffsetZNode.path(group, topic, partition)
        found = self.get_data(path)
        return None if found is None else zk_data.ConsumerOffsetZNode.decode(found[0], path=path)
