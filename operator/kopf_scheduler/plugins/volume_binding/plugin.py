"""VolumeBinding: places pods with PersistentVolumeClaims where their volumes can be (upstream's
``volumebinding/volume_binding.go``).

- PreFilter: pods without claims are skipped. A missing, lost or deleting claim, a generic ephemeral
  volume's claim not (yet) created for the pod, or an unbound claim the PV controller has to bind first
  (not WaitForFirstConsumer) make the pod wait, UnschedulableAndUnresolvable with upstream's message.
- Filter: per node, the binder's ``find_pod_volumes`` (bound volumes reachable, unbound claims matched to
  available volumes or provisionable); the decision is kept per node in the cycle state.
- PreScore/Score: volume-capacity scoring is behind the ``StorageCapacityScoring`` gate, off by default
  in v1.34, so pre-score always skips (the plugin stays in the score list with weight 1, as upstream).
- Reserve assumes the chosen node's decision in the binder's assume cache; Unreserve reverts it.
- PreBind writes it and waits for the claims to be bound (``binding.py``), up to ``bindTimeoutSeconds``.

The binder and its assume cache belong to this plugin instance, so to one profile, as upstream's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import ClusterEventWithHint
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    NodeSet,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import PERSISTENT_VOLUME_CLAIMS, PersistentVolume
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, unresolvable
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins.volume_binding import requeue
from kopf_scheduler.plugins.volume_binding.args import Args
from kopf_scheduler.plugins.volume_binding.binder import PodVolumes, VolumeBinder, bound_reasons
from kopf_scheduler.plugins.volume_binding.binding import PodVolumesBinding
from kopf_scheduler.plugins.volume_binding.claims import PodVolumeClaims, VolumeBindingError, check_pod_claims

NAME = names.VOLUME_BINDING
UNBOUND_IMMEDIATE_CLAIMS = "pod has unbound immediate PersistentVolumeClaims"


@dataclass(slots=True)
class _State:
    claims: PodVolumeClaims | None = None
    #: the filter's decision for each node that passed it
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    #: reserve found every claim bound: nothing to write
    all_bound: bool = False
    #: every claim is bound (pre-filter's view): the filter only checks ``bound_volumes``
    bound_only: bool = False
    #: the bound claims' volumes, in claim order (None: missing); empty when every one exists and is
    #: reachable from every node (no node affinity), so any node passes
    bound_volumes: tuple[PersistentVolume | None, ...] = ()

    def clone(self) -> _State:
        return self  # shared, as upstream's: filters of simulations record into the same map


_KEY: StateKey[_State] = StateKey(NAME)


class VolumeBinding(
    PreFilterPlugin,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(self, args: Args, handle: Any) -> None:
        self.handle = handle
        self.binder = VolumeBinder(handle.objects)
        self.args = args

    # -- pre-filter and filter -------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        has_claims, problem = check_pod_claims(pod, self.handle.objects.of(PERSISTENT_VOLUME_CLAIMS))
        if problem is not None:
            return None, unresolvable(problem)
        if not has_claims:
            state.write(_KEY, _State())
            return None, SKIP
        claims = self.binder.pod_volume_claims(pod)  # a VolumeBindingError is the runtime's error status
        if claims.immediate:  # the pod is requeued when the PV controller binds them
            return None, unresolvable(UNBOUND_IMMEDIATE_CLAIMS)
        found = _State(claims=claims)
        if not claims.delay_binding:  # every claim bound: the filter checks their volumes only
            found.bound_only = True
            volumes = tuple(self.binder.volumes.get("", claim.volume_name) for claim in claims.bound)
            if not all(v is not None and v.node_affinity is None for v in volumes):
                found.bound_volumes = volumes
        state.write(_KEY, found)
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        data = state.read(_KEY)
        assert data.claims is not None, "pre-filter skipped the pod"
        if data.bound_only:  # what ``find_pod_volumes`` does for bound claims, with the volumes looked up
            reasons = bound_reasons(data.bound_volumes, node.labels) if data.bound_volumes else None
            if reasons:
                return unresolvable(*reasons)
            data.by_node[node.name] = PodVolumes()
            return None
        pod_volumes, reasons = self.binder.find_pod_volumes(pod, data.claims, node.name, node.labels)
        if reasons:
            return unresolvable(*reasons)
        data.by_node[node.name] = pod_volumes
        return None

    # -- scoring: off without the StorageCapacityScoring gate ------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        return SKIP

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return 0

    # -- reserve ---------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.read(_KEY)
        pod_volumes = data.by_node.get(node_name)
        if pod_volumes is None:  # the pod has no claims
            data.all_bound = True
            return None
        data.all_bound = self.binder.all_bound(pod)
        if not data.all_bound:
            self.binder.assume_pod_volumes(pod_volumes, node_name)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        data = state.get(_KEY)
        pod_volumes = data.by_node.get(node_name) if data is not None else None
        if pod_volumes is not None:
            self.binder.revert(pod_volumes)

    # -- pre-bind --------------------------------------------------------------------------------------
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.read(_KEY)
        if data.all_bound:
            return None
        pod_volumes = data.by_node.get(node_name)
        if pod_volumes is None:
            raise VolumeBindingError(f'no pod volume found for node "{node_name}"')
        binding = PodVolumesBinding(
            self.binder,
            self.handle.client,
            self.handle.clock,
            self.args.bind_timeout_seconds,
            self._node_labels,
            self.handle.pod_exists,
        )
        await binding.bind(pod, node_name, pod_volumes)  # raises VolumeBindingError: an error status
        return None

    def _node_labels(self, name: str) -> Mapping[str, str] | None:
        node = self.handle.snapshot().get(name)
        return None if node is None else node.labels

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return requeue.events()


def new(args: Args, handle: Any) -> VolumeBinding:
    return VolumeBinding(args, handle)
