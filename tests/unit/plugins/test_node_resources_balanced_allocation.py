"""NodeResourcesBalancedAllocation: scores of the balance the pod brings (upstream's table at v1.37.2),
real requests, the best-effort skip, extended resources, arguments, and the vectorised score against
the per-node score."""

from __future__ import annotations

from typing import Any

import pytest
from _node_plugins_kit import all_rows, snapshot_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_scheduler.framework.args import ArgsError, decode_args
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import NodeSet
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP
from kopf_scheduler.plugins.node_resources_balanced_allocation import (
    Args,
    NodeResourcesBalancedAllocation,
    ResourceSpec,
    balance,
    balanced_score,
    new,
)
from kopf_scheduler.testing import make_node, make_pod

GPU = "nvidia.com/gpu"


def _node(name: str, milli_cpu: int, memory: int, gpu: int | None = None) -> dict[str, Any]:
    capacity: dict[str, Any] = {"cpu": f"{milli_cpu}m", "memory": str(memory), "pods": "110"}
    if gpu is not None:
        capacity[GPU] = str(gpu)
    return make_node().name(name).capacity(**capacity).obj()


def _pod(name: str, *containers: dict[str, str], node: str = "") -> dict[str, Any]:
    """A pod with one container per request map, as upstream's ``st.MakePod().Req(...).Req(...)``."""
    builder = make_pod().name(name).set("spec.containers", [])
    for requests in containers:
        builder.container().res(requests)
    return (builder.node(node) if node else builder).obj()


def cpu_only(cpu: str) -> dict[str, str]:
    return {"cpu": cpu}


def cpu_and_memory(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


def cpu_memory_gpu(cpu: str, memory: str, gpu: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory, GPU: gpu}


def _plugin(resources: list[str] | None = None) -> NodeResourcesBalancedAllocation:
    raw = {"resources": [{"name": r, "weight": 1} for r in resources]} if resources else {}
    args = decode_args(Args, raw)
    args.validate()
    return new(args, None)


DEFAULT = None
WITH_GPU = ["cpu", "memory", GPU]
#: the pod most cases place, and the pods upstream's table puts on the nodes
POD = _pod("p", cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000"))


def _cpu_pod_on(node: str) -> dict[str, Any]:
    return _pod(f"cpu-{node}", cpu_only("1000m"), cpu_only("2000m"), node=node)


def _cpu_memory_pod_on(node: str) -> dict[str, Any]:
    return _pod(f"cm-{node}", cpu_and_memory("1000m", "2000"), cpu_and_memory("2000m", "3000"), node=node)


#: upstream's TestNodeResourcesBalancedAllocation at v1.37.2 (balanced_allocation_test.go): the score
#: is 50 + (50 + balance with the pod - balance without it) / 2; the cases backed by DRA devices aside
CASES = [
    # n1: cpu 0 -> 3000/4000, memory 0 -> 5000/10000: balance 100 -> 87; n2: 100 -> 100
    pytest.param(
        POD,
        [_node("node1", 4000, 10000), _node("node2", 6000, 10000)],
        [],
        DEFAULT,
        [68, 75],
        id="nothing-scheduled-differently-sized-nodes",
    ),
    # n1: cpu 30% -> 60%, memory 0% -> 25%: 85 -> 82; n2: cpu 30% -> 60%, memory 25% -> 50%: 97 -> 95
    pytest.param(
        POD,
        [_node("node1", 10000, 20000), _node("node2", 10000, 20000)],
        [_cpu_pod_on("node1"), _cpu_memory_pod_on("node2")],
        DEFAULT,
        [73, 74],
        id="pods-scheduled-with-resources",
    ),
    # n2: cpu 30% -> 60%, memory 10% -> 20%: 90 -> 80
    pytest.param(
        POD,
        [_node("node1", 10000, 20000), _node("node2", 10000, 50000)],
        [_cpu_pod_on("node1"), _cpu_memory_pod_on("node2")],
        DEFAULT,
        [73, 70],
        id="pods-scheduled-differently-sized-nodes",
    ),
    # n1: cpu 100% -> 100%, memory 0% -> 100%: 50 -> 100; n2: cpu 0%, memory 0% -> 100%: 100 -> 50
    pytest.param(
        _pod("p", {"memory": "2000"}, {"memory": "3000"}),
        [_node("node1", 3000, 5000), _node("node2", 3000, 5000)],
        [_cpu_pod_on("node1")],
        DEFAULT,
        [100, 50],
        id="nodes-reach-min-and-max-score",
    ),
    # n1: cpu 50% -> 100%, memory 0%: 75 -> 50; n2: cpu 50% -> 100%, memory 50%: 100 -> 75
    pytest.param(
        _pod("p", cpu_only("1000m"), cpu_only("2000m")),
        [_node("node1", 6000, 10000), _node("node2", 6000, 10000)],
        [_cpu_pod_on("node1"), _cpu_memory_pod_on("node2")],
        DEFAULT,
        [62, 62],
        id="requested-at-node-capacity",
    ),
    # n1: cpu 85.7%, memory 12.5%, gpu 37.5% -> 50%: 69 -> 70; n2: gpu 0% -> 12.5%: 62 -> 65
    pytest.param(
        _pod("p", cpu_memory_gpu("0", "0", "1")),
        [_node("node1", 3500, 40000, gpu=8), _node("node2", 3500, 40000, gpu=8)],
        [
            _pod("cmg", cpu_and_memory("1000m", "2000"), cpu_memory_gpu("2000m", "3000", "3"), node="node1"),
            _cpu_memory_pod_on("node2"),
        ],
        WITH_GPU,
        [75, 76],
        id="requested-scalar-resource-counts",
    ),
    # cpu 0% -> 85.7%, memory 0% -> 12.5%: 100 -> 63 on both; gpu is not requested, so left out
    pytest.param(
        POD,
        [_node("node1", 3500, 40000, gpu=8), _node("node2", 3500, 40000)],
        [],
        WITH_GPU,
        [56, 56],
        id="unrequested-scalar-resource-left-out",
    ),
    # -- more cases --------------------------------------------------------------------------------------
    # n1: cpu 75% -> 150% (capped at 100%), memory 0%: 62 -> 50; n2: cpu 75% -> 100%, memory 50%: 87 -> 75
    pytest.param(
        _pod("p", cpu_only("1000m"), cpu_only("2000m")),
        [_node("node1", 4000, 10000), _node("node2", 4000, 10000)],
        [_cpu_pod_on("node1"), _cpu_memory_pod_on("node2")],
        DEFAULT,
        [69, 69],
        id="fraction-capped-at-one",
    ),
    # no allocatable: no fraction, balance 100 with and without the pod
    pytest.param(
        _pod("p", cpu_only("1000m"), cpu_only("2000m")),
        [_node("node1", 0, 0), _node("node2", 0, 0)],
        [],
        DEFAULT,
        [75, 75],
        id="zero-allocatable-left-out",
    ),
    # only cpu counts: one fraction, balance 100 with and without the pod
    pytest.param(
        _pod("p", cpu_only("1000m"), cpu_only("2000m")),
        [_node("node1", 3500, 40000, gpu=8), _node("node2", 3500, 40000)],
        [_cpu_pod_on("node1"), _cpu_pod_on("node2")],
        ["cpu", GPU],
        [75, 75],
        id="single-counted-resource",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "resources", "want"), CASES)
@pytest.mark.parametrize("run_pre_score", [True, False], ids=["after-pre-score", "without-pre-score"])
def test_score(pod: Any, nodes: Any, pods: Any, resources: Any, want: list[int], run_pre_score: bool) -> None:
    snapshot = snapshot_of(nodes, pods)
    plugin, state, info = _plugin(resources), CycleState(), PodInfo(pod)
    if run_pre_score:
        assert plugin.pre_score(state, info, NodeSet(snapshot, all_rows(snapshot))) is None
    assert [plugin.score(state, info, n) for n in snapshot.node_infos] == want
    assert plugin.score_rows(state, info, snapshot.table, all_rows(snapshot)).tolist() == want


@pytest.mark.parametrize(
    ("pod", "resources"),
    [
        pytest.param(make_pod().name("be").obj(), DEFAULT, id="no-requests"),
        pytest.param(make_pod().name("zero").req(cpu="0", memory="0").obj(), DEFAULT, id="zero-requests"),
        pytest.param(
            make_pod().name("eph").req(ephemeral_storage="1Gi").obj(), DEFAULT, id="only-unscored-resource"
        ),
    ],
)
def test_pre_score_skips_best_effort(pod: dict[str, Any], resources: Any) -> None:
    snapshot = snapshot_of([_node("n1", 4000, 10000)])
    status = _plugin(resources).pre_score(CycleState(), PodInfo(pod), NodeSet(snapshot, all_rows(snapshot)))
    assert status == SKIP


def test_score_without_pre_score_gives_best_effort_zero() -> None:
    snapshot = snapshot_of([_node("n1", 4000, 10000)], [_cpu_pod_on("n1")])
    assert _plugin().score(CycleState(), PodInfo(make_pod().name("be").obj()), snapshot.node_infos[0]) == 0


@pytest.mark.parametrize(
    ("requested", "allocatable", "want"),
    [
        pytest.param([], [], 100, id="nothing"),
        pytest.param([1, 2], [0, 0], 100, id="all-zero-allocatable"),
        pytest.param([3, 0], [4, 0], 100, id="one-fraction"),
        pytest.param([3, 5], [4, 10], 87, id="two-fractions"),
        pytest.param([9, 0], [4, 10], 50, id="capped"),
    ],
)
def test_balance(requested: list[int], allocatable: list[int], want: int) -> None:
    assert balance(requested, allocatable) == want


@pytest.mark.parametrize(
    ("requested", "allocated", "allocatable", "want"),
    [
        pytest.param([3, 5], [0, 0], [4, 10], 68, id="worsened-odd-difference"),  # 100 -> 87
        pytest.param([4, 0], [0, 0], [4, 10], 50, id="worst"),  # 100 -> 50
        pytest.param([3, 5], [3, 0], [3, 5], 100, id="best"),  # 50 -> 100
        pytest.param([1, 1], [1, 1], [2, 2], 75, id="unchanged"),
        pytest.param([5, 5], [3, 0], [10, 10], 82, id="improved-odd-difference"),  # 85 -> 100
    ],
)
def test_balanced_score(
    requested: list[int], allocated: list[int], allocatable: list[int], want: int
) -> None:
    assert balanced_score(requested, allocated, allocatable) == want


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param(
            {"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight", id="weight-not-one"
        ),
        pytest.param({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "resources[1].name", id="duplicate"),
        pytest.param({"resources": [{"weight": 1}]}, "resources[0]", id="no-name"),
        pytest.param({"scoringStrategy": {}}, "scoringStrategy", id="unknown-field"),
    ],
)
def test_args_rejected(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ArgsError) as caught:
        decode_args(Args, raw).validate()
    assert caught.value.field == field


def test_args_defaults() -> None:
    assert decode_args(Args, {}).resources == (ResourceSpec("cpu"), ResourceSpec("memory"))
    assert decode_args(Args, {"resources": [{"name": GPU, "weight": 0}]}).resources == (ResourceSpec(GPU, 1),)


# -- vectorised form -------------------------------------------------------------------------------------
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCORED = ["cpu", "memory", "ephemeral-storage", GPU, "hugepages-2Mi"]


@st.composite
def requests(draw: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, top in (
        ("cpu", 5000),
        ("memory", 70000),
        ("ephemeral-storage", 9000),
        (GPU, 9),
        ("hugepages-2Mi", 99),
    ):
        if draw(st.booleans()):
            out[name] = f"{draw(st.integers(0, top))}m" if name == "cpu" else str(draw(st.integers(0, top)))
    return out


@st.composite
def clusters(draw: Any) -> tuple[Any, PodInfo, list[str]]:
    nodes, pods = [], []
    for i in range(draw(st.integers(1, 8))):
        capacity = {"pods": "110"}
        for name, top in (
            ("cpu", 8000),
            ("memory", 60000),
            ("ephemeral-storage", 9000),
            (GPU, 8),
            ("hugepages-2Mi", 90),
        ):
            if draw(st.integers(0, 3)):
                capacity[name] = (
                    f"{draw(st.integers(0, top))}m" if name == "cpu" else str(draw(st.integers(0, top)))
                )
        nodes.append(make_node().name(f"n{i}").capacity(**capacity).obj())
        for j in range(draw(st.integers(0, 2))):
            pods.append(make_pod().name(f"e{i}-{j}").res(draw(requests())).node(f"n{i}").obj())
    pod = PodInfo(make_pod().name("p").res(draw(requests())).obj())
    resources = draw(st.lists(st.sampled_from(SCORED), min_size=1, max_size=5, unique=True))
    return snapshot_of(nodes, pods), pod, resources


@SETTINGS
@given(clusters())
def test_vector_score_agrees(cluster: tuple[Any, PodInfo, list[str]]) -> None:
    snapshot, pod, resources = cluster
    plugin, state = _plugin(resources), CycleState()
    rows = all_rows(snapshot)[::-1].copy()
    plugin.pre_score(state, pod, NodeSet(snapshot, rows))
    assert plugin.score_rows(state, pod, snapshot.table, rows).tolist() == [
        plugin.score(state, pod, snapshot.node_infos[r]) for r in rows
    ]
