"""The in-memory cluster ``simulate`` schedules against: a binder that records the binding and echoes
the bound pod back into the scheduler the way a watch would (also for a binding a scheduler extender
made, which a real cluster's watch would report), an evictor that deletes preemption victims at
once (as pods with no grace period go) and tells the scheduler, a recorder of events and of
``status.nominatedNodeName``, whose changes are echoed back too, and the volume binder's writes with
the PV controller and provisioners that act on them (``volumes``)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.client import APIError, PreemptorGroup
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.simulate.dra import SimulatedClaims
from kopf_scheduler.simulate.volumes import SimulatedVolumes

_DRA_PATH = "/apis/resource.k8s.io/"


@dataclass
class PodOutcome:
    node: str | None = None
    message: str | None = None
    reason: str | None = None
    nominated_node: str | None = None
    attempts: int = 0
    #: pods this pod preempted (``namespace/name``), in eviction order
    victims: list[str] = field(default_factory=list)
    #: the pod that preempted this one, after it was scheduled here
    preempted_by: str | None = None


@dataclass
class SimulatedCluster:
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # uid -> pod object
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)  # uid -> outcome
    #: called with (old, new) pod objects when a binding lands (the scheduler's watch), and for a
    #: binding the new object read already (the bound copy of the pod the scheduler sent)
    on_update: Callable[[Mapping[str, Any], Mapping[str, Any], PodInfo | None], None] | None = None
    #: called with the pod object when a pod is deleted (the scheduler's watch)
    on_delete: Callable[[Mapping[str, Any]], None] | None = None
    bindings: list[tuple[str, str]] = field(default_factory=list)
    #: (victim, preemptor, node) for every eviction, in order
    evictions: list[tuple[str, str, str]] = field(default_factory=list)
    #: PersistentVolumes and claims, and the controllers that bind and provision them
    volumes: SimulatedVolumes = field(default_factory=SimulatedVolumes)

    #: ResourceClaims and the resource-claim controller's side of them
    claims: SimulatedClaims = field(default_factory=SimulatedClaims)

    async def update_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        if path.startswith(_DRA_PATH):
            return self.claims.update(path, obj)
        return self.volumes.update(path, obj)

    async def get_object(self, path: str) -> dict[str, Any] | None:
        try:
            return self.claims.get(path)
        except APIError as e:
            if e.status == 404:
                return None
            raise

    async def patch_object(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        if path.startswith("/api/v1/namespaces/") and path.endswith("/status"):
            return self._patch_pod_status(path, patch)
        return self.claims.patch(path, patch)

    async def create_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        return self.claims.create(path, obj)

    async def delete_object(self, path: str) -> None:
        self.claims.delete(path)

    def _patch_pod_status(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """A merge of top-level ``status`` fields into the pod (``extendedResourceClaimStatus``), echoed
        to the scheduler as its watch would."""
        parts = path.strip("/").split("/")  # api/v1/namespaces/<ns>/pods/<name>/status
        for uid, old in self.pods.items():
            meta = old.get("metadata") or {}
            if (meta.get("namespace") or "default", meta.get("name")) == (parts[3], parts[5]):
                new = dict(old, status={**(old.get("status") or {}), **(patch.get("status") or {})})
                self.pods[uid] = new
                if self.on_update is not None:
                    self.on_update(old, new, None)
                return copy.deepcopy(new)
        raise APIError(404, f'pods "{parts[5]}" not found')

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        old = self.pods.get(pod.uid)
        if old is None:
            raise APIError(404, f'pods "{pod.name}" not found')
        if (old.get("spec") or {}).get("nodeName"):
            raise APIError(409, f'pod {pod.name} is already assigned to node "{old["spec"]["nodeName"]}"')
        self._apply_binding(pod, old, node_name)

    def bound_by_extender(self, pod: PodInfo, node_name: str) -> None:
        """A scheduler extender bound the pod (in its own cluster): take it as bound here too."""
        old = self.pods.get(pod.uid)
        if old is not None and not (old.get("spec") or {}).get("nodeName"):
            self._apply_binding(pod, old, node_name)

    def _apply_binding(self, pod: PodInfo, old: dict[str, Any], node_name: str) -> None:
        new = copy.copy(old)
        new["spec"] = dict(old.get("spec") or {}, nodeName=node_name)
        self.pods[pod.uid] = new
        self.bindings.append((pod.key, node_name))
        outcome = self.outcomes.setdefault(pod.uid, PodOutcome())
        outcome.node, outcome.message, outcome.reason = node_name, None, None
        if self.on_update is not None:
            # read from this very object, the pod sent differs from ``new`` only by spec.nodeName
            self.on_update(old, new, pod.bound_to(node_name, new) if pod.raw is old else None)

    def record_scheduled(self, pod: PodInfo, node_name: str) -> None:
        return None  # the binding itself is the record

    def record_failure(
        self, pod: PodInfo, reason: str, message: str, nominated_node_name: str | None
    ) -> None:
        outcome = self.outcomes.setdefault(pod.uid, PodOutcome())
        outcome.message, outcome.reason = message, reason
        outcome.attempts += 1
        if nominated_node_name is not None:
            outcome.nominated_node = nominated_node_name or None
            self._set_nominated_node_name(pod.uid, nominated_node_name)

    async def nominate(self, pod: PodInfo, node_name: str) -> None:
        self._set_nominated_node_name(pod.uid, node_name)

    def record_preempted_in_memory(
        self, victim: PodInfo, preemptor: PodInfo, node_name: str, *, group: PreemptorGroup | None = None
    ) -> None:
        self.outcomes.setdefault(preemptor.uid, PodOutcome()).victims.append(victim.key)

    async def evict(
        self, victim: PodInfo, preemptor: PodInfo, node_name: str, *, group: PreemptorGroup | None = None
    ) -> None:
        obj = self.pods.pop(victim.uid, None)
        if obj is None:
            return  # already gone
        self.evictions.append((victim.key, preemptor.key, node_name))
        self.outcomes.setdefault(preemptor.uid, PodOutcome()).victims.append(victim.key)
        outcome = self.outcomes.get(victim.uid)
        if outcome is not None:  # a pod of the input, scheduled earlier in this run
            outcome.node, outcome.preempted_by = None, preemptor.key
            outcome.message = f"preempted by {preemptor.key} on node {node_name}"
        if self.on_delete is not None:
            self.on_delete(obj)

    def clear_nominated_node_name(self, pod: PodInfo) -> None:
        outcome = self.outcomes.get(pod.uid)
        if outcome is not None:
            outcome.nominated_node = None
        self._set_nominated_node_name(pod.uid, "")

    def _set_nominated_node_name(self, uid: str, node_name: str) -> None:
        old = self.pods.get(uid)
        if old is None or (old.get("status") or {}).get("nominatedNodeName", "") == node_name:
            return
        status = {k: v for k, v in (old.get("status") or {}).items() if k != "nominatedNodeName"}
        if node_name:
            status["nominatedNodeName"] = node_name
        new = dict(old, status=status)
        self.pods[uid] = new
        if self.on_update is not None:
            self.on_update(old, new, None)
