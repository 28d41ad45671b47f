"""The names of the topics the coordinators keep their state in (Kafka's
``Topic.GROUP_METADATA_TOPIC_NAME`` and ``Topic.TRANSACTION_STATE_TOPIC_NAME``)."""

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
