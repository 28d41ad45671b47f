"""The broker's listeners following a change of the dynamic ``listeners`` config (Kafka's
``DynamicListenerConfig``).

A change goes in two steps. :meth:`DynamicListenerConfig.validate_reconfiguration` runs
while the new configs are layered in for checking: it binds every new listener's address
(an address in use refuses the change) and notes the listeners that go. Then either
:meth:`DynamicListenerConfig.reconfigure` starts and stops them, or
:meth:`DynamicListenerConfig.abandon` closes the sockets bound for a change that was
refused or only validated. A change that does not touch ``listeners`` still makes the
connection quotas look again (``max.connections`` and ``max.connections.per.ip`` are
dynamic).
"""

from __future__ import annotations

import dataclasses
import socket

from broker_py.network.listener_manager import ListenerManager
from broker_py.network.socket_server import SocketServer


@dataclasses.dataclass
class ListenerChanges:
    """What a change of ``listeners`` does: servers stopped, and new servers with their
    sockets, bound and listening, to start."""

    removed: list[SocketServer] = dataclasses.field(default_factory=list)
    bound: list[tuple[SocketServer, socket.socket]] = dataclasses.field(default_factory=list)


class DynamicListenerConfig:
    def __init__(self, listeners: ListenerManager) -> None:
        self._listeners = listeners

    def validate_reconfiguration(self, changes: ListenerChanges) -> None:
        """For the configs as they would be: adds to ``changes`` the servers that go and
        the new ones, bound. ConfigError when a listener would move or a new address
        cannot be bound (nothing is left bound then)."""
        _, removed, bound = self._listeners.prepare_changes()
        changes.removed = removed
        changes.bound.extend(bound)

    def abandon(self, changes: ListenerChanges) -> None:
        """Closes the sockets bound for a change that does not happen."""
        for _, sock in changes.bound:
            sock.close()

    def reconfigure(self, changes: ListenerChanges) -> None:
        """Stops the servers that go, starts the new ones, and has the connection quotas
        look again at their limits."""
        self._listeners.apply_changes(changes.removed, changes.bound)
        quotas = getattr(self._listeners, "quotas", None)
        if quotas is not None:
            quotas.limits_changed()
