"""DefaultPreemption: when no node fits, make room on one by evicting lower-priority pods
(``defaultpreemption/default_preemption.go``; the generic steps are ``framework.preemption``).

The preemptor is nominated to the chosen node and requeued; the evictions run before its attempt ends
(the scheduler awaits them outside the scheduling cycle), so it is retried only after they were sent and
lands on its nominated node once the victims are gone. kube-scheduler v1.37 sends them from a goroutine
and holds the pod back with a PreEnqueue check until the last victim's deletion has begun
(``SchedulerAsyncPreemption``); the pod sees the same thing, so this plugin needs no PreEnqueue and no
queueing hints. Victims waiting at Permit or in PreBind are stopped in the scheduler's memory instead
(``framework.preemption.Evaluator.preempt_pod``).

With GenericWorkload a node's victims are those kube-scheduler v1.37.2 counts with the gate on
(``domain``): a pod naming a seen PodGroup is preempted at its group's priority and offered back before
lone pods of the same priority (larger groups first), and the scheduled pods of a PodGroup with
``disruptionMode: all`` go together, from every node they run on. CompositePodGroups (their hierarchy's
priority and disruption mode) are not built: that gate is refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.disruption_budgets import DisruptionBudget
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    AsyncPostFilter,
    NodeStatusMap,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
    PostFilterPlugin,
    PostFilterResult,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.preemption import Evaluator
from kopf_scheduler.framework.status import Code, Status
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins.default_preemption.args import Args
from kopf_scheduler.plugins.default_preemption.domain import pod_priority
from kopf_scheduler.plugins.default_preemption.pod_group import PodGroupPreemption
from kopf_scheduler.plugins.default_preemption.victims import (
    select_victims_on_node,
    terminating_by_preemption,
)

NAME = names.DEFAULT_PREEMPTION
#: every message of this plugin starts with it
MESSAGE_PREFIX = "preemption: "
NOT_ELIGIBLE_POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
PREEMPT_NEVER = "Never"
GENERIC_WORKLOAD = "GenericWorkload"


class DefaultPreemption(PostFilterPlugin, AsyncPostFilter, PodGroupPostFilterPlugin):
    name = NAME

    def __init__(self, args: Args, handle: Handle, wall: Callable[[], float] = time.time) -> None:
        self.args = args
        self.handle = handle
        #: wall-clock seconds: pods that have not started count as starting now
        self.wall = wall
        #: GenericWorkload: victims are counted as ``domain.domain_victims`` says (a gang member at its
        #: PodGroup's priority, a PodGroup with ``disruptionMode: all`` whole)
        self.generic_workload = handle.feature_gates.enabled(GENERIC_WORKLOAD)
        self.evaluator = Evaluator(NAME, handle, self)
        self.pod_group_preemption = PodGroupPreemption(NAME, handle)

    def post_filter(
        self, state: CycleState, pod: PodInfo, node_statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status | None]:
        result, status = self.evaluator.preempt(state, pod, node_statuses, self.wall())
        return result, _prefixed(status)

    async def post_filter_async(
        self, state: CycleState, pod: PodInfo, node_statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status | None]:
        """``post_filter`` for profiles with extenders: their preempt verb may prune the candidates."""
        result, status = await self.evaluator.preempt_async(state, pod, node_statuses, self.wall())
        return result, _prefixed(status)

    async def pod_group_post_filter(
        self,
        group: WorkloadPodGroup,
        unscheduled: Sequence[PodInfo],
        states: Mapping[str, CycleState],
        schedule: PodGroupSchedulingFunc,
    ) -> tuple[PodGroupPostFilterResult | None, Status | None]:
        """Pod group preemption (``pod_group``), GenericWorkload's pod group cycle only."""
        return await self.pod_group_preemption.preempt(group, unscheduled, schedule, self.wall())

    # -- the policy the generic evaluator asks for -----------------------------------------------------
    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return self.handle.rng.randrange(num_nodes), self.args.num_candidates(num_nodes)

    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, nominated: str, nominated_status: Status | None
    ) -> tuple[bool, str]:
        """Not with ``preemptionPolicy: Never``; not while a pod of lower priority on the nominated node
        is terminating because of preemption (the room this pod asked for is on its way; with
        GenericWorkload a gang member has its PodGroup's priority), unless the nominated node now fails
        for a reason preemption cannot fix. ``nominated``: the pod's node as
        the scheduler holds it (its ``status.nominatedNodeName``, or the nomination just made)."""
        if pod.preemption_policy == PREEMPT_NEVER:
            return False, NOT_ELIGIBLE_POLICY_NEVER
        if nominated:
            if nominated_status is not None and nominated_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            node = self.handle.snapshot().get(nominated)
            if node is not None:
                groups = self.handle.pod_groups if self.generic_workload else None
                for other in node.pods.values():
                    priority = other.priority if groups is None else pod_priority(other, groups)
                    if priority < pod.priority and terminating_by_preemption(other):
                        return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, pdbs: Sequence[DisruptionBudget], now: float
    ) -> tuple[list[PodInfo], int, Status | None]:
        return select_victims_on_node(self.handle, state, pod, node, pdbs, now, self.generic_workload)


def _prefixed(status: Status) -> Status:
    """Every message of this plugin starts with ``preemption: ``."""
    message = status.message()
    if message:
        return Status(status.code, (MESSAGE_PREFIX + message,), NAME, status.cause)
    return status


def new(args: Args, handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(args, handle)
