"""Preemption victims as units (kube-scheduler v1.37.2 ``framework/preemption/types.go`` and ``util.go``, with
CompositePodGroup off): the pods that are preempted together, the priority they are preempted at, and
the order in which they are offered back.

Without GenericWorkload every pod is a victim of its own, at its own priority. With it, a pod naming a
PodGroup the scheduler has seen has that group's priority (``GetPodPriority``), and the scheduled pods of a
PodGroup whose ``spec.disruptionMode`` is ``all`` are one victim, on whichever nodes they run
(``getCrossNodesVictims``). Both single-pod preemption (its victims on one node) and pod group preemption
(the whole cluster) build their victims here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kopf_scheduler.framework.disruption_budgets import DisruptionBudget
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects.workload_pod_groups import (
    PodGroupManager,
    pod_group_priority,
    scheduling_group,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.preemption import pod_start_time

#: victim kinds, ranked as ``victimRank``: a pod naming a PodGroup counts as of its group
POD = 1
POD_GROUP = 2


@dataclass(slots=True)
class Victim:
    """Pods that are preempted together (upstream's ``DomainVictim``)."""

    pods: list[PodInfo]
    priority: int
    rank: int
    earliest_start: float
    #: the nodes the pods run on (``AffectedNodes``)
    nodes: set[str] = field(default_factory=set)

    @property
    def is_group(self) -> bool:
        return self.rank == POD_GROUP


def pod_priority(pod: PodInfo, groups: PodGroupManager) -> int:
    """``GetPodPriority``: the priority of the PodGroup the pod names, when it is seen; else the pod's."""
    name = scheduling_group(pod)
    group = None if name is None else groups.pod_group(pod.namespace, name)
    return pod.priority if group is None else pod_group_priority(group)


def _victim(pods: list[PodInfo], priority: int, rank: int, now: float) -> Victim:
    return Victim(
        pods,
        priority,
        rank,
        min(pod_start_time(p, now) for p in pods),
        {p.node_name for p in pods},
    )


def pod_victims(pods: Iterable[PodInfo], now: float) -> list[Victim]:
    """Every pod a victim of its own, at its own priority (GenericWorkload off: ``NewPodVictim`` without a
    PodGroup lister)."""
    return [Victim([p], p.priority, POD, pod_start_time(p, now), {p.node_name}) for p in pods]


def domain_victims(nodes: Sequence[NodeInfo], groups: PodGroupManager, now: float) -> list[Victim]:
    """``getCrossNodesVictims``: node by node, pod by pod; a group preempted whole is listed once, with
    all its scheduled pods (a pod on its own when the group's state lists none)."""
    seen: set[str] = set()
    victims: list[Victim] = []
    for node in nodes:
        for pod in node.pods.values():
            name = scheduling_group(pod)
            group = None if name is None else groups.pod_group(pod.namespace, name)
            rank = POD if name is None else POD_GROUP
            if group is None or not group.disruption_all:
                if pod.uid not in seen:
                    seen.add(pod.uid)
                    victims.append(_victim([pod], pod_priority(pod, groups), rank, now))
                continue
            key = f"podgroup/{group.namespace}/{group.name}"
            if key in seen:
                continue
            seen.add(key)
            state = groups.state(group.namespace, group.name)
            members = list(state.scheduled_pods()) if state is not None else []
            victims.append(_victim(members or [pod], pod_group_priority(group), POD_GROUP, now))
    return victims


def importance(victim: Victim) -> tuple[int, int, int, float]:
    """Sort key, most important first (``MoreImportantVictim``): higher priority, then a group's pods
    before lone pods, then more pods, then the longer running."""
    return (-victim.priority, -victim.rank, -len(victim.pods), victim.earliest_start)


def violates(pod: PodInfo, pdbs: Sequence[DisruptionBudget], allowed: list[int]) -> bool:
    """Whether evicting ``pod`` exceeds a budget, counting down ``allowed`` (one entry per budget) for
    every matching budget up to the first one it exceeds; a pod a budget lists as disrupted is not
    counted again."""
    if not pod.labels:
        return False
    for i, budget in enumerate(pdbs):
        if not budget.covers(pod.namespace, pod.labels) or pod.name in budget.disrupted_pods:
            continue
        allowed[i] -= 1
        if allowed[i] < 0:
            return True
    return False


def split_by_budgets(
    victims: Sequence[Victim], pdbs: Sequence[DisruptionBudget]
) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """``FilterVictimsWithPDBViolation``: a victim with any pod exceeding a budget violates (with how many
    of its pods do); the budgets are counted down pod by pod, in order."""
    allowed = [b.disruptions_allowed for b in pdbs]
    violating: list[tuple[Victim, int]] = []
    others: list[Victim] = []
    for victim in victims:
        count = sum(1 for pod in victim.pods if violates(pod, pdbs, allowed))
        if count:
            violating.append((victim, count))
        else:
            others.append(victim)
    return violating, others
