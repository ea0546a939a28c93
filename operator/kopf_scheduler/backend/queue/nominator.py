"""Nominated pods: pending pods that preemption (or ``status.nominatedNodeName``) reserved a node for.

Filters treat a nominated pod of equal or higher priority as if it already ran on its node, so that the
room preemption made is not taken by someone else (kube-scheduler's ``nominator``).

Invariants: a pod is nominated to at most one node; ``node_of`` and ``pods_on`` always agree; no node
is kept with an empty list; a nomination made in memory survives an update that carries no
``nominatedNodeName`` on either side (the API write may simply not have arrived yet).
"""

from __future__ import annotations

from kopf_scheduler.framework.pod_info import PodInfo


class Nominator:
    __slots__ = ("_node_of", "_pods_on")

    def __init__(self) -> None:
        #: node name -> {uid: PodInfo}, in nomination order
        self._pods_on: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def add(self, pod: PodInfo, node_name: str | None = None) -> None:
        """Nominates ``pod`` to ``node_name``, or to its ``status.nominatedNodeName`` when None.

        An empty node name clears the nomination.
        """
        self.delete(pod.uid)
        name = pod.nominated_node_name if node_name is None else node_name
        if not name:
            return
        self._node_of[pod.uid] = name
        self._pods_on.setdefault(name, {})[pod.uid] = pod

    def update(self, old: PodInfo | None, new: PodInfo) -> None:
        """Replaces the stored version of a pod, keeping an in-memory nomination the update does not touch."""
        node_name: str | None = None
        if (old is None or not old.nominated_node_name) and not new.nominated_node_name:
            node_name = self._node_of.get(new.uid)
            if node_name is None:
                return
        self.add(new, node_name)

    def delete(self, uid: str) -> None:
        name = self._node_of.pop(uid, None)
        if name is None:
            return
        pods = self._pods_on[name]
        del pods[uid]
        if not pods:
            del self._pods_on[name]

    def pods_on(self, node_name: str) -> list[PodInfo]:
        pods = self._pods_on.get(node_name)
        return list(pods.values()) if pods else []

    def node_names(self) -> frozenset[str]:
        return frozenset(self._pods_on) if self._pods_on else frozenset()

    def node_of(self, uid: str) -> str:
        return self._node_of.get(uid, "")

    def __len__(self) -> int:
        return len(self._node_of)
