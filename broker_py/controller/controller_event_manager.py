"""The controller's single event queue and thread (Kafka's ``ControllerEventManager``).

Store watch callbacks, API handlers and response callbacks only ``put`` events; the
thread processes them one at a time, in order, so the controller's state is touched by
this thread alone. The ``leader.imbalance.check.interval`` timer is an event too. An
exception while processing one event is logged and the next is taken.
"""

from __future__ import annotations

import logging
import queue
import threading

from broker_py.controller.controller_events import AutoPreferredReplicaLeaderElection
from broker_py.controller.kafka_controller import KafkaController
from broker_py.utils.time import SYSTEM_TIME, Time

log = logging.getLogger(__name__)

_STOP = object()


class ControllerEventManager:
    def __init__(self, controller: KafkaController, time: Time = SYSTEM_TIME) -> None:
        self.controller = controller
        self.time = time
        self._queue: queue.Queue[object] = queue.Queue()
        self._thread = threading.Thread(
            target=self._run, name=f"controller-event-thread-{controller.broker_id}", daemon=True
        )
        controller.enqueue = self.put

    def put(self, event: object) -> None:
        self._queue.put(event)

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float = 30.0) -> None:
        self._queue.put(_STOP)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def idle(self) -> bool:
        return self._queue.empty()

    def _run(self) -> None:
        interval = self.controller.config.leader_imbalance_check_interval_ms / 1000
        next_check = self.time.monotonic() + interval
        while True:
            try:
                event = self._queue.get(timeout=max(0.0, next_check - self.time.monotonic()))
            except queue.Empty:
                event = AutoPreferredReplicaLeaderElection()
                next_check = self.time.monotonic() + interval
            if event is _STOP:
                return
            try:
                self.controller.process(event)
            except Exception:
                log.exception("controller event %s failed", type(event).__name__)
