"""Client telemetry (KIP-714): CLIENT_METRICS resources, the subscription manager and
the pushed payloads; :mod:`.client_telemetry` wires them together for the handlers."""
