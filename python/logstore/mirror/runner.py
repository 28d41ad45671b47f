"""Runs the flows of a mirror configuration: one thread per flow, each a loop that
copies records and, on their intervals, commits progress, emits heartbeats, refreshes
topics and their configs, emits checkpoints and syncs group offsets.

Startup of a flow: the internal topics are created when missing (``heartbeats``,
``<source>.checkpoints.internal`` and, in exactly-once mode,
``mm2-offsets.<source>.internal`` on the target; ``mm2-offset-syncs.<target>.internal``
where ``offset-syncs.topic.location`` says; one partition each but the offsets topic,
compacted), the remote topics are synced, and the source consumer group is joined with
the replicated topics. The loop prints ``mirror <source>-><target>: running`` once
subscribed.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from logstore.mirror import clients, source_offsets
from logstore.mirror.checkpointer import Checkpointer
from logstore.mirror.config import Flow
from logstore.mirror.copier import BATCH, Copier
from logstore.mirror.heartbeats import Heartbeat
from logstore.mirror.sensors import Sensors
from logstore.mirror.topic_sync import TopicSync

COMPACT = {"cleanup.policy": "compact"}
OFFSETS_PARTITIONS = 5


def offsets_topic(flow: Flow) -> str:
    return f"mm2-offsets.{flow.source}.internal"


class FlowRunner:
    def __init__(
        self,
        flow: Flow,
        stop: threading.Event,
        say: Callable[[str], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.flow = flow
        self.stop = stop
        self.say = say
        self.clock = clock
        self.sensors = Sensors(flow.source, flow.target, clock)
        self.error: BaseException | None = None
        self.name = f"logstore-mirror-{flow.source}->{flow.target}-{socket.gethostname()}"

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the caller, which exits non-zero
            self.error = exc
            self.stop.set()

    def _run(self) -> None:
        flow = self.flow
        policy = flow.policy()
        eos = flow.exactly_once
        src_admin = clients.admin(flow.source_client, self.name)
        tgt_admin = clients.admin(flow.target_client, self.name)
        syncs_on_target = flow.offset_syncs_on_target
        syncs_topic = policy.offset_syncs_topic(flow.target)
        syncs_client = flow.target_client if syncs_on_target else flow.source_client
        syncs_admin = tgt_admin if syncs_on_target else src_admin
        emit_syncs = flow.flag("emit.offset-syncs.enabled")
        emit_checkpoints = flow.flag("emit.checkpoints.enabled")
        emit_heartbeats = flow.flag("emit.heartbeats.enabled")
        if emit_syncs or emit_checkpoints:
            rf = flow.integer("offset-syncs.topic.replication.factor")
            clients.ensure_topic(syncs_admin, syncs_topic, 1, rf, COMPACT)
        checkpoints_topic = policy.checkpoints_topic(flow.source)
        if emit_checkpoints:
            rf = flow.integer("checkpoints.topic.replication.factor")
            clients.ensure_topic(tgt_admin, checkpoints_topic, 1, rf, COMPACT)
        heartbeats_topic = policy.heartbeats_topic()
        if emit_heartbeats:
            rf = flow.integer("heartbeats.topic.replication.factor")
            clients.ensure_topic(tgt_admin, heartbeats_topic, 1, rf, COMPACT)
        offsets = offsets_topic(flow)
        if eos:
            rf = flow.integer("replication.factor")
            clients.ensure_topic(tgt_admin, offsets, OFFSETS_PARTITIONS, rf, COMPACT)

        topics = TopicSync(flow, src_admin, tgt_admin)
        topics.refresh(sync_configs=flow.flag("sync.topic.configs.enabled"))

        refresh_s = flow.seconds("refresh.topics.interval.seconds")
        consumer = clients.consumer(
            flow.source_client,
            flow.group_id,
            self.name,
            **{
                "group.instance.id": flow.instance_member_id,
                "isolation.level": "read_committed",
                "topic.metadata.refresh.interval.ms": int(min(refresh_s, 300) * 1000) or 1000,
            },
        )
        forced: dict[str, Any] = {"enable.idempotence": True}
        if eos:
            forced["transactional.id"] = flow.transactional_id
            forced["transaction.timeout.ms"] = flow.integer("transaction.timeout.ms")
        producer = clients.producer(flow.target_client, self.name, **forced)
        aux = clients.producer(flow.target_client, self.name + "-internal")
        sync_producer = None
        if emit_syncs:
            sync_producer = (
                aux
                if syncs_on_target
                else clients.producer(flow.source_client, self.name + "-syncs")
            )
        copier = Copier(
            source_alias=flow.source,
            consumer=consumer,
            producer=producer,
            topics=topics,
            sensors=self.sensors,
            offset_lag_max=flow.integer("offset.lag.max"),
            sync_producer=sync_producer,
            offset_syncs_topic=syncs_topic,
            offsets_topic=offsets if eos else None,
            clock=self.clock,
        )
        stored_reader = None
        stored: dict[tuple[str, str, int], int] = {}
        if eos:
            producer.init_transactions(60)
            stored_reader = clients.TopicReader(flow.target_client, offsets, self.name + "-offsets")

        def on_assign(c: Any, partitions: list[Any]) -> None:
            if eos and stored_reader is not None:
                got = stored_reader.read_to_end(flow.integer("transaction.timeout.ms") / 1000 + 30)
                stored.update(source_offsets.fold((m.key(), m.value()) for m in got))
                c.assign(copier.exactly_once_positions(stored, partitions))

        def on_revoke(c: Any, partitions: list[Any]) -> None:
            tps = [(tp.topic, tp.partition) for tp in partitions]
            if not eos:
                producer.flush(60)
                copier.commit(tps, wait=True)
            copier.promote_delayed()
            copier.send_syncs()
            copier.forget(tps)

        subscribed = sorted(topics.topics)
        if subscribed:
            consumer.subscribe(subscribed, on_assign=on_assign, on_revoke=on_revoke)
        checkpointer = None
        if emit_checkpoints:
            reader = clients.TopicReader(syncs_client, syncs_topic, self.name + "-syncs-reader")
            checkpointer = Checkpointer(
                flow, src_admin, tgt_admin, aux, reader, topics, self.sensors, self.clock
            )
        self.say(f"mirror {flow.source}->{flow.target}: running ({len(subscribed)} topics)")

        now = time.monotonic()
        commit_s = flow.integer("offset.flush.interval.ms") / 1000.0
        due = {
            "commit": now + commit_s,
            "heartbeat": now,
            "refresh": now + refresh_s,
            "configs": now + flow.seconds("sync.topic.configs.interval.seconds"),
            "checkpoint": now + flow.seconds("emit.checkpoints.interval.seconds"),
            "groups": now + flow.seconds("sync.group.offsets.interval.seconds"),
        }
        clean = False
        try:
            while not self.stop.is_set():
                if subscribed:
                    msgs = consumer.consume(BATCH, 0.2)
                    copier.check_consumed(msgs)
                    if eos:
                        copier.transfer_exactly_once(msgs)
                    elif msgs:
                        copier.copy(msgs)
                else:
                    self.stop.wait(0.2)
                # serve delivery reports even while no record comes: they move the
                # committed offsets and the offset syncs
                producer.poll(0)
                copier.send_syncs()
                now = time.monotonic()
                if now >= due["commit"]:
                    due["commit"] = now + commit_s
                    if not eos:
                        copier.commit()
                    copier.promote_delayed()
                    copier.send_syncs()
                if emit_heartbeats and now >= due["heartbeat"]:
                    due["heartbeat"] = now + flow.seconds("emit.heartbeats.interval.seconds")
                    hb = Heartbeat(flow.source, flow.target, int(self.clock() * 1000))
                    aux.produce(heartbeats_topic, hb.value(), hb.key(), partition=0)
                    aux.poll(0)
                if flow.flag("refresh.topics.enabled") and now >= due["refresh"]:
                    configs = flow.flag("sync.topic.configs.enabled") and now >= due["configs"]
                    if configs:
                        due["configs"] = now + flow.seconds("sync.topic.configs.interval.seconds")
                    due["refresh"] = now + refresh_s
                    topics.refresh(sync_configs=configs)
                    if sorted(topics.topics) != subscribed:
                        subscribed = sorted(topics.topics)
                        if subscribed:
                            consumer.subscribe(subscribed, on_assign=on_assign, on_revoke=on_revoke)
                        else:
                            consumer.unsubscribe()
                if checkpointer is not None and now >= due["checkpoint"]:
                    due["checkpoint"] = now + flow.seconds("emit.checkpoints.interval.seconds")
                    owned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
                    checkpointer.emit(owned)
                if (
                    checkpointer is not None
                    and flow.flag("sync.group.offsets.enabled")
                    and now >= due["groups"]
                ):
                    due["groups"] = now + flow.seconds("sync.group.offsets.interval.seconds")
                    checkpointer.sync_groups()
            clean = True
        finally:
            if clean:
                producer.flush(60)
                if not eos:
                    copier.commit(wait=True)
                copier.promote_delayed()
                copier.send_syncs()
            consumer.close()
            for p in {id(x): x for x in (aux, sync_producer) if x is not None}.values():
                p.flush(30)
            for r in (stored_reader, checkpointer.syncs if checkpointer else None):
                if r is not None:
                    r.close()


def run(
    flows: list[Flow], say: Callable[[str], None], stop: threading.Event, metrics_port: int = 0
) -> list[FlowRunner]:
    """Runs every flow until ``stop`` is set or one fails; returns the runners (a
    failed one has ``error`` set)."""
    runners = [FlowRunner(f, stop, say) for f in flows]
    if metrics_port:
        from logstore.mirror import metrics

        metrics.serve(metrics_port, [r.sensors for r in runners])
        say(f"mirror: metrics on port {metrics_port}")
    threads = [threading.Thread(target=r.run, name=r.name, daemon=True) for r in runners]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(0.2)
    return runners
