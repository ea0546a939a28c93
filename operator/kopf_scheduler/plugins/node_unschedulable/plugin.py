"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take only pods that tolerate the
``node.kubernetes.io/unschedulable:NoSchedule`` taint (``nodeunschedulable/node_unschedulable.go``).

Its pre-filter (v1.37) passes every pod: upstream's skips pods whose resize is deferred only with the
InPlacePodVerticalScalingSchedulerPreemption gate on, which is alpha, off, and not implemented here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kopf_scheduler.framework import signers
from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
    VectorFilter,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, unresolvable
from kopf_scheduler.framework.taints import NO_SCHEDULE, Taint, tolerated
from kopf_scheduler.plugins import names

NAME = names.NODE_UNSCHEDULABLE
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)


def _tolerates_cordon(pod: PodInfo) -> bool:
    return tolerated(UNSCHEDULABLE_TAINT, pod.tolerations)


class NodeUnschedulable(PreFilterPlugin, FilterPlugin, VectorFilter, EnqueueExtensions, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The pod's tolerations."""
        return [(signers.TOLERATIONS, signers.tolerations(pod))]

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if node.unschedulable and not _tolerates_cordon(pod):
            return unresolvable(ERR_REASON_UNSCHEDULABLE)
        return None

    def filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        if _tolerates_cordon(pod):
            return np.ones(len(rows), dtype=bool)
        return ~table.unschedulable[rows]

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_TAINT), _node_changed
            ),
            ClusterEventWithHint(
                ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_TOLERATION),
                _target_pod_toleration_changed,
            ),
        ]


def _node_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if isinstance(new, NodeInfo) and (not new.unschedulable or _tolerates_cordon(pod)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _target_pod_toleration_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """``isSchedulableAfterTargetPodTolerationChange``: the updated pod now tolerates the cordon."""
    if not isinstance(new, PodInfo) or _tolerates_cordon(new):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: NoArgs, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()
