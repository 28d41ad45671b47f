"""``logstore-broker [server.properties] [--override key=value ...]``, also ``python -m broker_py``.

With no arguments: one broker on 127.0.0.1:9092 keeping its data in ./logstore-data,
auto-creating topics. SIGTERM and SIGINT shut down cleanly (logs closed with their
clean-shutdown markers), so the next start needs no recovery.

Output: log lines on stderr (``--log-format text``: ``<time> <LEVEL> <logger>: <message>``;
``json``: one object per line with ``time``, ``level``, ``logger``, ``message`` and, for
an exception, ``exception``). The startup banner (``... listening on host:port ...``) and
the stop line go to stdout in the same format. A failure to start is one line on stderr
naming the config key to change, and exit status 2 (bad config) or 1 (anything else).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import gc
import json
import logging
import os
import signal
import sys
import tempfile

from broker_py.config.kafka_config import (
    BrokerConfig,
    ConfigError,
    Listener,
    unknown_key_warning,
)
from broker_py.network.allocator import retain_request_buffers
from logstore.protocol.errors import KafkaException

log = logging.getLogger("broker_py")
# The startup banner and the stop line: stdout, formatted as the log lines are.
banner = logging.getLogger("broker_py.banner")

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (ISO-8601, ms, local offset), level, logger,
    message, and exception (the traceback text) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        import datetime as dt

        return (
            dt.datetime.fromtimestamp(record.created)
            .astimezone()
            .isoformat(timespec="milliseconds")
        )


class _VersionAction(argparse.Action):
    """``--version``: the line ``logstore version`` prints first."""

    def __init__(
        self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object
    ) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="print the version and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from logstore.cli.version import version_string

        print(version_string())
        parser.exit(0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="logstore-broker", description="Run a Kafka-compatible logstore broker."
    )
    p.add_argument("properties", nargs="?", help="a server.properties file (Kafka's key names)")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one config key (repeatable)",
    )
    p.add_argument(
        "--log-level",
        default=os.environ.get("LOGSTORE_LOG_LEVEL", "INFO"),
        help="Python logging level (default INFO)",
    )
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=os.environ.get("LOGSTORE_LOG_FORMAT", "text"),
        help="log lines as text (default) or one JSON object per line, for log shippers",
    )
    p.add_argument("--version", action=_VersionAction)
    return p


def _setup_logging(level: str, fmt: str) -> None:
    formatter: logging.Formatter = (
        JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    try:
        root.setLevel(level.upper())
    except ValueError:
        root.setLevel(logging.INFO)
        log.warning("--log-level %s is not a level; using INFO", level)
    out = logging.StreamHandler(sys.stdout)
    out.setFormatter(formatter)
    banner.handlers[:] = [out]
    banner.setLevel(logging.INFO)
    banner.propagate = False


def _check_log_dirs(config: BrokerConfig) -> None:
    """Each log dir exists (made if missing) and takes a new file; ConfigError naming
    ``log.dirs`` (or ``log.dir`` when that is what was set) otherwise."""
    key = "log.dir" if config["log.dirs"] is None else "log.dirs"
    for d in config.log_dirs:
        try:
            os.makedirs(d, exist_ok=True)
            with tempfile.TemporaryFile(dir=d):
                pass
        except OSError as e:
            raise ConfigError(
                key, ",".join(config.log_dirs), f"log dir {d} cannot be written: {e.strerror or e}"
            ) from None


class ListenerBindError(ConfigError):
    """A ``listeners`` entry whose address cannot be listened on."""

    def __init__(self, listener: Listener, error: OSError) -> None:
        reason = error.strerror or str(error)
        if error.errno == errno.EADDRINUSE:
            reason = (
                f"port {listener.port} is already in use (another broker or program listens there)"
            )
        super().__init__(
            "listeners",
            str(listener),
            f"cannot listen on {listener.host}:{listener.port}: {reason}",
        )
        KafkaException.__init__(
            self,
            f"listeners entry {listener}: cannot listen on "
            f"{listener.host}:{listener.port}: {reason}",
        )


_BIND_ERRORS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)


async def _run(config: BrokerConfig) -> None:
    from broker_py.server.kafka_server import KafkaServer

    # Young collections less often from the start: loading thousands of logs allocates
    # long-lived objects, which each default-threshold collection would walk again.
    gc.set_threshold(20_000, 50, 100)
    broker = KafkaServer(config)
    try:
        await broker.start()
    except OSError as e:
        started = {s.name for s in broker.servers}
        failing = next((entry for entry in config["listeners"] if entry.name not in started), None)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(broker.stop(), 30)
        if failing is not None and e.errno in _BIND_ERRORS:
            raise ListenerBindError(failing, e) from None
        raise
    # Latency: objects alive after startup (codec schemas, loaded state) move out of the
    # cyclic collector's generations, and young collections run less often, so a full
    # collection does not walk them on the request path.
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)
    # Signal handlers first: whoever waits for the banner may stop the broker at once.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    listeners = ", ".join(f"{s.host}:{s.port}" for s in broker.servers)
    banner.info(
        "logstore broker %s listening on %s; data in %s",
        broker.broker_id,
        listeners,
        ", ".join(broker.log_manager.log_dirs),
    )
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    banner.info("logstore broker stopped cleanly")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _setup_logging(args.log_level, args.log_format)
    try:
        config = BrokerConfig.load(args.properties, args.override)
        _check_log_dirs(config)
    except ConfigError as e:
        print(f"logstore-broker: {e}", file=sys.stderr)
        return 2
    for key in config.unknown:
        log.warning("%s", unknown_key_warning(key))
    retain_request_buffers()
    try:
        asyncio.run(_run(config))
    except ConfigError as e:
        print(f"logstore-broker: {e}", file=sys.stderr)
        return 2
    except KafkaException as e:  # a log dir in use, a log that cannot be opened (a full disk), ...
        print(f"logstore-broker: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"logstore-broker: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
