"""Coscheduling: all-or-nothing placement of the pods of a PodGroup (scheduler-plugins
``pkg/coscheduling/coscheduling.go``), for pods labelled ``scheduling.x-k8s.io/pod-group: <name>``.

- QueueSort: priority, then the gang's PodGroup creation time (its last rejection, once it failed, so a
  failing gang does not block younger ones), then the gang's key, so a gang's pods stay together; pods
  without a gang sort by their own creation time and key.
- PreEnqueue: a member waits out of the queue until ``minMember`` pods of its gang exist.
- PreFilter: refuses a gang backing off, a gang short of members (gated ones count against it), and a
  gang whose ``minResources`` (plus ``minMember`` pod slots) the whole cluster cannot hold.
- PostFilter: when a member fits nowhere and too many of the gang are unplaced, rejects every member
  waiting at Permit and backs the gang off.
- Permit: a member waits until ``minMember`` members are assumed or bound, then all are released
  together; the first to wait moves back to the active queue the siblings this plugin sent away.
- Unreserve: a member that fails after Reserve (a Permit timeout among others) rejects every waiting
  sibling, so the gang's reservations are freed together.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    NodeStatusMap,
    PermitPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueSortPlugin,
    ReservePlugin,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects.podgroups import PodGroup, pod_group_name
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.status import WAIT, Code, Status, unresolvable, unschedulable
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins.coscheduling.args import Args
from kopf_scheduler.plugins.coscheduling.groups import PermitOutcome, PodGroupManager

NAME = names.COSCHEDULING

#: a member's wait when neither the PodGroup nor the arguments set one (``util.DefaultWaitTime``)
DEFAULT_WAIT_SECONDS = 60.0
POD_GROUP_NOT_FOUND = "PodGroup not found"
CANNOT_FIND_POD_GROUP = "can not find pod group"
REJECTED_IN_POST_FILTER = "optimistic rejection in PostFilter"
REJECTED_IN_UNRESERVE = "rejection in Unreserve"


def gang_rejected_message(group_key: str, pod: PodInfo) -> str:
    return f"PodGroup {group_key} gets rejected due to Pod {pod.name} is unschedulable even after PostFilter"


def _same_gang(a: PodInfo, b: PodInfo) -> bool:
    name = pod_group_name(a)
    return bool(name) and a.namespace == b.namespace and pod_group_name(b) == name


class Coscheduling(
    QueueSortPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PostFilterPlugin,
    ReservePlugin,
    PermitPlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(self, args: Args, handle: Handle, wall: Callable[[], float] = time.time) -> None:
        self.args = args
        self.handle = handle
        self.schedule_timeout = float(args.permit_waiting_time_seconds)
        self.reject_threshold = args.pod_group_reject_percentage / 100.0
        self.groups = PodGroupManager(handle, self.schedule_timeout, wall)

    # -- QueueSort -----------------------------------------------------------------------------------------
    def sort_key(self, qp: QueuedPodInfo) -> Any:
        pod = qp.pod
        name = pod_group_name(pod)
        when = self.groups.creation_time(pod, pod.creation)
        return (-pod.priority, when, f"{pod.namespace}/{name}" if name else pod.key, pod.key)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return bool(self.sort_key(a) < self.sort_key(b))

    # -- PreEnqueue ----------------------------------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        _, group = self.groups.get_pod_group(pod)
        if group is None:
            return None  # no gang, or its PodGroup is unknown: Permit decides
        message = self.groups.quorum_error(pod, group)
        return unresolvable(message) if message else None

    # -- PreFilter -----------------------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        # Unresolvable: preempting other pods cannot help a gang that is refused here.
        message = self.groups.pre_filter(pod)
        if message is None:
            return None, None
        self.groups.refuse(self.groups.get_pod_group(pod)[0], pod.uid)
        return None, unresolvable(message)

    # -- PostFilter ----------------------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: PodInfo, node_statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status | None]:
        key, group = self.groups.get_pod_group(pod)
        if group is None:
            return None, unschedulable(CANNOT_FIND_POD_GROUP)
        assigned = self.groups.assigned_count(key, group.namespace, group.name)
        if assigned >= group.min_member:
            return None, Status(Code.UNSCHEDULABLE)  # enough placed: keep the gang
        # a small gap: the next members may still complete the gang
        if (group.min_member - assigned) / group.min_member <= self.reject_threshold:
            return None, Status(Code.UNSCHEDULABLE)
        # one member that fits nowhere is taken to mean the others will not fit either
        self._reject_waiting(group, pod, REJECTED_IN_POST_FILTER)
        backoff = self.args.pod_group_backoff_seconds
        if backoff > 0 and len(self.groups.members(pod.namespace, group.name)) >= group.min_member:
            self.groups.backoff(key, backoff)
        self.groups.delete_permitted(key)
        self.groups.mark_failure(key)
        return None, unschedulable(gang_rejected_message(key, pod))

    # -- Reserve -------------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        key, group = self.groups.get_pod_group(pod)
        if group is None:
            return
        self.groups.unreserve(pod)
        self.groups.refuse(key, pod.uid)
        self._reject_waiting(group, pod, REJECTED_IN_UNRESERVE)
        self.groups.delete_permitted(key)
        self.groups.mark_failure(key)

    # -- Permit --------------------------------------------------------------------------------------------
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        outcome, first = self.groups.permit(pod)
        if outcome is PermitOutcome.NOT_SPECIFIED:
            return None, 0.0
        if outcome is PermitOutcome.NOT_FOUND:
            return unschedulable(POD_GROUP_NOT_FOUND), 0.0
        key, group = self.groups.get_pod_group(pod)
        if outcome is PermitOutcome.WAIT:
            if first:
                # The members this plugin sent back wait for its events only: try them now. (Upstream
                # activates every sibling; one that a filter rejected then fails again at once and
                # rejects the gang again, round after round, with nothing changed.)
                self.handle.activate(self.groups.take_refused(pod))
            return WAIT, self._wait_seconds(group)
        self.groups.clear_failure(key)
        for waiting in self.handle.waiting_pods.all():
            if _same_gang(waiting.pod, pod):
                waiting.allow(NAME)
        return None, 0.0

    def _wait_seconds(self, group: PodGroup | None) -> float:
        """``GetWaitTimeDuration``: the PodGroup's timeout, else the arguments', else 60 s; a PodGroup that
        says 0 leaves the arguments' value."""
        if group is not None and group.schedule_timeout_seconds is not None:
            wait = float(group.schedule_timeout_seconds)
        else:
            wait = self.schedule_timeout or DEFAULT_WAIT_SECONDS
        return wait if wait != 0 else self.schedule_timeout

    def _reject_waiting(self, group: PodGroup, pod: PodInfo, message: str) -> None:
        for waiting in self.handle.waiting_pods.all():
            member = waiting.pod
            if member.namespace == pod.namespace and pod_group_name(member) == group.name:
                self.groups.refuse(group.key, member.uid)
                waiting.reject(NAME, message)

    # -- requeueing ----------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # a new member may complete the gang (pending or created bound): any pod resource's Add
            ClusterEventWithHint(ClusterEvent(Resource.POD, Action.ADD), self._member_added),
            # the gang's PodGroup appeared, or its minMember or minResources changed
            ClusterEventWithHint(
                ClusterEvent(Resource.POD_GROUP, Action.ADD | Action.UPDATE), self._own_group_changed
            ),
            # Beyond scheduler-plugins (which leaves it to the five-minute flush): a bound pod deleted
            # may free the room a gang rejected at Permit or in PostFilter waits for. Its members were
            # last rejected by this plugin, so no resource plugin's event would retry them.
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE), self._room_freed),
        ]

    @staticmethod
    def _room_freed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        if not pod_group_name(pod):
            return QueueingHint.SKIP
        if isinstance(old, PodInfo) and not old.node_name and not old.nominated_node_name:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    @staticmethod
    def _member_added(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        if isinstance(new, PodInfo) and _same_gang(pod, new):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    @staticmethod
    def _own_group_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        if isinstance(new, PodGroup) and new.namespace == pod.namespace and new.name == pod_group_name(pod):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def new(args: Args, handle: Handle) -> Coscheduling:
    return Coscheduling(args, handle)
