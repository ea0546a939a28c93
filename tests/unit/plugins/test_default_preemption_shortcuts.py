"""For a pod no pre-filter extension follows, filtering with nominated pods and preemption's dry run take
shortcuts: the cycle state is not copied, and a snapshot node with its nominated pods is copied once and
kept for the next pod. They must reach the verdicts of the general path, which copies the state and runs
the extensions for every pod added or removed: the same filter statuses, nominated node and victims, on
random clusters with nominations, pod after pod."""

from __future__ import annotations

import random
from typing import Any

import pytest
from _preemption_kit import Harness, node

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import PreFilterExtensions
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status
from kopf_scheduler.testing import make_pod


class Follows(PreFilterExtensions):
    """An extension that follows pods coming and going and changes nothing: it forces the general path."""

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        return None

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None:
        return None


def _cluster(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[str, str]]]:
    nodes = [node(f"n{i}", cpu="4") for i in range(rng.randint(3, 8))]
    pods, nominations = [], []
    for i, n in enumerate(nodes):
        name = n["metadata"]["name"]
        for j in range(rng.randint(0, 4)):
            builder = make_pod().name(f"p{i}-{j}").uid(f"p{i}-{j}").node(name)
            builder.priority(rng.choice((0, 5, 10))).req(cpu=f"{rng.choice((500, 900, 1500))}m")
            pods.append(builder.obj())
        if rng.random() < 0.5:
            nominations.append((f"nom{i}", name))
    return nodes, pods, nominations


def _verdicts(seed: int, general: bool) -> list[tuple[Any, ...]]:
    """Four pods in turn: each is filtered and, when no node fits, preempts; the outcome is applied (the
    pod nominated, its victims deleted) before the next."""
    rng = random.Random(seed)
    nodes, pods, nominations = _cluster(rng)
    harness = Harness(nodes, pods, seed=seed)
    framework = harness.framework
    if general:
        framework.pre_filter_extensions = lambda state: [("Follows", Follows())]  # type: ignore[method-assign]
    for name, node_name in nominations:
        nominee = make_pod().name(name).uid(name).priority(rng.choice((5, 10, 15))).req(cpu=rng.choice("12"))
        framework.nominator.add_nominated_pod(PodInfo(nominee.obj()), node_name)
    verdicts: list[tuple[Any, ...]] = []
    for k in range(4):
        pod = PodInfo(make_pod().name(f"new{k}").uid(f"new{k}").priority(10).req(cpu=rng.choice("23")).obj())
        try:
            state, fit_error = harness.fail(pod)
        except AssertionError:  # a node fits
            verdicts.append(("fits",))
            continue
        statuses = fit_error.diagnosis.node_statuses
        assert statuses is not None
        result, status = harness.plugin.post_filter(state, pod, statuses)
        victims = [v.uid for v in result.victims] if result else []
        nominated = result.nominated_node_name if result else ""
        verdicts.append((str(fit_error), nominated, victims, status))
        if nominated:
            framework.nominator.add_nominated_pod(pod, nominated)
            for uid in victims:
                harness.sched.delete_pod(harness.cluster.pods.pop(uid))
    return verdicts


@pytest.mark.parametrize("seed", range(40))
def test_shortcuts_reach_the_general_paths_verdicts(seed: int) -> None:
    assert _verdicts(seed, general=False) == _verdicts(seed, general=True)
