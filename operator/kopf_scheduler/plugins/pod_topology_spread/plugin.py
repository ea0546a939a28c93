"""PodTopologySpread: pods spread evenly over topology domains (upstream's ``podtopologyspread/plugin.go``).

Hard constraints (``DoNotSchedule``) filter; soft ones (``ScheduleAnyway``) score, with weight 2 in the
default profile. Pods without constraints get the default constraints (the system ones unless
``defaultingType: List``) with a selector deduced from the Services, ReplicationControllers, ReplicaSets
and StatefulSets selecting or owning them (``default_selector``, read from the handle's object listers),
so Deployment, StatefulSet and Service pods spread by hostname and zone; a pod nothing selects or owns
gets no default constraint, as upstream.

Pre-filter returns Skip for pods without hard constraints, pre-score for pods without soft ones (or when
there are no nodes). Add/remove-pod extensions keep the counts right for nominated pods and preemption.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    NodeSet,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorFilter,
    VectorScore,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins.pod_topology_spread import filtering, scoring
from kopf_scheduler.plugins.pod_topology_spread.args import (
    DO_NOT_SCHEDULE,
    SCHEDULE_ANYWAY,
    SYSTEM_DEFAULTING,
    Args,
)
from kopf_scheduler.plugins.pod_topology_spread.constraints import (
    SYSTEM_DEFAULT_CONSTRAINTS,
    Constraint,
    DefaultSelectorFn,
    default_constraints,
    has_all_keys,
    no_default_selector,
    own_constraints,
    parse,
)
from kopf_scheduler.plugins.pod_topology_spread.default_selector import default_selection

NAME = names.POD_TOPOLOGY_SPREAD

_PRE_FILTER_KEY: StateKey[filtering.PreFilterState] = StateKey("PreFilter" + NAME)
_PRE_SCORE_KEY: StateKey[scoring.PreScoreState] = StateKey("PreScore" + NAME)


class PodTopologySpread(PreFilterPlugin, FilterPlugin, VectorFilter, PreFilterExtensions, PreScorePlugin,
                        ScorePlugin, VectorScore, EnqueueExtensions, SignPlugin):  # fmt: skip
    name = NAME
    has_normalize = True

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """Nothing; a pod with topology spread constraints is not signed, and while the plugin has default
        constraints (``defaultingType: System``, the default) no pod is."""
        if pod.topology_spread_constraints:
            return Status(Code.UNSCHEDULABLE, ("pods with topology constraints are not signable",))
        if self._default_hard or self._default_soft:
            return Status(Code.UNSCHEDULABLE, ("pods with default topology constraints are not signable",))
        return ()

    def __init__(
        self, args: Args, handle: Handle, default_selector: DefaultSelectorFn = no_default_selector
    ) -> None:
        self.handle = handle
        self.system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING
        defaults = SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else args.default_constraints
        # Default constraints carry no selector, so they parse the same for every pod.
        self._default_hard = parse(defaults, {}, DO_NOT_SCHEDULE)
        self._default_soft = parse(defaults, {}, SCHEDULE_ANYWAY)
        #: selectors of the Services and controllers selecting or owning a pod (see the module docstring)
        self.default_selector = default_selector

    # -- constraints -----------------------------------------------------------------------------------
    def hard_constraints(self, pod: PodInfo) -> tuple[Constraint, ...]:
        """``getConstraints``: the pod's DoNotSchedule constraints, or the default ones."""
        if pod.topology_spread_constraints:
            return own_constraints(pod, DO_NOT_SCHEDULE)
        return default_constraints(self._default_hard, self.default_selector, pod)

    def soft_constraints(self, pod: PodInfo) -> tuple[Constraint, ...]:
        if pod.topology_spread_constraints:
            return own_constraints(pod, SCHEDULE_ANYWAY)
        return default_constraints(self._default_soft, self.default_selector, pod)

    # -- pre-filter and filter -------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        constraints = self.hard_constraints(pod)
        if not constraints:
            return None, SKIP
        snapshot = self.handle.snapshot()
        state.write(_PRE_FILTER_KEY, filtering.compute(pod, constraints, snapshot.table, snapshot.node_infos))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        filtering.update_with_pod(state.read(_PRE_FILTER_KEY), pod, to_add, node, 1)
        return None

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None:
        filtering.update_with_pod(state.read(_PRE_FILTER_KEY), pod, to_remove, node, -1)
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return filtering.filter_node(state.read(_PRE_FILTER_KEY), node)

    def filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return filtering.filter_rows(state.read(_PRE_FILTER_KEY), rows)

    # -- scoring ---------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        snapshot = self.handle.snapshot()
        if not snapshot.node_infos:
            return SKIP
        constraints = self.soft_constraints(pod)
        if not constraints:
            return SKIP
        # Only the system defaults let nodes without every topology key be scored (for hostname spreading
        # on nodes without a zone).
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        computed = scoring.compute(
            pod, constraints, require_all, snapshot.table, snapshot.node_infos, np.asarray(nodes.rows)
        )
        state.write(_PRE_SCORE_KEY, computed)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return scoring.score_node(state.read(_PRE_SCORE_KEY), node)

    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return scoring.score_rows(state.read(_PRE_SCORE_KEY), table, self.handle.snapshot().node_infos, rows)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        scoring.normalize(state.read(_PRE_SCORE_KEY), scores)
        return None

    # -- requeueing ------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE),
                self._assigned_pod_changed,
            ),
            ClusterEventWithHint(
                ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_TOLERATION | Action.UPDATE_POD_LABEL),
                self._target_pod_changed,
            ),
            ClusterEventWithHint(
                ClusterEvent(
                    Resource.NODE,
                    Action.ADD | Action.DELETE | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_TAINT,
                ),
                self._node_changed,
            ),
        ]

    def _target_pod_changed(self, pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        """``isSchedulableAfterTargetPodChange``: a toleration gained with a constraint honouring taints, or
        labels that now match a constraint's selector differently."""
        if not isinstance(old, PodInfo) or not isinstance(new, PodInfo):
            return QueueingHint.QUEUE
        constraints = self.hard_constraints(pod)
        if new.tolerations != old.tolerations and any(c.honor_taints for c in constraints):
            return QueueingHint.QUEUE
        return _labels_changed(old, new, constraints)

    def _assigned_pod_changed(self, pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        """``isSchedulableAfterAssignedPodChange``."""
        for other in (new, old):
            if isinstance(other, PodInfo) and not _involved(other, pod):
                return QueueingHint.SKIP
        constraints = self.hard_constraints(pod)
        if isinstance(old, PodInfo) and isinstance(new, PodInfo):
            return _labels_changed(old, new, constraints)
        other = new if isinstance(new, PodInfo) else old
        if not isinstance(other, PodInfo):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE if any(c.matches(other.labels) for c in constraints) else QueueingHint.SKIP

    def _node_changed(self, pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        """``isSchedulableAfterNodeChange``."""
        constraints = self.hard_constraints(pod)
        old_node = old if isinstance(old, NodeInfo) else None
        new_node = new if isinstance(new, NodeInfo) else None
        old_matching = old_node is not None and has_all_keys(old_node.labels, constraints)
        new_matching = new_node is not None and has_all_keys(new_node.labels, constraints)
        if old_node is not None and new_node is not None:
            if old_matching != new_matching:
                return QueueingHint.QUEUE
            if new_matching and (
                any(
                    old_node.labels.get(c.topology_key) != new_node.labels.get(c.topology_key)
                    for c in constraints
                )
                or _taints(old_node) != _taints(new_node)
            ):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if new_node is not None:
            return QueueingHint.QUEUE if new_matching else QueueingHint.SKIP
        if old_node is not None:
            return QueueingHint.QUEUE if old_matching else QueueingHint.SKIP
        return QueueingHint.QUEUE


def _involved(incoming: PodInfo, pod: PodInfo) -> bool:
    """``involvedInTopologySpreading``: a pod of the same namespace, bound or nominated to a node."""
    return bool(incoming.node_name or incoming.nominated_node_name) and incoming.namespace == pod.namespace


def _labels_changed(old: PodInfo, new: PodInfo, constraints: Sequence[Constraint]) -> QueueingHint:
    """``isSchedulableAfterPodLabelChange``: a label change that flips a constraint's selector."""
    if new.labels == old.labels:
        return QueueingHint.SKIP
    changed = any(c.matches(old.labels) != c.matches(new.labels) for c in constraints)
    return QueueingHint.QUEUE if changed else QueueingHint.SKIP


def _taints(node: NodeInfo) -> Any:
    # Upstream compares ``spec.taints`` as a whole (a changed ``timeAdded`` counts too).
    spec = node.node.get("spec") if node.node is not None else None
    if isinstance(spec, Mapping):
        return spec.get("taints") or []
    return node.taints


def new(args: Args, handle: Handle) -> PodTopologySpread:
    objects = handle.objects
    return PodTopologySpread(args, handle, lambda pod: default_selection(objects, pod).selector)
