"""A PendingResponse builds and hands over its response once, whichever of the channel's
``on_complete`` and the handler's ``complete`` comes first, and nothing once cancelled."""

from __future__ import annotations

from broker_py.network.pending_response import PendingResponse


def test_the_response_is_handed_over_once_in_either_order():
    sent: list = []
    first = PendingResponse()
    first.on_complete(lambda build: sent.append(build()))
    first.complete(lambda: "a")
    first.complete(lambda: "again")
    later = PendingResponse()
    later.complete(lambda: "b")  # before the channel registered
    later.on_complete(lambda build: sent.append(build()))
    assert sent == ["a", "b"] and first.done and later.done


def test_a_cancelled_response_is_never_built():
    built: list = []
    for complete_first in (False, True):
        pending = PendingResponse()
        if complete_first:
            pending.complete(lambda: built.append("x"))
            pending.cancel()
            pending.on_complete(lambda build: build())
        else:
            pending.on_complete(lambda build: build())
            pending.cancel()
            pending.complete(lambda: built.append("x"))
        assert pending.done
    assert built == []
