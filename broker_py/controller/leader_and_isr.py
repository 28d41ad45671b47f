"""A partition's leader and ISR as the controller elected them (Kafka's
``LeaderIsrAndControllerEpoch``), with the controller epoch that wrote them. ``zk_data``
reads and writes it as ``/brokers/topics/<T>/partitions/<P>/state``, whose zkVersion is
the partition epoch."""

from __future__ import annotations

from dataclasses import dataclass

NO_LEADER, LEADER_DURING_DELETE = -1, -2
RECOVERED, RECOVERING = 0, 1  # LeaderRecoveryState


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    leader: int  # NO_LEADER, or LEADER_DURING_DELETE while the topic is deleted
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = RECOVERED
    partition_epoch: int = -1  # the state node's zkVersion, not in its data
