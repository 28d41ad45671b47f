"""group.consumer.migration.policy: whether a group may move between the classic and the
consumer protocols while it has members (Kafka's ConsumerGroupMigrationPolicy).

    value           upgrade (classic -> consumer)   downgrade (consumer -> classic)
    bidirectional   yes                             yes            (the default)
    upgrade         yes                             no
    downgrade       no                              yes
    disabled        no                              no

Values are matched without regard to case, as Kafka's validator does.
"""

from __future__ import annotations

import enum

CONFIG_NAME = "group.consumer.migration.policy"
DEFAULT = "bidirectional"


class MigrationPolicyError(ValueError):
    """A value that is none of the policies (Kafka's ConfigException text)."""

    def __init__(self, value: object) -> None:
        super().__init__(
            f"Invalid value {value} for configuration {CONFIG_NAME}: String must be one of "
            f"(case insensitive): {', '.join(p.value for p in MigrationPolicy)}"
        )
        self.key = CONFIG_NAME


class MigrationPolicy(enum.Enum):
    # Kafka's order, which its error text lists.
    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)

    @classmethod
    def parse(cls, value: object) -> MigrationPolicy:
        if isinstance(value, MigrationPolicy):
            return value
        if not isinstance(value, str):
            raise MigrationPolicyError(value)
        try:
            return cls(value.strip().lower())
        except ValueError:
            raise MigrationPolicyError(value) from None
