"""Which pods must leave a node for the preemptor to fit (``SelectVictimsOnNode`` upstream).

All lower-priority pods are removed from a copy of the node, with the pre-filter extensions told, so that
inter-pod affinity and topology spreading counts follow. If the preemptor still does not fit, the node
cannot help. Otherwise the removed pods are offered back, most important first, budget-violating ones
before the others, and each that still lets the preemptor fit is reprieved; the rest are the victims.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.disruption_budgets import DisruptionBudget
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.preemption import importance_key
from kopf_scheduler.framework.status import Status, error, unresolvable

#: the dry-run verdict on a node without any pod of lower priority
NO_VICTIMS = "No preemption victims found for incoming pod"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


def may_preempt(victim: PodInfo, preemptor: PodInfo) -> bool:
    """Only pods of strictly lower priority can be preempted (``isPreemptionAllowed``)."""
    return victim.priority < preemptor.priority


def terminating_by_preemption(pod: PodInfo) -> bool:
    """Being deleted because the scheduler preempted it: ``deletionTimestamp`` set and the first
    ``DisruptionTarget`` condition is ``True`` with reason ``PreemptionByScheduler``."""
    if not pod.deletion_timestamp:
        return False
    status = pod.raw.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions or ():
        if isinstance(condition, Mapping) and condition.get("type") == DISRUPTION_TARGET:
            return condition.get("status") == "True" and condition.get("reason") == PREEMPTION_BY_SCHEDULER
    return False


def filter_pods_with_pdb_violation(
    pods: Iterable[PodInfo], pdbs: Sequence[DisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """Splits ``pods`` (order kept) into those whose eviction would exceed a budget and the others
    (upstream's ``FilterVictimsWithPDBViolation``, ``framework/preemption/util.go`` at v1.37.2, one pod per
    victim).

    The matching budgets are counted down per pod, in order, up to the first one the pod exceeds: the
    budgets after it are not counted down for that pod. So the second pod of a budget allowing one
    disruption violates it, and a pod the budget already lists as disrupted is not counted again.
    """
    allowed = [b.disruptions_allowed for b in pdbs]
    violating: list[PodInfo] = []
    others: list[PodInfo] = []
    for pod in pods:
        (violating if _violates(pod, pdbs, allowed) else others).append(pod)
    return violating, others


def _violates(pod: PodInfo, pdbs: Sequence[DisruptionBudget], allowed: list[int]) -> bool:
    if not pod.labels:
        return False
    for i, budget in enumerate(pdbs):
        if not budget.covers(pod.namespace, pod.labels) or pod.name in budget.disrupted_pods:
            continue
        allowed[i] -= 1
        if allowed[i] < 0:
            return True
    return False


def _unfollowed(state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> None:
    return None


def select_victims_on_node(
    handle: Handle,
    state: CycleState,
    pod: PodInfo,
    node: NodeInfo,
    pdbs: Sequence[DisruptionBudget],
    now: float,
) -> tuple[list[PodInfo], int, Status | None]:
    """``(victims most important first, how many violate a budget, None)``, or ``([], 0, why not)``.

    ``node`` and ``state`` are the caller's copies and are changed.
    """
    potential = [p for p in node.pods.values() if may_preempt(p, pod)]
    if not potential:
        return [], 0, unresolvable(NO_VICTIMS)
    # looked up once: the handle forwards every attribute access to the framework
    fits = handle.run_filter_with_nominated_pods
    removed: Callable[[CycleState, PodInfo, PodInfo, NodeInfo], None] = _unfollowed
    added: Callable[[CycleState, PodInfo, PodInfo, NodeInfo], None] = _unfollowed
    if handle.pre_filter_extensions(state):  # else no plugin follows pods coming and going for this pod
        removed = handle.run_pre_filter_remove_pod
        added = handle.run_pre_filter_add_pod
    try:
        for victim in potential:
            node.remove_pod(victim)
            removed(state, pod, victim, node)
        status = fits(state, pod, node)
        if status is not None:
            return [], 0, status
        key = importance_key(now)
        potential.sort(key=key)
        violating, others = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []

        def reprieve(candidate: PodInfo) -> bool:
            node.add_pod(candidate)
            added(state, pod, candidate, node)
            if fits(state, pod, node) is None:
                return True
            node.remove_pod(candidate)
            removed(state, pod, candidate, node)
            victims.append(candidate)
            return False

        violations = sum(1 for candidate in violating if not reprieve(candidate))
        for candidate in others:
            reprieve(candidate)
    except RuntimeError as e:  # a pre-filter extension failed
        return [], 0, error(str(e))
    if violating and others:
        victims.sort(key=key)
    return victims, violations, None
