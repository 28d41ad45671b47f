"""``logstore produce TOPIC``: records from stdin, one per line (or per ``--delimiter``),
or from ``--value`` options, as ``rpk topic produce`` and ``kafka-console-producer.sh``
do, with confluent-kafka's Producer.

``-f/--input-format`` says how a line splits into key and value: ``%k`` and ``%v``
stand for them and the text between them is the separator (``'%k:%v'``; default
``%v``, the whole line is the value). ``-k`` gives every record the same key, ``-H
KEY=VALUE`` adds headers. Each record acknowledged prints its partition and offset
(``--format json``: one JSON object per line); a record the broker refuses prints its
error in words on stderr and makes the exit status 1.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

import click
from confluent_kafka import KafkaException, Producer

from logstore.cli.admin import error_text
from logstore.cli.base import command as cli_command
from logstore.cli.common import EXIT_FAILED, EXIT_OK, CliError
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.output import Output
from logstore.cli.topic import parse_pairs


class InputFormat:
    """A line's layout: literal text around at most one ``%k`` and one ``%v``."""

    def __init__(self, spec: str) -> None:
        if spec.count("%v") != 1 or spec.count("%k") > 1:
            raise CliError(f"--input-format {spec!r}: needs exactly one %v and at most one %k")
        pattern = ""
        for part in re.split(r"(%k|%v)", spec):
            if part == "%k":
                pattern += "(?P<key>.*?)"
            elif part == "%v":
                pattern += "(?P<value>.*?)" if spec.index("%v") < len(spec) - 2 else "(?P<value>.*)"
            else:
                pattern += re.escape(part)
        self.regex = re.compile(pattern, re.DOTALL)
        self.spec = spec
        self.has_key = "%k" in spec

    def parse(self, line: bytes) -> tuple[bytes | None, bytes]:
        text = line.decode("utf-8", errors="surrogateescape")
        m = self.regex.fullmatch(text)
        if m is None:
            raise CliError(
                f"input {text[:60]!r} does not match --input-format {self.spec!r}", EXIT_FAILED
            )
        key = m.group("key").encode("utf-8", errors="surrogateescape") if self.has_key else None
        return key, m.group("value").encode("utf-8", errors="surrogateescape")


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
@click.argument("topic")
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
    help="how a line splits into %k key and %v value",
)
@click.option(
    "--value",
    "values",
    multiple=True,
    help="produce this value instead of reading stdin; repeatable",
)
@click.option(
    "--delimiter",
    default="\\n",
    show_default=True,
    help="what ends a record on stdin (\\n, \\0 or any text)",
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
    topic: str,
    key: str | None,
    headers: tuple[str, ...],
    partition: int | None,
    input_format: str,
    values: tuple[str, ...],
    delimiter: str,
    acks: str,
    compression: str,
    client: ClientOptions,
    out: Output,
) -> int:
    """Produce records to TOPIC: lines of stdin, or --value options."""
    fmt = InputFormat(input_format)
    header_list = list(parse_pairs(headers, "--header").items())
    sep = delimiter.encode().decode("unicode_escape").encode("latin-1")
    if not sep:
        raise CliError("--delimiter must not be empty")
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
        raise CliError(f"client configuration: {error_text(exc)}") from None
    failed = 0

    def delivered(err: Any, msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
            click.echo(f"logstore produce: error: record {failed}: {error_text(err)}", err=True)
            return
        result = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset()}
        if out.json:
            sys.stdout.write(json.dumps(result) + "\n")
        else:
            sys.stdout.write(
                f"Produced to partition {result['partition']} at offset {result['offset']}.\n"
            )

    source = (v.encode() for v in values) if values else read_records(sys.stdin.buffer, sep)
    for raw in source:
        record_key, value = fmt.parse(raw)
        if key is not None:
            record_key = key.encode()
        kwargs: dict[str, Any] = {
            "key": record_key,
            "value": value,
            "headers": header_list,
            "on_delivery": delivered,
        }
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(client.timeout + 5)
    sys.stdout.flush()
    if left:
        raise CliError(
            f"{left} records not acknowledged within {client.timeout:g}s "
            f"(brokers {client.brokers})",
            EXIT_FAILED,
        )
    return EXIT_FAILED if failed else EXIT_OK
