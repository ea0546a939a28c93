"""Changes to a cycle's snapshot that are undone afterwards: the pods a pod group scheduling cycle assumes
while it tries the group's members, and the victims pod group preemption takes away to try the group again
(upstream's ``Snapshot.AssumePod``/``ForgetPod`` and the mutable snapshot lister of v1.37.2).

A node is cloned the first time it changes, and every change puts the clone back into the snapshot, so that
its table row and affinity indexes follow; ``restore`` puts the original nodes back. Invariant: after
``restore`` the snapshot holds exactly the node objects it held before the first change.
"""

from __future__ import annotations

from typing import Protocol

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo


class MutableSnapshot(Protocol):
    def get(self, name: str) -> NodeInfo | None: ...

    def replace(self, info: NodeInfo) -> None: ...


class SnapshotMutations:
    __slots__ = ("_originals", "snapshot")

    def __init__(self, snapshot: MutableSnapshot) -> None:
        self.snapshot = snapshot
        self._originals: dict[str, NodeInfo] = {}

    def _own(self, name: str) -> NodeInfo | None:
        node = self.snapshot.get(name)
        if node is None or node.node is None:
            return None
        if name not in self._originals:
            self._originals[name] = node
            node = node.clone()
        return node

    def add_pod(self, pod: PodInfo, node_name: str) -> bool:
        """Counts ``pod`` on ``node_name``; False when the snapshot has no such node."""
        node = self._own(node_name)
        if node is None:
            return False
        node.add_pod(pod)
        self.snapshot.replace(node)
        return True

    def remove_pod(self, pod: PodInfo, node_name: str) -> bool:
        """Takes ``pod`` (by uid) off ``node_name``; False when it is not there."""
        node = self._own(node_name)
        if node is None:
            return False
        removed = node.remove_pod(pod)
        self.snapshot.replace(node)
        return removed

    def restore(self) -> None:
        for original in self._originals.values():
            self.snapshot.replace(original)
        self._originals.clear()
