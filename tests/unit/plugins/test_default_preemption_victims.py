"""Victims on one node (``SelectVictimsOnNode``): all lower-priority pods out, then reprieved most
important first, budget-violating ones before the others; and the PodDisruptionBudget accounting
(``FilterVictimsWithPDBViolation``, v1.37.2)."""

from __future__ import annotations

from typing import Any

import pytest
from _preemption_kit import NOW, Harness, node

from kopf_scheduler.framework.disruption_budgets import DisruptionBudget
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status, unresolvable
from kopf_scheduler.plugins.default_preemption import NO_VICTIMS
from kopf_scheduler.plugins.default_preemption.victims import (
    filter_pods_with_pdb_violation,
    select_victims_on_node,
)
from kopf_scheduler.testing import make_pod

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T01:00:00Z"


def pdb(
    name: str, allowed: int, namespace: str = "default", disrupted: tuple[str, ...] = (), **labels: str
) -> Any:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {"disruptionsAllowed": allowed, "disruptedPods": {p: T0 for p in disrupted}},
    }


def pod(name: str, namespace: str = "default", **labels: str) -> PodInfo:
    builder = make_pod().name(name).namespace(namespace)
    for key, value in labels.items():
        builder = builder.label(key, value)
    return PodInfo(builder.obj())


def budgets(*objs: Any) -> list[DisruptionBudget]:
    return [DisruptionBudget.parse(o) for o in objs]


@pytest.mark.parametrize(
    ("pods", "pdbs", "violating"),
    [
        pytest.param([pod("a", app="x")], [], [], id="no-budgets"),
        pytest.param([pod("a", app="x")], [pdb("b", 0, app="x")], ["a"], id="none-allowed"),
        pytest.param(
            [pod("a", app="x"), pod("b", app="x")], [pdb("b", 1, app="x")], ["b"], id="counted-down"
        ),
        pytest.param([pod("a", "other", app="x")], [pdb("b", 0, app="x")], [], id="other-namespace"),
        pytest.param([pod("a")], [pdb("b", 0)], [], id="no-labels-match-nothing"),
        pytest.param([pod("a", app="x")], [pdb("b", 0)], [], id="empty-selector-matches-nothing"),
        pytest.param(
            [pod("a", app="x")], [pdb("b", 0, disrupted=("a",), app="x")], [], id="already-disrupted"
        ),
        pytest.param(
            [pod("a", app="x", tier="t"), pod("b", app="x", tier="t")],
            [pdb("one", 5, app="x"), pdb("two", 1, tier="t")],
            ["b"],
            id="any-budget-exhausted",
        ),
        pytest.param(
            [pod("a", app="x")],
            [
                {
                    "metadata": {"name": "bad"},
                    "spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "Bad"}]}},
                }
            ],
            [],
            id="invalid-selector",
        ),
    ],
)
def test_filter_pods_with_pdb_violation(pods: list[PodInfo], pdbs: list[Any], violating: list[str]) -> None:
    bad, good = filter_pods_with_pdb_violation(pods, budgets(*pdbs))
    assert [p.name for p in bad] == violating
    assert [p.name for p in good] == [p.name for p in pods if p.name not in violating]


# upstream's TestFilterVictimsWithPDBViolation (framework/preemption/util_test.go at v1.37.2); a pod group
# victim's ViolateCount is the number of its pods listed here as violating
UPSTREAM_PDB_CASES = [
    ("no victims, no PDBs", [], [], []),
    ("victim with no matching PDBs", [pod("p1", "", app="foo")], [pdb("b", 0, app="bar")], []),
    (
        "victim matching PDB, adequate DisruptionsAllowed",
        [pod("p1", app="foo")],
        [pdb("b", 1, app="foo")],
        [],
    ),
    ("victim matching PDB, no DisruptionsAllowed", [pod("p1", app="foo")], [pdb("b", 0, app="foo")], ["p1"]),
    (
        "podgroup victim with multiple pods, all violating",
        [pod("p1", app="foo"), pod("p2", app="foo")],
        [pdb("b", 0, app="foo")],
        ["p1", "p2"],
    ),
    (
        "podgroup victim with multiple pods, none violating",
        [pod("p1", app="foo"), pod("p2", app="foo")],
        [pdb("b", 2, app="foo")],
        [],
    ),
    (
        "multiple victims matching the same PDB",
        [pod("p1", app="foo"), pod("p2", app="foo")],
        [pdb("b", 1, app="foo")],
        ["p2"],
    ),
    ("pod in DisruptedPods is ignored", [pod("p1", app="foo")], [pdb("b", 0, ("p1",), app="foo")], []),
    ("PDB with empty selector", [pod("p1", app="foo")], [pdb("b", 0)], []),
    (
        "Multiple PDBs",
        [pod("p1", app="foo", tier="backend")],
        [pdb("a", 1, app="foo"), pdb("b", 0, tier="backend")],
        ["p1"],
    ),
    # v1.37.2 stops counting down at the first budget a pod exceeds: p1 exceeds "a" and leaves "b" at
    # one, so p2 (only in "b") fits it (v1.34 counted "b" down for p1 too, and p2 violated it)
    (
        "budgets after the first exceeded are not counted down",
        [pod("p1", app="foo", tier="backend"), pod("p2", tier="backend")],
        [pdb("a", 0, app="foo"), pdb("b", 1, tier="backend")],
        ["p1"],
    ),
]


@pytest.mark.parametrize(
    ("pods", "pdbs", "violating"), [c[1:] for c in UPSTREAM_PDB_CASES], ids=[c[0] for c in UPSTREAM_PDB_CASES]
)
def test_filter_victims_with_pdb_violation_upstream(
    pods: list[PodInfo], pdbs: list[Any], violating: list[str]
) -> None:
    bad, good = filter_pods_with_pdb_violation(pods, budgets(*pdbs))
    assert [p.name for p in bad] == violating
    assert [p.name for p in good] == [p.name for p in pods if p.name not in violating]


def bound(
    name: str, priority: int, cpu: str = "1", started: str | None = None, **labels: str
) -> dict[str, Any]:
    builder = make_pod().name(name).uid(name).priority(priority).req(cpu=cpu).node("n1")
    if started:
        builder = builder.set("status.startTime", started)
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder.obj()


def preemptor(priority: int = 100, cpu: str = "1") -> PodInfo:
    return PodInfo(make_pod().name("p").uid("p").priority(priority).req(cpu=cpu).obj())


INSUFFICIENT_CPU = Status(Code.UNSCHEDULABLE, ("Insufficient cpu",), "NodeResourcesFit")


@pytest.mark.parametrize(
    ("pods", "incoming", "pdbs", "victims", "violations", "status"),
    [
        pytest.param(
            [bound("a", 100), bound("b", 200)],
            preemptor(),
            [],
            [],
            0,
            unresolvable(NO_VICTIMS),
            id="no-lower-priority",
        ),
        pytest.param(
            [bound("a", 0), bound("b", 500, cpu="1500m")],
            preemptor(cpu="1"),
            [],
            [],
            0,
            INSUFFICIENT_CPU,
            id="not-enough-even-without-them",
        ),
        pytest.param(
            [bound("a", 5), bound("b", 1)], preemptor(), [], ["b"], 0, None, id="higher-priority-reprieved"
        ),
        pytest.param(
            [bound("late", 5, started=T1), bound("early", 5, started=T0)],
            preemptor(),
            [],
            ["late"],
            0,
            None,
            id="longer-running-reprieved",
        ),
        pytest.param(
            [bound("a", 1, cpu="500m"), bound("b", 1, cpu="500m"), bound("c", 1)],
            preemptor(cpu="1500m"),
            [],
            ["b", "c"],
            0,
            None,
            id="as-few-as-possible",
        ),
        pytest.param(
            # Equal importance: without budgets the first pod would be reprieved; the guarded one goes first.
            [bound("free", 5, started=T0), bound("guarded", 5, started=T1, app="g")],
            preemptor(),
            [pdb("g", 0, app="g")],
            ["free"],
            0,
            None,
            id="violating-reprieved-first",
        ),
        pytest.param(
            [bound("g1", 5, app="g"), bound("g2", 7, app="g")],
            preemptor(cpu="2"),
            [pdb("g", 1, app="g")],
            ["g2", "g1"],
            1,
            None,
            id="violations-counted",
        ),
        pytest.param(
            # a violates, b does not; both must go: victims come back sorted by importance.
            [bound("a", 3, cpu="1", app="g"), bound("b", 8, cpu="1")],
            preemptor(cpu="2"),
            [pdb("g", 0, app="g")],
            ["b", "a"],
            1,
            None,
            id="victims-sorted-by-importance",
        ),
    ],
)
def test_select_victims_on_node(
    pods: list[dict[str, Any]],
    incoming: PodInfo,
    pdbs: list[Any],
    victims: list[str],
    violations: int,
    status: Status | None,
) -> None:
    harness = Harness([node("n1", cpu="2")], pods, pdbs)
    state = harness.pre_filtered(incoming)
    info = harness.sched.snapshot.get("n1")
    assert info is not None
    copy = info.clone()
    got, count, got_status = select_victims_on_node(
        harness.framework, state.clone(), incoming, copy, harness.framework.pdbs(), NOW
    )
    assert ([p.name for p in got], count, got_status) == (victims, violations, status)
    assert len(info.pods) == len(pods)  # the snapshot's node is untouched


def test_pre_filter_state_follows_removed_pods() -> None:
    """The preemptor's required anti-affinity to a lower-priority pod is resolved by evicting it: the
    InterPodAffinity pre-filter state is updated through the remove-pod extension."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "noisy"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    pods = [bound("noisy", 1, cpu="100m", app="noisy"), bound("quiet", 1, cpu="100m")]
    incoming = PodInfo(make_pod().name("p").uid("p").priority(100).req(cpu="100m").affinity(anti).obj())
    harness = Harness([node("n1", cpu="2")], pods)
    state = harness.pre_filtered(incoming)
    info = harness.sched.snapshot.get("n1")
    assert info is not None
    got, count, status = select_victims_on_node(harness.framework, state, incoming, info.clone(), [], NOW)
    assert ([p.name for p in got], count, status) == (["noisy"], 0, None)
