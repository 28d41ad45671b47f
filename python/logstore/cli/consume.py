"""``logstore consume TOPIC...``: print records, as ``rpk topic consume``,
``kafka-console-consumer.sh`` and ``kcat -C`` do, with confluent-kafka's Consumer.

Without ``-g`` the partitions are assigned directly (no group, nothing committed) from
``-o`` (:mod:`logstore.cli.positions`). With ``-g GROUP`` the consumer joins the group,
starts where the group committed (``-o start|end`` only says where to begin without a
commit: ``auto.offset.reset``) and commits what it printed before it exits.

It stops after ``-n`` records, at the end of every partition with ``-e``, or on Ctrl-C.
Output: ``-f/--output-format`` (kcat's tokens: ``%t`` topic, ``%p`` partition, ``%o``
offset, ``%k`` key, ``%v`` value, ``%T`` timestamp ms, ``%h`` headers as k=v,...,
``\\n`` ``\\t``; default ``%v\\n``), or ``--format json``: one JSON object per record
per line, key and value as UTF-8 text (undecodable bytes as ``\\xNN``), headers as
[[key, value], ...].
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import Any

import click
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from logstore.cli.admin import Admin, BrokerError, error_text
from logstore.cli.base import command as cli_command
from logstore.cli.common import EXIT_OK, CliError
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.output import Output
from logstore.cli.positions import parse_position, resolve
from logstore.cli.topic import parse_partitions, topic_metadata


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def record_json(msg: Any) -> dict[str, Any]:
    _kind, ts = msg.timestamp()
    return {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": ts,
        "key": _text(msg.key()),
        "value": _text(msg.value()),
        "headers": [[k, _text(v)] for k, v in (msg.headers() or [])],
    }


class OutputFormat:
    """kcat-style ``%`` tokens rendered per record."""

    TOKENS = re.compile(r"%[tpokvTh%]|\\[nt\\]")

    def __init__(self, spec: str) -> None:
        self.spec = spec

    def render(self, msg: Any) -> str:
        def token(m: re.Match[str]) -> str:
            t = m.group(0)
            return {
                "%t": lambda: msg.topic(),
                "%p": lambda: str(msg.partition()),
                "%o": lambda: str(msg.offset()),
                "%k": lambda: _text(msg.key()) or "",
                "%v": lambda: _text(msg.value()) or "",
                "%T": lambda: str(msg.timestamp()[1]),
                "%h": lambda: ",".join(f"{k}={_text(v)}" for k, v in (msg.headers() or [])),
                "%%": lambda: "%",
                "\\n": lambda: "\n",
                "\\t": lambda: "\t",
                "\\\\": lambda: "\\",
            }[t]()

        return self.TOKENS.sub(token, self.spec)


def _start_offsets(
    admin: Admin, topics: tuple[str, ...], partitions: str | None, position: str
) -> list[TopicPartition]:
    where = parse_position(position)
    metas = topic_metadata(admin, topics)
    tps = [(t, p) for t in topics for p in parse_partitions(partitions, list(metas[t].partitions))]
    starts, ends = admin.offsets(tps, "earliest"), admin.offsets(tps, "latest")
    at_time = admin.offsets(tps, where.value) if where.kind == "timestamp" else {}
    out = []
    for tp in tps:
        start, end = starts[tp], ends[tp]
        if isinstance(start, BaseException) or isinstance(end, BaseException):
            raise BrokerError(
                f"offsets of {tp[0]}-{tp[1]}", start if isinstance(start, BaseException) else end
            )
        at = at_time.get(tp)
        out.append(
            TopicPartition(
                tp[0], tp[1], resolve(where, start, end, at if isinstance(at, int) else None)
            )
        )
    return out


@cli_command("consume")
@click.argument("topics", nargs=-1, required=True)
@click.option("-g", "--group", "group_id", help="consume as a member of this group and commit")
@click.option(
    "-o",
    "--offset",
    "position",
    default=None,
    metavar="start|end|N|-N|@TIME",
    help=(
        "where to start (default: start; with -g only start or end, for partitions without "
        "a commit)"
    ),
)
@click.option("-n", "--num", type=click.IntRange(min=1), help="stop after this many records")
@click.option("-p", "--partitions", metavar="0,1,4-6", help="only these partitions (not with -g)")
@click.option(
    "-e", "--exit-at-end", is_flag=True, help="stop when every partition's end is reached"
)
@click.option(
    "-f",
    "--output-format",
    default="%v\\n",
    show_default=True,
    help="kcat-style: %t %p %o %k %v %T %h",
)
@click.option(
    "--read-committed",
    is_flag=True,
    help="skip aborted transactions (isolation.level=read_committed)",
)
@broker_command
def command(
    topics: tuple[str, ...],
    group_id: str | None,
    position: str | None,
    num: int | None,
    partitions: str | None,
    exit_at_end: bool,
    output_format: str,
    read_committed: bool,
    client: ClientOptions,
    out: Output,
) -> int:
    """Print records of TOPICS."""
    conf = client.config()
    conf.update(
        {
            "group.id": group_id or f"logstore-cli-{os.getpid()}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            "auto.offset.reset": "earliest",
        }
    )
    if group_id:
        if partitions:
            raise CliError(
                "-p/--partitions is for consuming without a group: a group's partitions are "
                "assigned to it"
            )
        where = parse_position(position or "start")
        if where.kind not in ("start", "end"):
            raise CliError(
                "with -g, -o is start or end (where to begin without a commit); "
                "move a group with `logstore group seek`"
            )
        conf["auto.offset.reset"] = "earliest" if where.kind == "start" else "latest"
        topic_metadata(Admin(client), topics)  # an unknown topic or no broker fails here, in words
    else:
        assignment = _start_offsets(Admin(client), topics, partitions, position or "start")
    try:
        consumer = Consumer(conf)
    except KafkaException as exc:
        raise CliError(f"client configuration: {error_text(exc)}") from None
    fmt = OutputFormat(output_format)
    printed = 0
    at_end: set[tuple[str, int]] = set()
    try:
        if group_id:
            consumer.subscribe(list(topics))
        else:
            consumer.assign(assignment)
        while num is None or printed < num:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add((msg.topic(), msg.partition()))
                    if exit_at_end and _all_at_end(consumer, at_end):
                        break
                    continue
                raise BrokerError(f"consume {msg.topic() or ''}", KafkaException(err))
            at_end.discard((msg.topic(), msg.partition()))
            if out.json:
                sys.stdout.write(json.dumps(record_json(msg)) + "\n")
            else:
                sys.stdout.write(fmt.render(msg))
            printed += 1
        sys.stdout.flush()
        if group_id and printed:
            consumer.commit(asynchronous=False)
    except KafkaException as exc:
        raise BrokerError("consume", exc) from None
    finally:
        consumer.close()
    return EXIT_OK


def _all_at_end(consumer: Consumer, at_end: set[tuple[str, int]]) -> bool:
    assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    return bool(assigned) and assigned <= at_end
