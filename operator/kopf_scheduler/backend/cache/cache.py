"""The scheduler cache: every node, every assigned pod, and the pods assumed on a node before their
binding is confirmed.

Invariants:
- A pod is in at most one ``NodeInfo``; an assumed pod counts against its node like a bound one.
- Every assumed pod ends in exactly one of: confirmed (``add_pod`` when the API shows it bound) or
  forgotten (``forget_pod`` after a failed binding). The cache itself never expires one: with a TTL
  (upstream's is 0: never) ``overdue_assumed_pods`` lists those whose binding finished long ago without
  a confirmation, for the binding confirmation to re-read and settle.
- A node deleted while pods remain on it stays as a node-less entry until those pods are gone, and is
  not offered for scheduling.
- Every change bumps the node's generation and marks it dirty, so ``update_snapshot`` refreshes only
  those nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.backend.cache.node_tree import NodeTree, zone_key
from kopf_scheduler.backend.cache.pod_group_states import PodGroupStates
from kopf_scheduler.backend.cache.snapshot import Snapshot
from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo


class CacheError(RuntimeError):
    """A cache operation out of order (assuming a pod twice, forgetting a pod that is not assumed)."""


@dataclass(slots=True)
class _PodState:
    pod: PodInfo
    assumed: bool = False
    binding_finished: bool = False
    deadline: float | None = None


class Cache:
    def __init__(self, clock: Clock, assumed_ttl: float = 0.0) -> None:
        self.clock = clock
        #: seconds an assumed pod whose binding finished may wait for confirmation; 0 = forever (upstream)
        self.assumed_ttl = assumed_ttl
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodState] = {}
        self._tree = NodeTree()
        self._dirty: set[str] = set()
        self._structure_changed = True
        self._labels_changed = False
        self._images_changed = False
        #: GenericWorkload: the pod group states of the Workload API's PodGroups (``pod_group_states``),
        #: kept only while this is set
        self.pod_groups_enabled = False
        self.pod_groups = PodGroupStates()

    # -- nodes -----------------------------------------------------------------------------------------
    def add_node(self, node: Mapping[str, Any]) -> NodeInfo:
        """Adds or replaces a node; returns its ``NodeInfo``. Raises ``NodeParseError``."""
        return self.update_node(node)[1]

    def update_node(self, node: Mapping[str, Any]) -> tuple[NodeInfo | None, NodeInfo]:
        """Sets the node object; returns (a copy of the previous state or None, the current state)."""
        name = str((node.get("metadata") or {}).get("name") or "")
        info = self._nodes.get(name)
        old = info.clone() if info is not None and info.node is not None else None
        if info is None:
            info = NodeInfo(node)
            self._nodes[info.name] = info
        else:
            info.set_node(node)
        if old is None or zone_key(old.labels) != zone_key(info.labels):
            self._structure_changed = True
        if old is None or old.labels != info.labels or old.taints != info.taints:
            self._labels_changed = True
        if old is None or old.image_sizes != info.image_sizes:
            self._images_changed = True
        self._tree.add(info.name, info.labels)
        self._dirty.add(info.name)
        return old, info

    def remove_node(self, name: str) -> NodeInfo | None:
        info = self._nodes.get(name)
        if info is None or info.node is None:
            return None
        old = info.clone()
        self._tree.remove(name)
        if info.pods:
            info.node = None  # keep the pods' accounting until they are removed
        else:
            del self._nodes[name]
        self._structure_changed = True
        self._labels_changed = True
        self._images_changed = True
        return old

    def node_info(self, name: str) -> NodeInfo | None:
        info = self._nodes.get(name)
        return info if info is not None and info.node is not None else None

    def node_names(self) -> list[str]:
        """The nodes known from the API (not those only named by pods placed on them)."""
        return [name for name, info in self._nodes.items() if info.node is not None]

    def pods(self) -> list[PodInfo]:
        """Every pod placed on a node, assumed ones included."""
        return [state.pod for state in self._pods.values()]

    def node_count(self) -> int:
        return len(self._tree)

    # -- pods ------------------------------------------------------------------------------------------
    def _place(self, pod: PodInfo) -> None:
        info = self._nodes.get(pod.node_name)
        if info is None:
            info = self._nodes[pod.node_name] = NodeInfo(name=pod.node_name)
        info.add_pod(pod)
        self._dirty.add(pod.node_name)

    def _unplace(self, pod: PodInfo) -> None:
        info = self._nodes.get(pod.node_name)
        if info is None:
            return
        info.remove_pod(pod)
        self._dirty.add(pod.node_name)
        if info.node is None and not info.pods:
            del self._nodes[pod.node_name]

    def assume_pod(self, pod: PodInfo) -> None:
        """Counts ``pod`` (with ``node_name`` set) on its node before the binding is confirmed."""
        if pod.uid in self._pods:
            raise CacheError(f"pod {pod.key} ({pod.uid}) is already in the cache")
        if not pod.node_name:
            raise CacheError(f"pod {pod.key} has no node to be assumed on")
        self._place(pod)
        self._pods[pod.uid] = _PodState(pod, assumed=True)
        if self.pod_groups_enabled:
            self.pod_groups.assume_pod(pod)

    def finish_binding(self, pod: PodInfo) -> None:
        state = self._pods.get(pod.uid)
        if state is not None and state.assumed:
            state.binding_finished = True
            if self.assumed_ttl > 0:
                state.deadline = self.clock.now() + self.assumed_ttl

    def forget_pod(self, pod: PodInfo) -> None:
        state = self._pods.get(pod.uid)
        if state is None:
            return
        if not state.assumed:
            raise CacheError(f"pod {pod.key} is bound, not assumed; it cannot be forgotten")
        if state.pod.node_name != pod.node_name:
            raise CacheError(f"pod {pod.key} was assumed on {state.pod.node_name}, not {pod.node_name}")
        self._unplace(state.pod)
        del self._pods[pod.uid]
        if self.pod_groups_enabled:
            self.pod_groups.forget_pod(state.pod)

    def add_pod(self, pod: PodInfo) -> None:
        """An assigned pod seen in the API: confirms an assumed one (moving it if bound elsewhere)."""
        state = self._pods.get(pod.uid)
        if state is not None:
            if state.pod.node_name != pod.node_name or not state.assumed:
                self._unplace(state.pod)
                self._place(pod)
            else:  # same node: swap the record for the API's version of the pod
                self._unplace(state.pod)
                self._place(pod)
            self._pod_group_member_replaced(state.pod, pod)
            state.pod, state.assumed, state.deadline = pod, False, None
            return
        self._place(pod)
        self._pods[pod.uid] = _PodState(pod)
        if self.pod_groups_enabled:
            self.pod_groups.add_pod(pod)

    def update_pod(self, old: PodInfo | None, new: PodInfo) -> None:
        state = self._pods.get(new.uid)
        if state is None:
            self.add_pod(new)
            return
        self._unplace(state.pod)
        self._place(new)
        self._pod_group_member_replaced(state.pod, new)
        state.pod, state.assumed, state.deadline = new, False, None

    def remove_pod(self, pod: PodInfo) -> PodInfo | None:
        state = self._pods.pop(pod.uid, None)
        if state is None:
            return None
        self._unplace(state.pod)
        if self.pod_groups_enabled:
            self.pod_groups.remove_pod(state.pod)
        return state.pod

    def _pod_group_member_replaced(self, old: PodInfo, new: PodInfo) -> None:
        """Upstream's ``updatePod``: the old version leaves its pod group state, the new one joins it."""
        if self.pod_groups_enabled:
            self.pod_groups.remove_pod(old)
            self.pod_groups.add_pod(new)

    def pod_group_member_seen(self, pod: PodInfo) -> None:
        """A pending pod was added or changed (``AddPodGroupMember``/``UpdatePodGroupMember``)."""
        if self.pod_groups_enabled:
            self.pod_groups.upsert_pod(pod)

    def pod_group_member_gone(self, pod: PodInfo) -> None:
        """A pod was deleted (``RemovePodGroupMember``); nothing when it is not a member."""
        if self.pod_groups_enabled:
            self.pod_groups.remove_pod(pod)

    def get_pod(self, uid: str) -> PodInfo | None:
        state = self._pods.get(uid)
        return None if state is None else state.pod

    def is_assumed(self, uid: str) -> bool:
        state = self._pods.get(uid)
        return state is not None and state.assumed

    def pod_count(self) -> int:
        return len(self._pods)

    def assumed_count(self) -> int:
        return sum(1 for s in self._pods.values() if s.assumed)

    def overdue_assumed_pods(self) -> list[PodInfo]:
        """Assumed pods whose binding finished longer than the TTL ago and that no watch event has
        confirmed since; they stay assumed. A pod is overdue strictly after its deadline (upstream's
        ``now.After(deadline)``)."""
        now = self.clock.now()
        return [
            s.pod
            for s in self._pods.values()
            if s.assumed and s.binding_finished and s.deadline is not None and now > s.deadline
        ]

    # -- snapshot --------------------------------------------------------------------------------------
    def update_snapshot(self, snapshot: Snapshot) -> None:
        """Brings ``snapshot`` up to date, cloning only the nodes changed since the last call. When nodes
        came or went the node order changes, but the unchanged nodes' copies (and their table rows) are
        reused: a node added to a large cluster costs one clone, not one per node."""
        if self._structure_changed:
            dirty, nodes, held = self._dirty, self._nodes, snapshot.get
            infos = [
                kept if name not in dirty and (kept := held(name)) is not None else nodes[name].clone()
                for name in self._tree.ordered()
            ]
            snapshot.rebuild(infos)
            snapshot.table.bump_labels_version()
        else:
            for name in self._dirty:
                info = self._nodes.get(name)
                if info is not None and info.node is not None and snapshot.index_of(name) is not None:
                    snapshot.replace(info.clone())
            if self._labels_changed:
                snapshot.table.bump_labels_version()
            if self._images_changed:
                snapshot.invalidate_images()
        self._dirty.clear()
        self._structure_changed = self._labels_changed = self._images_changed = False

    def dump(self) -> dict[str, list[str]]:
        """Node name -> pod keys (assumed pods marked with ``*``), for debugging and tests."""
        return {
            name: sorted(p.key + ("*" if self.is_assumed(p.uid) else "") for p in info.pods.values())
            for name, info in self._nodes.items()
        }
