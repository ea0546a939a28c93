"""The bookkeeping behind Coscheduling (scheduler-plugins ``pkg/coscheduling/core``'s ``PodGroupManager``):
which PodGroup a pod belongs to, how many of its pods exist and how many are placed, the gangs that
passed the minResources check lately, the gangs backing off, and when each gang last failed.

A gang's members are the pods the scheduler knows with its label in its namespace that have not
finished (``GroupMembers``; kube-scheduler's pod informer holds no finished pods). Its placed members are
those bound to a node plus those this plugin permitted (assumed, waiting or binding) and that still
exist; a permitted member leaves that set when it is unreserved. Expiries are on the scheduler's clock;
failure times on the wall clock, as they are compared with creation timestamps.

Nothing is kept for gangs that are gone: scheduler-plugins forgets a bound pod when its pod informer
sees it deleted; here, whenever the pod store changed since the last look, ``forget_gone`` drops
permitted members once they are deleted or seen bound (bound members count from the store), members
sent back once deleted, and a gang's failure time, backoff and minResources pass once none of its pods
is left (or, for the last two, once they expire).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping, Sequence

from kopf_scheduler.api.quantity import format_quantity
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects.podgroups import POD_GROUPS, PodGroup, is_finished, pod_group_name
from kopf_scheduler.framework.pod_info import PodInfo

#: node resources upstream's ``getNodeResource`` always reports, besides the node's scalar resources
_NATIVE = ("cpu", "memory", "ephemeral-storage")


class PermitOutcome(enum.Enum):
    NOT_SPECIFIED = "PodGroup not specified"
    NOT_FOUND = "PodGroup not found"
    SUCCESS = "Success"
    WAIT = "Wait"


def sibling_pods_message(pod: PodInfo, count: int, min_member: int) -> str:
    return (
        f"pre-filter pod {pod.name} cannot find enough sibling pods, "
        f"current pods number: {count}, minMember of group: {min_member}"
    )


def format_resources(resources: Mapping[str, int]) -> str:
    """A resource list as Go prints a map (sorted keys), each amount as a quantity."""
    parts = []
    for name in sorted(resources):
        amount = resources[name]
        parts.append(f"{name}:{format_quantity(f'{amount}m' if name == 'cpu' else str(amount))}")
    return f"map[{' '.join(parts)}]"


def free_resources(node: NodeInfo, group_key: str) -> dict[str, int]:
    """What is left on ``node`` once the pods of ``group_key`` are taken off it (``getNodeResource``)."""
    requested = dict(node.requested)
    pods = len(node.pods)
    for pod in node.pods.values():
        name = pod_group_name(pod)
        if name and f"{pod.namespace}/{name}" == group_key:
            pods -= 1
            for resource, amount in pod.requests.items():
                requested[resource] = requested.get(resource, 0) - amount
    free = {"pods": node.allowed_pod_number - pods}
    for resource in (*_NATIVE, *node.allocatable):
        free[resource] = node.allocatable.get(resource, 0) - requested.get(resource, 0)
    return free


def resource_gap(nodes: Sequence[NodeInfo], request: Mapping[str, int], group_key: str) -> dict[str, int]:
    """What ``request`` still lacks after taking every node's free resources (``CheckClusterResource``);
    empty when the cluster can hold it."""
    remaining = dict(request)
    for node in nodes:
        if node.node is None:
            continue
        free = free_resources(node, group_key)
        for name in list(remaining):
            left = remaining[name] - free.get(name, 0)
            if left <= 0:
                del remaining[name]
            else:
                remaining[name] = left
        if not remaining:
            break
    return remaining


class PodGroupManager:
    def __init__(
        self, handle: Handle, schedule_timeout: float, wall: Callable[[], float] = time.time
    ) -> None:
        self._handle = handle
        self.schedule_timeout = schedule_timeout
        self._wall = wall
        #: gangs whose minResources fit lately -> when that stops counting (``permittedPG``)
        self._permitted: dict[str, float] = {}
        #: gangs refused at PreFilter until -> (``backedOffPG``)
        self._backed_off: dict[str, float] = {}
        #: gangs -> the wall time of their last rejection (``lastFailedSchedulePG``)
        self._last_failed: dict[str, float] = {}
        #: gangs -> uids of the members this plugin permitted (``assignedPodsByPG``, bound ones aside)
        self._assumed: dict[str, set[str]] = {}
        #: gangs -> uids of the members this plugin turned away or released since the last activation
        self._refused: dict[str, set[str]] = {}
        #: the pod store's generation when ``forget_gone`` last looked
        self._seen_generation: int | None = None

    def _now(self) -> float:
        return float(self._handle.clock.now())

    # -- lookups -------------------------------------------------------------------------------------------
    def get_pod_group(self, pod: PodInfo) -> tuple[str, PodGroup | None]:
        """(``namespace/name`` of the pod's group, the PodGroup); ("", None) for a pod without one."""
        name = pod_group_name(pod)
        if not name:
            return "", None
        return f"{pod.namespace}/{name}", self._handle.objects.of(POD_GROUPS).get(pod.namespace, name)

    def members(self, namespace: str, name: str) -> list[PodInfo]:
        return [p for p in self._handle.group_members.members(namespace, name) if not is_finished(p)]

    def _placed(self, key: str, namespace: str, name: str) -> set[str]:
        members = self.members(namespace, name)
        existing = {p.uid for p in members}
        assumed = self._assumed.get(key)
        if assumed:
            assumed &= existing  # deleted members no longer count
        placed = {p.uid for p in members if p.node_name}
        return placed | assumed if assumed else placed

    def assigned_count(self, key: str, namespace: str, name: str) -> int:
        return len(self._placed(key, namespace, name))

    def forget_gone(self) -> None:
        """Drops what is kept about members and gangs that are gone (see the module); does nothing while
        the pod store is unchanged."""
        store = self._handle.group_members
        if store.generation == self._seen_generation:
            return
        self._seen_generation = store.generation
        now = self._now()
        for key in list(self._assumed):
            unbound = {p.uid for p in self.members(*key.split("/", 1)) if not p.node_name}
            self._assumed[key] &= unbound
            if not self._assumed[key]:
                del self._assumed[key]
        for key in list(self._refused):
            self._refused[key] &= {p.uid for p in store.members(*key.split("/", 1))}
            if not self._refused[key]:
                del self._refused[key]
        for held in (self._last_failed, self._permitted, self._backed_off):
            for key in list(held):
                expired = held is not self._last_failed and now >= held[key]
                if expired or not store.members(*key.split("/", 1)):
                    del held[key]

    # -- the extension points' checks ---------------------------------------------------------------------
    def quorum_error(self, pod: PodInfo, group: PodGroup) -> str | None:
        count = len(self.members(pod.namespace, group.name))
        if count < group.min_member:
            return sibling_pods_message(pod, count, group.min_member)
        return None

    def pre_filter(self, pod: PodInfo) -> str | None:
        self.forget_gone()  # every pod of the profile passes here, a gang's or not
        key, group = self.get_pod_group(pod)
        if group is None:
            return None
        until = self._backed_off.get(key)
        if until is not None:
            if self._now() < until:
                return f"podGroup {key} failed recently"
            del self._backed_off[key]
        members = self.members(pod.namespace, group.name)
        gap = group.min_member - len(members)
        if gap > 0:
            return sibling_pods_message(pod, len(members), group.min_member)
        # members held back by scheduling gates count against the quorum (minMember < replicas)
        if gap + sum(1 for p in members if p.scheduling_gates) > 0:
            return f"pre-filter pod {pod.name} cannot proceed due to gated pods in the same PodGroup"
        if group.min_resources is None:
            return None
        until = self._permitted.get(key)
        if until is not None and self._now() < until:
            return None
        request = {**group.min_resources, "pods": group.min_member}
        missing = resource_gap(self._handle.snapshot().node_infos, request, key)
        if missing:
            return f"resource gap: {format_resources(missing)}"
        self._permitted[key] = self._now() + self.schedule_timeout
        return None

    def permit(self, pod: PodInfo) -> tuple[PermitOutcome, bool]:
        """The outcome, and whether this pod is the gang's first placed member (it activates the rest)."""
        key, group = self.get_pod_group(pod)
        if not key:
            return PermitOutcome.NOT_SPECIFIED, False
        if group is None:
            return PermitOutcome.NOT_FOUND, False
        placed = self._placed(key, pod.namespace, group.name)
        self._assumed.setdefault(key, set()).add(pod.uid)
        placed.add(pod.uid)
        if len(placed) >= group.min_member:
            return PermitOutcome.SUCCESS, False
        return PermitOutcome.WAIT, len(placed) == 1

    def unreserve(self, pod: PodInfo) -> None:
        key, _ = self.get_pod_group(pod)
        assumed = self._assumed.get(key)
        if assumed is not None:
            assumed.discard(pod.uid)
            if not assumed:
                del self._assumed[key]

    def refuse(self, key: str, uid: str) -> None:
        """Remembers that this plugin sent a member back to the queue (it waits for this plugin's events)."""
        if key:
            self._refused.setdefault(key, set()).add(uid)

    def take_refused(self, pod: PodInfo) -> list[PodInfo]:
        """The members of ``pod``'s gang this plugin sent back, ``pod`` aside; forgotten once taken."""
        key, group = self.get_pod_group(pod)
        refused = self._refused.pop(key, None)
        if not refused or group is None:
            return []
        return [p for p in self.members(pod.namespace, group.name) if p.uid in refused and p.uid != pod.uid]

    # -- gang-wide state -----------------------------------------------------------------------------------
    def creation_time(self, pod: PodInfo, fallback: float) -> float:
        """When the pod's gang is ordered in the queue: its last rejection if it had one, else its
        PodGroup's creation (``fallback`` for a pod without a known group)."""
        name = pod_group_name(pod)
        if not name:
            return fallback
        failed = self._last_failed.get(f"{pod.namespace}/{name}")
        if failed is not None:
            return failed
        group = self._handle.objects.of(POD_GROUPS).get(pod.namespace, name)
        return group.creation if group is not None else fallback

    def backoff(self, key: str, seconds: float) -> None:
        if seconds > 0:
            self._backed_off[key] = self._now() + seconds

    def delete_permitted(self, key: str) -> None:
        self._permitted.pop(key, None)

    def mark_failure(self, key: str) -> None:
        self._last_failed[key] = self._wall()

    def clear_failure(self, key: str) -> None:
        self._last_failed.pop(key, None)
