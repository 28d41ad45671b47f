"""The cluster fault-injection harness (issue 22, parts 1-3).

- :mod:`.cluster`: ZooKeeper and N broker processes on loopback, each restartable,
  killable, pausable (``Cluster``).
- :mod:`.proxy`: per-link TCP proxies that partition and delay traffic between nodes
  (``Network``).
- :mod:`.workload`: producers and consumers of three real client libraries recording
  a history of sends and polls.
- :mod:`.checker`: a pure checker of such a history in the spirit of Jepsen's queue
  workload (``check`` -> ``CheckResult``).
- :mod:`.replicas`: byte-for-byte comparison of replicas' segment files up to the
  high watermark.
- :mod:`.nemesis`: seeded, bounded fault schedules and their execution.

See docs/reliability.md, "Cluster fault harness".
"""
