"""``queued.max.request.bytes``: a cap on the request bytes the broker holds before
handling them, over every connection (Kafka's network memory pool).

A connection holds the bytes of the request it is still reading (its decoder's buffer)
plus the requests read and waiting in its queue. When the total is over the cap, a
connection that holds bytes stops reading until the total is back under it; what it
holds is released as its requests are handled. So that the broker always progresses,
one connection at a time (the first stopped while no other is exempt) goes on reading
until it holds nothing, as a request granted its buffer by Kafka's pool completes.

Bound: the bytes held never exceed the cap plus one request (``socket.request.max.bytes``)
plus, per connection, four socket reads and three times what it held of a frame before
the last read (a read completes before its bytes are counted, and a frame of which a
quarter has arrived gets a buffer of its whole size: ``protocol.frame.FrameDecoder``).

Kafka's default, -1, means no pool; here it means ``max(DEFAULT_CAP,
socket.request.max.bytes)``, so half-sent requests can never take unbounded memory.
"""

from __future__ import annotations

import collections
from typing import Protocol

DEFAULT_CAP = 512 << 20


class Holder(Protocol):
    held: int

    def pause_for_memory(self) -> None: ...

    def resume_for_memory(self) -> None: ...


class RequestMemoryPool:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.total = 0
        self._exempt: Holder | None = None
        self._waiting: collections.OrderedDict[Holder, None] = collections.OrderedDict()

    @classmethod
    def from_config(cls, config) -> RequestMemoryPool:
        cap = config["queued.max.request.bytes"]
        if cap < 0:
            cap = max(DEFAULT_CAP, config["socket.request.max.bytes"])
        return cls(cap)

    def update(self, holder: Holder, held: int) -> None:
        """Records that ``holder`` now holds ``held`` bytes; it is stopped if that puts
        the total over the cap, and waiting holders resume once the total is under it."""
        self.total += held - holder.held
        holder.held = held
        if held == 0:
            if self._exempt is holder:
                self._exempt = None
            self._waiting.pop(holder, None)
        if (
            self.total > self.cap
            and held > 0
            and holder is not self._exempt
            and holder not in self._waiting
        ):
            if self._exempt is None:
                self._exempt = holder  # it goes on reading until its requests are handled
            else:
                self._waiting[holder] = None
                holder.pause_for_memory()
        self._resume_waiting()

    def release(self, holder: Holder) -> None:
        """The holder is gone (its connection closed)."""
        self._waiting.pop(holder, None)
        if self._exempt is holder:
            self._exempt = None
        self.update(holder, 0)

    def _resume_waiting(self) -> None:
        while self._waiting and (self.total <= self.cap or self._exempt is None):
            holder, _ = self._waiting.popitem(last=False)
            if self.total > self.cap:
                self._exempt = holder
            holder.resume_for_memory()

    @property
    def waiting(self) -> int:
        return len(self._waiting)
