"""Property tests: each vectorised form (``filter_rows``, ``score_rows``) agrees with its per-node form on
randomised clusters, and the runtime's vectorised filtering reports the per-node chain's verdicts."""

import itertools
from typing import Any
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import FilterPlugin
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime import framework as runtime_framework
from kopf_scheduler.framework.status import Status, unschedulable
from kopf_scheduler.plugins import node_name, node_unschedulable
from kopf_scheduler.plugins.node_resources_fit import Args, NodeResourcesFit
from kopf_scheduler.testing import make_node, make_pod
from kopf_scheduler.testing.framework import make_framework

GPU = "example.com/gpu"
FPGA = "other.io/fpga"
LATE = "late.io/widget"  # first seen in an incremental snapshot update
HUGE = "hugepages-2Mi"
SCORED = ["cpu", "memory", "ephemeral-storage", GPU, FPGA, LATE, HUGE]
_ids = itertools.count()

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _container(draw: Any, extended: list[str]) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if draw(st.booleans()):
        requests["cpu"] = f"{draw(st.integers(0, 3000))}m"
    if draw(st.booleans()):
        requests["memory"] = f"{draw(st.integers(0, 4096))}Mi"
    if draw(st.integers(0, 3)) == 0:
        requests["ephemeral-storage"] = f"{draw(st.integers(0, 20))}Gi"
    for name in extended:
        if draw(st.integers(0, 2)) == 0:
            requests[name] = f"{draw(st.integers(0, 8))}Mi" if name == HUGE else str(draw(st.integers(0, 3)))
    return {"name": f"c{next(_ids)}", "image": "x", "resources": {"requests": requests}}


def _pod(draw: Any, extended: list[str], node: str = "") -> dict[str, Any]:
    containers = [_container(draw, extended) for _ in range(draw(st.integers(0, 2)))]
    builder = make_pod().name(f"p{next(_ids)}").set("spec.containers", containers)
    if node:
        builder.node(node)
    return builder.obj()


@st.composite
def clusters(draw: Any) -> tuple[Snapshot, PodInfo, np.ndarray]:
    infos = []
    for i in range(draw(st.integers(1, 7))):
        capacity = {"cpu": f"{draw(st.integers(0, 8000))}m", "memory": f"{draw(st.integers(0, 16384))}Mi"}
        if draw(st.booleans()):
            capacity["ephemeral-storage"] = f"{draw(st.integers(0, 100))}Gi"
        if draw(st.booleans()):
            capacity[GPU] = str(draw(st.integers(0, 4)))
        if draw(st.integers(0, 3)) == 0:
            capacity[FPGA] = str(draw(st.integers(0, 2)))
        if draw(st.integers(0, 3)) == 0:
            capacity[HUGE] = f"{draw(st.integers(0, 16))}Mi"
        if draw(st.integers(0, 5)) > 0:
            capacity["pods"] = str(draw(st.integers(0, 6)))
        builder = make_node().name(f"n{i}").capacity(**capacity).unschedulable(draw(st.booleans()))
        info = NodeInfo(builder.obj())
        for _ in range(draw(st.integers(0, 4))):
            info.add_pod(PodInfo(_pod(draw, [GPU, FPGA, HUGE], node=info.name)))
        infos.append(info)
    snapshot = Snapshot()
    snapshot.rebuild(infos)
    if draw(st.booleans()):  # an incremental update that may add a resource column
        row = draw(st.integers(0, len(infos) - 1))
        clone = snapshot.node_infos[row].clone()
        clone.add_pod(PodInfo(_pod(draw, [GPU, LATE], node=clone.name)))
        if draw(st.booleans()):
            clone.allocatable = {**clone.allocatable, LATE: draw(st.integers(0, 3))}
        snapshot.replace(clone)
    names = [info.name for info in infos]
    pod = make_pod().name("incoming").set("spec.containers", [])
    raw = _pod(draw, [GPU, FPGA, LATE, HUGE])
    pod.set("spec.containers", raw["spec"]["containers"])
    node = draw(st.sampled_from(["", "", *names, "missing"]))
    if node:
        pod.node(node)
    toleration = draw(st.sampled_from([None, "exact", "wildcard", "wrong-effect"]))
    if toleration == "exact":
        pod.toleration("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule")
    elif toleration == "wildcard":
        pod.toleration(operator="Exists")
    elif toleration == "wrong-effect":
        pod.toleration("node.kubernetes.io/unschedulable", "Exists", effect="NoExecute")
    order = draw(st.permutations(range(len(infos))))
    rows = np.asarray(order[: draw(st.integers(1, len(order)))], dtype=np.int64)
    return snapshot, PodInfo(pod.obj()), rows


@st.composite
def fit_args(draw: Any) -> Args:
    strategy = draw(st.sampled_from(["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]))
    names = draw(st.lists(st.sampled_from(SCORED), min_size=1, max_size=4, unique=True))
    raw: dict[str, Any] = {
        "scoringStrategy": {
            "type": strategy,
            "resources": [{"name": n, "weight": draw(st.integers(1, 5))} for n in names],
        },
        "ignoredResources": draw(st.lists(st.sampled_from([GPU, LATE]), unique=True)),
        "ignoredResourceGroups": draw(st.lists(st.sampled_from(["example.com", "other.io"]), unique=True)),
    }
    if strategy == "RequestedToCapacityRatio":
        utilizations = sorted(draw(st.lists(st.integers(0, 100), min_size=1, max_size=4, unique=True)))
        raw["scoringStrategy"]["requestedToCapacityRatio"] = {
            "shape": [{"utilization": u, "score": draw(st.integers(0, 10))} for u in utilizations]
        }
    args = Args.from_dict(raw)
    args.validate()
    return args


@SETTINGS
@given(cluster=clusters(), args=fit_args())
def test_node_resources_fit_filter_rows_agrees_with_filter(cluster: Any, args: Args) -> None:
    snapshot, pod, rows = cluster
    plugin = NodeResourcesFit(args)
    state = CycleState()
    plugin.pre_filter(state, pod, snapshot.node_infos)
    expected = [plugin.filter(state, pod, snapshot.node_infos[r]) is None for r in rows.tolist()]
    assert plugin.filter_rows(state, pod, snapshot.table, rows).tolist() == expected


@SETTINGS
@given(cluster=clusters(), args=fit_args())
def test_node_resources_fit_score_rows_agrees_with_score(cluster: Any, args: Args) -> None:
    snapshot, pod, rows = cluster
    plugin = NodeResourcesFit(args)
    state = CycleState()
    expected = [plugin.score(state, pod, snapshot.node_infos[r]) for r in rows.tolist()]
    assert plugin.score_rows(state, pod, snapshot.table, rows).tolist() == expected
    assert all(0 <= s <= 100 for s in expected)


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def snapshot(self) -> Snapshot:
        return self._snapshot


@SETTINGS
@given(cluster=clusters())
def test_node_name_and_node_unschedulable_filter_rows_agree_with_filter(cluster: Any) -> None:
    snapshot, pod, rows = cluster
    for plugin in (
        node_name.new(node_name.Args(), _Handle(snapshot)),
        node_unschedulable.new(node_unschedulable.Args(), None),
    ):
        expected = [plugin.filter(CycleState(), pod, snapshot.node_infos[r]) is None for r in rows.tolist()]
        assert plugin.filter_rows(CycleState(), pod, snapshot.table, rows).tolist() == expected, plugin.name


@SETTINGS
@given(
    cluster=clusters(), args=fit_args(), num_to_find=st.integers(1, 8), chunk=st.sampled_from([1, 2, 3, 256])
)
def test_find_feasible_reports_the_per_node_chain(
    cluster: Any, args: Args, num_to_find: int, chunk: int
) -> None:
    """Whatever the chunks candidates are filtered in, the feasible nodes are the first ``num_to_find``
    the per-node chain accepts, and the statuses are the chain's for every node examined up to there."""
    snapshot, pod, rows = cluster
    filters = [
        node_unschedulable.new(node_unschedulable.Args(), None),
        node_name.new(node_name.Args(), _Handle(snapshot)),
        NodeResourcesFit(args),
    ]
    framework = make_framework(filter=filters)
    state = CycleState()
    with mock.patch.object(runtime_framework, "MIN_FILTER_CHUNK", chunk):
        outcome = framework.find_feasible(state, pod, snapshot, rows, num_to_find)
    chain = [(r, framework.run_filter_chain(state, pod, snapshot.node_infos[r])) for r in rows.tolist()]
    fits = [r for r, status in chain if status is None]
    assert outcome.feasible.tolist() == fits[:num_to_find]
    examined = len(rows) if len(fits) < num_to_find else rows.tolist().index(fits[num_to_find - 1]) + 1
    assert outcome.examined == examined
    expected = {snapshot.node_infos[r].name: status for r, status in chain[:examined] if status is not None}
    assert dict(outcome.statuses.items()) == expected


class _FewPods(FilterPlugin):
    """A filter with no vectorised form: a node holding more than ``most`` pods does not fit."""

    name = "FewPods"

    def __init__(self, most: int) -> None:
        self.most = most

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return unschedulable("too many pods") if len(node.pods) > self.most else None


class _Nominated:
    def __init__(self, on: dict[str, list[PodInfo]]) -> None:
        self.on = on

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self.on.get(node_name, [])

    def add_nominated_pod(self, pod: PodInfo, node_name: str | None = None) -> None:
        raise AssertionError("filtering nominates nobody")

    def nominated_node_of(self, pod: PodInfo) -> str:
        return ""


@SETTINGS
@given(cluster=clusters(), args=fit_args(), num_to_find=st.integers(1, 8), data=st.data())
def test_find_feasible_with_nominated_pods_reports_the_per_node_chain(
    cluster: Any, args: Args, num_to_find: int, data: Any
) -> None:
    """Nodes with nominated pods (of lower, equal or higher priority than the pod) are judged as the
    per-node ``run_filter_with_nominated_pods`` judges them: with and without those pods, every filter.
    Where a vectorised filter rejects a node without the nominated pods, the status is the chain's
    without them: the node is infeasible either way (adding pods never makes a vectorised filter pass),
    but kube-scheduler's status would come from the pass with them, where an earlier filter may fail
    first (a known difference in the wording of such a node's reason, taken to spare a node clone per
    rejected node)."""
    snapshot, pod, rows = cluster
    on: dict[str, list[PodInfo]] = {}
    for info in snapshot.node_infos:
        for _ in range(data.draw(st.integers(0, 2))):
            raw = _pod(data.draw, [GPU, FPGA])
            raw["spec"]["priority"] = pod.priority + data.draw(st.integers(-1, 1))
            on.setdefault(info.name, []).append(PodInfo(raw))
    vectorised = [node_unschedulable.new(node_unschedulable.Args(), None), NodeResourcesFit(args)]
    filters = [vectorised[0], _FewPods(data.draw(st.integers(0, 4))), vectorised[1]]
    framework = make_framework(filter=filters)
    framework.nominator = _Nominated(on)
    state = CycleState()
    outcome = framework.find_feasible(state, pod, snapshot, rows, num_to_find, frozenset(on))

    def judged(node: NodeInfo) -> Status | None:
        if framework.run_filters(vectorised, state, pod, node) is not None:
            return framework.run_filter_chain(state, pod, node)
        return framework.run_filter_with_nominated_pods(state, pod, node)

    chain = [(r, judged(snapshot.node_infos[r])) for r in rows.tolist()]
    fits = [r for r, status in chain if status is None]
    assert outcome.feasible.tolist() == fits[:num_to_find]
    examined = len(rows) if len(fits) < num_to_find else rows.tolist().index(fits[num_to_find - 1]) + 1
    expected = {snapshot.node_infos[r].name: status for r, status in chain[:examined] if status is not None}
    assert dict(outcome.statuses.items()) == expected
