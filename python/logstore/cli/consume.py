"""``logstore consume TOPIC...``: print records, as ``rpk topic consume``,
``kafka-console-consumer.sh`` and ``kcat -C`` do, with confluent-kafka's Consumer.

Without ``-g`` the partitions are assigned directly (no group, nothing committed) from
``-o`` (:mod:`logstore.cli.positions`). With ``-g GROUP`` the consumer joins the group,
starts where the group committed (``-o start|end`` only says where to begin without a
commit: ``auto.offset.reset``).

It stops after ``-n`` records, at the end of every partition with ``-e``, on SIGINT
(Ctrl-C, exit status 130), on SIGTERM (143) or when the reader of stdout goes away (a
closed pipe, as ``| head -3`` does: exit status 0). However it stops, a group member
then commits what it printed and leaves the group (LeaveGroup, so the group is Empty at
once), both within ``--timeout``; a second SIGINT or SIGTERM exits at once. "Printed"
means written to stdout: every record is flushed before its offset counts, so the commit
holds, per partition, the offset after the last record written, never one fetched but
not written. A partition taken away by a rebalance is committed the same way before it
goes.

Output: ``-f/--output-format`` (kcat's tokens: ``%t`` topic, ``%p`` partition, ``%o``
offset, ``%k`` key, ``%v`` value, ``%T`` timestamp ms, ``%h`` headers as k=v,...,
``\\n`` ``\\t``; default ``%v\\n``), or ``--format json``: one JSON object per record
per line, key and value as UTF-8 text (undecodable bytes as ``\\xNN``), headers as
[[key, value], ...].
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import click
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from logstore.cli.admin import Admin, BrokerError, error_text
from logstore.cli.base import command as cli_command
from logstore.cli.common import EXIT_OK, CliError
from logstore.cli.connection import ClientOptions, broker_command
from logstore.cli.output import Output
from logstore.cli.positions import parse_position
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


class _Decoded:
    """A consumed message whose value() is its value decoded through the registry."""

    def __init__(self, msg: Any, value: bytes | None) -> None:
        self._msg, self._value = msg, value

    def value(self) -> bytes | None:
        return self._value

    def __getattr__(self, name: str) -> Any:
        return getattr(self._msg, name)


class OutputFormat:
    """kcat-style ``%`` tokens rendered per record."""

    TOKENS = re.compile(r"%[tpokvTh%]|\\[nt\\]")

    def __init__(self, spec: str, decode: Callable[[bytes | None], bytes | None] | None = None):
        self.spec = spec
        self.decode = decode  # --decode: values through the schema registry

    def decoded(self, msg: Any) -> Any:
        return msg if self.decode is None else _Decoded(msg, self.decode(msg.value()))

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
    return [
        TopicPartition(t, p, offset)
        for (t, p), (_, _, offset) in admin.positions(tps, where).items()
    ]


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
    "--decode",
    is_flag=True,
    help="decode values framed with a schema id (Confluent's serializers) through the registry",
)
@click.option(
    "--registry-url",
    envvar="LOGSTORE_REGISTRY_URL",
    default="http://127.0.0.1:8081",
    show_default=True,
    help="the schema registry --decode asks (env LOGSTORE_REGISTRY_URL)",
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
    decode: bool,
    registry_url: str,
    read_committed: bool,
    client: ClientOptions,
    out: Output,
) -> int:
    """Print records of TOPICS."""
    decoder = None
    if decode:
        from logstore.schema_registry.decoder import Decoder, http_fetch

        decoder = Decoder(http_fetch(registry_url)).decode
    stop = Stop()
    with stop.installed():
        return _consume(
            stop,
            topics,
            group_id,
            position,
            num,
            partitions,
            exit_at_end,
            OutputFormat(output_format, decoder),
            read_committed,
            client,
            out,
        )


class Stop:
    """Why the consume loop should end. The first SIGINT or SIGTERM records ``signum``
    (the loop sees it within one poll); a second one exits at once with 128 + signal
    (every record printed so far is already flushed)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._fd = sys.stdout.fileno() if _is_fifo(sys.stdout) else None

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.signum is not None:
            os._exit(128 + signum)
        self.signum = signum

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signal handlers can only be set from the main thread
            return
        previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def exit_status(self) -> int:
        """128 + the signal (130 for SIGINT, 143 for SIGTERM), or 0."""
        return EXIT_OK if self.signum is None else 128 + self.signum

    def reader_gone(self) -> bool:
        """True when stdout is a pipe whose reading end is closed (Linux reports POLLERR
        on such a write end), so an idle consumer notices ``| head`` has exited."""
        if self._fd is None:
            return False
        poller = select.poll()
        poller.register(self._fd, 0)  # POLLERR and POLLHUP are always reported
        return any(ev & (select.POLLERR | select.POLLHUP) for _fd, ev in poller.poll(0))


def _is_fifo(stream: Any) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return False


def _write(text: str) -> bool:
    """Writes and flushes ``text``; False when the reader of stdout has gone (EPIPE),
    after which stdout points at /dev/null so later flushes cannot fail."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return False
    return True


class Progress:
    """A group member's printed positions: per partition the offset after the last
    record written to stdout, the offsets it commits."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.printed: dict[tuple[str, int], int] = {}
        self._commit_result: list[tuple[Any, Any]] = []

    def offsets(self, only: set[tuple[str, int]] | None = None) -> list[TopicPartition]:
        return [
            TopicPartition(t, p, o)
            for (t, p), o in sorted(self.printed.items())
            if only is None or (t, p) in only
        ]

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Commits what was printed from partitions a rebalance takes away, before it does."""
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        offsets = self.offsets(revoked)
        for key in revoked:
            self.printed.pop(key, None)
        if not offsets:
            return
        try:
            for tp in consumer.commit(offsets=offsets, asynchronous=False) or []:
                if tp.error is not None:
                    _warn(
                        f"commit of {tp.topic}-{tp.partition} on rebalance: {error_text(tp.error)}"
                    )
        except KafkaException as exc:
            _warn(f"commit on rebalance: {error_text(exc)}")

    def on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions lost to a session timeout belong to another member already."""
        for tp in partitions:
            self.printed.pop((tp.topic, tp.partition), None)

    def on_commit(self, err: Any, partitions: Any) -> None:
        self._commit_result.append((err, partitions))

    def commit(self, consumer: Consumer, timeout: float) -> None:
        """Commits every printed position, waiting at most ``timeout`` seconds; BrokerError
        when the group coordinator refuses or does not answer in time. Tried once: the
        positions are forgotten either way, so close() does not commit them again."""
        offsets = self.offsets()
        self.printed.clear()
        if not offsets:
            return
        what = f"commit of group {self.group_id}"
        assigned = consumer.assignment()
        if assigned:
            consumer.pause(assigned)  # poll() below serves the callback, fetches nothing
        self._commit_result.clear()
        try:
            consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            raise BrokerError(what, exc) from None
        deadline = time.monotonic() + timeout
        while not self._commit_result and time.monotonic() < deadline:
            consumer.poll(0.1)  # a record returned here is not printed and not committed
        if not self._commit_result:
            raise BrokerError(what, KafkaError(KafkaError._TIMED_OUT))
        err, partitions = self._commit_result[0]
        if err is not None:
            raise BrokerError(what, KafkaException(err))
        for tp in partitions or []:
            if tp.error is not None:
                raise BrokerError(f"{what} on {tp.topic}-{tp.partition}", KafkaException(tp.error))


def _warn(text: str) -> None:
    click.echo(f"logstore consume: warning: {text}", err=True)


def _consume(
    stop: Stop,
    topics: tuple[str, ...],
    group_id: str | None,
    position: str | None,
    num: int | None,
    partitions: str | None,
    exit_at_end: bool,
    fmt: OutputFormat,
    read_committed: bool,
    client: ClientOptions,
    out: Output,
) -> int:
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
    progress = Progress(group_id) if group_id else None
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
    if stop.signum is not None:
        return stop.exit_status()
    if progress is not None:
        conf["on_commit"] = progress.on_commit
    try:
        consumer = Consumer(conf)
    except KafkaException as exc:
        raise CliError(f"client configuration: {error_text(exc)}") from None
    printed = 0
    at_end: set[tuple[str, int]] = set()
    failure: BrokerError | None = None
    try:
        if progress is not None:
            consumer.subscribe(list(topics), on_revoke=progress.on_revoke, on_lost=progress.on_lost)
        else:
            consumer.assign(assignment)
        while (num is None or printed < num) and stop.signum is None:
            msg = consumer.poll(0.5)
            if msg is None:
                if stop.reader_gone():
                    break
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add((msg.topic(), msg.partition()))
                    if exit_at_end and _all_at_end(consumer, at_end):
                        break
                    if stop.reader_gone():
                        break
                    continue
                raise BrokerError(f"consume {msg.topic() or ''}", KafkaException(err))
            at_end.discard((msg.topic(), msg.partition()))
            msg = fmt.decoded(msg)
            text = json.dumps(record_json(msg)) + "\n" if out.json else fmt.render(msg)
            if not _write(text):
                break
            if progress is not None:
                progress.printed[(str(msg.topic()), int(msg.partition() or 0))] = (
                    int(msg.offset() or 0) + 1
                )
            printed += 1
    except KafkaException as exc:
        failure = BrokerError("consume", exc)
    except BrokerError as exc:
        failure = exc
    try:
        if progress is not None:
            progress.commit(consumer, client.timeout)
    except BrokerError as exc:
        if failure is not None:
            _warn(str(exc))
        else:
            failure = exc
    finally:
        _close(consumer, client.timeout)
    if failure is not None:
        raise failure
    return stop.exit_status()


def _close(consumer: Consumer, timeout: float) -> None:
    """Closes the consumer (a group member sends LeaveGroup), waiting at most ``timeout``
    seconds: librdkafka's close waits for answers from a coordinator that may never
    send them. It runs in a daemon thread, so the main thread still sees signals (a
    second one exits at once) and the process can exit without it."""
    closer = threading.Thread(target=consumer.close, name="consumer-close", daemon=True)
    closer.start()
    closer.join(timeout)
    if closer.is_alive():
        _warn(
            f"the consumer did not close within {timeout:g} s (--timeout); the group "
            "coordinator removes a member that left this way after its session timeout"
        )


def _all_at_end(consumer: Consumer, at_end: set[tuple[str, int]]) -> bool:
    assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    return bool(assigned) and assigned <= at_end
