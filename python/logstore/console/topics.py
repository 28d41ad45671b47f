"""The topics pages: the list (partitions, replication factor, size, records per second;
searched by a substring of the name) and a topic's page (partitions with leader,
replicas, ISR, offline replicas, log start and end offsets; configs with their sources;
produce a record and delete the topic, with ``--allow-writes``).

A topic's size is the sum of its partitions' sizes on their leaders, from one
DescribeLogDirs (every partition) to each live broker; unknown (shown as -) when a broker
does not answer it. The rate is the sampler's (:mod:`logstore.console.kafka`).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from confluent_kafka import KafkaException, Producer

from logstore.cli.admin import BrokerError
from logstore.cli.connection import client_config_error
from logstore.cli.metadata_probe import connect, negotiated_version, offline_replicas
from logstore.cli.output import status_of
from logstore.cli.topic import describe_topic, is_internal, topic_metadata
from logstore.console.kafka import Kafka
from logstore.console.web import render, state, write_form
from logstore.protocol import ApiKey
from logstore.protocol.messages.log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from logstore.spark.kafka_client.errors import KafkaClientError

PRODUCE_TIMEOUT = 10.0


def leader_sizes(kafka: Kafka, leaders: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Each partition's size in bytes on its leader (``leaders``: partition -> broker id);
    partitions whose leader did not answer are left out."""
    conf = kafka.options.config()
    out: dict[tuple[str, int], int] = {}
    for broker_id in sorted(set(leaders.values())):
        node = kafka.nodes.get(broker_id)
        if node is None:
            continue
        try:
            connection = connect(conf, node.host, node.port, min(kafka.options.timeout, 5.0))
        except (KafkaClientError, OSError):
            continue
        try:
            version = negotiated_version(connection, ApiKey.DESCRIBE_LOG_DIRS)
            if version < 0:
                continue
            response = connection.request(
                ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None), version=version
            )
        except (KafkaClientError, OSError):
            continue
        finally:
            connection.close()
        assert isinstance(response, DescribeLogDirsResponse)
        for result in response.results:
            for t in result.topics if result.error_code == 0 else []:
                for p in t.partitions:
                    tp = (t.name, p.partition_index)
                    if leaders.get(tp) == broker_id and not p.is_future_key:
                        out[tp] = out.get(tp, 0) + p.partition_size
    return out


def topic_list(kafka: Kafka, search: str, internal: bool) -> list[dict[str, Any]]:
    md = kafka.admin.metadata()
    kafka.remember(list(md.brokers.values()))
    names = sorted(
        n for n in md.topics if (internal or not is_internal(n)) and search.lower() in n.lower()
    )
    leaders = {(n, p.id): p.leader for n in names for p in md.topics[n].partitions.values()}
    sizes = leader_sizes(kafka, leaders)
    rows = []
    for n in names:
        parts = list(md.topics[n].partitions.values())
        known = [sizes.get((n, p.id)) for p in parts]
        rows.append(
            {
                "name": n,
                "partitions": len(parts),
                "replicas": max((len(p.replicas) for p in parts), default=0),
                "under_replicated": sum(1 for p in parts if len(p.isrs) < len(p.replicas)),
                "size": sum(s for s in known if s is not None)
                if known and None not in known
                else None,
                "error": status_of(md.topics[n].error) if md.topics[n].error else None,
            }
        )
    return rows


def topic(kafka: Kafka, name: str) -> dict[str, Any]:
    meta = topic_metadata(kafka.admin, [name])[name]
    offline = offline_replicas(kafka.options, [name]).get(name)
    return describe_topic(kafka.admin, name, meta, offline)


def produce(kafka: Kafka, name: str, key: bytes | None, value: bytes, partition: int | None) -> Any:
    """Produces one record and waits for its acknowledgement: (partition, offset)."""
    try:
        producer = Producer({**kafka.options.config(), "linger.ms": 0})
    except KafkaException as exc:
        raise client_config_error(exc) from None
    result: dict[str, Any] = {}

    def delivered(err: Any, msg: Any) -> None:
        result["error"], result["msg"] = err, msg

    kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": delivered}
    if partition is not None:
        kwargs["partition"] = partition
    try:
        producer.produce(name, **kwargs)
    except KafkaException as exc:
        raise BrokerError(f"produce to {name}", exc) from None
    producer.flush(PRODUCE_TIMEOUT)
    if "msg" not in result:
        raise BrokerError(f"produce to {name}", TimeoutError("no acknowledgement"))
    if result["error"] is not None:
        raise BrokerError(f"produce to {name}", result["error"])
    return result["msg"].partition(), result["msg"].offset()


async def list_page(request: web.Request) -> web.Response:
    search = request.query.get("q", "")
    internal = request.query.get("internal") == "1"
    st = state(request)
    rows = await st.kafka.run(topic_list, st.kafka, search, internal)
    for r in rows:
        r["rate"] = st.history.rate(f"topic:{r['name']}")
    return render(request, "topics.html", topics=rows, q=search, internal=internal)


async def topic_page(request: web.Request, message: str | None = None) -> web.Response:
    st = state(request)
    name = request.match_info["topic"]
    data = await st.kafka.run(topic, st.kafka, name)
    return render(
        request, "topic.html", topic=data, rate=st.history.rate(f"topic:{name}"), message=message
    )


async def produce_action(request: web.Request) -> web.Response:
    form = await write_form(request, "Producing a record")
    st = state(request)
    name = request.match_info["topic"]
    key = str(form.get("key", ""))
    partition = str(form.get("partition", "")).strip()
    where = await st.kafka.run(
        produce,
        st.kafka,
        name,
        key.encode() if key else None,
        str(form.get("value", "")).encode(),
        int(partition) if partition.isdigit() else None,
    )
    return await topic_page(request, f"Produced to partition {where[0]} at offset {where[1]}.")


async def delete_action(request: web.Request) -> web.Response:
    form = await write_form(request, "Deleting a topic")
    st = state(request)
    name = request.match_info["topic"]
    if form.get("confirm") != name:
        return render(
            request,
            "error.html",
            status=400,
            title="Not deleted",
            message=f"Type the topic's name ({name}) to confirm.",
        )
    admin = st.kafka.admin

    def delete() -> None:
        admin.result(
            admin.client.delete_topics([name], operation_timeout=10, **admin.kwargs())[name],
            f"delete topic {name}",
        )

    await st.kafka.run(delete)
    raise web.HTTPSeeOther("/topics")


def routes(app: web.Application) -> None:
    app.router.add_get("/topics", list_page)
    app.router.add_get("/topics/{topic}", topic_page)
    app.router.add_post("/topics/{topic}/produce", produce_action)
    app.router.add_post("/topics/{topic}/delete", delete_action)
