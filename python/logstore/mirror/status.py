"""``logstore mirror status``: per replicated topic, how far the mirror's source group
has copied (its committed offsets, which both delivery modes commit) against the
source's end offsets, and the remote topic's end offsets on the target."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaException, TopicPartition

from logstore.mirror import clients
from logstore.mirror.config import Flow

try:
    from confluent_kafka import ConsumerGroupTopicPartitions
except ImportError:  # pragma: no cover
    from confluent_kafka.admin import ConsumerGroupTopicPartitions  # type: ignore

TIMEOUT = 30.0


@dataclass(frozen=True)
class TopicStatus:
    topic: str
    remote: str
    partitions: int
    source_end: int  # sum of the source partitions' end offsets
    copied: int  # sum of the committed positions (the log start where none)
    target_end: int  # sum of the remote partitions' end offsets (0 if absent)

    @property
    def lag(self) -> int:
        return max(0, self.source_end - self.copied)


@dataclass(frozen=True)
class FlowStatus:
    source: str
    target: str
    group: str
    members: int
    topics: list[TopicStatus]


def flow_status(flow: Flow) -> FlowStatus:
    name = "logstore-mirror-status"
    src_admin = clients.admin(flow.source_client, name)
    topic_filter = flow.topic_filter()
    policy = flow.policy()
    meta = src_admin.list_topics(timeout=TIMEOUT)
    wanted = sorted(
        t for t, md in meta.topics.items() if md.error is None and topic_filter.should_replicate(t)
    )
    committed: dict[tuple[str, int], int] = {}
    members = 0
    try:
        got = src_admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(flow.group_id)], request_timeout=TIMEOUT
        )[flow.group_id].result()
        committed = {
            (tp.topic, tp.partition): tp.offset for tp in got.topic_partitions if tp.offset >= 0
        }
        desc = src_admin.describe_consumer_groups([flow.group_id], request_timeout=TIMEOUT)[
            flow.group_id
        ].result()
        members = len(desc.members)
    except KafkaException:
        pass
    src = clients.consumer(flow.source_client, name, name)
    tgt = clients.consumer(flow.target_client, name, name)
    out: list[TopicStatus] = []
    try:
        tmeta = tgt.list_topics(timeout=TIMEOUT)
        for t in wanted:
            remote = policy.format_remote_topic(flow.source, t)
            parts = sorted(meta.topics[t].partitions)
            source_end = copied = target_end = 0
            for p in parts:
                low, high = src.get_watermark_offsets(TopicPartition(t, p), TIMEOUT)
                source_end += high
                copied += max(committed.get((t, p), low), low)
            rmd = tmeta.topics.get(remote)
            if rmd is not None and rmd.error is None:
                for p in sorted(rmd.partitions):
                    target_end += tgt.get_watermark_offsets(TopicPartition(remote, p), TIMEOUT)[1]
            out.append(TopicStatus(t, remote, len(parts), source_end, copied, target_end))
    finally:
        src.close()
        tgt.close()
    return FlowStatus(flow.source, flow.target, flow.group_id, members, out)
