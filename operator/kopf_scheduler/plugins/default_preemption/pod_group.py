"""DefaultPreemption's pod group step: PodGroupPostFilter, preemption for a gang that its pod group cycle
could not place (kube-scheduler v1.37.2 ``framework/preemption/podgrouppreemption.go`` and ``types.go``,
with PodGroupPreemptionPolicy and CompositePodGroup off, SchedulerAsyncPreemption on).

The domain is the whole cluster. Its victims are the pods on its nodes, each on its own, except that the
scheduled pods of a PodGroup whose ``spec.disruptionMode`` is ``all`` are one victim together; a pod naming
a seen PodGroup has that group's priority. Only victims of lower priority than the gang's PodGroup may go.
With none, the gang is told ``No preemption victims found for incoming preemptor``. Otherwise every such
victim is taken off the snapshot and the gang's cycle is run again: if it still fails, its status is the
answer. If it fits, victims are offered back, the most important first (higher priority, then groups
before pods, then more pods, then the longer running), those whose eviction would exceed a
PodDisruptionBudget before the others: a victim stays when every assigned member still passes its filters
on its node with the victim back (the members before it assumed there). The rest are evicted, and every
assigned member is nominated to its node.

A member nominated to a node where a lower-priority pod is already being deleted by preemption means the
room is on its way: the members keep their nominations and nothing else is done. A member with
``preemptionPolicy: Never`` keeps the whole gang from preempting.

Every message starts with ``pod group preemption: ``. The snapshot is restored before the step returns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from kopf_scheduler.framework.client import PreemptorGroup
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
    ProposedAssignment,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup, pod_group_priority
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.preemption import stop_in_memory
from kopf_scheduler.framework.runtime.recorder import POD_GROUP as POD_GROUP_PREEMPTOR
from kopf_scheduler.framework.snapshot_mutations import MutableSnapshot, SnapshotMutations
from kopf_scheduler.framework.status import Code, Status, error
from kopf_scheduler.plugins.default_preemption.domain import (
    Victim,
    domain_victims,
    importance,
    pod_priority,
    split_by_budgets,
)
from kopf_scheduler.plugins.default_preemption.victims import terminating_by_preemption

MESSAGE_PREFIX = "pod group preemption: "
NO_VICTIMS = "No preemption victims found for incoming preemptor"
ONGOING = "ongoing preemption on nominated nodes"
NOT_ELIGIBLE_POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
PREEMPT_NEVER = "Never"


def placement_found(num_victims: int) -> str:
    return f"found a placement for podgroup, preempting {num_victims} victims"


def _policy(unscheduled: Sequence[PodInfo]) -> str:
    """``resolvePreemptionPolicy`` with PodGroupPreemptionPolicy off: Never when any member says so."""
    return PREEMPT_NEVER if any(p.preemption_policy == PREEMPT_NEVER for p in unscheduled) else ""


#: the name of the one candidate of pod group preemption (its domain, the whole cluster): victims' events
#: say ``on node cluster``
CANDIDATE = "cluster"


class PodGroupPreemption:
    """Pod group preemption for the plugin ``plugin_name`` (DefaultPreemption)."""

    def __init__(self, plugin_name: str, handle: Handle) -> None:
        self.plugin_name = plugin_name
        self.handle = handle

    async def preempt(
        self,
        group: WorkloadPodGroup,
        unscheduled: Sequence[PodInfo],
        schedule: PodGroupSchedulingFunc,
        now: float,
    ) -> tuple[PodGroupPostFilterResult | None, Status]:
        """``PodGroupPostFilter``: a result with the nominations (and, with victims to evict, their
        eviction to await) and the status, its message prefixed."""
        result, status = await self._preempt(group, unscheduled, schedule, now)
        if result is not None and result.victims and status.is_success:
            result.prepare = self.actuation(group, unscheduled, result.victims)
        message = status.message()
        if message:
            status = Status(status.code, (MESSAGE_PREFIX + message,), status.plugin, status.cause)
        self.handle.recorder.workload_preemption_attempted(status)
        return result, status

    async def _preempt(
        self,
        group: WorkloadPodGroup,
        unscheduled: Sequence[PodInfo],
        schedule: PodGroupSchedulingFunc,
        now: float,
    ) -> tuple[PodGroupPostFilterResult | None, Status]:
        handle = self.handle
        priority = pod_group_priority(group)
        if _policy(unscheduled) == PREEMPT_NEVER:
            return None, Status(Code.UNSCHEDULABLE, (NOT_ELIGIBLE_POLICY_NEVER,))
        snapshot = handle.snapshot()
        nodes = [n for n in snapshot.node_infos if n.node is not None]  # type: ignore[attr-defined]
        if self._ongoing(unscheduled, priority):
            nominations = {p.uid: p.nominated_node_name for p in unscheduled}
            return PodGroupPostFilterResult(nominations), Status(Code.SUCCESS, (ONGOING,))
        started = time.perf_counter()
        result, status = await self._evaluate(nodes, priority, schedule, now)
        self.handle.recorder.preemption_evaluated(POD_GROUP_PREEMPTOR, status, started)
        return result, status

    async def _evaluate(
        self,
        nodes: list[NodeInfo],
        priority: int,
        schedule: PodGroupSchedulingFunc,
        now: float,
    ) -> tuple[PodGroupPostFilterResult | None, Status]:
        """``PodGroupEvaluator.evaluate``: the victims, without acting on them."""
        handle = self.handle
        snapshot = handle.snapshot()
        potential = [v for v in domain_victims(nodes, handle.pod_groups, now) if v.priority < priority]
        if not potential:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_VICTIMS,))
        mutations = SnapshotMutations(snapshot)  # type: ignore[arg-type]
        try:
            return await self._select(potential, schedule, mutations, snapshot)  # type: ignore[arg-type]
        except RuntimeError as e:  # a pre-filter extension failed
            return None, error(str(e), cause=e)
        finally:
            mutations.restore()

    def _ongoing(self, unscheduled: Sequence[PodInfo], priority: int) -> bool:
        """``isOngoingPreemption``: a member's nominated node has a lower-priority pod that preemption is
        deleting."""
        snapshot = self.handle.snapshot()
        for name in {p.nominated_node_name for p in unscheduled if p.nominated_node_name}:
            node = snapshot.get(name)
            if node is None or node.node is None:
                continue
            for other in node.pods.values():
                if pod_priority(other, self.handle.pod_groups) < priority and terminating_by_preemption(
                    other
                ):
                    return True
        return False

    async def _select(
        self,
        potential: list[Victim],
        schedule: PodGroupSchedulingFunc,
        mutations: SnapshotMutations,
        snapshot: MutableSnapshot,
    ) -> tuple[PodGroupPostFilterResult | None, Status]:
        handle = self.handle
        for victim in potential:
            for pod in victim.pods:
                mutations.remove_pod(pod, pod.node_name)
        assignments, status = await schedule()
        if status is not None and not status.is_success:
            return None, status
        potential.sort(key=importance)
        violating, others = split_by_budgets(potential, handle.pdbs())
        valid = [a for a in assignments if a.node_name]
        to_preempt: list[Victim] = []
        pdb_violations = 0
        for victim, count in violating:
            if not self._reprieve(victim, valid, mutations, snapshot):
                to_preempt.append(victim)
                pdb_violations += count
        for victim in others:
            if not self._reprieve(victim, valid, mutations, snapshot):
                to_preempt.append(victim)
        to_preempt.sort(key=importance)
        pods = [pod for victim in to_preempt for pod in victim.pods]
        nominations = {a.pod.uid: a.node_name for a in valid}
        disruptions = sum(1 for victim in to_preempt if victim.is_group)
        # the candidate acted on (upstream's ``observeVictims``, as its actuation begins)
        handle.recorder.preemption_candidate(POD_GROUP_PREEMPTOR, len(pods), disruptions, pdb_violations)
        return (
            PodGroupPostFilterResult(nominations, victims=pods),
            Status(Code.SUCCESS, (placement_found(len(pods)),)),
        )

    # -- actuation -------------------------------------------------------------------------------------
    def actuation(
        self, group: WorkloadPodGroup, unscheduled: Sequence[PodInfo], victims: Sequence[PodInfo]
    ) -> Callable[[], Awaitable[Status | None]]:
        """The victims' preemption as upstream's asynchronous one for a pod group: victims already being
        deleted are left alone; every other one but the last at once, the last after them unless one of
        them failed. On a failure, or when the last victim was stopped in the scheduler's memory (no
        deletion will wake the gang), the gang's pods are activated. Returns the first failure."""
        preemptor = PreemptorGroup(group.namespace, group.name, group.uid)

        async def prepare() -> Status | None:
            pending = [v for v in victims if not v.deletion_timestamp]
            if not pending or not unscheduled:
                return None
            member = unscheduled[0]
            outcomes = await asyncio.gather(
                *(self.preempt_pod(v, member, preemptor) for v in pending[:-1]), return_exceptions=True
            )
            failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
            in_memory = False
            if failure is None:
                try:
                    in_memory = await self.preempt_pod(pending[-1], member, preemptor)
                except Exception as e:
                    failure = e
            if failure is not None or in_memory:
                self.handle.activate(unscheduled)
            if failure is not None:
                return error(str(failure), plugin=self.plugin_name, cause=failure)
            return None

        return prepare

    async def preempt_pod(self, victim: PodInfo, member: PodInfo, preemptor: PreemptorGroup) -> bool:
        """``PreemptPod``: a victim waiting at Permit or in PreBind is stopped in memory (True); any other
        is marked and deleted."""
        handle = self.handle
        if stop_in_memory(handle, self.plugin_name, victim):
            handle.client.record_preempted_in_memory(victim, member, CANDIDATE, group=preemptor)
            return True
        await handle.client.evict(victim, member, CANDIDATE, group=preemptor)
        return False

    def _reprieve(
        self,
        victim: Victim,
        assignments: Sequence[ProposedAssignment],
        mutations: SnapshotMutations,
        snapshot: MutableSnapshot,
    ) -> bool:
        """Whether the gang still fits with ``victim`` back: its pods are added, then each assigned member
        is filtered on its node and, if it passes, assumed and reserved there until the check ends."""
        handle = self.handle
        for pod in victim.pods:
            mutations.add_pod(pod, pod.node_name)
            node = snapshot.get(pod.node_name)
            if node is None:
                continue
            for assignment in assignments:
                handle.run_pre_filter_add_pod(assignment.state, assignment.pod, pod, node)
        undo: list[tuple[CycleState, PodInfo, str]] = []
        try:
            for assignment in assignments:
                node = snapshot.get(assignment.node_name)
                fits = node is not None and (
                    handle.run_filter_with_nominated_pods(assignment.state, assignment.pod, node) is None
                )
                if not fits:
                    for pod in victim.pods:
                        mutations.remove_pod(pod, pod.node_name)
                        held = snapshot.get(pod.node_name)
                        if held is None:
                            continue
                        for other in assignments:
                            handle.run_pre_filter_remove_pod(other.state, other.pod, pod, held)
                    return False
                placed = assignment.pod.bound_to(assignment.node_name)
                mutations.add_pod(placed, assignment.node_name)
                handle.run_reserve(assignment.state, placed, assignment.node_name)
                undo.append((assignment.state, placed, assignment.node_name))
            return True
        finally:
            for state, placed, node_name in reversed(undo):
                handle.run_unreserve(state, placed, node_name)
                mutations.remove_pod(placed, node_name)
