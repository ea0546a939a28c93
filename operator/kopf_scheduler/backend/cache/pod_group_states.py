"""What the scheduler knows of each Workload API pod group (``scheduling.k8s.io/v1beta1`` PodGroups):
upstream's ``backend/cache/podgroupstate.go`` and the pod group half of ``cache.go`` (v1.37.2), without
CompositePodGroups.

A group's state exists once a pod naming it (``spec.schedulingGroup.podGroupName``) or its PodGroup is seen,
and goes when both are gone. Every pod of the group is in exactly one of: unscheduled (neither assumed nor
bound), assumed (past Reserve, waiting to bind) or assigned (bound). A pod seen bound is assigned whatever
the scheduler thought of it; forgetting an assumed pod puts it back to unscheduled.

Invariants: ``all_pods_count() == len(unscheduled) + len(assumed) + len(assigned)``;
``scheduled_pods_count()`` counts assumed and assigned pods.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup, scheduling_group
from kopf_scheduler.framework.pod_info import PodInfo


@dataclass(slots=True)
class PodGroupStateData:
    #: every pod of the group the scheduler knows, by UID, in the order first seen
    all_pods: dict[str, PodInfo] = field(default_factory=dict)
    unscheduled: dict[str, None] = field(default_factory=dict)
    assumed: dict[str, PodInfo] = field(default_factory=dict)
    assigned: dict[str, None] = field(default_factory=dict)
    pod_group: WorkloadPodGroup | None = None
    #: the UID of the PodGroup whose ``PodGroupInitiallyScheduled`` condition a cycle set ``True`` (before
    #: the watch shows it); "" when none did
    scheduled_uid: str = ""

    def add_pod(self, pod: PodInfo) -> None:
        self.all_pods[pod.uid] = pod
        if pod.node_name:
            self.assigned[pod.uid] = None
            self.unscheduled.pop(pod.uid, None)
            self.assumed.pop(pod.uid, None)
        else:
            self.unscheduled[pod.uid] = None

    def update_pod(self, old: PodInfo, new: PodInfo) -> None:
        self.all_pods[new.uid] = new
        if not old.node_name and new.node_name:
            self.assigned[new.uid] = None
            self.unscheduled.pop(new.uid, None)
            self.assumed.pop(new.uid, None)

    def delete_pod(self, uid: str) -> None:
        self.all_pods.pop(uid, None)
        self.unscheduled.pop(uid, None)
        self.assumed.pop(uid, None)
        self.assigned.pop(uid, None)

    def assume_pod(self, pod: PodInfo) -> None:
        stored = self.all_pods.get(pod.uid)
        if stored is None:
            return  # deleted while it was being scheduled
        if stored.node_name:
            self.assigned[pod.uid] = None
        else:
            self.assumed[pod.uid] = pod
        self.unscheduled.pop(pod.uid, None)

    def forget_pod(self, uid: str) -> None:
        pod = self.all_pods.get(uid)
        if pod is None:
            return
        self.assumed.pop(uid, None)
        if pod.node_name:
            self.assigned[uid] = None
        else:
            self.unscheduled[uid] = None

    def empty(self) -> bool:
        return not self.all_pods and self.pod_group is None

    # -- PodGroupState -----------------------------------------------------------------------------------
    def all_pods_count(self) -> int:
        return len(self.all_pods)

    def scheduled_pods_count(self) -> int:
        return len(self.assumed) + len(self.assigned)

    def unscheduled_pods(self) -> list[PodInfo]:
        return [self.all_pods[uid] for uid in self.unscheduled]

    def assumed_pods(self) -> frozenset[str]:
        return frozenset(self.assumed)

    def scheduled_pods(self) -> list[PodInfo]:
        return [self.all_pods[uid] for uid in self.assigned] + list(self.assumed.values())


class PodGroupStates:
    """The states of all groups, by ``(namespace, name)``; the ``PodGroupManager`` plugins read."""

    def __init__(self) -> None:
        self._states: dict[tuple[str, str], PodGroupStateData] = {}

    @staticmethod
    def _key(pod: PodInfo) -> tuple[str, str] | None:
        name = scheduling_group(pod)
        return None if name is None else (pod.namespace, name)

    # -- PodGroupManager ---------------------------------------------------------------------------------
    def pod_group(self, namespace: str, name: str) -> WorkloadPodGroup | None:
        state = self._states.get((namespace, name))
        return None if state is None else state.pod_group

    def state(self, namespace: str, name: str) -> PodGroupStateData | None:
        return self._states.get((namespace, name))

    # -- PodGroup objects --------------------------------------------------------------------------------
    def set_pod_group(self, group: WorkloadPodGroup) -> None:
        """A PodGroup added or updated."""
        self._states.setdefault((group.namespace, group.name), PodGroupStateData()).pod_group = group

    def remove_pod_group(self, namespace: str, name: str) -> None:
        state = self._states.get((namespace, name))
        if state is None:
            return
        state.pod_group = None
        if state.empty():
            del self._states[(namespace, name)]

    # -- member pods -------------------------------------------------------------------------------------
    def add_pod(self, pod: PodInfo) -> None:
        key = self._key(pod)
        if key is not None:
            self._states.setdefault(key, PodGroupStateData()).add_pod(pod)

    def upsert_pod(self, pod: PodInfo) -> None:
        """A pending member seen: added when new to its group, else updated (its state kept)."""
        key = self._key(pod)
        if key is None:
            return
        state = self._states.get(key)
        known = None if state is None else state.all_pods.get(pod.uid)
        if known is None:
            self.add_pod(pod)
        else:
            self.update_pod(known, pod)

    def update_pod(self, old: PodInfo, new: PodInfo) -> None:
        key = self._key(new)
        state = None if key is None else self._states.get(key)
        if state is not None:  # upstream logs a missed add and leaves it
            state.update_pod(old, new)

    def remove_pod(self, pod: PodInfo) -> None:
        key = self._key(pod)
        state = None if key is None else self._states.get(key)
        if state is None or key is None:
            return
        state.delete_pod(pod.uid)
        if state.empty():
            del self._states[key]

    def assume_pod(self, pod: PodInfo) -> None:
        key = self._key(pod)
        if key is None:
            return
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = PodGroupStateData()
            state.all_pods[pod.uid] = pod
        state.assume_pod(pod)

    def forget_pod(self, pod: PodInfo) -> None:
        key = self._key(pod)
        state = None if key is None else self._states.get(key)
        if state is not None:
            state.forget_pod(pod.uid)
