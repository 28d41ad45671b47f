"""The overview page: brokers (id, rack, address, controller, partitions led, up or
down), cluster health (:mod:`logstore.cli.cluster_health`'s report: under-replicated,
leaderless, offline, under min ISR) and the throughput charts.

A broker is *down* when it is not in the Metadata answer but some partition names it as
a replica, or the console saw it alive before. Throughput is records per second, from
the sampler's high watermarks (in) and groups' committed offsets (out).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from logstore.cli import cluster_health
from logstore.console.charts import line_chart
from logstore.console.kafka import Kafka
from logstore.console.web import render, state


def overview(kafka: Kafka) -> dict[str, Any]:
    admin = kafka.admin
    desc = admin.result(admin.client.describe_cluster(**admin.kwargs()), "describe cluster")
    kafka.remember(desc.nodes)
    observation = cluster_health.observe(kafka.options)
    health = cluster_health.report(observation, set(kafka.nodes))
    led: dict[int, int] = {}
    for p in observation.partitions:
        led[p.leader] = led.get(p.leader, 0) + 1
    ids = sorted(set(kafka.nodes) | set(health["brokers_down"]) | set(observation.brokers))
    brokers = []
    for i in ids:
        node = kafka.nodes.get(i)
        brokers.append(
            {
                "id": i,
                "address": f"{node.host}:{node.port}" if node else None,
                "rack": node.rack if node else None,
                "controller": i == health["controller"],
                "leads": led.get(i, 0),
                "up": i in observation.brokers,
            }
        )
    return {"cluster_id": desc.cluster_id, "brokers": brokers, "health": health}


def throughput_chart(request: web.Request) -> str:
    history = state(request).history
    return line_chart(
        {
            "in (records/s)": history.rates("topic:", prefix=True),
            "out (records/s)": history.rates("committed:", prefix=True),
        }
    )


async def page(request: web.Request) -> web.Response:
    data = await state(request).kafka.run(overview, state(request).kafka)
    return render(request, "overview.html", chart=throughput_chart(request), **data)


async def chart(request: web.Request) -> web.Response:
    return web.Response(text=throughput_chart(request), content_type="image/svg+xml")


def routes(app: web.Application) -> None:
    app.router.add_get("/", page, name="overview")
    app.router.add_get("/charts/throughput.svg", chart)
