"""Java's ``String.hashCode`` and the partition Kafka derives from it, so Kafka and
logstore place every group, transactional id and fetcher on the same partition or thread.
"""

from __future__ import annotations


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code
    units, in signed 32-bit arithmetic."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % numPartitions`` (``Utils.abs`` is
    ``x & 0x7fffffff``): the partition of a coordinator's topic holding ``key``, a group
    id in ``__consumer_offsets`` or a transactional id in ``__transaction_state``."""
    return (java_string_hashcode(key) & 0x7FFFFFFF) % num_partitions
