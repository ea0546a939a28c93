"""One scheduling cycle and its binding cycle (upstream's ``schedule_one.go``).

Scheduling cycle (over the snapshot): pre-filter -> filter (stopping after the number of feasible nodes
to find, from a rotating start index) -> filter extenders -> post-filter on failure -> pre-score ->
score -> normalise -> weights (+ prioritize extenders) -> select host (ties at random) -> assume ->
reserve -> permit. Binding cycle (async, concurrent): wait on permit -> pre-bind -> bind -> post-bind.
Every failure after assume unreserves and forgets the pod, then requeues it (with backoff for errors).

The scheduling cycle is written as coroutines that await only scheduler extenders (HTTP). The scheduler
runs it eagerly, as synchronous code: without extenders it never suspends; with extenders it is replayed
with the answers recorded so far, and a call not answered yet ends it before anything is assumed
(``framework.extenders.replay``). ``simulate`` awaits the calls in the cycle instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kopf_scheduler.backend.cache import CacheError
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.diagnosis import Diagnosis, FitError, truncate_event_message, verdict_counts
from kopf_scheduler.framework.extenders import scheduling as extending
from kopf_scheduler.framework.interface import NodeSet, PostFilterResult, SnapshotLister
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.preemption import StatusMap
from kopf_scheduler.framework.runtime.batch import OpportunisticBatch, SortedNodes
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.framework.runtime.pods_in_pre_bind import PodInPreBind
from kopf_scheduler.framework.runtime.recorder import POD, Recorder
from kopf_scheduler.framework.status import Code, Status, error, unresolvable
from kopf_scheduler.plugins.names import DEFAULT_PREEMPTION
from kopf_scheduler.scheduling.context import CycleContext, ScheduleResult

log = logging.getLogger("kopf_scheduler")

#: below this many nodes every node is examined (``minFeasibleNodesToFind``).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES_AVAILABLE = "no nodes available to schedule pods"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
#: the nomination a failure leaves: none (upstream's ``clearNominatedNode``, every failure but a
#: post-filter's since v1.35)
CLEAR = ""
NOMINATED_NODE_NAME_FOR_EXPECTATION = "NominatedNodeNameForExpectation"


class SchedulingError(Exception):
    """An unexpected failure of the cycle (a plugin error), not a verdict on the pod."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


class NoNodesAvailable(Exception):
    """The snapshot has no node at all (upstream's ``ErrNoNodesAvailable``): no plugin ran, so no plugin
    rejected the pod and no post-filter (preemption) can help."""


class BatchCycle:
    """Opportunistic batching's part in one cycle (``framework.runtime.batch``): the pod's signature, the
    cycle's number, and the hint the profile's memory gave."""

    __slots__ = ("batch", "cycle", "hint", "recorder", "signature")

    def __init__(self, batch: OpportunisticBatch, pod: PodInfo, cycle: int, recorder: Recorder) -> None:
        self.batch = batch
        started = now()
        self.signature = batch.sign_pod(pod)
        # upstream times SignPod as the extension point "Sign" when the queue takes the pod in (its status
        # label is always Success: the status it reports is never set); here once per attempt
        recorder.observe("Sign", None, batch.framework.profile_name, started)
        self.cycle = cycle
        self.recorder = recorder
        self.hint = ""

    def find_hint(self, pod: PodInfo, state: CycleState, snapshot: SnapshotLister) -> str:
        self.hint = self.batch.node_hint(pod, self.signature, state, self.cycle, snapshot, self.recorder)
        return self.hint

    def store(self, chosen: str, others: SortedNodes | None, others_count: int) -> None:
        self.batch.store(self.signature, self.hint, chosen, others, others_count, self.cycle, self.recorder)


def _sorted_others(
    ctx: CycleContext,
    infos: list[Any],
    rows: np.ndarray,
    totals: np.ndarray,
    raw: dict[str, np.ndarray],
    chosen: int,
) -> SortedNodes:
    """The feasible nodes but the chosen one, best first (ties in random order), with their raw scores."""
    keep = np.ones(len(rows), dtype=bool)
    keep[chosen] = False
    names = [infos[i].name for i in rows[keep].tolist()]
    tie_keys = np.random.default_rng(ctx.rng.getrandbits(64)).random(len(names))
    return SortedNodes.ordered(names, {k: v[keep] for k, v in raw.items()}, totals[keep], tie_keys)


def num_feasible_nodes_to_find(
    profile_percentage: int | None, global_percentage: int, num_all_nodes: int
) -> int:
    """How many feasible nodes to find before scoring: all below 100 nodes, else the (adaptive)
    percentage, at least 100."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    percentage = profile_percentage if profile_percentage is not None else global_percentage
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


async def find_nodes_that_fit(
    ctx: CycleContext, fwk: Framework, state: CycleState, pod: PodInfo, batching: BatchCycle | None = None
) -> tuple[np.ndarray, Diagnosis]:
    snapshot = ctx.snapshot
    diagnosis = Diagnosis()
    started = now()
    pre_result, status, with_nodes = fwk.run_pre_filter(state, pod, snapshot.node_infos)
    ctx.recorder.observe("PreFilter", status, fwk.profile_name, started)
    if status is not None and not status.is_success:
        if not status.is_rejection:
            raise SchedulingError(status)
        diagnosis.absent_status = status
        diagnosis.pre_filter_message = status.message()
        # Upstream: the plugins whose results restricted the nodes, plus the rejecting plugin if named
        # (an empty intersection of results names none).
        diagnosis.unschedulable_plugins.update(with_nodes)
        if status.plugin:
            target = (
                diagnosis.pending_plugins if status.code == Code.PENDING else diagnosis.unschedulable_plugins
            )
            target.add(status.plugin)
        return np.zeros(0, dtype=np.int64), diagnosis

    # As upstream, the hint is asked for even when the pod has a nominated node (it then gets none), and
    # the hinted node is tried first as a nominated one is.
    hint = batching.find_hint(pod, state, snapshot) if batching is not None else ""
    nominated = ctx.queue.nominated_node_names()
    early: dict[str, Status] = {}  # extenders' verdicts on the nominated node
    if pod.nominated_node_name or hint:
        node = snapshot.get(pod.nominated_node_name or hint)
        if node is not None and fwk.run_filter_with_nominated_pods(state, pod, node) is None:
            fits = np.array([snapshot.index_of(node.name)], dtype=np.int64)
            if fwk.extenders:
                try:
                    fits = await extending.find_nodes_that_pass_extenders(
                        fwk.extenders, pod, fits, snapshot, early.__setitem__
                    )
                except extending.ExtenderFailure as e:  # upstream logs it and filters every node
                    log.warning("evaluating nominated node %s for %s: %s", node.name, pod.key, e)
                    fits = fits[:0]
            if len(fits):
                return fits, diagnosis

    total = len(snapshot)
    if pre_result is not None and pre_result.node_names is not None:
        rows = sorted(i for i in (snapshot.index_of(n) for n in pre_result.node_names) if i is not None)
        candidates = np.asarray(rows, dtype=np.int64)
        diagnosis.absent_status = unresolvable(
            f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(with_nodes))}]"
        )
    else:
        candidates = np.arange(total, dtype=np.int64)
    n = len(candidates)
    if n == 0:
        return candidates, diagnosis
    to_find = num_feasible_nodes_to_find(
        fwk.percentage_of_nodes_to_score, ctx.percentage_of_nodes_to_score, n
    )
    if (
        not fwk.score
        and not extending.has_filters(fwk.extenders)
        and not extending.has_prioritizers(fwk.extenders)
    ):
        to_find = 1
    start = ctx.next_start_node_index % n
    order = np.concatenate((candidates[start:], candidates[:start])) if start else candidates
    started = now()
    outcome = fwk.find_feasible(state, pod, snapshot, order, to_find, nominated)
    ctx.recorder.observe("Filter", outcome.statuses.error, fwk.profile_name, started)
    if outcome.statuses.error is not None:  # a filter failed: the attempt fails with its error
        raise SchedulingError(outcome.statuses.error)
    processed = len(outcome.feasible) + len(outcome.statuses)
    ctx.next_start_node_index = (ctx.next_start_node_index + processed) % total
    diagnosis.node_statuses = outcome.statuses
    feasible = outcome.feasible
    if fwk.extenders:
        for name, status in early.items():  # what the full pass did not judge again
            if outcome.statuses.get(name) is None:
                outcome.statuses.set(name, status)
        passed = await _pass_extenders(fwk, pod, feasible, snapshot, outcome.statuses.set)
        if len(passed) != len(feasible):  # extenders do not say what helps: any event may
            diagnosis.unschedulable_plugins.add(extending.EXTENDER_NAME)
        feasible = passed
    return feasible, diagnosis


async def _pass_extenders(
    fwk: Framework,
    pod: PodInfo,
    rows: np.ndarray,
    snapshot: SnapshotLister,
    set_status: Callable[[str, Status], None],
) -> np.ndarray:
    try:
        return await extending.find_nodes_that_pass_extenders(fwk.extenders, pod, rows, snapshot, set_status)
    except extending.ExtenderFailure as e:
        raise SchedulingError(e.status) from e


async def schedule_pod(
    ctx: CycleContext, fwk: Framework, state: CycleState, pod: PodInfo, batching: BatchCycle | None = None
) -> ScheduleResult:
    """Picks a node, or raises ``FitError`` (no node fits), ``NoNodesAvailable`` (the cluster has none)
    or ``SchedulingError`` (a plugin failed). ``batching``: the cycle's part in opportunistic batching
    (None: the gate is off, or the pod is judged outside a cycle)."""
    snapshot = ctx.snapshot
    if len(snapshot) == 0:
        raise NoNodesAvailable(NO_NODES_AVAILABLE)
    feasible, diagnosis = await find_nodes_that_fit(ctx, fwk, state, pod, batching)
    if len(feasible) == 0:
        raise FitError(pod, len(snapshot), diagnosis)
    evaluated = len(feasible) + (len(diagnosis.node_statuses) if diagnosis.node_statuses is not None else 0)
    infos = snapshot.node_infos
    if len(feasible) == 1:
        host = infos[int(feasible[0])].name
        if batching is not None:
            batching.store(host, None, 0)
            batching = None  # an explanation's scoring below stores nothing more
        if ctx.explainer is None:
            return ScheduleResult(host, evaluated, 1, diagnosis=diagnosis)
    keep_raw = batching is not None and batching.signature is not None
    nodes = NodeSet(snapshot, feasible)
    if not fwk.score and not fwk.extenders:
        totals = np.ones(len(feasible), dtype=np.int64)
        breakdown = None
    else:
        started = now()
        status = fwk.run_pre_score(state, pod, nodes)
        ctx.recorder.observe("PreScore", status, fwk.profile_name, started)
        if status is not None:
            raise SchedulingError(status)
        started = now()
        totals, breakdown, status = fwk.run_score(
            state, pod, nodes, explain=ctx.explainer is not None, keep_raw=keep_raw
        )
        ctx.recorder.observe("Score", status, fwk.profile_name, started)
        if status is not None:
            raise SchedulingError(status)
        if fwk.extenders and len(feasible) > 1:  # one node (explained) is not sent to be prioritized
            extra, per_extender = await extending.prioritize(fwk.extenders, pod, nodes.infos)
            totals = totals + extra
            if breakdown is not None:
                for name, (raw, weighted) in per_extender.items():
                    breakdown.raw[name] = raw
                    breakdown.normalized[name] = raw * extending.SCORE_SCALE
                    breakdown.weighted[name] = weighted
    best = np.flatnonzero(totals == totals.max())
    choice = int(best[ctx.rng.randrange(len(best))]) if len(best) > 1 else int(best[0])
    if batching is not None:
        host = infos[int(feasible[choice])].name
        others = None
        if keep_raw:
            raw_scores = breakdown.raw if breakdown is not None else {}
            others = _sorted_others(ctx, infos, feasible, totals, raw_scores, choice)
        batching.store(host, others, len(feasible) - 1)
    return ScheduleResult(
        infos[int(feasible[choice])].name, evaluated, len(feasible), feasible, totals, breakdown, diagnosis
    )


def _rejectors(diagnosis: Diagnosis) -> None:
    if diagnosis.node_statuses is None:
        return
    for status, _ in verdict_counts(diagnosis.node_statuses):
        target = diagnosis.pending_plugins if status.code == Code.PENDING else diagnosis.unschedulable_plugins
        if status.plugin:
            target.add(status.plugin)


async def scheduling_cycle(ctx: CycleContext, fwk: Framework, qp: QueuedPodInfo, started: float) -> Any:
    """Runs the scheduling part (see the module docstring on awaiting it); returns the binding-cycle
    coroutine (or, after a preemption, the coroutine finishing its API calls and the pod's failure
    report), or None when the pod failed."""
    pod = qp.pod
    state = CycleState()
    ctx.cache.update_snapshot(ctx.snapshot)
    fwk.current_snapshot = ctx.snapshot
    batching = None
    if fwk.batch is not None:
        batching = BatchCycle(fwk.batch, pod, ctx.queue.scheduling_cycle, ctx.recorder)
    try:
        result = await schedule_pod(ctx, fwk, state, pod, batching)
    except FitError as fit_error:
        _rejectors(fit_error.diagnosis)
        nominated: str | None = CLEAR  # without a post-filter, as after any failure but one
        if fwk.post_filter:
            nominated = None  # the post-filter's result says (none: the nomination stays)
            post_started = now()
            post_result, post_status = await fwk.run_post_filter_async(
                state,
                pod,
                fit_error.diagnosis.node_statuses or StatusMap(fit_error.diagnosis.absent_status),
            )
            ctx.recorder.observe("PostFilter", post_status, fwk.profile_name, post_started)
            if _default_preemption_ran(fwk, post_status):
                ctx.recorder.preemption_attempted()
            if post_status.code == Code.ERROR:
                # As upstream: a post-filter error (preemption's dry run, an extender's preempt verb) is
                # logged and its message ends the FitError's; the pod stays unschedulable.
                log.warning("post-filter for %s: %s", pod.key, post_status.message())
            # upstream keeps the message of any outcome: a preemption under way says where (v1.37)
            fit_error.diagnosis.post_filter_message = post_status.message()
            if post_result is not None:
                nominated = post_result.nominated_node_name
                if post_result.prepare is not None and post_status.is_success:
                    # upstream's preemption executor observes every candidate it prepares
                    ctx.recorder.preemption_victims(len(post_result.victims))
                    ctx.recorder.algorithm(started)
                    if ctx.explainer is not None:
                        ctx.explainer.failure(pod, fit_error)
                    # The room is the pod's from now on; it is reported and requeued once the
                    # post-filter's API calls (preemption's evictions) are done.
                    ctx.queue.add_nominated_pod(pod, nominated)
                    return after_post_filter(ctx, fwk, qp, fit_error, post_result, started)
        ctx.recorder.algorithm(started)
        if ctx.explainer is not None:
            ctx.explainer.failure(pod, fit_error)
        handle_fit_error(ctx, fwk, qp, fit_error, nominated, started)
        return None
    except NoNodesAvailable:
        # As ``schedulingCycle`` upstream: UnschedulableAndUnresolvable with the bare error message, no
        # post-filter, no rejecting plugin (so the pod retries after backoff), nomination cleared.
        ctx.recorder.algorithm(started)
        handle_failure(ctx, fwk, qp, unresolvable(NO_NODES_AVAILABLE), CLEAR, started)
        return None
    except SchedulingError as e:
        ctx.recorder.algorithm(started)
        handle_failure(ctx, fwk, qp, e.status, CLEAR, started)
        return None
    # upstream's schedulingAlgorithm observes its latency from the attempt's start on return
    ctx.recorder.algorithm(started)
    if ctx.explainer is not None:
        ctx.explainer.success(pod, result)

    assumed = pod.bound_to(result.host)
    try:
        ctx.cache.assume_pod(assumed)
    except Exception as e:  # a cache inconsistency: report, do not crash the loop
        handle_failure(ctx, fwk, qp, error(f"assuming pod: {e}"), CLEAR, started)
        return None
    ctx.queue.delete_nominated_pod_if_exists(pod)

    step = now()
    status = fwk.run_reserve(state, assumed, result.host)
    ctx.recorder.observe("Reserve", status, fwk.profile_name, step)
    if status is not None:
        _unreserve(ctx, fwk, state, assumed, result.host)
        ctx.cache.forget_pod(assumed)
        handle_failure(ctx, fwk, qp, on_one_node(pod, status), CLEAR, started)
        return None
    step = now()
    status = fwk.run_permit(state, assumed, result.host)
    ctx.recorder.observe("Permit", status, fwk.profile_name, step)
    if status is not None and status.code != Code.WAIT:
        _unreserve(ctx, fwk, state, assumed, result.host)
        ctx.cache.forget_pod(assumed)
        handle_failure(ctx, fwk, qp, on_one_node(pod, status), CLEAR, started)
        return None
    return binding_cycle(ctx, fwk, state, qp, assumed, result.host, started)


async def binding_cycle(
    ctx: CycleContext,
    fwk: Framework,
    state: CycleState,
    qp: QueuedPodInfo,
    assumed: PodInfo,
    host: str,
    started: float,
) -> None:
    """Permit wait -> pre-bind -> bind -> post-bind (upstream's ``bindingCycle``). With the
    NominatedNodeNameForExpectation gate, pre-bind's pre-flights run first; when pre-bind has work or
    the pod waits at Permit, ``status.nominatedNodeName`` is set to the node before either. From the end
    of the Permit wait until the binding, preemption may cancel the pod (``pods_in_pre_bind``)."""
    bound = False
    in_pre_bind: PodInPreBind | None = None
    try:
        pre_flight: Status | None = None  # upstream's nil status when the gate is off: success
        status: Status | None = None
        if fwk.feature_gates.enabled(NOMINATED_NODE_NAME_FOR_EXPECTATION):
            step = now()
            pre_flight = fwk.run_pre_bind_pre_flights(state, assumed, host)
            ctx.recorder.observe("PreBindPreFlight", pre_flight, fwk.profile_name, step)
            if pre_flight is not None and pre_flight.code == Code.ERROR:
                status = pre_flight
            elif pre_flight is None or fwk.will_wait_on_permit(assumed):
                # Tells other components (the cluster autoscaler) where the pod is about to go; a pod
                # bound at once needs no announcement.
                await ctx.client.nominate(assumed, host)
        if status is None:
            waits = fwk.will_wait_on_permit(assumed)
            step = now()
            status = await fwk.wait_on_permit(assumed)
            if waits:
                ctx.recorder.permit_waited(status, step)
            if status is not None:
                status = on_one_node(assumed, status)
        if status is None:
            if pre_flight is None:  # pre-bind has work (or the gate is off): preemption may cancel it
                in_pre_bind = fwk.pods_in_pre_bind.add(assumed.uid)
            step = now()
            status = await fwk.run_pre_bind(state, assumed, host, in_pre_bind)
            ctx.recorder.observe("PreBind", status, fwk.profile_name, step)
            if status is None and in_pre_bind is not None and not in_pre_bind.mark_prebound():
                status = error(in_pre_bind.message)  # preempted while its pre-bind ended
        if status is None:
            step = now()
            status = await fwk.run_bind(state, assumed, host)
            ctx.recorder.observe("Bind", status, fwk.profile_name, step)
        if status is not None:
            _unreserve(ctx, fwk, state, assumed, host)
            try:
                ctx.cache.forget_pod(assumed)
            except CacheError as e:
                # As upstream's handleBindingCycleError: the watch showed the pod bound meanwhile (the
                # binding went through after all, or another scheduler bound it); it keeps its room.
                log.warning("binding %s: %s", assumed.key, e)
            else:
                ctx.queue.assigned_pod_deleted(assumed)  # the resources it held are free again
            cause = status.cause
            if getattr(cause, "is_gone_or_conflict", False):
                ctx.binding_conflicts += 1  # deleted or bound elsewhere: nothing to retry
                return
            handle_failure(ctx, fwk, qp, status, CLEAR, started)
            return
        bound = True
        ctx.cache.finish_binding(assumed)
        ctx.client.record_scheduled(assumed, host)
        ctx.recorder.bound(qp, host, started)
        step = now()
        await fwk.run_post_bind(state, assumed, host)
        ctx.recorder.observe("PostBind", None, fwk.profile_name, step)
    except asyncio.CancelledError:
        if not bound:  # fenced (Lease lost, or a stop's deadline passed): release as after a failed bind
            _unreserve(ctx, fwk, state, assumed, host)
            with contextlib.suppress(CacheError):
                ctx.cache.forget_pod(assumed)
        raise
    finally:
        if in_pre_bind is not None:
            fwk.pods_in_pre_bind.remove(assumed.uid)
        ctx.queue.done(assumed.uid)


async def after_post_filter(
    ctx: CycleContext,
    fwk: Framework,
    qp: QueuedPodInfo,
    fit_error: FitError,
    post_result: PostFilterResult,
    started: float,
) -> None:
    """Awaits the post-filter's API work with the pod still in flight, then reports the failure with the
    nomination and requeues the pod; events that arrived meanwhile (victims deleted) are checked then.
    Work that failed is logged and the pod retried at once, as after upstream's asynchronous preemption:
    its report and nomination stand."""
    assert post_result.prepare is not None
    executing = now()
    try:
        status = await post_result.prepare()
    except Exception as e:  # the work should report failures as statuses; do not lose the pod
        status = error(f"running PostFilter API calls: {e}", cause=e)
    failed = status is not None and not status.is_success
    if failed:
        assert status is not None
        log.warning("post-filter API calls for %s: %s", qp.pod.key, status.message())
    if any(not victim.deletion_timestamp for victim in post_result.victims):
        # upstream's preemption goroutine runs only when some victim's deletion has not begun
        ctx.recorder.preemption_executed("error" if failed else "success", POD, executing)
    handle_fit_error(ctx, fwk, qp, fit_error, post_result.nominated_node_name, started)
    if failed:
        fwk.activate([qp.pod])


def _unreserve(ctx: CycleContext, fwk: Framework, state: CycleState, pod: PodInfo, host: str) -> None:
    step = now()
    fwk.run_unreserve(state, pod, host)
    ctx.recorder.observe("Unreserve", None, fwk.profile_name, step)


def _default_preemption_ran(fwk: Framework, status: Status) -> bool:
    """Whether DefaultPreemption's post-filter was called (upstream counts its every call): post-filters
    run in order until one decides (success, unresolvable, error); an unschedulable result means all ran."""
    names = [plugin.name for plugin in fwk.post_filter]
    if DEFAULT_PREEMPTION not in names:
        return False
    if status.code == Code.UNSCHEDULABLE or status.plugin not in names:
        return True
    return names.index(DEFAULT_PREEMPTION) <= names.index(status.plugin)


def handle_fit_error(
    ctx: CycleContext,
    fwk: Framework,
    qp: QueuedPodInfo,
    fit_error: FitError,
    nominated: str | None,
    started: float,
) -> None:
    qp.unschedulable_plugins = set(fit_error.diagnosis.unschedulable_plugins)
    qp.pending_plugins = set(fit_error.diagnosis.pending_plugins)
    qp.last_failure_was_error = False
    _requeue_and_report(ctx, qp, REASON_UNSCHEDULABLE, str(fit_error), nominated, started, "unschedulable")


def on_one_node(pod: PodInfo, status: Status) -> Status:
    """A rejection at Reserve or Permit (or while waiting there) as kube-scheduler reports it: a FitError of
    the one node tried (``schedule_one.go``: ``FitError{NumAllNodes: 1}``), "0/1 nodes are available: 1
    <reason>."; errors keep their own message."""
    if not status.is_rejection:
        return status
    message = str(FitError(pod, 1, Diagnosis(absent_status=status)))
    return Status(status.code, (message,), plugin=status.plugin)


def handle_failure(
    ctx: CycleContext,
    fwk: Framework,
    qp: QueuedPodInfo,
    status: Status,
    nominated: str | None,
    started: float,
) -> None:
    if status.is_rejection:
        qp.unschedulable_plugins = {status.plugin} if status.plugin and status.code != Code.PENDING else set()
        qp.pending_plugins = {status.plugin} if status.plugin and status.code == Code.PENDING else set()
        qp.last_failure_was_error = False
        reason, result = REASON_UNSCHEDULABLE, "unschedulable"
    else:
        qp.unschedulable_plugins, qp.pending_plugins = set(), set()
        qp.last_failure_was_error = True
        reason, result = REASON_SCHEDULER_ERROR, "error"
    _requeue_and_report(ctx, qp, reason, status.message(), nominated, started, result)


def _requeue_and_report(
    ctx: CycleContext,
    qp: QueuedPodInfo,
    reason: str,
    message: str,
    nominated: str | None,
    started: float,
    result: str,
) -> None:
    pod = qp.pod
    # Requeues the pod and ends its attempt; None when it was deleted meanwhile. A deleted pod still gets
    # its FailedScheduling event, as handleSchedulingFailure writes it whether or not the pod is in the
    # informer cache, but no nomination (it would hold room for a pod that no longer exists).
    requeued = ctx.queue.add_unschedulable_if_not_present(qp) is not None
    if requeued and nominated is not None:  # "" clears a nomination
        ctx.queue.add_nominated_pod(qp.pod, nominated)
    ctx.client.record_failure(pod, reason, truncate_event_message(message), nominated if requeued else None)
    ctx.recorder.failed(qp, reason, message, result, started)


def now() -> float:
    return time.perf_counter()
