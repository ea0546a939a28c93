"""NodeResourcesFit: filter reasons and codes, the three scoring strategies with upstream's integer
arithmetic (examples from upstream's ``least_allocated_test.go``, ``most_allocated_test.go`` and
``requested_to_capacity_ratio_test.go``), and argument validation."""

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.framework.args import ArgsError
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import NodeSet
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status
from kopf_scheduler.plugins.node_resources_fit import Args, NodeResourcesFit
from kopf_scheduler.plugins.node_resources_fit.args import ResourceSpec
from kopf_scheduler.testing import make_node, make_pod

_ids = itertools.count()
GPU = "example.com/gpu"
Mi = 1024 * 1024


def _args(**raw: Any) -> Args:
    args = Args.from_dict(raw)
    args.validate()
    return args


def _pod(**requests: str) -> dict[str, Any]:
    return (
        make_pod().name(f"p{next(_ids)}").res(requests).obj()
        if requests
        else make_pod().name(f"p{next(_ids)}").obj()
    )


def _node_info(node: dict[str, Any], pods: Sequence[dict[str, Any]] = ()) -> NodeInfo:
    info = NodeInfo(node)
    for pod in pods:
        info.add_pod(PodInfo(pod))
    return info


# -- filter ---------------------------------------------------------------------------------------------
def _n(pods: int = 3, **extra: str) -> dict[str, Any]:
    capacity = {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi", "pods": str(pods), **extra}
    return make_node().name("n").capacity(**capacity).obj()


def _unsch(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def _uau(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


@pytest.mark.parametrize(
    ("node", "existing", "pod", "args", "expected"),
    [
        (_n(), [], _pod(cpu="1"), {}, None),
        (_n(), [_pod(cpu="1")], _pod(cpu="1"), {}, None),
        (_n(pods=1), [_pod()], _pod(), {}, _unsch("Too many pods")),
        (_n(pods=0), [], _pod(), {}, _unsch("Too many pods")),
        (_n(), [_pod(cpu="1500m")], _pod(cpu="1"), {}, _unsch("Insufficient cpu")),
        (_n(), [], _pod(cpu="2001m"), {}, _uau("Insufficient cpu")),
        (_n(), [_pod(memory="3Gi")], _pod(memory="2Gi"), {}, _unsch("Insufficient memory")),
        (_n(), [], _pod(memory="5Gi"), {}, _uau("Insufficient memory")),
        (
            _n(),
            [_pod(**{"ephemeral-storage": "8Gi"})],
            _pod(**{"ephemeral-storage": "4Gi"}),
            {},
            _unsch("Insufficient ephemeral-storage"),
        ),
        (_n(**{GPU: "2"}), [_pod(**{GPU: "2"})], _pod(**{GPU: "1"}), {}, _unsch(f"Insufficient {GPU}")),
        (_n(), [], _pod(**{GPU: "1"}), {}, _uau(f"Insufficient {GPU}")),
        # reasons in upstream's order (pods, cpu, memory, ephemeral-storage, extended),
        # whatever order the pod lists them in
        (
            _n(),
            [_pod(cpu="1", memory="1Gi")],
            _pod(memory="4Gi", cpu="2"),
            {},
            _unsch("Insufficient cpu", "Insufficient memory"),
        ),
        (_n(pods=1), [_pod(cpu="1")], _pod(cpu="3"), {}, _uau("Too many pods", "Insufficient cpu")),
        (
            _n(),
            [_pod(memory="1Gi")],
            _pod(cpu="3", memory="4Gi"),
            {},
            _uau("Insufficient cpu", "Insufficient memory"),
        ),
        (
            _n(),
            [],
            _pod(**{"b.io/x": "1", "a.io/y": "1"}),
            {},
            _uau("Insufficient a.io/y", "Insufficient b.io/x"),
        ),
        (_n(), [], _pod(**{GPU: "1"}), {"ignoredResources": [GPU]}, None),
        (_n(), [], _pod(**{GPU: "1"}), {"ignoredResourceGroups": ["example.com"]}, None),
        (_n(), [], _pod(**{GPU: "1"}), {"ignoredResourceGroups": ["other.io"]}, _uau(f"Insufficient {GPU}")),
        (_n(), [], _pod(cpu="3"), {"ignoredResources": ["cpu"]}, _uau("Insufficient cpu")),
        (
            _n(),
            [],
            _pod(**{"hugepages-2Mi": "4Mi"}),
            {"ignoredResources": ["hugepages-2Mi"], "ignoredResourceGroups": ["hugepages-2Mi"]},
            _uau("Insufficient hugepages-2Mi"),
        ),
        (_n(), [_pod(cpu="2", memory="4Gi")], _pod(), {}, None),
        (_n(), [_pod(cpu="2")], _pod(cpu="0"), {}, None),
    ],
    ids=[
        "fits-empty-node",
        "fits-exactly",
        "too-many-pods",
        "no-pods-allowed",
        "insufficient-cpu",
        "cpu-over-allocatable-unresolvable",
        "insufficient-memory",
        "memory-over-allocatable-unresolvable",
        "insufficient-ephemeral-storage",
        "insufficient-extended",
        "extended-absent-unresolvable",
        "upstream-reason-order",
        "pods-and-cpu",
        "one-unresolvable-decides-code",
        "extended-reasons-sorted",
        "ignored-resource",
        "ignored-resource-group",
        "other-group-not-ignored",
        "ignored-resources-only-extended",
        "hugepages-not-ignorable",
        "no-requests-fit-a-full-node",
        "zero-request-fits",
    ],
)
def test_filter(
    node: dict[str, Any],
    existing: list[dict[str, Any]],
    pod: dict[str, Any],
    args: dict[str, Any],
    expected: Status | None,
) -> None:
    plugin = NodeResourcesFit(_args(**args))
    info, pod_info = _node_info(node, existing), PodInfo(pod)
    state = CycleState()
    assert plugin.pre_filter(state, pod_info, [info]) == (None, None)
    assert plugin.filter(state, pod_info, info) == expected
    assert plugin.filter(CycleState(), pod_info, info) == expected  # without pre-filter state too
    snapshot = Snapshot()
    snapshot.rebuild([info])
    assert plugin.filter_rows(state, pod_info, snapshot.table, np.array([0])).tolist() == [expected is None]
    statuses = plugin.filter_statuses(state, pod_info, snapshot.table, np.array([0]))
    if statuses is None:  # only when no node has a requested resource: the runtime asks filter instead
        assert any(name not in snapshot.table.column for name in pod_info.requests)
    else:
        assert statuses[0] == expected


def test_filter_statuses_of_many_nodes_match_filter_node_by_node() -> None:
    """Nodes rejected for different reasons each get the status ``filter`` gives them, and nodes with the
    same reasons share one status object."""
    plugin = NodeResourcesFit(_args())
    full_pod = _pod(cpu="1500m", memory="1Gi")

    def node(name: str, pods: int = 3, cpu: str = "2") -> dict[str, Any]:
        return make_node().name(name).capacity(cpu=cpu, memory="4Gi", pods=str(pods)).obj()

    infos = [
        _node_info(node("cpu"), [full_pod]),
        _node_info(node("pods", pods=1), [_pod()]),
        _node_info(node("both", pods=1), [full_pod]),
        _node_info(node("cpu-again"), [full_pod]),
        _node_info(node("fits")),
        _node_info(node("small", cpu="500m")),
    ]
    snapshot = Snapshot()
    snapshot.rebuild(infos)
    incoming, state = PodInfo(_pod(cpu="1", memory="1Gi")), CycleState()
    plugin.pre_filter(state, incoming, infos)
    rows = np.arange(len(infos))
    statuses = plugin.filter_statuses(state, incoming, snapshot.table, rows)
    assert statuses is not None
    assert [statuses[i] for i in rows] == [
        plugin.filter(state, incoming, info) for info in snapshot.node_infos
    ]
    # rows in examination order (starting mid-table), and fewer than half of them: the same per row
    for picked in (np.array([3, 4, 5, 0, 1, 2]), np.array([5, 0, 2]), np.array([4, 1])):
        verdicts = plugin.filter_statuses(state, incoming, snapshot.table, picked)
        assert verdicts is not None
        want = [plugin.filter(state, incoming, infos[row]) for row in picked.tolist()]
        assert [verdicts[i] for i in range(len(picked))] == want
        passed = plugin.filter_rows(state, incoming, snapshot.table, picked).tolist()
        assert passed == [status is None for status in want]
    assert statuses[0] is statuses[3]
    assert len(statuses.distinct) == 5  # cpu, pods, both, fits (None), unresolvable cpu
    unresolvable = statuses[5]
    assert unresolvable is not None and unresolvable.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# -- score ----------------------------------------------------------------------------------------------
def _st_pod(*containers: dict[str, str], node: str = "") -> dict[str, Any]:
    """Like upstream's ``st.MakePod()``: no containers unless requests are given, one container each."""
    spec = [
        {"name": f"c{i}", "image": "x", "resources": {"requests": dict(c)}} for i, c in enumerate(containers)
    ]
    builder = make_pod().name(f"p{next(_ids)}").set("spec.containers", spec)
    if node:
        builder.node(node)
    return builder.obj()


def _st_node(name: str, **capacity: str) -> dict[str, Any]:
    return make_node().name(name).capacity(**capacity).obj()


def _scores(
    args: Args, pod: dict[str, Any], nodes: list[dict[str, Any]], existing: Sequence[dict[str, Any]] = ()
) -> list[int]:
    infos = [NodeInfo(n) for n in nodes]
    by_name = {i.name: i for i in infos}
    for p in existing:
        by_name[p["spec"]["nodeName"]].add_pod(PodInfo(p))
    plugin, pod_info, state = NodeResourcesFit(args), PodInfo(pod), CycleState()
    snapshot = Snapshot()
    snapshot.rebuild(infos)
    rows = np.arange(len(infos))
    assert plugin.pre_score(state, pod_info, NodeSet(snapshot, rows)) is None
    per_node = [plugin.score(state, pod_info, info) for info in snapshot.node_infos]
    assert plugin.score_rows(state, pod_info, snapshot.table, rows).tolist() == per_node
    return per_node


DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
EXT = "abc.com/xyz"
EXTENDED_SET = [*DEFAULT_RESOURCES, {"name": EXT, "weight": 1}]
C1 = {"cpu": "1000", "memory": "2000"}
C2 = {"cpu": "2000", "memory": "3000"}


def _strategy(kind: str, resources: list[dict[str, Any]] = DEFAULT_RESOURCES, shape: Any = None) -> Args:
    strategy: dict[str, Any] = {"type": kind, "resources": resources}
    if shape is not None:
        strategy["requestedToCapacityRatio"] = {"shape": [{"utilization": u, "score": s} for u, s in shape]}
    return _args(scoringStrategy=strategy)


N4_10 = _st_node("node1", cpu="4000", memory="10000")

UPSTREAM_LEAST = [
    (
        "nothing-scheduled-nothing-requested",
        DEFAULT_RESOURCES,
        _st_pod(),
        [N4_10, _st_node("node2", cpu="4000", memory="10000")],
        [],
        [100, 100],
    ),
    (
        "nothing-scheduled-differently-sized-nodes",
        DEFAULT_RESOURCES,
        _st_pod(C1, C2),
        [N4_10, _st_node("node2", cpu="6000", memory="10000")],
        [],
        [37, 50],
    ),
    (
        "no-resources-requested-pods-scheduled",
        DEFAULT_RESOURCES,
        _st_pod(),
        [N4_10, _st_node("node2", cpu="4000", memory="10000")],
        [_st_pod(node="node1"), _st_pod(node="node1"), _st_pod(node="node2"), _st_pod(node="node2")],
        [100, 100],
    ),
    (
        "no-resources-requested-pods-scheduled-with-resources",
        DEFAULT_RESOURCES,
        _st_pod(),
        [_st_node("node1", cpu="10000", memory="20000"), _st_node("node2", cpu="10000", memory="20000")],
        [
            _st_pod({"cpu": "3000", "memory": "0"}, node="node1"),
            _st_pod({"cpu": "3000", "memory": "0"}, node="node1"),
            _st_pod({"cpu": "3000", "memory": "0"}, node="node2"),
            _st_pod({"cpu": "3000", "memory": "5000"}, node="node2"),
        ],
        [70, 57],
    ),
    (
        "resources-requested-pods-scheduled-with-resources",
        DEFAULT_RESOURCES,
        _st_pod(C1, C2),
        [_st_node("node1", cpu="10000", memory="20000"), _st_node("node2", cpu="10000", memory="20000")],
        [
            _st_pod({"cpu": "3000", "memory": "0"}, node="node1"),
            _st_pod({"cpu": "3000", "memory": "5000"}, node="node2"),
        ],
        [57, 45],
    ),
    (
        "differently-sized-nodes-with-pods",
        DEFAULT_RESOURCES,
        _st_pod(C1, C2),
        [_st_node("node1", cpu="10000", memory="20000"), _st_node("node2", cpu="10000", memory="50000")],
        [
            _st_pod({"cpu": "3000", "memory": "0"}, node="node1"),
            _st_pod({"cpu": "3000", "memory": "5000"}, node="node2"),
        ],
        [57, 60],
    ),
    (
        "requested-exceeds-capacity",
        DEFAULT_RESOURCES,
        _st_pod({"cpu": "3000", "memory": "0"}),
        [N4_10, _st_node("node2", cpu="4000", memory="10000")],
        [
            _st_pod({"cpu": "3000", "memory": "0"}, node="node1"),
            _st_pod({"cpu": "3000", "memory": "5000"}, node="node2"),
        ],
        [50, 25],
    ),
    (
        "zero-node-resources",
        DEFAULT_RESOURCES,
        _st_pod(),
        [make_node().name("node1").capacity().obj(), make_node().name("node2").capacity().obj()],
        [
            _st_pod({"cpu": "3000", "memory": "0"}, node="node1"),
            _st_pod({"cpu": "3000", "memory": "5000"}, node="node2"),
        ],
        [0, 0],
    ),
    (
        "different-weights",
        [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}],
        _st_pod(C1, C2),
        [N4_10, _st_node("node2", cpu="6000", memory="10000")],
        [],
        [41, 50],
    ),
    (
        "bypass-extended-resource-not-requested",
        EXTENDED_SET,
        _st_pod(C1, C2),
        [
            _st_node("node1", cpu="6000", memory="10000"),
            _st_node("node2", cpu="6000", memory="10000", **{EXT: "4"}),
        ],
        [],
        [50, 50],
    ),
    (
        "honor-extended-resource-requested",
        EXTENDED_SET,
        _st_pod({"cpu": "3000", "memory": "5000", EXT: "2"}),
        [
            _st_node("node1", cpu="6000", memory="10000", **{EXT: "4"}),
            _st_node("node2", cpu="6000", memory="10000", **{EXT: "10"}),
        ],
        [],
        [50, 60],
    ),
    (
        "node-without-the-resource",
        [{"name": EXT, "weight": 2}, *DEFAULT_RESOURCES],
        _st_pod({"cpu": "3000", "memory": "4000"}),
        [
            _st_node("node1", cpu="6000", memory="10000"),
            _st_node("node2", cpu="6000", memory="10000", **{EXT: "4"}),
        ],
        [],
        [55, 55],
    ),
]


@pytest.mark.parametrize(
    ("resources", "pod", "nodes", "existing", "expected"),
    [c[1:] for c in UPSTREAM_LEAST],
    ids=[c[0] for c in UPSTREAM_LEAST],
)
def test_score_least_allocated_upstream(
    resources: Any, pod: Any, nodes: Any, existing: Any, expected: list[int]
) -> None:
    assert _scores(_strategy("LeastAllocated", resources), pod, nodes, existing) == expected


UPSTREAM_MOST = [
    (
        "nothing-scheduled-nothing-requested",
        DEFAULT_RESOURCES,
        _st_pod(),
        [N4_10, _st_node("node2", cpu="4000", memory="10000")],
        [],
        [0, 0],
    ),
    (
        "nothing-scheduled-differently-sized-nodes",
        DEFAULT_RESOURCES,
        _st_pod(C1, C2),
        [N4_10, _st_node("node2", cpu="6000", memory="10000")],
        [],
        [62, 50],
    ),
    (
        "no-resources-requested-pods-scheduled-with-resources",
        DEFAULT_RESOURCES,
        _st_pod(),
        [_st_node("node1", cpu="10000", memory="20000"), _st_node("node2", cpu="10000", memory="20000")],
        [
            _st_pod({"cpu": "3000", "memory": "0"}, node="node1"),
            _st_pod({"cpu": "3000", "memory": "0"}, node="node1"),
            _st_pod({"cpu": "3000", "memory": "0"}, node="node2"),
            _st_pod({"cpu": "3000", "memory": "5000"}, node="node2"),
        ],
        [30, 42],
    ),
    (
        "resources-requested-pods-scheduled-with-resources",
        DEFAULT_RESOURCES,
        _st_pod(C1, C2),
        [_st_node("node1", cpu="10000", memory="20000"), _st_node("node2", cpu="10000", memory="20000")],
        [
            _st_pod({"cpu": "3000", "memory": "0"}, node="node1"),
            _st_pod({"cpu": "3000", "memory": "5000"}, node="node2"),
        ],
        [42, 55],
    ),
    (
        "requested-equals-capacity",
        DEFAULT_RESOURCES,
        _st_pod({"cpu": "2000", "memory": "4000"}, {"cpu": "3000", "memory": "5000"}),
        [_st_node("node1", cpu="5000", memory="10000"), _st_node("node2", cpu="10000", memory="9000")],
        [],
        [95, 75],
    ),
    (
        "different-weights",
        [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}],
        _st_pod(C1, C2),
        [N4_10, _st_node("node2", cpu="6000", memory="10000")],
        [],
        [58, 50],
    ),
    (
        "non-zero-request-for-containers-without-requests",
        DEFAULT_RESOURCES,
        _st_pod({}),
        [_st_node("node1", cpu="250m", memory="1000Mi"), _st_node("node2", cpu="250m", memory="1000Mi")],
        [_st_pod({}, node="node1"), _st_pod({}, node="node1")],
        [80, 30],
    ),
    (
        "bypass-extended-resource-not-requested",
        EXTENDED_SET,
        _st_pod(C1, C2),
        [
            _st_node("node1", cpu="6000", memory="10000"),
            _st_node("node2", cpu="6000", memory="10000", **{EXT: "4"}),
        ],
        [],
        [50, 50],
    ),
    (
        "honor-extended-resource-requested",
        EXTENDED_SET,
        _st_pod({"cpu": "3000", "memory": "5000", EXT: "2"}),
        [
            _st_node("node1", cpu="6000", memory="10000", **{EXT: "4"}),
            _st_node("node2", cpu="6000", memory="10000", **{EXT: "10"}),
        ],
        [],
        [50, 40],
    ),
    (
        "node-without-the-resource",
        [{"name": EXT, "weight": 2}, *DEFAULT_RESOURCES],
        _st_pod({"cpu": "3000", "memory": "4000"}),
        [
            _st_node("node1", cpu="6000", memory="10000"),
            _st_node("node2", cpu="6000", memory="10000", **{EXT: "4"}),
        ],
        [],
        [45, 45],
    ),
]


@pytest.mark.parametrize(
    ("resources", "pod", "nodes", "existing", "expected"),
    [c[1:] for c in UPSTREAM_MOST],
    ids=[c[0] for c in UPSTREAM_MOST],
)
def test_score_most_allocated_upstream(
    resources: Any, pod: Any, nodes: Any, existing: Any, expected: list[int]
) -> None:
    assert _scores(_strategy("MostAllocated", resources), pod, nodes, existing) == expected


DECREASING = [(0, 10), (100, 0)]
INCREASING_1 = [(0, 0), (100, 1)]
FOO, BAR = "intel.com/foo", "intel.com/bar"
MEM_10000_MI = str(10000 * Mi)


def _bin_node(name: str, **extended: str) -> dict[str, Any]:
    return _st_node(name, cpu="4", memory=MEM_10000_MI, **extended)


UPSTREAM_RTCR = [
    (
        "nothing-scheduled-nothing-requested",
        DEFAULT_RESOURCES,
        DECREASING,
        _st_pod(),
        [N4_10, _st_node("node2", cpu="4000", memory="10000")],
        [_st_pod(node="node1"), _st_pod(node="node1")],
        [100, 100],
    ),
    (
        "differently-sized-nodes-rounded",
        DEFAULT_RESOURCES,
        DECREASING,
        _st_pod(C1, C2),
        [N4_10, _st_node("node2", cpu="6000", memory="10000")],
        [_st_pod(node="node1"), _st_pod(node="node1")],
        [38, 50],
    ),
    (
        "pods-scheduled-with-resources",
        DEFAULT_RESOURCES,
        DECREASING,
        _st_pod(),
        [N4_10, _st_node("node2", cpu="6000", memory="10000")],
        [
            _st_pod({"cpu": "3000", "memory": "5000"}, node="node1"),
            _st_pod({"cpu": "3000", "memory": "5000"}, node="node2"),
        ],
        [38, 50],
    ),
    (
        "single-extended-nothing-requested",
        [{"name": FOO, "weight": 1}],
        INCREASING_1,
        _st_pod(),
        [_bin_node("node1", **{FOO: "8"}), _bin_node("node2", **{FOO: "4"})],
        [],
        [0, 0],
    ),
    (
        "single-extended-requested",
        [{"name": FOO, "weight": 1}],
        INCREASING_1,
        _st_pod({FOO: "2"}),
        [_bin_node("node1", **{FOO: "8"}), _bin_node("node2", **{FOO: "4"})],
        [],
        [2, 5],
    ),
    (
        "single-extended-existing-pod",
        [{"name": FOO, "weight": 1}],
        INCREASING_1,
        _st_pod({FOO: "2"}),
        [_bin_node("node1", **{FOO: "8"}), _bin_node("node2", **{FOO: "4"})],
        [_st_pod({FOO: "2"}, node="node2")],
        [2, 10],
    ),
    (
        "single-extended-more-requested",
        [{"name": FOO, "weight": 1}],
        INCREASING_1,
        _st_pod({FOO: "4"}),
        [_bin_node("node1", **{FOO: "8"}), _bin_node("node2", **{FOO: "4"})],
        [],
        [5, 10],
    ),
    (
        "multiple-extended-nothing-requested",
        [{"name": FOO, "weight": 3}, {"name": BAR, "weight": 5}],
        INCREASING_1,
        _st_pod(),
        [_bin_node("node1", **{FOO: "8", BAR: "4"}), _bin_node("node2", **{FOO: "4", BAR: "8"})],
        [],
        [0, 0],
    ),
    (
        "multiple-extended-requested",
        [{"name": FOO, "weight": 3}, {"name": BAR, "weight": 5}],
        INCREASING_1,
        _st_pod({FOO: "2", BAR: "2"}),
        [_bin_node("node1", **{FOO: "8", BAR: "4"}), _bin_node("node2", **{FOO: "4", BAR: "8"})],
        [],
        [4, 3],
    ),
    (
        "multiple-extended-existing-pod",
        [{"name": FOO, "weight": 3}, {"name": BAR, "weight": 5}],
        INCREASING_1,
        _st_pod({FOO: "2", BAR: "2"}),
        [_bin_node("node1", **{FOO: "8", BAR: "4"}), _bin_node("node2", **{FOO: "4", BAR: "8"})],
        [_st_pod({FOO: "4", BAR: "2"}, node="node2")],
        [4, 7],
    ),
    (
        "multiple-extended-more-requested",
        [{"name": FOO, "weight": 3}, {"name": BAR, "weight": 5}],
        INCREASING_1,
        _st_pod({FOO: "4", BAR: "2"}),
        [_bin_node("node1", **{FOO: "8", BAR: "4"}), _bin_node("node2", **{FOO: "4", BAR: "8"})],
        [],
        [5, 5],
    ),
]


@pytest.mark.parametrize(
    ("resources", "shape", "pod", "nodes", "existing", "expected"),
    [c[1:] for c in UPSTREAM_RTCR],
    ids=[c[0] for c in UPSTREAM_RTCR],
)
def test_score_requested_to_capacity_ratio_upstream(
    resources: Any, shape: Any, pod: Any, nodes: Any, existing: Any, expected: list[int]
) -> None:
    assert _scores(_strategy("RequestedToCapacityRatio", resources, shape), pod, nodes, existing) == expected


def _hand_node(cpu: str = "4", memory: str = "8Gi", **extra: str) -> dict[str, Any]:
    return _st_node("n", cpu=cpu, memory=memory, **extra)


@pytest.mark.parametrize(
    ("args", "pod", "node", "existing", "expected"),
    [
        # (4000-1000)*100/4000 = 75 for both
        (_strategy("LeastAllocated"), _st_pod({"cpu": "1", "memory": "2Gi"}), _hand_node(), [], 75),
        # an existing pod without requests counts 100m / 200Mi:
        # (1000-500)*100/1000 = 50, (1024-512)*100/1024 = 50
        (
            _strategy("LeastAllocated"),
            _st_pod({"cpu": "400m", "memory": "312Mi"}),
            _hand_node("1", "1Gi"),
            [_st_pod({}, node="n")],
            50,
        ),
        # the incoming pod's missing memory request counts 200Mi:
        # cpu 50, memory (1000-200)*100/1000 = 80 -> 65
        (_strategy("LeastAllocated"), _st_pod({"cpu": "500m"}), _hand_node("1", "1000Mi"), [], 65),
        # 75*3 + 25*1 = 250, / 4 = 62 (integer division)
        (
            _strategy("LeastAllocated", [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]),
            _st_pod({"cpu": "1", "memory": "6Gi"}),
            _hand_node(),
            [],
            62,
        ),
        # ephemeral-storage counts real requests even when the pod asks for none: (10-5)*100/10 = 50
        (
            _strategy("LeastAllocated", [{"name": "ephemeral-storage", "weight": 1}]),
            _st_pod({"cpu": "1"}),
            _hand_node(**{"ephemeral-storage": "10Gi"}),
            [_st_pod({"ephemeral-storage": "5Gi"}, node="n")],
            50,
        ),
        # requested over allocatable scores 0
        (
            _strategy("LeastAllocated", [{"name": "cpu", "weight": 1}]),
            _st_pod({"cpu": "5"}),
            _hand_node(),
            [],
            0,
        ),
        # 3000*100/4000 = 75, 2Gi*100/8Gi = 25 -> 50
        (_strategy("MostAllocated"), _st_pod({"cpu": "3", "memory": "2Gi"}), _hand_node(), [], 50),
        # requested over allocatable is capped at allocatable: 100
        (
            _strategy("MostAllocated", [{"name": "cpu", "weight": 1}]),
            _st_pod({"cpu": "5"}),
            _hand_node(),
            [],
            100,
        ),
        # 333*100/1000 = 33 (truncated), memory 0 -> (33*2 + 0)/3 = 22
        (
            _strategy("MostAllocated", [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}]),
            _st_pod({"cpu": "333m", "memory": "0"}),
            _hand_node("1"),
            [],
            22,
        ),
        # decreasing shape (0,100)->(30,0) at utilisation 10: 100 + (-100*10)/30 = 100 - 33
        # (Go truncates toward zero; flooring would give 66)
        (
            _strategy("RequestedToCapacityRatio", [{"name": "cpu", "weight": 1}], [(0, 10), (30, 0)]),
            _st_pod({"cpu": "100m"}),
            _hand_node("1"),
            [],
            67,
        ),
        # utilisation past the last point takes its score: 0, and a zero score is left out of the average
        (
            _strategy("RequestedToCapacityRatio", [{"name": "cpu", "weight": 1}], [(0, 10), (30, 0)]),
            _st_pod({"cpu": "500m"}),
            _hand_node("1"),
            [],
            0,
        ),
        # cpu utilisation 0 scores 0 and does not count; memory 50 -> 50 (not 25)
        (
            _strategy("RequestedToCapacityRatio", DEFAULT_RESOURCES, [(0, 0), (100, 10)]),
            _st_pod({"cpu": "0", "memory": "4Gi"}),
            _hand_node(),
            [],
            50,
        ),
        # (45 + 50) / 2 = 47.5 rounds half away from zero: 48
        (
            _strategy("RequestedToCapacityRatio", DEFAULT_RESOURCES, [(0, 0), (100, 10)]),
            _st_pod({"cpu": "45", "memory": "4Gi"}),
            _hand_node("100"),
            [],
            48,
        ),
        # requested over allocatable is utilisation 100
        (
            _strategy("RequestedToCapacityRatio", [{"name": "cpu", "weight": 1}], [(0, 0), (100, 10)]),
            _st_pod({"cpu": "500m"}),
            _hand_node("1"),
            [_st_pod({"cpu": "900m"}, node="n")],
            100,
        ),
        # before the first point: the first point's score
        (
            _strategy("RequestedToCapacityRatio", [{"name": "cpu", "weight": 1}], [(50, 2), (100, 10)]),
            _st_pod({"cpu": "100m"}),
            _hand_node("1"),
            [],
            20,
        ),
    ],
    ids=[
        "least-both-75",
        "least-existing-pod-non-zero",
        "least-incoming-pod-non-zero-memory",
        "least-weighted-truncated",
        "least-ephemeral-storage",
        "least-over-allocatable",
        "most-average",
        "most-capped",
        "most-weighted-truncated",
        "ratio-decreasing-go-truncation",
        "ratio-past-last-point",
        "ratio-zero-scores-left-out",
        "ratio-rounding",
        "ratio-over-allocatable",
        "ratio-before-first-point",
    ],
)
def test_score_by_hand(args: Args, pod: Any, node: Any, existing: Any, expected: int) -> None:
    assert _scores(args, pod, [node], existing) == [expected]


#: a node whose memory does not fit an int64: ``Value()`` gives 2^63-1 bytes (as kube-scheduler reads it)
_INT64_MEMORY = _st_node("n", cpu="100m", memory="999999999999999999999999999999Ki", pods="100m")


@pytest.mark.parametrize(
    ("args", "pod", "expected"),
    [
        # memory: (2^63-1 - 64Mi) * 100 wraps around to -27682406500 in int64; Go's / truncates it to 0
        # (numpy's // floors it to -1, and the node scored -1, "an invalid score"); cpu (100-100)*100/100
        (_strategy("LeastAllocated"), _st_pod({"cpu": "100m", "memory": "64Mi"}), 0),
        # memory: min(2^63-1, 2^63-1) * 100 wraps around to -100, / (2^63-1) is 0; cpu 100 -> (100+0)/2
        (_strategy("MostAllocated"), _st_pod({"cpu": "100m", "memory": "10Ei"}), 50),
    ],
    ids=["least", "most"],
)
def test_score_truncates_toward_zero_where_int64_wraps(args: Args, pod: Any, expected: int) -> None:
    """kube-scheduler's scorers compute in int64 and divide with Go's ``/`` (toward zero): a product past
    2^63 wraps around to a negative number that divides to 0, not -1; per node and vectorised alike."""
    assert _scores(args, pod, [_INT64_MEMORY]) == [expected]


# -- in-place resizes and pod-level requests ------------------------------------------------------------
def _resized_on_n(spec_cpu: str, running_cpu: str, condition: str = "") -> dict[str, Any]:
    builder = make_pod().name(f"p{next(_ids)}").node("n").req(cpu=spec_cpu, memory="1Gi")
    builder.container_status(
        "c", {"cpu": running_cpu, "memory": "1Gi"}, {"cpu": running_cpu, "memory": "1Gi"}
    )
    if condition:
        builder.condition("PodResizePending", condition)
    return builder.obj()


@pytest.mark.parametrize(
    ("existing", "expected"),
    [
        # resized down to 500m in the spec, still running with 1500m: no room yet
        (_resized_on_n("500m", "1500m"), _unsch("Insufficient cpu")),
        (_resized_on_n("500m", "500m"), None),
        # resized up to 1500m: the room is taken before the kubelet acts ...
        (_resized_on_n("1500m", "500m"), _unsch("Insufficient cpu")),
        (_resized_on_n("1500m", "500m", "Deferred"), _unsch("Insufficient cpu")),
        # ... and given back when the resize can never happen
        (_resized_on_n("1500m", "500m", "Infeasible"), None),
    ],
    ids=["down-not-actuated", "down-actuated", "up-pending", "up-deferred", "up-infeasible"],
)
def test_filter_counts_existing_pods_as_resized(existing: dict[str, Any], expected: Status | None) -> None:
    plugin = NodeResourcesFit(_args())
    info, pod = _node_info(_n(), [existing]), PodInfo(_pod(cpu="1"))
    state = CycleState()
    plugin.pre_filter(state, pod, [info])
    assert plugin.filter(state, pod, info) == expected


def test_filter_reads_the_spec_of_the_pod_being_scheduled() -> None:
    """Upstream's computePodResourceRequest reads no resize status for a pod being scheduled."""
    raw = make_pod().name("p").req(cpu="1").container_status("c", {"cpu": "3"}).obj()
    plugin, pod, info = NodeResourcesFit(_args()), PodInfo(raw), _node_info(_n())
    state = CycleState()
    plugin.pre_filter(state, pod, [info])
    assert plugin.filter(state, pod, info) is None


def test_pod_level_requests_score_and_count_differently() -> None:
    """With pod-level cpu only, the incoming pod scores its containers' memory with a 200 MiB stand-in
    each (``calculatePodResourceRequest``), while on the node only the resources missing from the whole
    pod get one (``getNonMissingContainerRequests``): memory is present there, so 100 MiB."""
    raw = make_pod().name("p").req(memory="100Mi").container().pod_requests(cpu="1").obj()
    memory_only = _strategy("LeastAllocated", [{"name": "memory", "weight": 1}])
    # (1024 - 300) * 100 / 1024 = 70 for the incoming pod ...
    assert _scores(memory_only, raw, [_hand_node("4", "1Gi")]) == [70]
    # ... and (1024 - 100 - 200) * 100 / 1024 = 70 with it placed (100Mi, not 300Mi: that would be 51)
    # and a newcomer of one container without requests (200Mi)
    placed = dict(raw, spec=dict(raw["spec"], nodeName="n"))
    assert _scores(memory_only, _st_pod({}), [_hand_node("4", "1Gi")], [placed]) == [70]
    assert (PodInfo(raw).scoring_memory, PodInfo(placed).non_zero_memory) == (300 * Mi, 100 * Mi)


# -- args -----------------------------------------------------------------------------------------------
def test_default_args() -> None:
    args = _args()
    assert args.strategy == "LeastAllocated"
    assert args.resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
    assert (args.ignored_resources, args.ignored_resource_groups, args.shape) == ((), (), ())


_STRATEGY = "scoringStrategy"
_RATIO = "scoringStrategy.requestedToCapacityRatio"
_SHAPE = f"{_RATIO}.shape"
_RTCR = "RequestedToCapacityRatio"


def _rtcr(*points: tuple[int, int], **strategy: Any) -> dict[str, Any]:
    shape = [{"utilization": u, "score": s} for u, s in points]
    return {_STRATEGY: {"type": _RTCR, "requestedToCapacityRatio": {"shape": shape}, **strategy}}


#: v1.37.2's ``TestValidateFitArgs``, ``TestValidate{Least,Most}AllocatedScoringStrategy`` and
#: ``TestValidateRequestedToCapacityRatioScoringStrategy`` (``pkg/scheduler/apis/config/validation``), as
#: configured in YAML (defaulted first, as kube-scheduler decodes), with the messages of
#: ``ValidateNodeResourcesFitArgs``; the first error upstream lists is the one raised
UPSTREAM_FIT_ARGS = [
    pytest.param(
        {"ignoredResources": ["example.com/"]},
        'ignoredResources[0]: Invalid value: "example.com/": name part must be non-empty',
        id="ignored-resources-name-is-empty",
    ),
    pytest.param(
        {"ignoredResources": ["longvalue" + "a" * 64]},
        f'ignoredResources[0]: Invalid value: "longvalue{"a" * 64}": name part must be no more than 63 bytes',
        id="ignored-resources-too-long",
    ),
    pytest.param(
        {"ignoredResources": ["example.com/aaa/bbb"]},
        'ignoredResources[0]: Invalid value: "example.com/aaa/bbb": a valid label key must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. "
        "'example.com/MyName')",
        id="ignored-resources-too-many-slashes",
    ),
    pytest.param({"ignoredResources": ["example.com"]}, None, id="ignored-resources-valid"),
    pytest.param({"ignoredResourceGroups": ["example.com"]}, None, id="ignored-resource-groups-valid"),
    pytest.param(
        {"ignoredResourceGroups": ["example.com/"]},
        "ignoredResourceGroups[0]: Invalid value: \"example.com/\": resource group name can't contain '/'",
        id="ignored-resource-groups-illegal",
    ),
    pytest.param(
        {"ignoredResourceGroups": ["a" * 64]},
        f'ignoredResourceGroups[0]: Invalid value: "{"a" * 64}": name part must be no more than 63 bytes',
        id="ignored-resource-groups-too-long",
    ),
    pytest.param(
        {"ignoredResourceGroups": ["example.com/aa"]},
        "ignoredResourceGroups[0]: Invalid value: \"example.com/aa\": resource group name can't contain '/'",
        id="ignored-resource-groups-with-slash",
    ),
    pytest.param(
        {_STRATEGY: {"type": "Invalid"}},
        'scoringStrategy.type: Unsupported value: "Invalid": supported values: "LeastAllocated", '
        '"MostAllocated", "RequestedToCapacityRatio"',
        id="type-unsupported",
    ),
    pytest.param(
        {_STRATEGY: {"resources": [{"name": "cpu"}]}},
        'scoringStrategy.type: Unsupported value: "": supported values: "LeastAllocated", "MostAllocated", '
        '"RequestedToCapacityRatio"',
        id="type-left-out-of-a-given-strategy",
    ),
    pytest.param(
        {_STRATEGY: {"type": _RTCR}},
        f"{_RATIO}: Required value: must be specified when type is RequestedToCapacityRatio",
        id="requested-to-capacity-ratio-missing",
    ),
    pytest.param(
        {_STRATEGY: {"type": "LeastAllocated", "requestedToCapacityRatio": {"shape": [{"utilization": 0}]}}},
        f"{_RATIO}: Forbidden: must be nil when type is not RequestedToCapacityRatio",
        id="requested-to-capacity-ratio-with-least-allocated",
    ),
    pytest.param(
        {_STRATEGY: {"type": "MostAllocated", "requestedToCapacityRatio": {}}},
        f"{_RATIO}: Forbidden: must be nil when type is not RequestedToCapacityRatio",
        id="requested-to-capacity-ratio-with-most-allocated",
    ),
    *(
        pytest.param({_STRATEGY: {"type": kind, "resources": resources}}, message, id=f"{kind}-{name}")
        for kind in ("LeastAllocated", "MostAllocated")
        for name, resources, message in [
            ("multi-valid-resources", [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 10}], None),
            (
                "weight-greater-than-max",
                [{"name": "cpu", "weight": 101}],
                "scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in "
                "valid range (0, 100]",
            ),
            (
                "multi-invalid-resources",
                [{"name": "cpu", "weight": -1}, {"name": "memory", "weight": 101}],
                "scoringStrategy.resources[0].weight: Invalid value: -1: resource weight of cpu not in valid "
                "range (0, 100]",
            ),
        ]
    ),
    pytest.param(
        {_STRATEGY: {"type": _RTCR, "requestedToCapacityRatio": {}}},
        f"{_SHAPE}: Required value: at least one point must be specified",
        id="rtcr-no-shapes",
    ),
    pytest.param(
        _rtcr((30, 3), resources=[{"name": "cpu", "weight": 101}]),
        "scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range "
        "(0, 100]",
        id="rtcr-weight-greater-than-max",
    ),
    pytest.param(_rtcr((30, 3)), None, id="rtcr-valid-shapes"),
    pytest.param(
        _rtcr((-1, 3)),
        f"{_SHAPE}[0].utilization: Invalid value: -1: not in valid range [0, 100]",
        id="rtcr-utilization-less-than-min",
    ),
    pytest.param(
        _rtcr((101, 3)),
        f"{_SHAPE}[0].utilization: Invalid value: 101: not in valid range [0, 100]",
        id="rtcr-utilization-greater-than-max",
    ),
    pytest.param(
        _rtcr((10, 3), (10, 3)),
        f"{_SHAPE}[1].utilization: Invalid value: 10: values must be sorted in increasing order",
        id="rtcr-duplicated-utilization",
    ),
    pytest.param(_rtcr((10, 3), (20, 3), (30, 3)), None, id="rtcr-increasing-utilization"),
    pytest.param(
        _rtcr((10, 3), (20, 3), (15, 3)),
        f"{_SHAPE}[2].utilization: Invalid value: 15: values must be sorted in increasing order",
        id="rtcr-non-increasing-utilization",
    ),
    pytest.param(
        _rtcr((10, -1)),
        f"{_SHAPE}[0].score: Invalid value: -1: not in valid range [0, 10]",
        id="rtcr-score-less-than-min",
    ),
    pytest.param(
        _rtcr((10, 11)),
        f"{_SHAPE}[0].score: Invalid value: 11: not in valid range [0, 10]",
        id="rtcr-score-greater-than-max",
    ),
]


@pytest.mark.parametrize(("raw", "message"), UPSTREAM_FIT_ARGS)
def test_args_validation_as_upstream(raw: dict[str, Any], message: str | None) -> None:
    if message is None:
        _args(**raw)
        return
    with pytest.raises(ArgsError) as info:
        _args(**raw)
    assert str(info.value) == message


def test_args_defaulting_as_upstream() -> None:
    # SetDefaults_NodeResourcesFitArgs: a weight of 0 weighs 1, no resources are cpu and memory
    args = _args(scoringStrategy={"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 0}]})
    assert args.resources == (ResourceSpec("cpu", 1),)
    args = _args(scoringStrategy={"type": "MostAllocated", "resources": []})
    assert args.resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
    # a resource named twice is not refused (upstream scores it twice)
    args = _args(scoringStrategy={"type": "MostAllocated", "resources": [{"name": "cpu"}, {"name": "cpu"}]})
    assert [r.name for r in args.resources] == ["cpu", "cpu"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {_STRATEGY: {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": "2"}]}},
            "scoringStrategy.resources[0].weight: must be an integer, not '2'",
        ),
        (
            {_STRATEGY: {"type": "MostAllocated", "resources": [{"weight": 2}]}},
            "scoringStrategy.resources[0]: must be an object with a name",
        ),
        ({_STRATEGY: {"resources": {"cpu": 1}}}, "scoringStrategy.resources: must be a list"),
        ({_STRATEGY: "LeastAllocated"}, "scoringStrategy: must be an object"),
        ({_STRATEGY: {"type": 1}}, "scoringStrategy.type: must be a string, not 1"),
        ({_STRATEGY: {"requestedToCapacityRatio": []}}, f"{_RATIO}: must be an object"),
        (
            {_STRATEGY: {"requestedToCapacityRatio": {"shape": [{"utilization": 1.5, "score": 1}]}}},
            f"{_SHAPE}[0].utilization: must be an integer, not 1.5",
        ),
        ({_STRATEGY: {"requestedToCapacityRatio": {"shape": {}}}}, f"{_SHAPE}: must be a list"),
        ({"ignoredResources": "example.com/gpu"}, "ignoredResources: must be a list of strings"),
        ({"ignoredResources": [1]}, "ignoredResources: must be a list of strings"),
        (
            {"scoringStrategies": {}},
            "scoringStrategies: unknown field; "
            "known: ignoredResourceGroups, ignoredResources, scoringStrategy",
        ),
    ],
    ids=[
        "weight-not-integer",
        "resource-without-name",
        "resources-not-a-list",
        "strategy-not-an-object",
        "type-not-a-string",
        "ratio-not-an-object",
        "utilization-not-integer",
        "shape-not-a-list",
        "ignored-not-a-list",
        "ignored-not-strings",
        "unknown-field",
    ],
)
def test_args_decoding(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError) as info:
        _args(**raw)
    assert str(info.value) == message
