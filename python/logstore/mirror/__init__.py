"""``logstore mirror``: copies topics, topic configs and consumer groups' offsets from one
Kafka-compatible cluster to another with MirrorMaker 2's naming, configuration keys and
internal-topic formats (docs/mirror.md, docs/design/mirror.md).

Pure decision logic (no I/O): :mod:`.config`, :mod:`.replication_policy`, :mod:`.filters`,
:mod:`.structs`, :mod:`.offset_syncs`, :mod:`.checkpoints`, :mod:`.heartbeats`,
:mod:`.source_offsets`, :mod:`.topic_plan`, :mod:`.group_plan`, :mod:`.sensors`. The parts
that talk to clusters through confluent-kafka: :mod:`.clients`, :mod:`.topic_sync`,
:mod:`.copier`, :mod:`.checkpointer`, :mod:`.metrics`, :mod:`.status`, :mod:`.runner`.
"""
