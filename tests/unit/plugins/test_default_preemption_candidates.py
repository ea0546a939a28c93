"""Finding candidates and the post-filter verdict: only ``Unschedulable`` nodes are tried, from a random
offset, until enough candidates are found with one that violates no budget; the nested FitError message
when no node can be helped (cases and texts from upstream's ``TestPostFilter``)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from _preemption_kit import NOW, Harness, node

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.disruption_budgets import DisruptionBudget
from kopf_scheduler.framework.interface import PostFilterResult
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.preemption import Evaluator, StatusMap
from kopf_scheduler.framework.runtime.recorder import Recorder
from kopf_scheduler.framework.status import Code, Status, error, unresolvable, unschedulable
from kopf_scheduler.testing import make_pod

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


# -- the dry run, with a scripted policy -------------------------------------------------------------------
class ScriptedPolicy:
    """Victims per node name: an int is that many victims (negative: with one PDB violation); a Status is
    the verdict; None means the pod fits without victims."""

    def __init__(self, script: dict[str, Any], offset: int, wanted: int) -> None:
        self.script = script
        self.offset, self.wanted = offset, wanted
        self.tried: list[str] = []

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return self.offset, min(self.wanted, num_nodes)

    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, nominated: str, nominated_status: Status | None
    ) -> tuple[bool, str]:
        return True, ""

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, pdbs: Sequence[DisruptionBudget], now: float
    ) -> tuple[list[PodInfo], int, Status | None]:
        self.tried.append(node.name)
        verdict = self.script[node.name]
        if isinstance(verdict, Status):
            return [], 0, verdict
        if verdict is None:
            return [], 0, None
        victims = [PodInfo(make_pod().name(f"{node.name}-v{i}").obj()) for i in range(abs(verdict))]
        return victims, 1 if verdict < 0 else 0, None


class SnapshotHandle:
    def __init__(self, names: list[str]) -> None:
        from kopf_scheduler.backend.cache import Snapshot

        self._snapshot = Snapshot()
        self._snapshot.rebuild([NodeInfo(node(n)) for n in names])
        self.recorder = Recorder()

    def snapshot(self) -> Any:
        return self._snapshot

    def pdbs(self) -> list[DisruptionBudget]:
        return []

    @property
    def nominator(self) -> Any:
        return _NoNominations()


class _NoNominations:
    def nominated_node_of(self, pod: PodInfo) -> str:
        return pod.nominated_node_name


NODES = ["n0", "n1", "n2", "n3", "n4"]


@pytest.mark.parametrize(
    ("script", "offset", "wanted", "tried", "candidates"),
    [
        pytest.param({n: 1 for n in NODES}, 0, 2, ["n0", "n1"], ["n0", "n1"], id="stops-when-enough"),
        pytest.param({n: 1 for n in NODES}, 3, 2, ["n3", "n4"], ["n3", "n4"], id="from-offset"),
        pytest.param({n: 1 for n in NODES}, 4, 3, ["n4", "n0", "n1"], ["n4", "n0", "n1"], id="wraps-around"),
        pytest.param(
            {"n0": -1, "n1": -2, "n2": -1, "n3": 1, "n4": 1},
            0,
            2,
            ["n0", "n1", "n2", "n3"],
            ["n3", "n0", "n1"],
            id="goes-on-until-one-violates-no-budget",
        ),
        pytest.param(
            {"n0": -1, "n1": -1, "n2": -1, "n3": -1, "n4": -1},
            0,
            2,
            NODES,
            ["n0", "n1"],
            id="only-violating-candidates",
        ),
        pytest.param(
            {
                "n0": unresolvable(NO_VICTIMS),
                "n1": unschedulable("Insufficient cpu"),
                "n2": 2,
                "n3": 1,
                "n4": 1,
            },
            0,
            2,
            ["n0", "n1", "n2", "n3"],
            ["n2", "n3"],
            id="failures-do-not-count",
        ),
    ],
)
def test_dry_run_preemption(
    script: dict[str, Any], offset: int, wanted: int, tried: list[str], candidates: list[str]
) -> None:
    policy = ScriptedPolicy(script, offset, wanted)
    handle = SnapshotHandle(NODES)
    evaluator = Evaluator("DefaultPreemption", handle, policy)  # type: ignore[arg-type]
    potential = handle.snapshot().node_infos
    found, statuses, errors = evaluator.dry_run_preemption(
        CycleState(), PodInfo(make_pod().name("p").obj()), potential, [], offset, wanted, NOW
    )
    assert policy.tried == tried
    assert [c.name for c in found] == candidates
    assert errors == []
    assert {n: s for n, s in statuses.items()} == {
        n: script[n] for n in tried if isinstance(script[n], Status)
    }


@pytest.mark.parametrize(
    ("statuses", "tried"),
    [
        pytest.param(
            {"n0": unschedulable("x"), "n1": unresolvable("y"), "n3": unschedulable("z")},
            None,
            id="explicit-only",
        ),
        pytest.param(
            {"n0": unschedulable("x"), "n1": unresolvable("y"), "n3": unschedulable("z")},
            unschedulable("absent"),
            id="absent-unschedulable",
        ),
    ],
)
def test_only_unschedulable_nodes_are_tried(statuses: dict[str, Status], tried: Status | None) -> None:
    policy = ScriptedPolicy({n: unresolvable(NO_VICTIMS) for n in NODES}, 0, 100)
    evaluator = Evaluator("DefaultPreemption", SnapshotHandle(NODES), policy)  # type: ignore[arg-type]
    status_map = StatusMap(absent=tried)
    status_map.known.update(statuses)
    evaluator.preempt(CycleState(), PodInfo(make_pod().name("p").obj()), status_map, NOW)
    assert policy.tried == (["n0", "n3"] if tried is None else ["n0", "n2", "n3", "n4"])


def test_a_node_that_fits_without_victims_is_an_error() -> None:
    policy = ScriptedPolicy({"n0": None, "n1": unresolvable(NO_VICTIMS)}, 0, 100)
    evaluator = Evaluator("DefaultPreemption", SnapshotHandle(["n0", "n1"]), policy)  # type: ignore[arg-type]
    status_map = StatusMap(absent=unschedulable("absent"))
    result, status = evaluator.preempt(CycleState(), PodInfo(make_pod().name("p").obj()), status_map, NOW)
    assert (result, status) == (None, error('expected at least one victim pod on node "n0"'))


# -- the plugin over real filters ---------------------------------------------------------------------------
def pod(name: str, priority: int, node_name: str = "", cpu: str = "1", **labels: str) -> dict[str, Any]:
    builder = make_pod().name(name).uid(name).priority(priority).req(cpu=cpu)
    if node_name:
        builder = builder.node(node_name)
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder.obj()


HIGH, MID, LOW = 1000, 100, 0


def statuses(absent: Status | None = None, **known: Status) -> StatusMap:
    status_map = StatusMap(absent=absent if absent is not None else unresolvable())
    status_map.known.update(known)
    return status_map


def upstream_pdbs() -> list[Any]:
    return [
        {
            "metadata": {"name": "violating", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"pdb": "violating"}}},
            "status": {"disruptionsAllowed": 0},
        },
        {
            "metadata": {"name": "non-violating", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"pdb": "non-violating"}}},
            "status": {"disruptionsAllowed": 2**31 - 1},
        },
    ]


@pytest.mark.parametrize(
    ("nodes", "pods", "pdbs", "incoming", "node_statuses", "result", "status"),
    [
        pytest.param(
            [node("node1", cpu="1")],
            [pod("p1", HIGH, "node1")],
            [],
            pod("p", HIGH),
            statuses(node1=unschedulable()),
            PostFilterResult(""),
            unschedulable(f"preemption: 0/1 nodes are available: 1 {NO_VICTIMS}."),
            id="no-lower-priority-pods",
        ),
        pytest.param(
            [node("node1", cpu="1")],
            [pod("p1", LOW, "node1")],
            [],
            pod("p", HIGH),
            statuses(node1=unresolvable()),
            PostFilterResult(""),
            unschedulable(f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."),
            id="respects-unresolvable",
        ),
        pytest.param(
            [node("node1", cpu="1")],
            [pod("p1", LOW, "node1")],
            [],
            pod("p", HIGH),
            statuses(),
            PostFilterResult(""),
            unschedulable(f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."),
            id="absent-means-unresolvable",
        ),
        pytest.param(
            [node("node1", cpu="1"), node("node2", cpu="1")],
            [pod("p1", HIGH, "node1"), pod("p2", LOW, "node2")],
            [],
            pod("p", MID),
            statuses(node1=unschedulable(), node2=unschedulable()),
            PostFilterResult("node2"),
            Status(
                Code.SUCCESS,
                ("preemption: found a potential placement for pod on node node2, preempting 1 victims",),
            ),
            id="schedulable-on-one-node",
        ),
        pytest.param(
            [node("node1", cpu="1", pods=2), node("node2", cpu="1", pods=2)],
            [
                pod("p1", HIGH, "node1", cpu="500m", pdb="non-violating"),
                pod("p2", LOW, "node1", cpu="500m", pdb="violating"),
                pod("p3", MID, "node2", cpu="1", pdb="violating"),
            ],
            upstream_pdbs(),
            pod("p", 10 * HIGH),
            statuses(node1=unschedulable(), node2=unschedulable()),
            PostFilterResult("node2"),
            Status(
                Code.SUCCESS,
                ("preemption: found a potential placement for pod on node node2, preempting 1 victims",),
            ),
            id="min-highest-priority-node",
        ),
        pytest.param(
            [node("node1", cpu="2"), node("node2", cpu="2")],
            [
                pod("h1", HIGH, "node1", cpu="1500m"),
                pod("l1", LOW, "node1", cpu="500m"),
                pod("h2", HIGH, "node2", cpu="1500m"),
                pod("l2", LOW, "node2", cpu="500m"),
            ],
            [],
            pod("p", MID),
            statuses(node1=unschedulable(), node2=unschedulable()),
            PostFilterResult(""),
            unschedulable("preemption: 0/2 nodes are available: 2 Insufficient cpu."),
            id="not-enough-after-removing-lower-priority",
        ),
        pytest.param(
            [node("node1", cpu="1"), node("node2", cpu="2"), node("node3", cpu="1")],
            [
                pod("p1", HIGH, "node1"),
                pod("h2", HIGH, "node2", cpu="1500m"),
                pod("l2", LOW, "node2", cpu="500m"),
                pod("p3", HIGH, "node3"),
            ],
            [],
            pod("p", MID),
            statuses(node1=unschedulable(), node2=unschedulable(), node3=unschedulable()),
            PostFilterResult(""),
            unschedulable(f"preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 {NO_VICTIMS}."),
            id="mixed-reasons",
        ),
        pytest.param(
            [node("node1", cpu="2"), node("node2", cpu="2"), node("node3", cpu="2"), node("node4", cpu="2")],
            [
                pod("h1", HIGH, "node1", cpu="1500m"),
                pod("l1", LOW, "node1", cpu="500m"),
                pod("h2", HIGH, "node2", cpu="1500m"),
                pod("l2", LOW, "node2", cpu="500m"),
            ],
            [],
            pod("p", MID),
            statuses(node1=unschedulable(), node2=unschedulable(), node4=unresolvable()),
            PostFilterResult(""),
            unschedulable(f"preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 {NOT_HELPFUL}."),
            id="mixed-with-unresolvable-and-absent",
        ),
    ],
)
def test_post_filter(
    nodes: list[Any],
    pods: list[Any],
    pdbs: list[Any],
    incoming: dict[str, Any],
    node_statuses: StatusMap,
    result: PostFilterResult,
    status: Status,
) -> None:
    harness = Harness(nodes, pods, pdbs)
    preemptor = PodInfo(incoming)
    got_result, got_status = harness.plugin.post_filter(
        harness.pre_filtered(preemptor), preemptor, node_statuses
    )
    assert got_result is not None
    assert got_result.nominated_node_name == result.nominated_node_name
    assert got_status == status.with_plugin("DefaultPreemption")
    assert (got_result.prepare is not None) == bool(result.nominated_node_name)


def test_the_message_example_of_a_tainted_node_and_full_nodes() -> None:
    tainted = node("control-plane", cpu="4")
    tainted["spec"]["taints"] = [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]
    pods = [pod("a", 100, "w1", cpu="1500m"), pod("b", 200, "w2", cpu="1500m")]
    harness = Harness([tainted, node("w1"), node("w2")], pods)
    _, status = harness.post_filter(PodInfo(pod("p", 100)))
    assert status == Status(
        Code.UNSCHEDULABLE,
        (f"preemption: 0/3 nodes are available: 1 {NOT_HELPFUL}, 2 {NO_VICTIMS}.",),
        "DefaultPreemption",
    )


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_candidates_come_from_a_random_offset_of_the_seeded_rng(seed: int) -> None:
    names = [f"n{i}" for i in range(6)]
    pods = [pod(f"low-{n}", LOW, n, cpu="2") for n in names]
    harness = Harness(
        [node(n) for n in names],
        pods,
        args={"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 2},
        seed=seed,
    )
    rng_copy = random.Random()
    rng_copy.setstate(harness.sched.rng.getstate())
    offset = rng_copy.randrange(len(names))
    result, status = harness.post_filter(PodInfo(pod("p", HIGH)))
    placement = (
        f"preemption: found a potential placement for pod on node {names[offset]}, preempting 1 victims"
    )
    assert status == Status(Code.SUCCESS, (placement,), "DefaultPreemption")
    tried = [c.name for c in harness.plugin.evaluator.last_candidates]
    assert tried == [names[offset], names[(offset + 1) % len(names)]]
    assert result is not None and result.nominated_node_name == names[offset]
    assert [v.name for v in result.victims] == [f"low-{names[offset]}"]
