"""Which translated offsets to write to a consumer group on the target (pure), as MM2's
``MirrorCheckpointTask.syncGroupOffset``: only while the group has no active members on
the target (absent, ``Empty`` or ``Dead``), never moving a partition's committed offset
backwards, and only for translated offsets >= 0.
"""

from __future__ import annotations

from collections.abc import Mapping

WRITABLE_STATES = frozenset({"EMPTY", "DEAD", "UNKNOWN", "NONE", ""})


def offsets_to_write(
    target_state: str | None,
    translated: Mapping[tuple[str, int], int],
    committed_on_target: Mapping[tuple[str, int], int],
) -> dict[tuple[str, int], int]:
    """``translated``: (remote topic, partition) -> offset from the checkpoints;
    ``committed_on_target``: the group's current offsets there; ``target_state``: the
    group's state name there (None when it does not exist)."""
    if target_state is not None and target_state.upper() not in WRITABLE_STATES:
        return {}
    out: dict[tuple[str, int], int] = {}
    for tp, offset in translated.items():
        if offset < 0:
            continue
        current = committed_on_target.get(tp)
        if current is not None and current >= offset:
            continue
        out[tp] = offset
    return out
