"""The error codes a response carries (Kafka's ``AbstractResponse.errorCounts``), for
``kafka_network_requestmetrics_errors_total{request, error}``.

Every ``error_code`` field of the response counts once: the top-level one and those
of each topic, partition or other entry, NONE included, as Kafka counts them. The
fields are found from the message's schema once per response class; a response is
then walked along the arrays and structs that hold an ``error_code``, and nothing else.

Produce and Fetch answer with frames they encode themselves, so their codes come from
their per-partition outcomes instead (:meth:`BrokerMetrics.on_produce_results`,
:meth:`BrokerMetrics.on_fetch_response`).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from logstore.protocol.schema import Array, Struct

# Counts the codes of one value (a struct instance) into a Counter of codes.
Walker = Callable[[Any, "collections.Counter[int]"], None]

_WALKERS: dict[type, Walker | None] = {}


def _compile(struct: Struct) -> Walker | None:
    """The walker of ``struct``'s error codes; None when it holds none."""
    codes: list[str] = []
    arrays: list[tuple[str, Walker]] = []
    structs: list[tuple[str, Walker]] = []
    for f in struct.fields:
        t = f.type
        if f.name == "error_code":
            codes.append(f.name)
        elif isinstance(t, Array) and isinstance(t.element, Struct):
            sub = _compile(t.element)
            if sub is not None:
                arrays.append((f.name, sub))
        elif isinstance(t, Struct):
            sub = _compile(t)
            if sub is not None:
                structs.append((f.name, sub))
    if not (codes or arrays or structs):
        return None

    def walk(value: Any, out: collections.Counter[int]) -> None:
        for name in codes:
            out[getattr(value, name)] += 1
        for name, sub in arrays:
            for item in getattr(value, name) or ():
                sub(item, out)
        for name, sub in structs:
            item = getattr(value, name)
            if item is not None:
                sub(item, out)

    return walk


def count(response: Any, out: collections.Counter[int]) -> None:
    """Adds the codes of ``response`` (a decoded-shape Message) to ``out``; a response
    of any other kind (an encoded frame) adds nothing."""
    cls = type(response)
    try:
        walker = _WALKERS[cls]
    except KeyError:
        schema = getattr(cls, "SCHEMA", None)
        walker = _compile(schema) if isinstance(schema, Struct) else None
        _WALKERS[cls] = walker
    if walker is not None:
        walker(response, out)
