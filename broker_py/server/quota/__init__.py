"""Client quotas: entities, the quota managers and the broker's quota state."""
