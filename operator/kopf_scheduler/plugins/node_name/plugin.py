"""NodeName: a pod that names a node in ``spec.nodeName`` fits only there (``nodename/node_name.go``,
v1.37).

Pre-filter restricts filtering to the named node (a ``PreFilterResult``), so the other nodes are not
filtered at all: the scheduling message counts them as ``node(s) didn't satisfy plugin(s) [NodeName]``,
and preemption does not consider them. The filter still rejects any other node it is asked about.
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
from kopf_scheduler.plugins import names

NAME = names.NODE_NAME
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(PreFilterPlugin, FilterPlugin, VectorFilter, EnqueueExtensions, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The node the pod names."""
        return [(signers.NODE_NAME, pod.spec.get("nodeName") or "")]

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if pod.node_name:
            return PreFilterResult(frozenset({pod.node_name})), None
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if pod.node_name and pod.node_name != node.name:
            return unresolvable(ERR_REASON)
        return None

    def filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        if not pod.node_name:
            return np.ones(len(rows), dtype=bool)
        wanted = self.handle.snapshot().index_of(pod.node_name)
        return rows == (-1 if wanted is None else wanted)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(Resource.NODE, Action.ADD), _node_added)]


def _node_added(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    name = new.name if isinstance(new, NodeInfo) else ""
    return QueueingHint.QUEUE if not pod.node_name or pod.node_name == name else QueueingHint.SKIP


def new(args: NoArgs, handle: Handle) -> NodeName:
    return NodeName(handle)
