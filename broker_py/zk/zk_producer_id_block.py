"""Producer id blocks: ``/latest_producer_id_block``, claimed by a conditional write.

Invariant: blocks are claimed in order, each ``BLOCK_SIZE`` ids after the last one written;
a claim is setData at the version read, so two brokers never get the same block.
"""

from __future__ import annotations

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker_py.zk import zk_data
from broker_py.zk.zk_session import ZkSession

__all__ = ["ZkProducerIdBlocks"]


class ZkProducerIdBlocks(ZkSession):
    def claim_producer_id_block(self, broker_id: int) -> zk_data.ProducerIdsBlock:
        """Claims the next block of ``BLOCK_SIZE`` producer ids for ``broker_id``: reads
        ``/latest_producer_id_block`` and writes the block after it, conditional on the
        version read (another broker's claim in between → read again). The first block
        starts at 0."""
        path = zk_data.ProducerIdBlockZNode.PATH
        size = zk_data.ProducerIdBlockZNode.BLOCK_SIZE
        while True:
            try:
                data, stat = self._zk.get(path)
            except NoNodeError:
                try:
                    self._zk.create(path, b"", makepath=True)
                except NodeExistsError:
                    pass
                continue
            first = zk_data.ProducerIdBlockZNode.decode(data).last_producer_id + 1 if data else 0
            block = zk_data.ProducerIdsBlock(broker_id, first, size)
            try:
                self._zk.set(path, zk_data.ProducerIdBlockZNode.encode(block), version=stat.version)
            except BadVersionError:
                continue
            return block
