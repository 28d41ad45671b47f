"""Consumer groups on the consumer protocol (KIP-848), as pure decision logic: members and
their epochs, the server-side assignors, reconciliation and the heartbeat step function
with its timers. No I/O; the coordinator feeds it requests, topics and a clock, and
persists the records it returns. The package mirrors Kafka's ``modern/consumer``.

- :mod:`.member`: a member, its state and epochs;
- :mod:`.records`: the records the group is made of (Kafka 4's record types);
- :mod:`.group`: a group, rebuilt by replaying records; its state;
- :mod:`.assignor`, :mod:`.uniform_assignor`, :mod:`.range_assignor`: target assignments;
- :mod:`.reconciliation`: one member's step towards its target, revoking first;
- :mod:`.heartbeat`: the request and response fields;
- :mod:`.manager`: the heartbeat step function, leaving, fencing and the timers;
- :mod:`.config`: group.consumer.* with Kafka's defaults and bounds;
- :mod:`.classic_member`: the ConsumerProtocol bytes of classic members, a classic group
  as plain values;
- :mod:`.migration`: upgrade and downgrade between the protocols, classic members served
  inside a consumer group; :mod:`.migration_policy`: group.consumer.migration.policy.
"""
