"""Shared pieces of the Coscheduling tests: a handle with the stores the plugin reads (PodGroups, the
members index, waiting pods, a snapshot of nodes, a virtual clock), and PodGroup and member builders."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.backend.objects.members import GroupMembersIndex
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import POD_GROUPS
from kopf_scheduler.framework.objects.podgroups import POD_GROUP_LABEL
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.runtime.waiting_pods import WaitingPod, WaitingPods
from kopf_scheduler.plugins.coscheduling import Args, Coscheduling
from kopf_scheduler.testing import PodBuilder, VirtualClock, make_node, make_pod

NS = "ns1"
#: the wall clock the plugin's failure marks read (epoch seconds, after every creation time used here)
WALL = 2_000_000_000.0


def pod_group(
    name: str,
    min_member: int = 0,
    *,
    namespace: str = NS,
    min_resources: dict[str, str] | None = None,
    timeout: int | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if min_member:
        spec["minMember"] = min_member
    if min_resources is not None:
        spec["minResources"] = min_resources
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"pg-{namespace}-{name}"}
    if created is not None:
        meta["creationTimestamp"] = created
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta, "spec": spec}


def member(name: str, group: str | None, namespace: str = NS) -> PodBuilder:
    builder = make_pod().name(name).namespace(namespace).uid(f"{namespace}-{name}")
    return builder.label(POD_GROUP_LABEL, group) if group else builder


@dataclass
class Snapshot:
    node_infos: list[NodeInfo] = field(default_factory=list)


class Handle:
    """What Coscheduling reads through the framework handle."""

    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.objects = ClusterObjects([POD_GROUPS])
        self.group_members = GroupMembersIndex()
        self.waiting_pods = WaitingPods()
        self.nodes = Snapshot()
        self.activated: list[str] = []

    def snapshot(self) -> Snapshot:
        return self.nodes

    def activate(self, pods: Iterable[PodInfo]) -> None:
        self.activated.extend(p.name for p in pods)

    # -- arranging ---------------------------------------------------------------------------------------
    def groups(self, *raws: dict[str, Any]) -> Handle:
        for raw in raws:
            self.objects.store(POD_GROUPS).upsert(raw)
        return self

    def pods(self, *raws: dict[str, Any]) -> list[PodInfo]:
        infos = [PodInfo(raw) for raw in raws]
        for info in infos:
            self.group_members.update(info)
        return infos

    def node(self, name: str, *bound: dict[str, Any], **capacity: str | int) -> NodeInfo:
        builder = make_node().name(name)
        info = NodeInfo((builder.capacity(**capacity) if capacity else builder).obj())
        for raw in bound:
            info.add_pod(PodInfo(raw))
        self.nodes.node_infos.append(info)
        return info

    def wait(self, pod: PodInfo, timeout: float = 60.0) -> WaitingPod:
        waiting = WaitingPod(pod, {"Coscheduling": timeout}, self.clock)
        self.waiting_pods.add(waiting)
        return waiting


def plugin(handle: Handle, **args: int) -> Coscheduling:
    return Coscheduling(Args(**args), handle, wall=lambda: WALL)


def queued(pod: PodInfo, timestamp: float = 0.0) -> QueuedPodInfo:
    return QueuedPodInfo(pod=pod, timestamp=timestamp, initial_timestamp=timestamp)
