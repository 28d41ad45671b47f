"""``logstore-broker [server.properties] [--override key=value ...]``, also ``python -m broker_py``.

With no arguments: one broker on 127.0.0.1:9092 keeping its data in ./logstore-data,
auto-creating topics. SIGTERM and SIGINT shut down cleanly (logs closed with their
clean-shutdown markers), so the next start needs no recovery.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys

from broker_py.network.allocator import retain_request_buffers
from broker_py.config.kafka_config import BrokerConfig, ConfigError
from logstore.protocol.errors import KafkaException

log = logging.getLogger("broker_py")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="logstore-broker", description="Run a Kafka-compatible logstore broker.")
    p.add_argument("properties", nargs="?", help="a server.properties file (Kafka's key names)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="set one config key (repeatable)")
    p.add_argument("--log-level", default=os.environ.get("LOGSTORE_LOG_LEVEL", "INFO"), help="Python logging level (default INFO)")
    return p


async def _run(config: BrokerConfig) -> None:
    from broker_py.server.kafka_server import KafkaServer

    broker = KafkaServer(config)
    await broker.start()
    # Latency: objects alive after startup (codec schemas, loaded state) move out of the
    # cyclic collector's generations, and young collections run less often, so a full
    # collection does not walk them on the request path.
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)
    listeners = ", ".join(f"{s.host}:{s.port}" for s in broker.servers)
    print(f"logstore broker {broker.broker_id} listening on {listeners}; data in {', '.join(broker.log_manager.log_dirs)}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    print("logstore broker stopped cleanly", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        config = BrokerConfig.load(args.properties, args.override)
    except ConfigError as e:
        print(f"logstore-broker: {e}", file=sys.stderr)
        return 2
    for key in config.unknown:
        log.warning("unknown configuration key %s (ignored)", key)
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
