"""Preemption's generic part (upstream's ``framework/preemption``): from the filter verdicts to the node to
nominate and the victims to evict. A preemption plugin supplies the policy (``PreemptionPolicy``): who may
preempt, which pods on a node must go, how many candidate nodes to try and from where.

Steps, as kube-scheduler v1.37 runs them:

1. The pod must be eligible (the plugin says why not: the reason becomes the post-filter message).
2. Candidates: only nodes the filters rejected as ``Unschedulable`` (``UnschedulableAndUnresolvable``
   nodes cannot be helped by removing pods). A dry run on copies of the node and of the cycle state, from
   the plugin's offset, until the plugin's number of candidates is found with at least one that violates
   no PodDisruptionBudget. A node that fits with no victim at all is an error; nodes that cannot be helped
   keep the status the dry run gave them.
3. No candidate: the pod stays unschedulable; the message is a nested ``FitError`` over all nodes, where
   nodes the dry run did not try count as ``Preemption is not helpful for scheduling``, and any previous
   nomination is cleared.
4. Extenders with a preempt verb may drop candidates or change their victims (``call_extenders``), each
   in turn over what the one before kept; an extender that fails ends preemption with its error unless it
   is ignorable. Then the best candidate (``pick_one_node_for_preemption``) is nominated, with the message
   ``found a potential placement for pod on node <node>, preempting <n> victims``. Lower-priority pods
   nominated to that node lose their nomination and its victims are preempted: deleted, or stopped in the
   scheduler's memory when they wait at Permit or are in PreBind (v1.36 on): ``prepare_candidate``, which
   the scheduler awaits outside the scheduling cycle while the preemptor stays in flight, so it is not
   retried before the API calls are done.

Dry runs go through the nodes one by one in a fixed order; kube-scheduler runs them in parallel, so which
candidates it finds first may differ, never what a candidate is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.diagnosis import Diagnosis, FitError, verdict_counts
from kopf_scheduler.framework.disruption_budgets import DisruptionBudget
from kopf_scheduler.framework.eager import run_eagerly
from kopf_scheduler.framework.extenders import ExtenderError
from kopf_scheduler.framework.handle import Handle, PodNominator
from kopf_scheduler.framework.interface import NodeStatusMap, PostFilterResult
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo, parse_timestamp
from kopf_scheduler.framework.runtime.recorder import POD
from kopf_scheduler.framework.status import Code, Status, error, unresolvable, unschedulable

#: the status of every node the dry run did not try (upstream's absent-node status for preemption)
NOT_HELPFUL = "Preemption is not helpful for scheduling"
#: the message a victim waiting at Permit is stopped with
PREEMPTED = "preempted"


def stop_in_memory(handle: Handle, plugin_name: str, victim: PodInfo) -> bool:
    """Stops a victim that waits at Permit (its wait fails) or in PreBind (its binding is cancelled); False
    when it does neither, or its wait or pre-bind ended just now: then it is to be deleted."""
    waiting = handle.waiting_pods.get(victim.uid)
    if waiting is not None:
        return waiting.preempt(plugin_name, PREEMPTED)
    binding = handle.pods_in_pre_bind.get(victim.uid)
    return binding is not None and binding.cancel_pod(f"preempted by {plugin_name}")


#: added to every priority when summing victims' priorities, so that negative priorities sum sensibly
PRIORITY_OFFSET = 2**31
_START_TIME_KEY = "preemption/startTime"


class PreemptionPolicy(Protocol):
    """What a preemption plugin decides (upstream's ``preemption.Interface``)."""

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """Where the dry run starts among ``num_nodes`` potential nodes, and how many candidates it wants."""

    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, nominated: str, nominated_status: Status | None
    ) -> tuple[bool, str]:
        """Whether ``pod`` (nominated to ``nominated``, or "") may preempt at all; when not, the reason."""

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, pdbs: Sequence[DisruptionBudget], now: float
    ) -> tuple[list[PodInfo], int, Status | None]:
        """The fewest pods to remove from ``node`` (a copy, as is ``state``) so ``pod`` fits, most
        important first, and how many of them violate a PodDisruptionBudget; or why the node cannot
        help."""


@dataclass(slots=True)
class Candidate:
    name: str
    #: most important first
    victims: list[PodInfo]
    num_pdb_violations: int = 0


class StatusMap:
    """Node verdicts by name, with a status for every node not listed (upstream's ``NodeToStatus``)."""

    def __init__(self, absent: Status | None = None) -> None:
        self.known: dict[str, Status] = {}
        self.absent = absent

    def get(self, name: str) -> Status | None:
        return self.known.get(name)

    def items(self) -> Iterator[tuple[str, Status]]:
        return iter(list(self.known.items()))

    def __len__(self) -> int:
        return len(self.known)


def pod_start_time(pod: PodInfo, now: float) -> float:
    """``status.startTime`` in epoch seconds; ``now`` for a pod that has not started (upstream's
    ``GetPodStartTime``)."""
    extra = pod.extra
    if _START_TIME_KEY not in extra:
        status = pod.raw.get("status")
        raw = status.get("startTime") if isinstance(status, Mapping) else None
        try:
            extra[_START_TIME_KEY] = parse_timestamp(raw) if raw else None
        except ValueError:
            extra[_START_TIME_KEY] = None
    started = extra[_START_TIME_KEY]
    return now if started is None else started


def importance_key(now: float) -> Callable[[PodInfo], tuple[int, float]]:
    """A sort key putting more important pods first: higher priority, then the longer running
    (upstream's ``MoreImportantPod``)."""
    return lambda pod: (-pod.priority, pod_start_time(pod, now))


def earliest_start_of_highest_priority(victims: Sequence[PodInfo], now: float) -> float:
    """The earliest start time among the victims of the highest priority (``GetEarliestPodStartTime``)."""
    top = max(p.priority for p in victims)
    return min(pod_start_time(p, now) for p in victims if p.priority == top)


def pick_one_node_for_preemption(candidates: Sequence[Candidate], now: float) -> str:
    """The candidate to nominate: fewest PDB violations, then the lowest highest-victim priority, the
    lowest sum of victim priorities, the fewest victims, the latest start of the highest-priority
    victims; the first of any remaining tie."""
    if not candidates:
        return ""
    criteria = (
        lambda c: -c.num_pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(p.priority + PRIORITY_OFFSET for p in c.victims),
        lambda c: -len(c.victims),
        lambda c: earliest_start_of_highest_priority(c.victims, now),
    )
    remaining = list(candidates)
    for score in criteria:
        scores = [score(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
        if len(remaining) == 1:
            break
    return remaining[0].name


def placement_found(node_name: str, num_victims: int) -> str:
    """The message of a preemption under way (v1.37), which ends the preemptor's FailedScheduling event."""
    return f"found a potential placement for pod on node {node_name}, preempting {num_victims} victims"


def lower_priority_nominated_pods(nominator: PodNominator, pod: PodInfo, node_name: str) -> list[PodInfo]:
    return [p for p in nominator.nominated_pods_for_node(node_name) if p.priority < pod.priority]


def _aggregate(messages: list[str]) -> str:
    """Several errors read as upstream's aggregate error: ``[a, b]``."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


@dataclass
class Evaluator:
    plugin_name: str
    handle: Handle
    policy: PreemptionPolicy
    #: candidates of the last dry run, for tests and explanations
    last_candidates: list[Candidate] = field(default_factory=list)

    def preempt(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap, now: float
    ) -> tuple[PostFilterResult | None, Status]:
        """``(result, status)``: success with the node to nominate; unschedulable with the reason (and a
        result clearing the nomination when no node can help); error when the dry run (or an extender)
        failed. Profiles with extenders need ``preempt_async``."""
        return run_eagerly(self.preempt_async(state, pod, statuses, now))

    async def preempt_async(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap, now: float
    ) -> tuple[PostFilterResult | None, Status]:
        """``preempt``, awaiting the extenders' preempt verb. The search is timed (upstream's
        ``evaluate``: everything but the victims' preemption), and the candidate acted on reported."""
        recorder = self.handle.recorder
        started = time.perf_counter()
        result, status = await self._evaluate(state, pod, statuses, now)
        recorder.preemption_evaluated(POD, status, started)
        return result, status

    async def _evaluate(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap, now: float
    ) -> tuple[PostFilterResult | None, Status]:
        nominated = self.handle.nominator.nominated_node_of(pod)
        nominated_status = _status_of(statuses, nominated) if nominated else None
        eligible, reason = self.policy.pod_eligible_to_preempt_others(pod, nominated, nominated_status)
        if not eligible:
            return None, unschedulable(reason)
        all_nodes = self.handle.snapshot().node_infos
        if not all_nodes:  # nothing to preempt on; kube-scheduler does not even get here
            return None, Status(Code.UNSCHEDULABLE)
        candidates, dry_run, errors = self.find_candidates(state, pod, all_nodes, statuses, now)
        self.last_candidates = candidates
        if errors and not candidates:
            return None, error(_aggregate(errors))
        if not candidates:
            dry_run.absent = unresolvable(NOT_HELPFUL)
            diagnosis = Diagnosis(node_statuses=dry_run, absent_status=dry_run.absent)
            return PostFilterResult(""), unschedulable(str(FitError(pod, len(all_nodes), diagnosis)))
        candidates, status = await self.call_extenders(pod, candidates)
        if status is not None:
            return None, status
        if not candidates:
            return None, unschedulable("no candidate node for preemption")
        self.last_candidates = candidates
        best = self.select_candidate(candidates, now)
        # the pod's victims are counted by the scheduler (``preemption_victims``), with the attempt
        self.handle.recorder.preemption_candidate(POD, len(best.victims), 0, best.num_pdb_violations)
        return (
            PostFilterResult(
                best.name, list(best.victims), prepare=lambda: self.prepare_candidate(best, pod)
            ),
            Status(Code.SUCCESS, (placement_found(best.name, len(best.victims)),)),
        )

    def find_candidates(
        self,
        state: CycleState,
        pod: PodInfo,
        all_nodes: Sequence[NodeInfo],
        statuses: NodeStatusMap,
        now: float,
    ) -> tuple[list[Candidate], StatusMap, list[str]]:
        potential = _nodes_with_code(all_nodes, statuses, Code.UNSCHEDULABLE)
        if not potential:
            return [], StatusMap(), []
        offset, wanted = self.policy.get_offset_and_num_candidates(len(potential))
        return self.dry_run_preemption(state, pod, potential, self.handle.pdbs(), offset, wanted, now)

    def dry_run_preemption(
        self,
        state: CycleState,
        pod: PodInfo,
        potential: Sequence[NodeInfo],
        pdbs: Sequence[DisruptionBudget],
        offset: int,
        wanted: int,
        now: float,
    ) -> tuple[list[Candidate], StatusMap, list[str]]:
        """Tries the potential nodes from ``offset`` on; stops once ``wanted`` candidates are found and at
        least one of them violates no budget. Candidates violating no budget come first."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        dry_run = StatusMap()
        errors: list[str] = []
        count = len(potential)
        for i in range(count):
            node = potential[(offset + i) % count].clone()
            victims, violations, status = self.policy.select_victims_on_node(
                state.clone(), pod, node, pdbs, now
            )
            if status is None and victims:
                kept = non_violating if violations == 0 else violating
                if len(kept) < wanted:
                    kept.append(Candidate(node.name, victims, violations))
                if non_violating and len(non_violating) + len(violating) >= wanted:
                    break
                continue
            if status is None:
                status = error(f'expected at least one victim pod on node "{node.name}"')
            if status.code == Code.ERROR:
                errors.append(status.message())
            dry_run.known[node.name] = status
        return non_violating + violating, dry_run, errors

    async def call_extenders(
        self, pod: PodInfo, candidates: list[Candidate]
    ) -> tuple[list[Candidate], Status | None]:
        """The candidates the extenders with a preempt verb keep (upstream's ``callExtenders``): each
        interested one answers for the candidates the previous one kept; an answer with a node and no
        victims is an error (skipped, for an ignorable extender). An extender that fails ends preemption
        with its error, unless it is ignorable."""
        extenders = [e for e in self.handle.extenders if e.supports_preemption]
        if not extenders:
            return candidates, None
        victims: dict[str, tuple[list[PodInfo], int]] = {
            c.name: (list(c.victims), c.num_pdb_violations) for c in candidates
        }
        snapshot = self.handle.snapshot()
        for extender in extenders:
            if not extender.is_interested(pod):
                continue
            try:
                answer = await extender.process_preemption(pod, victims, snapshot)
            except ExtenderError as e:
                if extender.is_ignorable:
                    continue
                return [], error(str(e), cause=e)
            kept: dict[str, tuple[list[PodInfo], int]] = {}
            for node_name, entry in answer.items():
                if entry is None or not entry[0]:
                    if extender.is_ignorable:
                        continue
                    return [], error(f'expected at least one victim pod on node "{node_name}"')
                kept[node_name] = entry
            victims = kept
            if not victims:
                break
        return [Candidate(name, pods, violations) for name, (pods, violations) in victims.items()], None

    def select_candidate(self, candidates: Sequence[Candidate], now: float) -> Candidate:
        if len(candidates) == 1:
            return candidates[0]
        name = pick_one_node_for_preemption(candidates, now)
        return next((c for c in candidates if c.name == name), candidates[0])

    async def prepare_candidate(self, candidate: Candidate, pod: PodInfo) -> Status | None:
        """Preempts the victims as upstream's asynchronous preemption does (``prepareCandidateAsync``):
        victims already terminating are left alone, and with none left nothing else is done; else
        lower-priority pods nominated to the node lose their nomination first, then every victim but the
        last is preempted at once, and the last one after them unless one of them failed. The first
        failure is returned as an error status. When the last victim was stopped in the scheduler's
        memory, no deletion will wake the preemptor: it is activated."""
        handle = self.handle
        victims = [v for v in candidate.victims if not v.deletion_timestamp]
        if not victims:
            return None  # their graceful deletion has begun: another call would change nothing
        nominator = handle.nominator
        for nominee in lower_priority_nominated_pods(nominator, pod, candidate.name):
            nominator.add_nominated_pod(nominee, "")
            if nominee.nominated_node_name:
                handle.client.clear_nominated_node_name(nominee)
        outcomes = await asyncio.gather(
            *(self.preempt_pod(v, pod, candidate.name) for v in victims[:-1]), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                return error(str(outcome), plugin=self.plugin_name, cause=outcome)
        try:
            in_memory = await self.preempt_pod(victims[-1], pod, candidate.name)
        except Exception as e:
            return error(str(e), plugin=self.plugin_name, cause=e)
        if in_memory:
            handle.activate([pod])
        return None

    async def preempt_pod(self, victim: PodInfo, pod: PodInfo, node_name: str) -> bool:
        """Preempts one victim (upstream's ``PreemptPod``); True when that happened in the scheduler's
        memory: a victim waiting at Permit fails its wait with an error, one in PreBind has its binding
        cancelled. Any other victim, or one whose wait or pre-bind ended just now, is deleted."""
        handle = self.handle
        if stop_in_memory(handle, self.plugin_name, victim):
            handle.client.record_preempted_in_memory(victim, pod, node_name)
            return True
        await handle.client.evict(victim, pod, node_name)
        return False


def _status_of(statuses: NodeStatusMap, name: str) -> Status | None:
    status = statuses.get(name)
    return status if status is not None else getattr(statuses, "absent", None)


def _nodes_with_code(nodes: Sequence[NodeInfo], statuses: NodeStatusMap, code: Code) -> list[NodeInfo]:
    """The nodes whose verdict has ``code``, in snapshot order; nodes without a verdict have the map's
    ``absent`` status, when it has one (upstream's ``NodesForStatusCode``)."""
    absent: Status | None = getattr(statuses, "absent", None)
    if (absent is None or absent.code != code) and all(s.code != code for s, _ in verdict_counts(statuses)):
        return []  # e.g. every node rejected as unresolvable: no scan of thousands of verdicts
    verdicts = dict(statuses.items())
    if absent is not None and absent.code == code:
        return [n for n in nodes if verdicts.get(n.name, absent).code == code]
    if not verdicts:
        return []
    return [n for n in nodes if (status := verdicts.get(n.name)) is not None and status.code == code]
