"""VolumeBinding: places pods with PersistentVolumeClaims where their volumes can be (upstream's
``volumebinding/volume_binding.go``).

- PreFilter: pods without claims are skipped. A missing, lost or deleting claim, a generic ephemeral
  volume's claim not (yet) created for the pod, or an unbound claim the PV controller has to bind first
  (not WaitForFirstConsumer) make the pod wait, UnschedulableAndUnresolvable with upstream's message.
- Filter: per node, the binder's ``find_pod_volumes`` (bound volumes reachable, unbound claims matched to
  available volumes or provisionable); the decision is kept per node in the cycle state. For a pod whose
  claims are all bound, the vectorised filter checks their volumes on every node at once (``bound.py``),
  and every node that passes needs nothing bound; other pods are filtered node by node.
- PreScore/Score: volume-capacity scoring (``scorer.py``) with the ``StorageCapacityScoring`` gate on
  (from 1.37), over the decision the filter kept for each node: a node without one (no claims, or every
  claim bound) scores 0. With the gate off, pre-score skips (the plugin stays in the score list with
  weight 1, as upstream).
- Reserve assumes the chosen node's decision in the binder's assume cache; Unreserve reverts it.
- PreBind writes it and waits for the claims to be bound (``binding.py``), up to ``bindTimeoutSeconds``.

The binder and its assume cache belong to this plugin instance, so to one profile, as upstream's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kopf_scheduler.framework import signers
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import ClusterEventWithHint
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    NodeSet,
    PreBindPlugin,
    PreBindPreFlightResult,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorFilter,
    VectorScore,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.objects import CSI_NODES, PERSISTENT_VOLUME_CLAIMS
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, unresolvable
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins.volume_binding import requeue
from kopf_scheduler.plugins.volume_binding.args import Args
from kopf_scheduler.plugins.volume_binding.binder import PodVolumes, VolumeBinder
from kopf_scheduler.plugins.volume_binding.binding import PodVolumesBinding
from kopf_scheduler.plugins.volume_binding.bound import BoundVolume, affinity_mask, check_rows, migrated_mask
from kopf_scheduler.plugins.volume_binding.claims import PodVolumeClaims, VolumeBindingError, check_pod_claims
from kopf_scheduler.plugins.volume_binding.scorer import VolumeCapacityScorer, class_resources

NAME = names.VOLUME_BINDING
UNBOUND_IMMEDIATE_CLAIMS = "pod has unbound immediate PersistentVolumeClaims"


@dataclass(slots=True)
class _State:
    claims: PodVolumeClaims | None = None
    #: the filter's decision for each node that passed it (but with ``bound_only``: nothing to bind)
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    #: reserve found every claim bound: nothing to write
    all_bound: bool = False
    #: every claim is bound (pre-filter's view): the filter only checks ``bound_volumes``, and a node
    #: that passes needs nothing bound
    bound_only: bool = False
    #: the bound claims' volumes, in claim order; empty when every one exists and is reachable from every
    #: node, so any node passes
    bound_volumes: tuple[BoundVolume, ...] = ()

    def clone(self) -> _State:
        return self  # shared, as upstream's: filters of simulations record into the same map

    def decision(self, node_name: str) -> PodVolumes | None:
        """What binding the pod's claims on a node that passed the filter takes (None: no claims)."""
        found = self.by_node.get(node_name)
        return PodVolumes() if found is None and self.bound_only else found


_KEY: StateKey[_State] = StateKey(NAME)
_PARALLEL = PreBindPreFlightResult(allow_parallel=True)


class VolumeBinding(
    PreFilterPlugin,
    FilterPlugin,
    VectorFilter,
    PreScorePlugin,
    ScorePlugin,
    VectorScore,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
    SignPlugin,
):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The pod's volumes but ConfigMaps and Secrets."""
        return [(signers.VOLUMES, signers.volumes(pod))]

    def __init__(self, args: Args, handle: Handle) -> None:
        self.handle = handle
        self.binder = VolumeBinder(handle.objects)
        self.args = args
        # upstream's New defaults and validates the arguments with the gates it is given (a profile's
        # arguments already are; these calls matter for arguments made in code)
        args.set_defaults(handle.feature_gates)
        args.validate()
        shape = args.shape if args.storage_capacity_scoring else None
        self.scorer = None if shape is None else VolumeCapacityScorer(shape)

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
            if not all(v.anywhere for v in claims.bound_volumes):
                found.bound_volumes = claims.bound_volumes
        state.write(_KEY, found)
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        data = state.read(_KEY)
        assert data.claims is not None, "pre-filter skipped the pod"
        if data.bound_only:  # what ``find_pod_volumes`` does for bound claims, with the volumes looked up
            if data.bound_volumes:
                reasons = self.binder.bound_reasons(data.bound_volumes, node.name, node.labels)
                if reasons:
                    return unresolvable(*reasons)
            return None
        pod_volumes, reasons = self.binder.find_pod_volumes(pod, data.claims, node.name, node.labels)
        if reasons:
            return unresolvable(*reasons)
        data.by_node[node.name] = pod_volumes
        return None

    def filter_rows(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> np.ndarray | None:
        judged = self._judge(state, table, rows)
        return None if judged is None else judged[0]

    def filter_errors(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> np.ndarray | None:
        judged = self._judge(state, table, rows)
        return None if judged is None else judged[1]

    def _judge(
        self, state: CycleState, table: NodeTable, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None] | None:
        """``filter``'s verdicts on ``rows`` (passes, fails with an error) for a pod whose claims are all
        bound; None for other pods (filtered node by node)."""
        data = state.read(_KEY)
        if not data.bound_only:
            return None
        if not data.bound_volumes:
            return np.ones(len(rows), dtype=bool), None
        infos = self.handle.snapshot().node_infos
        if len(infos) != table.size:
            raise RuntimeError("the node table does not describe the current snapshot")
        csi_nodes = self.handle.objects.of(CSI_NODES)
        return check_rows(
            data.bound_volumes,
            rows,
            lambda affinity: affinity_mask(table, infos, affinity),
            lambda plugin: migrated_mask(table, infos, csi_nodes, plugin),
        )

    # -- scoring: only with the StorageCapacityScoring gate ---------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        if self.scorer is None:
            return SKIP
        state.read(_KEY)  # upstream reads its state first: an error when pre-filter did not run
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        if self.scorer is None:
            return 0
        pod_volumes = state.read(_KEY).by_node.get(node.name)
        return 0 if pod_volumes is None else self.scorer(class_resources(pod_volumes))

    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        by_node = state.read(_KEY).by_node if self.scorer is not None else {}
        out = np.zeros(len(rows), dtype=np.int64)
        if by_node:  # only pods with claims to bind have decisions
            infos = self.handle.snapshot().node_infos
            for i, row in enumerate(rows.tolist()):
                out[i] = self.score(state, pod, infos[row])
        return out

    # -- reserve ---------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.read(_KEY)
        pod_volumes = data.decision(node_name)
        if pod_volumes is None:  # the pod has no claims
            data.all_bound = True
            return None
        data.all_bound = self.binder.all_bound(pod)
        if not data.all_bound:
            self.binder.assume_pod_volumes(pod_volumes, node_name)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        data = state.get(_KEY)
        pod_volumes = data.decision(node_name) if data is not None else None
        if pod_volumes is not None:
            self.binder.revert(pod_volumes)

    # -- pre-bind --------------------------------------------------------------------------------------
    def pre_bind_pre_flight(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[PreBindPreFlightResult | None, Status | None]:
        """Pre-bind has work unless Reserve found every claim bound; it may run together with the other
        pre-binds that allow it (upstream: ``AllowParallel``)."""
        data = state.read(_KEY)
        if data.all_bound:
            return _PARALLEL, SKIP
        if data.decision(node_name) is None:
            raise VolumeBindingError(f'no pod volume found for node "{node_name}"')
        return _PARALLEL, None

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.read(_KEY)
        if data.all_bound:
            return None
        pod_volumes = data.decision(node_name)
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


def new(args: Args, handle: Handle) -> VolumeBinding:
    return VolumeBinding(args, handle)
