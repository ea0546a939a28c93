"""Which pods must leave a node for the preemptor to fit (``SelectVictimsOnNode`` upstream).

All lower-priority pods are removed from a copy of the node, with the pre-filter extensions told, so that
inter-pod affinity and topology spreading counts follow. If the preemptor still does not fit, the node
cannot help. Otherwise the removed pods are offered back, most important first, budget-violating ones
before the others, and each that still lets the preemptor fit is reprieved; the rest are the victims.
The pods are taken and offered back as victims (``domain.Victim``): one pod each, or, with
GenericWorkload, a PodGroup with ``disruptionMode: all`` whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.disruption_budgets import DisruptionBudget
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, error, unresolvable
from kopf_scheduler.plugins.default_preemption.domain import (
    Victim,
    domain_victims,
    importance,
    pod_victims,
    split_by_budgets,
    violates,
)

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
        (violating if violates(pod, pdbs, allowed) else others).append(pod)
    return violating, others


def _unfollowed(state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> None:
    return None


def node_info_missing(name: str) -> str:
    """The dry run's error for a victim on a node the snapshot lacks."""
    return (
        f'failed to get node info for node "{name}" from snapshot: nodeinfo not found for node name "{name}"'
    )


def _other_nodes(
    handle: Handle, node: NodeInfo, victims: Sequence[Victim], hosts: dict[str, NodeInfo]
) -> str | None:
    """Fills ``hosts`` with the snapshot's nodes the victims run on besides ``node``; the name of one the
    snapshot lacks, if any (``newDomainVictim``'s error)."""
    snapshot = handle.snapshot()
    for victim in victims:
        for name in victim.nodes:
            if name == node.name or name in hosts:
                continue
            held = snapshot.get(name)
            if held is None:
                return name
            hosts[name] = held
    return None


def select_victims_on_node(
    handle: Handle,
    state: CycleState,
    pod: PodInfo,
    node: NodeInfo,
    pdbs: Sequence[DisruptionBudget],
    now: float,
    generic_workload: bool = False,
) -> tuple[list[PodInfo], int, Status | None]:
    """``(victims most important first, how many violate a budget, None)``, or ``([], 0, why not)``.

    ``node`` and ``state`` are the caller's copies and are changed. With ``generic_workload`` the victims
    are those of ``domain.domain_victims``: a PodGroup preempted whole takes its pods on other nodes
    along, which the pre-filter extensions are told of on their own nodes (left unchanged, as upstream:
    only this node's filters run).
    """
    hosts: dict[str, NodeInfo] = {}  # the other nodes a PodGroup preempted whole runs on
    if generic_workload:
        candidates = domain_victims([node], handle.pod_groups, now)
        missing = _other_nodes(handle, node, candidates, hosts)
        if missing is not None:
            return [], 0, error(node_info_missing(missing))
        potential = [v for v in candidates if v.priority < pod.priority]
    else:
        potential = pod_victims((p for p in node.pods.values() if may_preempt(p, pod)), now)
    if not potential:
        return [], 0, unresolvable(NO_VICTIMS)
    here = dict(node.pods)  # this node's pods, by UID: those it holds are taken off it, not just told
    # looked up once: the handle forwards every attribute access to the framework
    fits = handle.run_filter_with_nominated_pods
    removed: Callable[[CycleState, PodInfo, PodInfo, NodeInfo], None] = _unfollowed
    added: Callable[[CycleState, PodInfo, PodInfo, NodeInfo], None] = _unfollowed
    if handle.pre_filter_extensions(state):  # else no plugin follows pods coming and going for this pod
        removed = handle.run_pre_filter_remove_pod
        added = handle.run_pre_filter_add_pod

    def take(victim: Victim) -> None:
        for member in victim.pods:
            local = here.get(member.uid)
            if local is not None:
                node.remove_pod(local)
                removed(state, pod, local, node)
            else:
                removed(state, pod, member, hosts[member.node_name])

    def give_back(victim: Victim) -> None:
        for member in victim.pods:
            local = here.get(member.uid)
            if local is not None:
                node.add_pod(local)
                added(state, pod, local, node)
            else:
                added(state, pod, member, hosts[member.node_name])

    try:
        for victim in potential:
            take(victim)
        status = fits(state, pod, node)
        if status is not None:
            return [], 0, status
        potential.sort(key=importance)
        violating, others = split_by_budgets(potential, pdbs)
        victims: list[Victim] = []

        def reprieve(candidate: Victim) -> bool:
            give_back(candidate)
            if fits(state, pod, node) is None:
                return True
            take(candidate)
            victims.append(candidate)
            return False

        violations = sum(count for candidate, count in violating if not reprieve(candidate))
        for candidate in others:
            reprieve(candidate)
    except RuntimeError as e:  # a pre-filter extension failed
        return [], 0, error(str(e))
    if violating and others:
        victims.sort(key=importance)
    return [member for victim in victims for member in _here_first(victim.pods, here)], violations, None


def _here_first(pods: list[PodInfo], here: Mapping[str, PodInfo]) -> list[PodInfo]:
    """A group's pods, those on this node first. kube-scheduler lists them in no set order (a map's) and
    preempts the last victim after the others, holding the preemptor back until that one's deletion has
    begun; here the preemptor is retried on the deletions seen meanwhile, so the last one is best not on
    the node it waits for (it would find that pod there still terminating)."""
    if len(pods) < 2:
        return pods
    return sorted(pods, key=lambda p: p.uid not in here)
