"""Share groups on the partition leaders (KIP-932): the share-partitions' in-flight records."""
