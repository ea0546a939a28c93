"""The pod group scheduling cycle: a Workload API gang's pods tried together (kube-scheduler v1.37.2
``schedule_one_podgroup.go`` with GenericWorkload on, TopologyAwareWorkloadScheduling and CompositePodGroup
off).

1. The PodGroup as last seen, and its pods checked: one scheduler name, each pod's priority the group's,
   one preemption policy (the bound and assumed members too). A failure here is an error for every pod
   and a ``SchedulerError`` condition. Pods being deleted, or already assumed, leave the attempt.
2. The algorithm: PlacementFeasible is asked first (``minCount`` out of reach ends it at once); then each
   pod in the group's order is filtered and scored as on its own (no per-pod preemption), and assumed and
   reserved in the snapshot, so the next ones see it; PlacementFeasible is asked after each. A group still
   waiting when its pods run out is unschedulable; so is one that placed no pod. Everything it assumed is
   undone when it ends.
3. An unschedulable group gets the PodGroupPostFilter plugins (pod group preemption), which may run the
   algorithm again on a snapshot without victims; their message is added to the group's.
4. Submission: a feasible group's placed pods are assumed in the cache, reserved and permitted again and
   go to binding (GangScheduling's Permit holds the first ones until the last is assumed); the others fail
   with their own FitError, or with ``pod group is unschedulable, <the group's message>`` when they fitted
   but the group did not. The PodGroup's ``PodGroupInitiallyScheduled`` condition is written, and the
   group's pods left go back to the queue as one entity.

A group waiting on preemption keeps its pods in flight until the victims' evictions were sent, then fails
them with their nominations, as a single pod's preemption does here (``after_post_filter``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.backend.queue.pod_groups import QueuedPodGroupInfo
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.diagnosis import FitError
from kopf_scheduler.framework.interface import PodGroupPostFilterResult, ProposedAssignment
from kopf_scheduler.framework.objects.pod_group_conditions import (
    TRUE,
    PodGroupCondition,
    scheduled,
    scheduler_error,
    set_condition,
    unschedulable,
)
from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup, pod_group_priority
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.framework.runtime.pod_group_points import (
    run_placement_feasible,
    run_pod_group_post_filter,
)
from kopf_scheduler.framework.runtime.recorder import POD_GROUP
from kopf_scheduler.framework.snapshot_mutations import SnapshotMutations
from kopf_scheduler.framework.status import Code, Status, error
from kopf_scheduler.scheduling.context import CycleContext
from kopf_scheduler.scheduling.schedule_one import (
    CLEAR,
    NO_NODES_AVAILABLE,
    NoNodesAvailable,
    SchedulingError,
    _rejectors,
    _unreserve,
    binding_cycle,
    handle_failure,
    handle_fit_error,
    now,
    on_one_node,
    schedule_pod,
)

log = logging.getLogger("kopf_scheduler")

#: ``errPodGroupUnschedulable``: the first reason of a group's rejection made by the cycle itself
POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"
PREEMPT_NEVER = "Never"
#: the results of a pod group's attempt (``scheduler_podgroup_schedule_attempts_total``)
SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
WAITING_ON_PREEMPTION = "waiting_on_preemption"
ERROR = "error"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"

FrameworkFor = Callable[[str], Framework | None]


@dataclass(slots=True)
class PodResult:
    """One pod's attempt in the algorithm (``algorithmResult``)."""

    qp: QueuedPodInfo
    state: CycleState
    started: float
    #: None: placed on ``host``
    status: Status | None = None
    host: str = ""
    fit_error: FitError | None = None
    #: the nomination its failure leaves: None keeps it, "" clears it
    nominated: str | None = CLEAR


@dataclass(slots=True)
class GroupResult:
    """The algorithm's verdict on the group (``podGroupAlgorithmResult``); ``status`` None: feasible."""

    status: Status | None
    pods: list[PodResult] = field(default_factory=list)
    waiting_on_preemption: bool = False
    any_scheduled: bool = False


def _unschedulable(*reasons: str) -> Status:
    """``NewStatus(Unschedulable, reasons...).WithError(errPodGroupUnschedulable)``."""
    return Status(Code.UNSCHEDULABLE, (POD_GROUP_UNSCHEDULABLE, *reasons))


def _with_reason(status: Status | None, reason: str) -> Status:
    """``AppendReason`` (a success gains the reason too: it is then a success with a message)."""
    base = status if status is not None else Status(Code.SUCCESS)
    return Status(base.code, (*base.reasons, reason), base.plugin, base.cause)


def _is_success(status: Status | None) -> bool:
    return status is None or status.is_success


def _entity_key(namespace: str, name: str) -> str:
    return f"podgroup/{namespace}/{name}"


def _preemption_policy(pod: PodInfo) -> str:
    return pod.preemption_policy or PREEMPT_LOWER_PRIORITY


def validate(group: WorkloadPodGroup, members: Sequence[PodInfo], scheduled_pods: Sequence[PodInfo]) -> str:
    """``validatePodGroup`` with PodGroupPreemptionPolicy off: '' when the group may be tried, else why
    not."""
    scheduler_name = members[0].scheduler_name if members else ""
    priority = pod_group_priority(group)
    policy = ""
    for pod in (*members, *scheduled_pods):
        if pod.scheduler_name != scheduler_name:
            return (
                "all pods in a single pod group should have the same .spec.schedulerName set, "
                f'got: "{pod.scheduler_name}" and "{scheduler_name}"'
            )
        if pod.priority != priority:
            return (
                "all pods in a single pod group should have the same priority as the pod group's priority, "
                f"got {pod.priority} and {priority}"
            )
        own = _preemption_policy(pod)
        if not policy:
            policy = own
        elif own != policy:
            return (
                "all pods in a single pod group should have the same preemption policy, "
                f"got {own} and {policy}"
            )
    return ""


class PodGroupCycle:
    """One pod group's attempt; ``run`` returns the coroutines to start (bindings, the condition write,
    or the wait for preemption's evictions followed by the report)."""

    def __init__(self, ctx: CycleContext, framework_for: FrameworkFor, entity: QueuedPodGroupInfo) -> None:
        self.ctx = ctx
        self.framework_for = framework_for
        self.entity = entity
        self.started = now()

    # -- 1. before the algorithm -----------------------------------------------------------------------
    async def run(self) -> list[Awaitable[Any]]:
        ctx, entity = self.ctx, self.entity
        ctx.cache.update_snapshot(ctx.snapshot)
        namespace, name = entity.group_key
        groups = ctx.cache.pod_groups
        group = groups.pod_group(namespace, name)
        if group is None:
            key = _entity_key(namespace, name)
            missing = "pod group state" if groups.state(namespace, name) is None else "pod group object"
            return self._fail_before(None, error(f"{missing} not found for pod group {key}"))
        members = [qp.pod for qp in entity.members]
        state = groups.state(namespace, name)
        problem = validate(group, members, list(state.scheduled_pods()) if state is not None else [])
        fwk = self.framework_for(members[0].scheduler_name) if members else None
        if not problem and fwk is None:
            problem = f'profile not found for scheduler name "{members[0].scheduler_name}"'
        if problem or fwk is None:
            return self._fail_before(group, error(problem))
        kept = []
        for qp in entity.members:
            if qp.pod.deletion_timestamp or ctx.cache.is_assumed(qp.pod.uid):
                ctx.queue.done(qp.pod.uid)  # not requeued: its attempt just ends
            else:
                kept.append(qp)
        entity.members = kept
        if not kept:
            ctx.queue.add_attempted_pod_group_if_needed(entity, None)
            return []
        fwk.current_snapshot = ctx.snapshot
        return await self._cycle(fwk, group)

    def _fail_before(self, group: WorkloadPodGroup | None, status: Status) -> list[Awaitable[Any]]:
        """``handlePodGroupFailureBeforeScheduling``: every pod fails with ``status``; the condition says
        SchedulerError (when the PodGroup is known)."""
        ctx = self.ctx
        for qp in self.entity.members:
            fwk = self.framework_for(qp.pod.scheduler_name)
            if fwk is None:
                ctx.queue.done(qp.pod.uid)
                continue
            handle_failure(ctx, fwk, qp, status, CLEAR, self.started)
        coroutines: list[Awaitable[Any]] = []
        if group is not None:
            coroutines.extend(self._write_condition(group, scheduler_error(status.message())))
        ctx.queue.add_attempted_pod_group_if_needed(self.entity, status)
        return coroutines

    # -- 2. the algorithm ------------------------------------------------------------------------------
    async def _cycle(self, fwk: Framework, group: WorkloadPodGroup) -> list[Awaitable[Any]]:
        result = await self._run_root(fwk, group)
        root_status = result.status
        self._complete(result)
        self.ctx.recorder.pod_group_algorithm(self.started)
        post: PodGroupPostFilterResult | None = None
        if root_status is not None and root_status.code == Code.UNSCHEDULABLE:
            states = {r.qp.pod.uid: r.state for r in result.pods}
            post, post_status = await run_pod_group_post_filter(
                fwk,
                group,
                [qp.pod for qp in self.entity.members],
                states,
                lambda: self._assignments(fwk, group),
            )
            self._apply_post_filter(result, post, post_status)
        if post is not None and post.prepare is not None and result.waiting_on_preemption:
            # upstream submits at once, the evictions running apart: the attempt ends now
            self._record(fwk, result)
            return [self._after_preemption(fwk, group, result, post, root_status)]
        coroutines = self._submit(fwk, group, result, root_status)
        self._record(fwk, result)
        return coroutines

    def _record(self, fwk: Framework, result: GroupResult) -> None:
        """The attempt's outcome, from the group's status (as ``submitPodGroupAlgorithmResult`` ends)."""
        status = result.status
        if _is_success(status):
            outcome = SCHEDULED
        elif status is not None and status.is_rejection:
            outcome = WAITING_ON_PREEMPTION if result.waiting_on_preemption else UNSCHEDULABLE
        else:
            outcome = ERROR
        self.ctx.recorder.pod_group_attempt(fwk.profile_name, outcome, self.started)

    async def _run_root(self, fwk: Framework, group: WorkloadPodGroup) -> GroupResult:
        """``runRootSchedulingAlgorithm``: the algorithm, then everything it assumed undone."""
        mutations = SnapshotMutations(self.ctx.snapshot)
        undo: list[Callable[[], None]] = []
        try:
            result = await self._algorithm(fwk, group, mutations, undo)
        finally:
            for step in reversed(undo):
                step()
            mutations.restore()
        if _is_success(result.status) and not result.any_scheduled:
            result.status = _unschedulable()
        return result

    async def _assignments(
        self, fwk: Framework, group: WorkloadPodGroup
    ) -> tuple[list[ProposedAssignment], Status | None]:
        """The scheduling function pod group preemption runs (on its snapshot without victims)."""
        result = await self._run_root(fwk, group)
        assignments = [
            ProposedAssignment(r.qp.pod, r.host, r.state)
            for r in result.pods
            if _is_success(r.status) and r.host
        ]
        return assignments, result.status

    async def _algorithm(
        self,
        fwk: Framework,
        group: WorkloadPodGroup,
        mutations: SnapshotMutations,
        undo: list[Callable[[], None]],
    ) -> GroupResult:
        """``podGroupSchedulingDefaultAlgorithm``."""
        ctx = self.ctx
        namespace, name = self.entity.group_key
        state = ctx.cache.pod_groups.state(namespace, name)
        if state is None:
            key = _entity_key(namespace, name)
            cause = f"pod group state not found for pod group {key}"
            message = (
                f"failed to get podGroup state for podGroup {namespace}/{name} to compute gang "
                f"feasibility: {cause}"
            )
            return GroupResult(error(message))
        members = self.entity.members
        remaining, scheduled_count = len(members), state.scheduled_pods_count()
        feasible = run_placement_feasible(fwk, group, scheduled_count, remaining)
        if feasible is not None and feasible.code == Code.ERROR:
            return GroupResult(error(f"failed to evaluate placement feasibility: {feasible.message()}"))
        if feasible is not None and feasible.code == Code.UNSCHEDULABLE:
            return GroupResult(_unschedulable(*feasible.reasons))
        result = GroupResult(feasible)
        group_undo: list[Callable[[], None]] = []
        for qp in members:
            pod_result = await self._pod_algorithm(fwk, qp, mutations, group_undo)
            result.pods.append(pod_result)
            status = pod_result.status
            if not _is_success(status) and not (status is not None and status.is_rejection):
                assert status is not None
                result.status = error(f"failed to schedule other pod from a pod group: {status.message()}")
                break
            remaining -= 1
            if _is_success(status):
                scheduled_count += 1
            feasible = run_placement_feasible(fwk, group, scheduled_count, remaining)
            if feasible is not None and feasible.code == Code.ERROR:
                result.status = error(f"failed to evaluate placement feasibility: {feasible.message()}")
                break
            result.status = feasible
            if feasible is not None and feasible.code == Code.UNSCHEDULABLE:
                break
            result.any_scheduled = result.any_scheduled or _is_success(status)
        if result.status is not None and result.status.code == Code.WAIT:
            result.status = _unschedulable(*result.status.reasons)
        if not _is_success(result.status):  # the deferred revert of upstream's default algorithm
            for step in reversed(group_undo):
                step()
            group_undo.clear()
            result.any_scheduled = False
        undo.extend(group_undo)
        return result

    async def _pod_algorithm(
        self, fwk: Framework, qp: QueuedPodInfo, mutations: SnapshotMutations, undo: list[Callable[[], None]]
    ) -> PodResult:
        """``podGroupPodSchedulingAlgorithm``: filter and score as on its own, without preemption; a
        placed pod is assumed in the snapshot and reserved."""
        ctx = self.ctx
        pod = qp.pod
        started = now()
        state = CycleState()
        result = PodResult(qp, state, started)
        try:
            chosen = await schedule_pod(ctx, fwk, state, pod)
        except FitError as fit_error:
            _rejectors(fit_error.diagnosis)
            result.status = Status(Code.UNSCHEDULABLE, (str(fit_error),))
            result.fit_error = fit_error
            result.nominated = None  # pod group preemption may nominate it
            return result
        except NoNodesAvailable:
            result.status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_NODES_AVAILABLE,))
            return result
        except SchedulingError as e:
            result.status = e.status
            return result
        finally:
            ctx.recorder.algorithm(started)
        host = chosen.host
        assumed = pod.bound_to(host)
        mutations.add_pod(assumed, host)
        ctx.queue.delete_nominated_pod_if_exists(pod)
        nominated = pod.nominated_node_name

        def revert() -> None:
            _unreserve(ctx, fwk, state, assumed, host)
            mutations.remove_pod(assumed, host)
            if nominated:
                ctx.queue.add_nominated_pod(pod, nominated)

        step = now()
        status = fwk.run_reserve(state, assumed, host)
        ctx.recorder.observe("Reserve", status, fwk.profile_name, step)
        if status is not None:
            revert()
            result.status = on_one_node(pod, status)
            return result
        undo.append(revert)
        result.host = host
        result.nominated = None  # a placed pod's nomination stays unless preemption gives it one
        return result

    def _complete(self, result: GroupResult) -> None:
        """``completePodGroupAlgorithmResult``: the pods the algorithm did not try share its status."""
        tried = {r.qp.pod.uid for r in result.pods}
        for qp in self.entity.members:
            if qp.pod.uid not in tried:  # its nomination stays unless preemption gives it one
                status = result.status or Status(Code.SUCCESS)
                result.pods.append(PodResult(qp, CycleState(), self.started, status=status, nominated=None))

    # -- 3. pod group preemption -----------------------------------------------------------------------
    @staticmethod
    def _apply_post_filter(
        result: GroupResult, post: PodGroupPostFilterResult | None, status: Status
    ) -> None:
        """``applyPodGroupPostFilterResult``."""
        if status.is_success:
            result.waiting_on_preemption = True
            if post is not None:
                for pod_result in result.pods:
                    node = post.nominations.get(pod_result.qp.pod.uid)
                    if node is not None:
                        pod_result.nominated = node
        if status.code == Code.ERROR:
            result.status = status
        else:
            result.status = _with_reason(result.status, status.message())

    async def _after_preemption(
        self,
        fwk: Framework,
        group: WorkloadPodGroup,
        result: GroupResult,
        post: PodGroupPostFilterResult,
        root_status: Status | None,
    ) -> None:
        """The victims' evictions sent (the gang's pods still in flight), the group is reported."""
        assert post.prepare is not None
        executing = now()
        try:
            failure = await post.prepare()
        except Exception as e:  # the work should report failures as statuses; do not lose the pods
            failure = error(f"running PodGroupPostFilter API calls: {e}", cause=e)
        failed = failure is not None and not failure.is_success
        if failure is not None and failed:
            log.warning("pod group preemption for %s/%s: %s", group.namespace, group.name, failure.message())
        if any(not victim.deletion_timestamp for victim in post.victims):
            # upstream's preemption goroutine runs only when some victim's deletion has not begun
            self.ctx.recorder.preemption_executed("error" if failed else "success", POD_GROUP, executing)
        for coroutine in self._submit(fwk, group, result, root_status):
            await coroutine

    # -- 4. submission ---------------------------------------------------------------------------------
    def _submit(
        self, fwk: Framework, group: WorkloadPodGroup, result: GroupResult, root_status: Status | None
    ) -> list[Awaitable[Any]]:
        """``submitPodGroupAlgorithmResult``."""
        ctx = self.ctx
        group_status = result.status
        coroutines: list[Awaitable[Any]] = []
        for pod_result in result.pods:
            qp, status = pod_result.qp, pod_result.status
            if group_status is not None and group_status.code == Code.ERROR:
                failed = status if status is not None and status.code == Code.ERROR else group_status
                handle_failure(ctx, fwk, qp, failed, CLEAR, pod_result.started)
            elif _is_success(status):
                if _is_success(group_status):
                    binding = self._prepare_binding(fwk, pod_result)
                    if binding is not None:
                        coroutines.append(binding)
                elif result.waiting_on_preemption:
                    assert group_status is not None
                    handle_failure(ctx, fwk, qp, group_status, pod_result.nominated, pod_result.started)
                else:
                    assert group_status is not None
                    rejected = _unschedulable(group_status.message())
                    handle_failure(ctx, fwk, qp, rejected, CLEAR, pod_result.started)
            elif pod_result.fit_error is not None:
                handle_fit_error(ctx, fwk, qp, pod_result.fit_error, pod_result.nominated, pod_result.started)
            else:
                assert status is not None
                handle_failure(ctx, fwk, qp, status, pod_result.nominated, pod_result.started)
        if _is_success(group_status):
            condition = (
                scheduled()
                if group_status is None
                else PodGroupCondition("True", "Scheduled", group_status.message())
            )
        elif group_status is not None and group_status.is_rejection:
            condition = unschedulable(group_status.message())
        else:
            assert group_status is not None
            condition = scheduler_error(group_status.message())
        coroutines.extend(self._write_condition(group, condition))
        ctx.queue.add_attempted_pod_group_if_needed(self.entity, root_status)
        return coroutines

    def _prepare_binding(self, fwk: Framework, pod_result: PodResult) -> Awaitable[Any] | None:
        """``prepareForBindingCycle``: assumed in the cache, reserved and permitted; the binding cycle's
        coroutine, or None after a failure (reported here)."""
        ctx = self.ctx
        qp, state, host = pod_result.qp, pod_result.state, pod_result.host
        pod = qp.pod
        assumed = pod.bound_to(host)
        try:
            ctx.cache.assume_pod(assumed)
        except Exception as e:  # a cache inconsistency: report, do not crash the loop
            handle_failure(ctx, fwk, qp, error(f"assuming pod: {e}"), CLEAR, pod_result.started)
            return None
        ctx.queue.delete_nominated_pod_if_exists(pod)
        step = now()
        status = fwk.run_reserve(state, assumed, host)
        ctx.recorder.observe("Reserve", status, fwk.profile_name, step)
        if status is None:
            step = now()
            status = fwk.run_permit(state, assumed, host)
            ctx.recorder.observe("Permit", status, fwk.profile_name, step)
            if status is not None and status.code == Code.WAIT:
                status = None
        if status is not None:
            _unreserve(ctx, fwk, state, assumed, host)
            ctx.cache.forget_pod(assumed)
            handle_failure(ctx, fwk, qp, on_one_node(pod, status), CLEAR, pod_result.started)
            return None
        return binding_cycle(ctx, fwk, state, qp, assumed, host, pod_result.started)

    def _write_condition(self, group: WorkloadPodGroup, condition: PodGroupCondition) -> list[Awaitable[Any]]:
        """``updatePodGroupCondition``, as the coroutine to start (none when nothing is to be written). A
        condition this scheduler set ``True`` is never turned back by a later cycle for extra pods, even
        before a watch event shows the ``True`` in the cached PodGroup: the cycle remembers it at once."""
        state = self.ctx.cache.pod_groups.state(group.namespace, group.name)
        if condition.status == TRUE:
            if state is not None:
                state.scheduled_uid = group.uid
        elif state is not None and state.scheduled_uid == group.uid:
            return []
        return [self._send_condition(group, condition)]

    async def _send_condition(self, group: WorkloadPodGroup, condition: PodGroupCondition) -> None:
        """A failed write is logged, as upstream logs it."""
        try:
            await set_condition(self.ctx.client, group, condition, time.time())
        except APIError as e:
            log.warning("updating the status of PodGroup %s/%s: %s", group.namespace, group.name, e)


async def schedule_pod_group(
    ctx: CycleContext, framework_for: FrameworkFor, entity: QueuedPodGroupInfo
) -> list[Awaitable[Any]]:
    """One pod group scheduling cycle (awaiting only scheduler extenders, as ``scheduling_cycle``); the
    coroutines it leaves (bindings, the PodGroup's condition, the wait for preemption's evictions) are
    the caller's to start."""
    return await PodGroupCycle(ctx, framework_for, entity).run()
