"""NodeResourcesBalancedAllocation: scores from real requests, the best-effort skip, extended
resources, arguments, and the vectorised score against the per-node score."""

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


def cpu_only(node: str = "") -> dict[str, Any]:
    builder = make_pod().name(f"cpu-{node}").req(cpu="1000m", memory="0").container(cpu="2000m", memory="0")
    return (builder.node(node) if node else builder).obj()


def cpu_and_memory(node: str = "") -> dict[str, Any]:
    builder = (
        make_pod().name(f"cm-{node}").req(cpu="1000m", memory="2000").container(cpu="2000m", memory="3000")
    )
    return (builder.node(node) if node else builder).obj()


def cpu_memory_gpu(node: str) -> dict[str, Any]:
    return (
        make_pod()
        .name(f"cmg-{node}")
        .req(cpu="1000m", memory="2000")
        .container(cpu="2000m", memory="3000")
        .res({GPU: "3"})
        .node(node)
        .obj()
    )


def _plugin(resources: list[str] | None = None) -> NodeResourcesBalancedAllocation:
    raw = {"resources": [{"name": r, "weight": 1} for r in resources]} if resources else {}
    args = decode_args(Args, raw)
    args.validate()
    return new(args, None)


DEFAULT = None
WITH_GPU = ["cpu", "memory", GPU]

CASES = [
    pytest.param(
        cpu_and_memory(),
        [_node("n1", 4000, 10000), _node("n2", 6000, 10000)],
        [],
        DEFAULT,
        [87, 100],
        id="nothing-scheduled-differently-sized",
    ),
    pytest.param(
        cpu_and_memory(),
        [_node("n1", 10000, 20000), _node("n2", 10000, 20000)],
        [cpu_only("n1"), cpu_and_memory("n2")],
        DEFAULT,
        [82, 95],
        id="pods-scheduled-with-resources",
    ),
    pytest.param(
        cpu_and_memory(),
        [_node("n1", 10000, 20000), _node("n2", 10000, 50000)],
        [cpu_only("n1"), cpu_and_memory("n2")],
        DEFAULT,
        [82, 80],
        id="pods-scheduled-differently-sized",
    ),
    pytest.param(
        cpu_only(),
        [_node("n1", 6000, 10000), _node("n2", 6000, 10000)],
        [cpu_only("n1"), cpu_and_memory("n2")],
        DEFAULT,
        [50, 75],
        id="requested-at-capacity",
    ),
    pytest.param(
        cpu_only(),
        [_node("n1", 4000, 10000), _node("n2", 4000, 10000)],
        [cpu_only("n1"), cpu_and_memory("n2")],
        DEFAULT,
        [50, 75],
        id="fraction-capped-at-one",
    ),
    pytest.param(
        cpu_only(),
        [_node("n1", 0, 0), _node("n2", 0, 0)],
        [],
        DEFAULT,
        [100, 100],
        id="zero-allocatable-left-out",
    ),
    pytest.param(
        make_pod().name("g").req(memory="0").res({GPU: "1"}).obj(),
        [_node("n1", 3500, 40000, gpu=8), _node("n2", 3500, 40000, gpu=8)],
        [cpu_memory_gpu("n1"), cpu_and_memory("n2")],
        WITH_GPU,
        [70, 65],
        id="three-resources-population-std",
    ),
    pytest.param(
        cpu_only(),
        [_node("n1", 3500, 40000, gpu=8), _node("n2", 3500, 40000)],
        [cpu_only("n1"), cpu_only("n2")],
        ["cpu", GPU],
        [100, 100],
        id="unrequested-scalar-left-out",
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
    snapshot = snapshot_of([_node("n1", 4000, 10000)], [cpu_only("n1")])
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
def test_balanced_score(requested: list[int], allocatable: list[int], want: int) -> None:
    assert balanced_score(requested, allocatable) == want


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
