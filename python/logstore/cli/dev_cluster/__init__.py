"""``logstore dev-cluster``: a local cluster in one command, for trying replication the
way ``rpk container`` does, without containers.

``up`` starts Debian's ZooKeeper (``/usr/share/java/zookeeper.jar``, package
``zookeeper``) and N brokers (``python -m broker_py``, ids 1..N) on 127.0.0.1, each in
its own session so they outlive the command, waits until every broker is registered,
and prints the bootstrap servers. ``start``/``stop``/``restart BROKER`` act on one
broker, ``add`` starts one more (the next id), ``logs`` prints the logs, ``status``
shows each node, ``down`` stops the brokers (SIGTERM: a controlled shutdown), then
ZooKeeper.

Layout of ``--dir`` (default ``./logstore-dev-cluster``)::

    cluster.json           the state: ports, pids, shared broker config (state.py)
    zookeeper/zoo.cfg      ZooKeeper's config; zookeeper/data its snapshots; zookeeper.log
    b<i>/data              broker i's log.dirs; b<i>/broker.log its log (stderr);
    b<i>/broker.out        its stdout (the "listening on" banner)

Modules: ``state`` (cluster.json, ports, broker configs), ``processes`` (starting,
finding and stopping the directory's processes, asking ZooKeeper), ``logs`` (printing
and following the logs), ``commands`` (the click commands).
"""

from logstore.cli.dev_cluster.commands import group

__all__ = ["group"]
