"""``logstore produce TOPIC``: records from stdin, one per line (or per ``--delimiter``),
or from ``--value`` options, as ``rpk topic produce`` and ``kafka-console-producer.sh``
do, with confluent-kafka's Producer.

``-f/--input-format`` says how the input splits into records and a record into key,
value, topic, partition and headers (:mod:`logstore.cli.input_format`; default ``%v``,
the whole line is the value). ``-k`` gives every record the same key, ``-H
KEY=VALUE`` adds headers. Each record acknowledged prints its partition and offset
(``--format json``: one JSON object per line); a record the broker refuses prints its
error in words on stderr and makes the exit status 1. No broker reachable (before the
first record, or for every record) is exit status 2, with the cause librdkafka reported
(:mod:`logstore.cli.client_log`); the records then are not listed one by one. A topic
that did not exist before and does after is named on stderr (``created topic X
(auto.create.topics.enable)``): the broker created it for this producer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

import click
from confluent_kafka import KafkaError, KafkaException, Producer

from logstore.cli.admin import Admin, error_text
from logstore.cli.base import command as cli_command
from logstore.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from logstore.cli.connection import ClientOptions, broker_command, client_config_error
from logstore.cli.input_format import InputFormat, shown, unescape
from logstore.cli.output import Output
from logstore.cli.topic import parse_pairs


def record_delimiter(fmt: InputFormat, delimiter: str | None) -> bytes:
    """What ends a record on stdin: the format's trailing text, else ``--delimiter``,
    else a newline; CliError when the two disagree."""
    given = None if delimiter is None else unescape(delimiter, "--delimiter")
    if fmt.delimiter is not None and given is not None and given != fmt.delimiter:
        raise CliError(
            f"--input-format {shown(fmt.spec)} ends records with its trailing text; "
            f"--delimiter {shown(delimiter or '')} says otherwise: give one of them"
        )
    sep = fmt.delimiter if fmt.delimiter is not None else given
    if sep is None:
        return b"\n"
    if not sep:
        raise CliError("--delimiter must not be empty")
    return sep


def announce_created(
    before: set[str], produced: set[str], producer: Producer, timeout: float
) -> None:
    """Names on stderr each topic of ``produced`` missing from ``before`` (the topics
    that existed when the command started) that exists now."""
    new = produced - before
    if not new:
        return
    try:
        now = set(producer.list_topics(timeout=timeout).topics)
    except KafkaException:
        return
    for topic in sorted(new & now):
        click.echo(f"logstore produce: created topic {topic} (auto.create.topics.enable)", err=True)


def read_records(stream: BinaryIO, delimiter: bytes) -> Iterator[bytes]:
    """The records of ``stream`` split at ``delimiter`` (a final empty record dropped)."""
    buf = b""
    while chunk := stream.read1(1 << 16) if hasattr(stream, "read1") else stream.read(1 << 16):
        buf += chunk
        *records, buf = buf.split(delimiter)
        yield from records
    if buf:
        yield buf


@cli_command("produce")
@click.argument("topic", required=False)
@click.option("-k", "--key", help="the key of every record")
@click.option(
    "-H",
    "--header",
    "headers",
    multiple=True,
    metavar="KEY=VALUE",
    help="a header on every record; repeatable",
)
@click.option(
    "-p",
    "--partition",
    type=click.IntRange(min=0),
    help="produce to this partition (default: by key)",
)
@click.option(
    "-f",
    "--input-format",
    default="%v",
    show_default=True,
    help="fields %k %v %t %p %h and the text around them; trailing text ends a record",
)
@click.option(
    "--value",
    "values",
    multiple=True,
    help="produce this value instead of reading stdin; repeatable",
)
@click.option(
    "--delimiter",
    help="what ends a record on stdin when -f does not say (default \\n; \\0 or any text)",
)
@click.option(
    "--acks", type=click.Choice(["all", "-1", "0", "1"]), default="all", show_default=True
)
@click.option(
    "-z",
    "--compression",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="none",
    show_default=True,
)
@broker_command
def command(
    topic: str | None,
    key: str | None,
    headers: tuple[str, ...],
    partition: int | None,
    input_format: str,
    values: tuple[str, ...],
    delimiter: str | None,
    acks: str,
    compression: str,
    client: ClientOptions,
    out: Output,
) -> int:
    """Produce records to TOPIC (or each record's %t): lines of stdin, or --value options."""
    fmt = InputFormat(input_format)
    header_list = [(k, v.encode()) for k, v in parse_pairs(headers, "--header").items()]
    sep = record_delimiter(fmt, delimiter)
    if topic is None and "t" not in fmt.fields:
        raise CliError("give a TOPIC, or %t in --input-format")
    existing = set(Admin(client).metadata().topics)
    conf = client.config()
    conf.update(
        {
            "acks": acks,
            "compression.type": compression,
            "linger.ms": 5,
            "message.timeout.ms": int(client.timeout * 1000),
        }
    )
    try:
        producer = Producer(conf)
    except KafkaException as exc:
        raise client_config_error(exc) from None
    failed = acknowledged = timed_out = 0

    def delivered(err: Any, msg: Any) -> None:
        nonlocal failed, acknowledged, timed_out
        if err is not None:
            failed += 1
            if err.code() == KafkaError._MSG_TIMED_OUT and not acknowledged:
                timed_out += 1  # reported below: the broker went away, or the record failed
                return
            click.echo(f"logstore produce: error: record {failed}: {error_text(err)}", err=True)
            return
        acknowledged += 1
        result = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset()}
        if out.json:
            sys.stdout.write(json.dumps(result) + "\n")
        else:
            sys.stdout.write(
                f"Produced to partition {result['partition']} at offset {result['offset']}.\n"
            )

    source = (v.encode() for v in values) if values else read_records(sys.stdin.buffer, sep)
    produced: set[str] = set()
    for number, raw in enumerate(source, 1):
        fields = fmt.parse(raw, number)
        record_topic = fields.topic or topic
        assert record_topic is not None
        produced.add(record_topic)
        kwargs: dict[str, Any] = {
            "key": key.encode() if key is not None else fields.key,
            "value": fields.value,
            "headers": header_list + fields.headers,
            "on_delivery": delivered,
        }
        if fields.partition is not None or partition is not None:
            kwargs["partition"] = fields.partition if fields.partition is not None else partition
        while True:
            try:
                producer.produce(record_topic, **kwargs)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(client.timeout + 5)
    sys.stdout.flush()
    if (left or timed_out) and client.log.unreachable():
        cause = client.log.cause()
        if not acknowledged:  # no broker took any record
            raise CliError(f"{cause}; {left + timed_out} records not sent", EXIT_USAGE)
        raise CliError(f"{left + timed_out} records not acknowledged: {cause}", EXIT_FAILED)
    announce_created(existing, produced, producer, client.timeout)
    if timed_out:
        click.echo(
            f"logstore produce: error: {timed_out} records not acknowledged within "
            f"{client.timeout:g}s (MSG_TIMED_OUT)",
            err=True,
        )
    if left:
        raise CliError(
            f"{left} records not acknowledged within {client.timeout:g}s "
            f"(brokers {client.brokers})",
            EXIT_FAILED,
        )
    return EXIT_FAILED if failed else EXIT_OK
