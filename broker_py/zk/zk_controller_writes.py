"""The controller's writes, each fenced by the zkVersion of ``/controller_epoch``.

Invariant: every write is a multi that begins with ``check(/controller_epoch,
epoch_zk_version)`` (Kafka's ``wrapRequestWithControllerEpochCheck``), so a controller that
lost its place fails with :class:`ControllerMovedError` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kazoo.exceptions import BadVersionError, NoNodeError

from broker_py.controller.controller_store import ControllerMovedError
from broker_py.zk import zk_data
from broker_py.zk.zk_node_ops import PIPELINE, ZkOp, first_error
from broker_py.zk.zk_session import ZkSession

__all__ = ["BATCH", "ZkControllerWrites"]

BATCH = 100  # items per multi in controller_ops


class ZkControllerWrites(ZkSession):
    def controller_transaction(
        self, epoch_zk_version: int, build: Callable[[object], None]
    ) -> list:
        """Runs ``build(transaction)``'s operations in one multi behind
        ``check(/controller_epoch, epoch_zk_version)``; returns their results (the
        check's left out). ControllerMovedError if the epoch moved; the first error of
        an operation is raised as it is."""
        transaction = self._zk.transaction()
        transaction.check(zk_data.ControllerEpochZNode.PATH, epoch_zk_version)
        build(transaction)
        results = transaction.commit()
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise _controller_moved(epoch_zk_version)
        if (error := first_error(results[1:])) is not None:
            raise error
        return results[1:]

    def controller_ops(
        self, epoch_zk_version: int, items: Sequence[Sequence[ZkOp]], batch: int = BATCH
    ) -> list[list[object]]:
        """Runs each item's operations atomically behind ``check(/controller_epoch,
        epoch_zk_version)`` (Kafka fences every controller request so) and returns each
        item's results as if it ran alone in its own multi: a failed item's results are
        exceptions (see :func:`first_error`), and it changed nothing.

        Items go ``batch`` at a time into one multi; the items of a multi that fails run
        again one per multi. Multis are pipelined. ControllerMovedError once a check fails
        (items answered before it stand)."""
        results: list[list[object]] = [[] for _ in items]
        chunks = [
            range(at, min(at + batch, len(items))) for at in range(0, len(items), max(1, batch))
        ]
        retry: list[int] = []
        multis = [[op for i in chunk for op in items[i]] for chunk in chunks]
        for chunk, answer in zip(chunks, self._fenced_multis(epoch_zk_version, multis)):
            if len(chunk) == 1:
                results[chunk[0]] = answer
            elif first_error(answer) is not None:
                retry.extend(chunk)
            else:
                at = 0
                for i in chunk:
                    results[i], at = answer[at : at + len(items[i])], at + len(items[i])
        for i, answer in zip(
            retry, self._fenced_multis(epoch_zk_version, [items[i] for i in retry])
        ):
            results[i] = answer
        return results

    def _fenced_multis(self, epoch_zk_version: int, multis: list[list[ZkOp]]) -> list[list[object]]:
        out: list[list[object]] = []
        for start in range(0, len(multis), PIPELINE):
            pending = []
            for ops in multis[start : start + PIPELINE]:
                transaction = self._zk.transaction()
                transaction.check(zk_data.ControllerEpochZNode.PATH, epoch_zk_version)
                for op in ops:
                    op.add_to(transaction)
                pending.append(transaction.commit_async())
            answered = [p.get() for p in pending]
            if any(isinstance(r[0], (BadVersionError, NoNodeError)) for r in answered):
                raise _controller_moved(epoch_zk_version)
            out.extend(r[1:] for r in answered)
        return out


def _controller_moved(epoch_zk_version: int) -> ControllerMovedError:
    return ControllerMovedError(
        f"/controller_epoch is no longer at version {epoch_zk_version}: another controller exists"
    )
