"""What the broker does when one of its log dirs fails (Kafka's ``LogDirFailureHandler``,
KIP-112, in ZooKeeper mode).

For each dir the :class:`~broker_py.log.log_dir_failure_channel.LogDirFailureChannel`
reports offline, on the event loop, in order:

1. the replica manager stops serving the dir's partitions (they answer
   KAFKA_STORAGE_ERROR; fetchers and moves stop; the logs are dropped unwritten);
2. if no live log dir is left, or the dir was a broker alone's metadata dir (the first
   log dir holds its cluster metadata, as a KRaft broker's ``metadata.log.dir``, whose
   failure Kafka also answers with a shutdown), the broker halts: it logs why, ends its
   ZooKeeper session (so the controller moves leadership at once instead of after the
   session timeout) and exits with status 1 without a clean shutdown, as Kafka's
   ``Exit.halt(1)``; the next start recovers every log;
3. otherwise it tells the controller (``/log_dir_event_notification/log_dir_event_N``,
   or the local controller of a broker alone), which sends it a LeaderAndIsr for every
   replica it holds and takes those it answers KAFKA_STORAGE_ERROR for offline: leaders
   move to other in-sync replicas and the broker leaves their ISRs. The notification is
   retried until it is written (ZooKeeper may be away).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable

from broker_py.log.log_dir_failure_channel import LogDirFailureChannel
from broker_py.log.log_manager import LogManager
from broker_py.replication.replica_manager import ReplicaManager

__all__ = ["HALT_STATUS", "LogDirFailureHandler"]

log = logging.getLogger(__name__)

HALT_STATUS = 1
NOTIFY_RETRY_S = 1.0
SESSION_CLOSE_WAIT_S = 5.0


class LogDirFailureHandler:
    """``support``: the broker's ZkSupport or LocalSupport (its ``store`` takes the
    notification, ``store_call`` runs a store call off the loop); ``end_session``: ends
    the ZooKeeper session before a halt (None on a broker alone); ``metadata_dir``: the
    log dir whose failure halts the broker whatever else is live (a broker alone's
    first); ``exit``: how the process ends (``os._exit``)."""

    def __init__(
        self,
        channel: LogDirFailureChannel,
        replica_manager: ReplicaManager,
        log_manager: LogManager,
        support,
        end_session: Callable[[], None] | None = None,
        metadata_dir: str | None = None,
        exit: Callable[[int], None] = os._exit,
    ) -> None:
        self.channel = channel
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.support = support
        self._end_session = end_session
        self._metadata_dir = None if metadata_dir is None else os.path.abspath(metadata_dir)
        self._exit = exit
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="log-dir-failure-handler")
        self.channel.set_listener(
            lambda log_dir: loop.call_soon_threadsafe(self._queue.put_nowait, log_dir)
        )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            log_dir = await self._queue.get()
            try:
                await self.handle(log_dir)
            except Exception:
                log.exception("handling the failure of log dir %s", log_dir)

    async def handle(self, log_dir: str) -> None:
        self.replica_manager.handle_log_dir_failure(log_dir)
        broker_id = self.replica_manager.broker_id
        if not self.log_manager.live_log_dirs:
            self.halt(
                f"shutting down broker {broker_id} because all log dirs "
                f"in {', '.join(self.log_manager.log_dirs)} have failed"
            )
            return
        if os.path.abspath(log_dir) == self._metadata_dir:
            self.halt(
                f"shutting down broker {broker_id} because its metadata log dir "
                f"{log_dir} has failed"
            )
            return
        await self._notify_controller()

    async def _notify_controller(self) -> None:
        store = self.support.store
        broker_id = self.replica_manager.broker_id
        while True:
            try:
                await self.support.store_call(store.propagate_log_dir_event, broker_id)
                log.info("told the controller that a log dir of broker %d failed", broker_id)
                return
            except Exception as e:
                log.warning("writing the log dir event notification failed (retrying): %s", e)
                await asyncio.sleep(NOTIFY_RETRY_S)

    def halt(self, why: str) -> None:
        log.critical(why)
        if self._end_session is not None:
            closer = threading.Thread(target=self._end_session, name="zk-close", daemon=True)
            closer.start()
            closer.join(SESSION_CLOSE_WAIT_S)
        for handler in logging.getLogger().handlers:
            try:
                handler.flush()
            except Exception:  # a handler on the failed disk
                pass
        self._exit(HALT_STATUS)
