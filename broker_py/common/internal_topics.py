"""The names of the topics the coordinators keep their state in (Kafka's
``Topic.GROUP_METADATA_TOPIC_NAME``, ``Topic.TRANSACTION_STATE_TOPIC_NAME`` and
``Topic.SHARE_GROUP_STATE_TOPIC_NAME``)."""

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"

# Kafka's ``Topic.isInternal``: the coordinators' topics, and no others (a user topic
# may start with ``__``).
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS
