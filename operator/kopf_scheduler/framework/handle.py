"""What the runtime offers to plugins (upstream's ``framework.Handle``)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Protocol

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.client import ClusterClient
from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.disruption_budgets import DisruptionBudget
from kopf_scheduler.framework.extenders import HTTPExtender
from kopf_scheduler.framework.interface import PreFilterExtensions, SnapshotLister
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import ClusterListers
from kopf_scheduler.framework.objects.podgroups import GroupMembers
from kopf_scheduler.framework.objects.workload_pod_groups import PodGroupManager
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.recorder import Recorder
from kopf_scheduler.framework.status import Status


class WaitingPod(Protocol):
    pod: PodInfo

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> bool:
        """Declares the pod unschedulable; False when its wait was over already."""

    def preempt(self, plugin: str, message: str) -> bool:
        """Stops the wait with an error, so the pod is retried after backoff; False when it was over
        already."""

    def pending_plugins(self) -> list[str]: ...


class WaitingPods(Protocol):
    def get(self, uid: str) -> WaitingPod | None: ...

    def all(self) -> list[WaitingPod]: ...


class PodInPreBind(Protocol):
    def cancel_pod(self, message: str) -> bool:
        """Stops the pod's binding cycle, which fails with ``message``; False once PreBind is over."""


class PodsInPreBind(Protocol):
    def get(self, uid: str) -> PodInPreBind | None: ...


class PodNominator(Protocol):
    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...

    def add_nominated_pod(self, pod: PodInfo, node_name: str | None = None) -> None:
        """Nominates ``pod`` to ``node_name`` (None: its ``status.nominatedNodeName``; "": clears)."""

    def nominated_node_of(self, pod: PodInfo) -> str:
        """The node ``pod`` is nominated to as the scheduler holds it ("" for none): its own nomination
        counts at once, before the write of ``status.nominatedNodeName`` comes back through the watch."""


class Handle(Protocol):
    profile_name: str
    client: ClusterClient
    #: the scheduler's random source (seeded in simulations): plugins draw from it, never from ``random``
    rng: random.Random
    #: listers of the cluster objects besides pods and nodes (Namespaces, Services, controllers, ...);
    #: available from the plugin's construction on
    objects: ClusterListers

    #: the scheduler's clock: plugins that wait (pre-bind) sleep on it, so tests run in virtual time
    clock: Clock
    #: the pods of each PodGroup, by namespace and group name (the Coscheduling plugin counts them)
    group_members: GroupMembers
    #: the Workload API's PodGroups and the states of their pods (GangScheduling reads them)
    pod_groups: PodGroupManager
    #: the Kubernetes feature gates in force (upstream's names and versioned defaults); available from
    #: the plugin's construction on. Plugins read the gates in ``feature_gates.READ``; for every other gate
    #: the code behaves as ``IMPLEMENTED`` says
    feature_gates: FeatureGates
    #: where preemption reports its searches and the candidates it acts on (the metrics listen)
    recorder: Recorder

    def snapshot(self) -> SnapshotLister: ...

    def pod_exists(self, pod: PodInfo) -> bool:
        """False once the scheduler has seen ``pod`` (by uid) deleted: a pre-bind waiting on the cluster
        for it stops then (upstream checks its pod lister)."""

    def activate(self, pods: Iterable[PodInfo]) -> None:
        """Moves ``pods`` from the queue's backoff or unschedulable pool to its active heap (PreEnqueue
        still applies); a pod in flight is retried at once if its attempt fails (upstream's
        ``Handle.Activate``)."""

    @property
    def waiting_pods(self) -> WaitingPods: ...

    @property
    def pods_in_pre_bind(self) -> PodsInPreBind:
        """Pods past their Permit wait whose binding has not started (upstream's ``GetPodInPreBind``)."""

    @property
    def nominator(self) -> PodNominator: ...

    def pdbs(self) -> Sequence[DisruptionBudget]:
        """The PodDisruptionBudgets of the cluster, as last seen."""

    @property
    def extenders(self) -> Sequence[HTTPExtender]:
        """The profile's scheduler extenders, in calling order (preemption asks their preempt verb)."""

    # -- simulating pods on a node (preemption) --------------------------------------------------------
    def pre_filter_extensions(self, state: CycleState) -> Sequence[tuple[str, PreFilterExtensions]]:
        """The pre-filter extensions the cycle of ``state`` runs (name, extensions): none means that pods
        added to or removed from a node change nothing in ``state``."""

    def run_pre_filter_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo
    ) -> None: ...

    def run_pre_filter_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> None: ...

    def run_filter_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> Status | None: ...

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """The Reserve plugins (pod group preemption assumes a gang's pods while it checks victims)."""

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...
