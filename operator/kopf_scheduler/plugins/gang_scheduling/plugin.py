"""GangScheduling: all-or-nothing placement of the Workload API's gang pod groups (kube-scheduler v1.37.2
``framework/plugins/gangscheduling/gangscheduling.go``), for pods naming a PodGroup in
``spec.schedulingGroup.podGroupName`` whose ``spec.schedulingPolicy.gang.minCount`` is set. Pods of a group
with the ``basic`` policy, and pods naming no group, pass every point untouched.

- PreEnqueue: a member waits out of the queue until its PodGroup is seen and ``minCount`` pods of the group
  exist (pending, assumed or bound).
- Permit: a member waits (five minutes at most) until ``minCount`` members are assumed or bound, then every
  assumed member waiting at Permit is allowed together. A member that waits first activates the group's
  unscheduled members, which may have been waiting for it.
- PlacementFeasible (the pod group scheduling cycle's check): whether ``minCount`` can still be reached with
  the pods scheduled so far and those left to try.

CompositePodGroups (the ``CompositePodGroup`` gate, alpha and off in v1.37) are not handled: a PodGroup's
``parentCompositePodGroupName`` is ignored, as upstream ignores it with that gate off.
"""

from __future__ import annotations

from typing import Any

from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    PermitPlugin,
    PlacementFeasiblePlugin,
    PreEnqueuePlugin,
)
from kopf_scheduler.framework.objects.workload_pod_groups import (
    PodGroupManager,
    WorkloadPodGroup,
    scheduling_group,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status, error, unresolvable

NAME = "GangScheduling"

#: how long a member waits at Permit for the rest of its gang (``permitTimeoutDuration``)
PERMIT_TIMEOUT_SECONDS = 300.0
WAITING_FOR_MIN_COUNT_PODS = "waiting for minCount pods from a gang to appear in scheduling queue"
WAITING_FOR_MIN_COUNT_SCHEDULED = "waiting for minCount pods from a gang to be scheduled"


def waiting_for_pod_group(name: str) -> str:
    # "pods's" as upstream spells it
    return f'waiting for pods\'s pod group "{name}" to appear in scheduling queue'


def min_count_unsatisfiable(min_count: int, scheduled: int, remaining: int) -> str:
    return f"minCount ({min_count}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"


def min_count_not_yet_satisfied(min_count: int, scheduled: int, remaining: int) -> str:
    return f"minCount ({min_count}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining"


def _entity_key(namespace: str, name: str) -> str:
    """``fwk.PodGroupKey(...).String()``."""
    return f"podgroup/{namespace}/{name}"


class GangScheduling(PreEnqueuePlugin, PermitPlugin, PlacementFeasiblePlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, handle: Handle, groups: PodGroupManager | None = None) -> None:
        """``groups``: the PodGroups and pod group states to read; None: the handle's (the scheduler's
        cache), looked up at each use."""
        self.handle = handle
        self._groups = groups

    @property
    def groups(self) -> PodGroupManager:
        return self._groups if self._groups is not None else self.handle.pod_groups

    # -- PreEnqueue ----------------------------------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        name = scheduling_group(pod)
        if name is None:
            return None
        group = self.groups.pod_group(pod.namespace, name)
        if group is None:
            return unresolvable(waiting_for_pod_group(name))
        if group.min_count is None:
            return None
        state = self.groups.state(pod.namespace, name)
        if state is None:
            return error(f"pod group state not found for pod group {pod.namespace}/{name}")
        if state.all_pods_count() < group.min_count:
            return unresolvable(WAITING_FOR_MIN_COUNT_PODS)
        return None

    # -- Permit --------------------------------------------------------------------------------------------
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        name = scheduling_group(pod)
        if name is None:
            return None, 0.0
        # upstream reads the PodGroup through the snapshot's lister, which fails with these two messages
        group_state = self.groups.state(pod.namespace, name)
        group = self.groups.pod_group(pod.namespace, name)
        if group_state is None or group is None:
            missing = "pod group state" if group_state is None else "pod group object"
            cause = f"{missing} not found for pod group {_entity_key(pod.namespace, name)}"
            return error(f"failed to get podGroup {pod.namespace}/{name}: {cause}"), 0.0
        if group.min_count is None:
            return None, 0.0
        if group_state.scheduled_pods_count() < group.min_count:
            # the unscheduled members may have been waiting for this one
            self.handle.activate(group_state.unscheduled_pods())
            return Status(Code.WAIT, (WAITING_FOR_MIN_COUNT_SCHEDULED,)), PERMIT_TIMEOUT_SECONDS
        for uid in group_state.assumed_pods():
            waiting = self.handle.waiting_pods.get(uid)
            if waiting is not None:
                waiting.allow(NAME)
        return None, 0.0

    # -- PlacementFeasible ---------------------------------------------------------------------------------
    def placement_feasible(self, group: WorkloadPodGroup, scheduled: int, remaining: int) -> Status | None:
        """``scheduled``: the group's pods assumed or bound so far in this cycle (those bound before it
        included); ``remaining``: its pods not yet tried. Unschedulable ends the cycle early; Wait means
        the pods left may still reach ``minCount``."""
        min_count = 1 if group.min_count is None else group.min_count
        if remaining + scheduled < min_count:
            return Status(Code.UNSCHEDULABLE, (min_count_unsatisfiable(min_count, scheduled, remaining),))
        if scheduled < min_count:
            return Status(Code.WAIT, (min_count_not_yet_satisfied(min_count, scheduled, remaining),))
        return None

    # -- requeueing ----------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # a new member, pending or created bound, may complete the gang; spec.schedulingGroup is
            # immutable, so pod updates are not registered
            ClusterEventWithHint(ClusterEvent(Resource.UNSCHEDULED_POD, Action.ADD), self._member_added),
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, Action.ADD), self._member_added),
            # the group's PodGroup appeared
            ClusterEventWithHint(
                ClusterEvent(Resource.WORKLOAD_POD_GROUP, Action.ADD), self._own_group_added
            ),
            # its minCount went down
            ClusterEventWithHint(
                ClusterEvent(Resource.WORKLOAD_POD_GROUP, Action.UPDATE), self._min_count_lowered
            ),
        ]

    @staticmethod
    def _member_added(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        name = scheduling_group(pod)
        if name is None or not isinstance(new, PodInfo):
            return QueueingHint.SKIP
        added = scheduling_group(new)
        if added is None or (new.namespace, added) != (pod.namespace, name):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    @staticmethod
    def _own_group_added(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        name = scheduling_group(pod)
        if name is None or not isinstance(new, WorkloadPodGroup):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE if (new.namespace, new.name) == (pod.namespace, name) else QueueingHint.SKIP

    @staticmethod
    def _min_count_lowered(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        name = scheduling_group(pod)
        if name is None or not isinstance(old, WorkloadPodGroup) or not isinstance(new, WorkloadPodGroup):
            return QueueingHint.SKIP
        if (new.namespace, new.name) != (pod.namespace, name):
            return QueueingHint.SKIP
        if old.min_count is None or new.min_count is None or new.min_count >= old.min_count:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE


def new(args: NoArgs, handle: Handle) -> GangScheduling:
    return GangScheduling(handle)
