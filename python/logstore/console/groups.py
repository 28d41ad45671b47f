"""The consumer groups pages: the list (type, state, members, lag) and a group's page
(state, protocol, members and their assignments, lag per partition from
:func:`logstore.cli.group.describe_one`, total lag charted over time, and resetting its
committed offsets).

Share groups (KIP-932) are listed beside them (ListGroups filtered on type share, as
``logstore group list`` finds them: confluent-kafka's list leaves them out); a share
group's page is :func:`logstore.cli.group.describe_share`'s description (ShareGroupDescribe
and DescribeShareGroupOffsets to its coordinator): epochs, members and assignments, and per
partition the share-partition start offset, log start and end and the records in flight,
their total charted over time. Its start offsets are not moved here (``logstore group
seek`` does not move them).

Resetting works as ``logstore group seek`` does: the target is ``start``, ``end``, an
offset, ``-N`` or ``@TIME`` (:mod:`logstore.cli.positions`), for the partitions the group
committed or those named (``T1,T2`` or ``T1:0,1;T2``); a preview shows each partition's
current and new offset and changes nothing; applying it needs ``--allow-writes`` and a
group with no members (Kafka refuses the commit otherwise: NON_EMPTY_GROUP).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from logstore.cli.admin import BrokerError
from logstore.cli.common import CliError
from logstore.cli.group import (
    _INACTIVE,
    _topic_partitions,
    committed,
    describe_groups,
    describe_one,
    describe_share,
    state_name,
    type_name,
)
from logstore.cli.output import status_of
from logstore.cli.positions import parse_position
from logstore.cli.share_group_describe import share_group_at, share_groups
from logstore.console.charts import line_chart
from logstore.console.kafka import Kafka
from logstore.console.web import read_form, render, state, write_form

DESCRIBED = 500  # groups described for the list page's member counts
SHARES_DESCRIBED = 50  # share groups described (one coordinator round trip each)
SHARE_WORKERS = 4


def _share_at(kafka: Kafka, group_id: str) -> dict[str, Any] | None:
    """The share group's description, or None when it is not one (or its coordinator
    cannot say)."""
    try:
        return share_group_at(kafka.options, group_id)
    except CliError:
        return None


def share_group_list(kafka: Kafka) -> list[dict[str, Any]]:
    """The share groups with their states; the first :data:`SHARES_DESCRIBED` with their
    assignors and member counts."""
    states = share_groups(kafka.options)
    names = sorted(states)
    with ThreadPoolExecutor(SHARE_WORKERS, thread_name_prefix="console-share") as pool:
        described = dict(
            zip(names, pool.map(lambda g: _share_at(kafka, g), names[:SHARES_DESCRIBED]))
        )
    rows = []
    for name in names:
        d = described.get(name)
        rows.append(
            {
                "group": name,
                "type": "share",
                "state": states[name].upper(),
                "protocol": (d["assignor"] or None) if d else None,
                "members": len(d["members"]) if d else None,
            }
        )
    return rows


def group_list(kafka: Kafka) -> list[dict[str, Any]]:
    admin = kafka.admin
    listed = admin.result(admin.client.list_consumer_groups(**admin.kwargs()), "list groups")
    groups = sorted(listed.valid, key=lambda g: g.group_id)
    ids = [g.group_id for g in groups[:DESCRIBED]]
    described: dict[str, Any] = {}
    if ids:
        futures = admin.client.describe_consumer_groups(ids, **admin.kwargs())
        described = admin.results(futures)
    rows = []
    for g in groups:
        d = described.get(g.group_id)
        ok = d is not None and not isinstance(d, KafkaException)
        rows.append(
            {
                "group": g.group_id,
                "type": type_name(g.type),
                "state": state_name(g.state),
                "protocol": d.partition_assignor if ok else None,
                "members": len(d.members) if ok else None,
            }
        )
    rows.extend(share_group_list(kafka))
    return sorted(rows, key=lambda r: str(r["group"]))


def group(kafka: Kafka, group_id: str) -> dict[str, Any]:
    admin = kafka.admin
    share = _share_at(kafka, group_id)
    if share is not None:
        kafka.shares[group_id] = None
        data = describe_share(admin, group_id, share)
        data["state"] = str(data["state"]).upper()
        return data
    md = admin.metadata()
    partitions = {name: sorted(t.partitions) for name, t in md.topics.items()}
    desc = describe_groups(admin, [group_id])[group_id]
    data = describe_one(admin, desc, partitions)
    data["protocol_type"] = getattr(desc, "protocol_type", None) or None
    data["simple"] = bool(getattr(desc, "is_simple_consumer_group", False))
    return data


def plan(kafka: Kafka, group_id: str, to: str, topics: str) -> list[dict[str, Any]]:
    """Each partition's current and new committed offset for moving to ``to``."""
    admin = kafka.admin
    position = parse_position(to, "to")
    current = committed(admin, group_id)
    tps = _topic_partitions(admin, topics) if topics.strip() else sorted(current)
    if not tps:
        raise CliError(f"group {group_id} has no committed offsets: name the topics to reset")
    return [
        {
            "topic": tp[0],
            "partition": tp[1],
            "current_offset": current.get(tp),
            "new_offset": offset,
            "error": None,
        }
        for tp, (_, _, offset) in admin.positions(tps, position).items()
    ]


def apply(kafka: Kafka, group_id: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Commits the plan's offsets for the group (it must have no members)."""
    admin = kafka.admin
    group_state = describe_groups(admin, [group_id])[group_id].state
    if group_state not in _INACTIVE:
        raise BrokerError(
            f"group {group_id} is {state_name(group_state)}: "
            "offsets can only be reset while it has no members",
            KafkaError(KafkaError.NON_EMPTY_GROUP),
        )
    moves = [TopicPartition(r["topic"], r["partition"], r["new_offset"]) for r in rows]
    result = admin.result(
        admin.client.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id, moves)], **admin.kwargs()
        )[group_id],
        f"reset group {group_id}",
    )
    errors = {(tp.topic, tp.partition): tp.error for tp in result.topic_partitions or []}
    for r in rows:
        err = errors.get((r["topic"], r["partition"]))
        r["error"] = status_of(KafkaException(err)) if err is not None else None
    return rows


def delete(kafka: Kafka, group_id: str) -> None:
    admin = kafka.admin
    admin.result(
        admin.client.delete_consumer_groups([group_id], **admin.kwargs())[group_id],
        f"delete group {group_id}",
    )


def lag_chart(request: web.Request, group_id: str) -> str:
    st = state(request)
    label = "records in flight" if group_id in st.kafka.shares else "total lag (records)"
    return line_chart({label: st.history.values(f"lag:{group_id}")})


async def list_page(request: web.Request) -> web.Response:
    st = state(request)
    rows = await st.kafka.run(group_list, st.kafka)
    for r in rows:
        r["lag"] = st.history.latest(f"lag:{r['group']}")
    return render(request, "groups.html", groups=rows)


async def group_page(
    request: web.Request,
    reset: dict[str, Any] | None = None,
    message: str | None = None,
) -> web.Response:
    st = state(request)
    group_id = request.match_info["group"]
    st.kafka.watched[group_id] = None
    data = await st.kafka.run(group, st.kafka, group_id)
    return render(
        request,
        "group.html",
        g=data,
        chart=lag_chart(request, group_id),
        reset=reset or {"to": "start", "topics": "", "rows": None, "applied": False},
        message=message,
    )


async def reset_action(request: web.Request) -> web.Response:
    st = state(request)
    group_id = request.match_info["group"]
    form = await request.post()
    execute = form.get("action") == "execute"
    if execute:
        form = await write_form(request, "Resetting a group's offsets")
    else:
        form = await read_form(request)
    to, topics = str(form.get("to", "")).strip(), str(form.get("topics", ""))
    reset: dict[str, Any] = {"to": to, "topics": topics, "rows": None, "applied": False}
    try:
        rows = await st.kafka.run(plan, st.kafka, group_id, to, topics)
        if execute:
            rows = await st.kafka.run(apply, st.kafka, group_id, rows)
        reset.update(rows=rows, applied=execute)
    except CliError as exc:
        return await group_page(request, reset, f"Not reset: {exc}")
    return await group_page(request, reset, "Offsets reset." if execute else None)


async def delete_action(request: web.Request) -> web.Response:
    await write_form(request, "Deleting a group")
    st = state(request)
    await st.kafka.run(delete, st.kafka, request.match_info["group"])
    raise web.HTTPSeeOther("/groups")


async def chart(request: web.Request) -> web.Response:
    return web.Response(
        text=lag_chart(request, request.match_info["group"]), content_type="image/svg+xml"
    )


def routes(app: web.Application) -> None:
    app.router.add_get("/groups", list_page)
    app.router.add_get("/groups/{group}", group_page)
    app.router.add_post("/groups/{group}/reset", reset_action)
    app.router.add_post("/groups/{group}/delete", delete_action)
    app.router.add_get("/charts/lag/{group}.svg", chart)
