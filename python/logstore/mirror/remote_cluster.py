"""What ``RemoteClusterUtils.translateOffsets`` answers, from the target cluster alone:
the offsets a consumer group should start from on the target, read from the newest
checkpoints in ``<source alias>.checkpoints.internal`` (works while the source is down).
"""

from __future__ import annotations

from logstore.mirror import clients
from logstore.mirror.checkpoints import Checkpoint, latest
from logstore.mirror.config import ClientConfig


def translate_offsets(
    target: ClientConfig, checkpoints_topic: str, group: str, timeout: float = 60.0
) -> dict[tuple[str, int], Checkpoint]:
    """(remote topic, partition) -> the newest checkpoint of ``group``."""
    reader = clients.TopicReader(target, checkpoints_topic, "logstore-mirror-translate")
    try:
        msgs = reader.read_to_end(timeout)
    finally:
        reader.close()
    found = latest((m.key(), m.value()) for m in msgs)
    return {(t, p): cp for (g, t, p), cp in found.items() if g == group}
