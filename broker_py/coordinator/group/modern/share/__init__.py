"""Share groups (KIP-932) on the modern group protocol, sans-IO: the records of a share
group (:mod:`.records`, as bytes in :mod:`.record_serde`), its state (:mod:`.group`), the
server-side assignor (:mod:`.simple_assignor`) and the ShareGroupHeartbeat rules with the
session timers (:mod:`.manager`)."""
