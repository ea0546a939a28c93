"""The unschedulable pool: pods that wait for a cluster event (kube-scheduler's ``unschedulablePods``).

It holds two kinds of pods, told apart by ``QueuedPodInfo.gated_by``: pods a plugin rejected in a
scheduling attempt, and pods a PreEnqueue plugin keeps out of the active queue ("gated"). Both leave only
through the scheduling queue, on an event the rejecting (or gating) plugin registered, on the pod's own
update, or (rejected pods only) after sitting here longer than the leftover timeout.

Invariant: the gated count equals the number of members whose ``gated_by`` was set when they were last
stored; callers re-store a member (``add``) whenever they change its ``gated_by``.
"""

from __future__ import annotations

from collections.abc import Iterator

from kopf_scheduler.framework.pod_info import QueuedPodInfo


class UnschedulablePool:
    __slots__ = ("_gated", "_pods")

    def __init__(self) -> None:
        self._pods: dict[str, QueuedPodInfo] = {}
        #: uids of the members stored while gated
        self._gated: set[str] = set()

    def add(self, qp: QueuedPodInfo) -> None:
        """Adds or re-stores a pod (the gated bookkeeping follows its current ``gated_by``)."""
        uid = qp.pod.uid
        self._pods[uid] = qp
        if qp.gated_by:
            self._gated.add(uid)
        else:
            self._gated.discard(uid)

    def remove(self, uid: str) -> QueuedPodInfo | None:
        self._gated.discard(uid)
        return self._pods.pop(uid, None)

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._pods.get(uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def __iter__(self) -> Iterator[QueuedPodInfo]:
        return iter(self._pods.values())

    def snapshot(self) -> list[QueuedPodInfo]:
        """The members as a list, safe to iterate while moving pods out."""
        return list(self._pods.values())

    @property
    def gated_count(self) -> int:
        return len(self._gated)
