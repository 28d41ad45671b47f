"""logstore's Kafka-compatible broker."""
