"""NodePorts: the host ports a pod asks for must be free on the node (``nodeports/node_ports.go``).

A port is a (protocol, host IP, port) triple; an unset host IP is ``0.0.0.0`` and an unset protocol TCP.
A wanted port on ``0.0.0.0`` clashes with that protocol and port on any IP; a wanted port on a specific
IP clashes with the same IP and with ``0.0.0.0``. The ports are those of the containers and of sidecar
(restartable init) containers. Pre-filter skips pods without host ports; the rejection is resolvable
(preemption may free the port).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kopf_scheduler.framework import signers
from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
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
from kopf_scheduler.framework.pod_info import HostPort, PodInfo
from kopf_scheduler.framework.status import SKIP, Status, unschedulable
from kopf_scheduler.plugins import names

NAME = names.NODE_PORTS
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
BIND_ALL = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    ports: tuple[HostPort, ...]

    def clone(self) -> _PreFilterState:  # not changed by added or removed pods
        return self


_PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)


def conflicts(wanted: Iterable[HostPort], used: Any) -> bool:
    """Whether any wanted port clashes with ``used`` (a container of ``HostPort``s, e.g. a Counter)."""
    if not used:
        return False
    for port in wanted:
        if port.host_ip == BIND_ALL:
            if any(u.port == port.port and u.protocol == port.protocol for u in used):
                return True
        elif port in used or HostPort(port.protocol, BIND_ALL, port.port) in used:
            return True
    return False


class NodePorts(PreFilterPlugin, FilterPlugin, VectorFilter, EnqueueExtensions, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The host ports the pod asks for."""
        return [(signers.HOST_PORTS, signers.host_ports(pod))]

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.host_ports:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, _PreFilterState(pod.host_ports))
        return None, None

    def _wanted(self, state: CycleState, pod: PodInfo) -> tuple[HostPort, ...]:
        found = state.get(_PRE_FILTER_KEY)
        return found.ports if found is not None else pod.host_ports

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if conflicts(self._wanted(state, pod), node.used_ports):
            return unschedulable(ERR_REASON)
        return None

    def filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        wanted = self._wanted(state, pod)
        if not wanted:
            return np.ones(len(rows), dtype=bool)
        infos = self.handle.snapshot().node_infos
        # Most nodes hold no host ports at all: they pass without a call.
        ok = np.ones(len(rows), dtype=bool)
        for i, row in enumerate(rows.tolist()):
            used = infos[row].used_ports
            if used and conflicts(wanted, used):
                ok[i] = False
        return ok

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Ports are immutable, so only deletions of pods holding them can free a node.
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE), pod_deleted),
            ClusterEventWithHint(ClusterEvent(Resource.NODE, Action.ADD)),
        ]


def pod_deleted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue only when the deleted pod held (or was nominated to take) a port the pod wants."""
    if not isinstance(old, PodInfo):
        return QueueingHint.QUEUE
    if not old.node_name and not old.nominated_node_name:
        return QueueingHint.SKIP
    if not old.host_ports or not conflicts(pod.host_ports, set(old.host_ports)):
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


def new(args: NoArgs, handle: Handle) -> NodePorts:
    return NodePorts(handle)
