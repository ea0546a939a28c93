"""The framework runtime: filtering until enough nodes fit, lazily resolved statuses, scoring with
weights and range checks, reserve/unreserve, and permit waits on a virtual clock."""

import asyncio
from collections.abc import Iterable
from typing import Any

import numpy as np
import pytest

from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import (
    BindPlugin,
    FilterPlugin,
    NodeSet,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    RowVerdicts,
    ScorePlugin,
    VectorFilter,
    VectorScore,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.framework import NOMINATED_COPIES_SLACK, Framework, NodeStatuses
from kopf_scheduler.framework.status import SKIP, WAIT, Code, Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins.node_resources_fit import Args as FitArgs
from kopf_scheduler.plugins.node_resources_fit import NodeResourcesFit
from kopf_scheduler.testing import VirtualClock, make_node, make_pod
from kopf_scheduler.testing.framework import make_framework

NAMES = [f"n{i}" for i in range(6)]


def _snapshot(names: Iterable[str] = NAMES, cpu: str = "4") -> Snapshot:
    snapshot = Snapshot()
    snapshot.rebuild(
        [NodeInfo(make_node().name(n).capacity(cpu=cpu, memory="8Gi", pods=10).obj()) for n in names]
    )
    return snapshot


def _pod(name: str = "p", priority: int = 0, **requests: str) -> PodInfo:
    builder = make_pod().name(name).priority(priority)
    if requests:
        builder.req(**requests)
    return PodInfo(builder.obj())


def _framework(
    filter: Iterable[Any] = (),
    score: Iterable[Any] = (),
    weights: dict[str, int] | None = None,
    reserve: Iterable[Any] = (),
    permit: Iterable[Any] = (),
    pre_filter: Iterable[Any] = (),
    pre_score: Iterable[Any] = (),
    clock: VirtualClock | None = None,
    snapshot: Snapshot | None = None,
) -> Framework:
    return make_framework(
        pre_filter=pre_filter,
        filter=filter,
        pre_score=pre_score,
        score=score,
        weights=weights,
        reserve=reserve,
        permit=permit,
        clock=clock,
        snapshot=snapshot,
    )


# -- fake plugins ---------------------------------------------------------------------------------------
class Reject(FilterPlugin):
    """Rejects the named nodes; records every per-node call."""

    def __init__(self, name: str, nodes: Iterable[str], status: Status | None = None) -> None:
        self.name = name
        self.nodes = set(nodes)
        self.status = status or unschedulable(f"rejected by {name}")
        self.calls: list[str] = []

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        self.calls.append(node.name)
        return self.status if node.name in self.nodes else None


class VectorReject(Reject, VectorFilter):
    def __init__(
        self, name: str, nodes: Iterable[str], snapshot: Snapshot, status: Status | None = None
    ) -> None:
        super().__init__(name, nodes, status)
        self.snapshot = snapshot
        self.vector_calls = 0

    def filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        self.vector_calls += 1
        return np.array(
            [self.snapshot.node_infos[r].name not in self.nodes for r in rows.tolist()], dtype=bool
        )


class Boom(FilterPlugin, VectorFilter):
    """Raises: per node on ``on``, and always in its vector form."""

    name = "Boom"

    def __init__(self, on: str = "") -> None:
        self.on = on

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if node.name == self.on:
            raise RuntimeError("boom")
        return None

    def filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        raise RuntimeError("vector boom")


class FilterPluginOnly(FilterPlugin):
    """Hides a plugin's vector form, so the runtime must use its per-node filter."""

    def __init__(self, inner: FilterPlugin) -> None:
        self.inner = inner
        self.name = inner.name

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return self.inner.filter(state, pod, node)


def _reject(
    kind: str, name: str, nodes: Iterable[str], snapshot: Snapshot, status: Status | None = None
) -> Reject:
    return VectorReject(name, nodes, snapshot, status) if kind == "vector" else Reject(name, nodes, status)


def _find(
    framework: Framework,
    snapshot: Snapshot,
    order: list[int],
    num_to_find: int,
    pod: PodInfo | None = None,
    nominated: frozenset[str] = frozenset(),
) -> Any:
    return framework.find_feasible(
        CycleState(), pod or _pod(), snapshot, np.asarray(order, dtype=np.int64), num_to_find, nominated
    )


# -- filtering ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["scalar", "vector"])
@pytest.mark.parametrize(
    ("order", "num_to_find", "feasible", "examined", "rejected"),
    [
        ([0, 1, 2, 3, 4, 5], 3, ["n0", "n2", "n3"], 4, ["n1"]),
        ([0, 1, 2, 3, 4, 5], 10, ["n0", "n2", "n3", "n5"], 6, ["n1", "n4"]),
        ([3, 4, 5, 0, 1, 2], 2, ["n3", "n5"], 3, ["n4"]),
        ([0, 1, 2, 3, 4, 5], 1, ["n0"], 1, []),
        ([1, 4, 2], 5, ["n2"], 3, ["n1", "n4"]),
    ],
    ids=["stops-after-enough", "all-examined", "rotated-start", "first-fits", "subset"],
)
def test_find_feasible_stops_after_num_to_find(
    kind: str, order: list[int], num_to_find: int, feasible: list[str], examined: int, rejected: list[str]
) -> None:
    snapshot = _snapshot()
    framework = _framework(filter=[_reject(kind, "F", ["n1", "n4"], snapshot)])
    outcome = _find(framework, snapshot, order, num_to_find)
    assert [snapshot.node_infos[r].name for r in outcome.feasible.tolist()] == feasible
    assert outcome.examined == examined
    assert dict(outcome.statuses.items()) == {n: unschedulable("rejected by F", plugin="F") for n in rejected}
    assert len(outcome.statuses) == len(rejected)


@pytest.mark.parametrize("kind", ["scalar", "vector"])
def test_find_feasible_when_nothing_fits(kind: str) -> None:
    snapshot = _snapshot()
    framework = _framework(filter=[_reject(kind, "F", NAMES, snapshot, unresolvable("nope"))])
    outcome = _find(framework, snapshot, list(range(6)), 3)
    assert outcome.feasible.tolist() == []
    assert outcome.examined == 6
    assert dict(outcome.statuses.items()) == {n: unresolvable("nope", plugin="F") for n in NAMES}


def test_statuses_of_vector_rejected_nodes_are_resolved_lazily() -> None:
    snapshot = _snapshot()
    plugin = VectorReject("V", ["n1", "n2"], snapshot)
    outcome = _find(_framework(filter=[plugin]), snapshot, list(range(6)), 6)
    assert plugin.vector_calls == 1
    assert plugin.calls == []  # a pod that fits pays nothing for the statuses of rejected nodes
    assert len(outcome.statuses) == 2
    assert outcome.statuses.get("n2") == unschedulable("rejected by V", plugin="V")
    assert sorted(plugin.calls) == ["n1", "n2"]
    outcome.statuses.get("n1")
    assert len(plugin.calls) == 2  # resolved once


@pytest.mark.parametrize(
    ("chain", "expected"),
    [
        # the per-node chain's first failing plugin decides, even when a later vector filter pruned the node
        (
            [("scalar", "A", ["n1"]), ("vector", "B", ["n1", "n2"])],
            {
                "n1": unschedulable("rejected by A", plugin="A"),
                "n2": unschedulable("rejected by B", plugin="B"),
            },
        ),
        (
            [("vector", "B", ["n1"]), ("scalar", "A", ["n1", "n2"])],
            {
                "n1": unschedulable("rejected by B", plugin="B"),
                "n2": unschedulable("rejected by A", plugin="A"),
            },
        ),
        (
            [("vector", "A", ["n3"]), ("vector", "B", ["n1", "n3"])],
            {
                "n1": unschedulable("rejected by B", plugin="B"),
                "n3": unschedulable("rejected by A", plugin="A"),
            },
        ),
    ],
    ids=["scalar-before-vector", "vector-before-scalar", "two-vectors"],
)
def test_lazy_status_equals_the_per_node_chain(
    chain: list[tuple[str, str, list[str]]], expected: dict[str, Status]
) -> None:
    snapshot = _snapshot()
    framework = _framework(filter=[_reject(kind, name, nodes, snapshot) for kind, name, nodes in chain])
    outcome = _find(framework, snapshot, list(range(6)), 6)
    assert dict(outcome.statuses.items()) == expected
    for name, status in expected.items():
        assert framework.run_filter_chain(CycleState(), _pod(), snapshot.get(name)) == status  # type: ignore[arg-type]


class VectorStatuses(VectorReject):
    """Judges rejected rows in its vector form too: one status object for all of them; its per-node form
    accepts the nodes in ``disagree``, for which the vector form says None (a plugin bug)."""

    def __init__(
        self, name: str, nodes: Iterable[str], snapshot: Snapshot, disagree: Iterable[str] = ()
    ) -> None:
        super().__init__(name, nodes, snapshot)
        self.disagree = set(disagree)

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> RowVerdicts:
        shared = unschedulable(f"rejected by {self.name}")
        names = [self.snapshot.node_infos[r].name for r in rows.tolist()]
        return RowVerdicts([shared, None], np.array([name in self.disagree for name in names], dtype=np.intp))

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None if node.name in self.disagree else super().filter(state, pod, node)


def test_vector_statuses_name_their_plugin_and_are_counted_per_distinct_verdict() -> None:
    snapshot = _snapshot()
    plugin = VectorStatuses("V", ["n1", "n2", "n4"], snapshot)
    outcome = _find(_framework(filter=[plugin]), snapshot, list(range(6)), 6)
    rejected = unschedulable("rejected by V", plugin="V")
    assert outcome.statuses.verdict_counts() == [(rejected, 3)]  # counted before any node is read
    assert len(outcome.statuses) == 3
    assert outcome.statuses.get("n4") == rejected
    assert outcome.statuses.get("n0") is None
    assert dict(outcome.statuses.items()) == dict.fromkeys(["n1", "n2", "n4"], rejected)
    assert plugin.calls == []  # the vector form judged them all
    assert outcome.statuses.verdict_counts() == [(rejected, 3)]
    other = unresolvable("rejected by an extender", plugin="extender")
    outcome.statuses.set("n2", other)
    assert sorted(outcome.statuses.verdict_counts(), key=lambda c: c[1]) == [(other, 1), (rejected, 2)]


def test_a_vector_verdict_that_disagrees_with_the_per_node_filter_is_an_error() -> None:
    snapshot = _snapshot()
    plugin = VectorStatuses("V", ["n1", "n2"], snapshot, disagree=["n2"])
    outcome = _find(_framework(filter=[plugin]), snapshot, list(range(6)), 6)
    assert outcome.statuses.get("n1") == unschedulable("rejected by V", plugin="V")
    n2 = outcome.statuses.get("n2")
    assert n2 is not None and n2.code == Code.ERROR
    assert n2.message() == "vectorised filter 'V' rejected a node its filter accepts"


def test_skipped_filter_plugins_do_not_run() -> None:
    snapshot = _snapshot()
    framework = _framework(filter=[Reject("F", NAMES)])
    state = CycleState()
    state.skip_filter_plugins.add("F")
    outcome = framework.find_feasible(state, _pod(), snapshot, np.arange(6), 6)
    assert len(outcome.feasible) == 6


def test_a_raising_filter_becomes_an_error_status_naming_the_plugin() -> None:
    """Filtering stops at the first error, as ``findNodesThatPassFilters`` cancels on one upstream; the
    cycle then fails with it (``statuses.error``)."""
    snapshot = _snapshot()
    framework = _framework(filter=[Reject("F", []), FilterPluginOnly(Boom(on="n2"))])
    outcome = _find(framework, snapshot, list(range(6)), 6)
    expected = error('running "Boom" filter plugin: boom', plugin="Boom")
    assert dict(outcome.statuses.items()) == {"n2": expected}
    assert outcome.statuses.error == expected
    assert framework.run_filter_chain(CycleState(), _pod(), snapshot.get("n2")) == expected  # type: ignore[arg-type]
    assert outcome.feasible.tolist() == [0, 1]


def test_a_raising_vector_filter_fails_every_candidate() -> None:
    snapshot = _snapshot()
    outcome = _find(_framework(filter=[Boom()]), snapshot, [0, 1, 2], 3)
    assert outcome.feasible.tolist() == []
    assert outcome.examined == 3
    expected = error('running "Boom" filter plugin: vector boom', plugin="Boom")
    assert dict(outcome.statuses.items()) == {"n0": expected, "n1": expected, "n2": expected}


class Nominator:
    def __init__(self, pods: dict[str, list[PodInfo]]) -> None:
        self.pods = pods

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self.pods.get(node_name, [])


@pytest.mark.parametrize(
    ("priority", "fits"),
    [(0, False), (10, False), (20, True)],
    ids=["lower-priority-counts-nominee", "equal-priority-counts-nominee", "higher-priority-ignores-nominee"],
)
def test_filter_with_nominated_pods(priority: int, fits: bool) -> None:
    snapshot = _snapshot(["n0"], cpu="1")
    framework = _framework(filter=[NodeResourcesFit(FitArgs())])
    framework.nominator = Nominator({"n0": [_pod("nominee", priority=10, cpu="600m")]})
    outcome = _find(
        framework, snapshot, [0], 1, pod=_pod(priority=priority, cpu="500m"), nominated=frozenset({"n0"})
    )
    assert (len(outcome.feasible) == 1) is fits
    if not fits:
        assert outcome.statuses.get("n0") == unschedulable("Insufficient cpu", plugin="NodeResourcesFit")
    assert snapshot.get("n0").requested == {}  # type: ignore[union-attr]  # the simulation left the node alone


def test_each_pod_sees_a_nominated_node_as_it_is_now() -> None:
    """The copy of a node with its nominees is kept for the next pod, never past a change of either."""
    snapshot = _snapshot(["n0"], cpu="1")
    framework = _framework(filter=[NodeResourcesFit(FitArgs())])
    nominee = _pod("nominee", priority=10, cpu="600m")
    framework.nominator = nominator = Nominator({"n0": [nominee]})

    def fits() -> bool:
        pod = _pod(priority=10, cpu="300m")
        return len(_find(framework, snapshot, [0], 1, pod=pod, nominated=frozenset({"n0"})).feasible) == 1

    assert fits() and fits()  # 600m + 300m of 1 CPU, twice
    nominator.pods["n0"] = [nominee, _pod("second", priority=10, cpu="200m")]
    assert not fits()  # a second nominee
    nominator.pods["n0"] = [nominee]
    assert fits()
    nominator.pods["n0"] = [_pod("nominee", priority=10, cpu="800m")]
    assert not fits()  # the nominee updated: a new object, larger
    nominator.pods["n0"] = [nominee]
    assert fits()
    bound = _pod("bound", cpu="200m")
    node = snapshot.get("n0")
    assert node is not None
    node.add_pod(bound)  # the node changed: a new generation
    assert not fits()
    node.remove_pod(bound)
    assert fits()


def test_copies_of_nodes_no_longer_nominated_are_dropped() -> None:
    """Each copy holds a whole node and its nominees: once the nominees are gone (a gang deleted, its
    members bound), the copies go too, beyond a few kept for the next pods."""
    names = [f"n{i}" for i in range(200)]
    snapshot = _snapshot(names, cpu="1")
    framework = _framework(filter=[NodeResourcesFit(FitArgs())])
    framework.nominator = nominator = Nominator(
        {n: [_pod(f"nominee-{n}", priority=10, cpu="600m")] for n in names}
    )
    everywhere = frozenset(names)
    pod = _pod(priority=10, cpu="300m")
    assert (
        len(_find(framework, snapshot, list(range(200)), 200, pod=pod, nominated=everywhere).feasible) == 200
    )
    assert len(framework._nominated_copies) == 200  # one copy per nominated node, kept for the next pod
    nominator.pods = {"n7": nominator.pods["n7"]}
    assert len(_find(framework, snapshot, [7], 1, pod=pod, nominated=frozenset({"n7"})).feasible) == 1
    assert list(framework._nominated_copies) == ["n7"]
    nominator.pods = {}
    for _ in range(3):
        assert len(_find(framework, snapshot, list(range(200)), 10, pod=pod).feasible) == 10
    assert len(framework._nominated_copies) <= NOMINATED_COPIES_SLACK


# -- pre-filter -----------------------------------------------------------------------------------------
class Pre(PreFilterPlugin):
    """A pre-filter plugin that records that it ran."""

    def __init__(self, name: str, status: Status | None = None, nodes: Iterable[str] | None = None) -> None:
        self.name = name
        self.status = status
        self.nodes = None if nodes is None else frozenset(nodes)
        self.ran = False

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Any
    ) -> tuple[PreFilterResult | None, Status | None]:
        self.ran = True
        return PreFilterResult(self.nodes), self.status


PENDING = Status(Code.PENDING, ("waiting",))


@pytest.mark.parametrize(
    ("plugins", "nodes", "status", "with_nodes", "ran"),
    [
        ([Pre("A")], None, None, [], "A"),
        ([Pre("A", nodes=["n1", "n2"]), Pre("B", nodes=["n2", "n3"])], {"n2"}, None, ["A", "B"], "AB"),
        (
            [Pre("B", nodes=["n1"]), Pre("A", nodes=["n2"]), Pre("C")],
            set(),
            # no plugin named; the plugins listed sorted, as upstream's set
            unresolvable("node(s) didn't satisfy plugin(s) [A B] simultaneously"),
            ["B", "A"],
            "BA",
        ),
        ([Pre("A", nodes=[])], set(), unresolvable("node(s) didn't satisfy plugin A"), ["A"], "A"),
        # Unschedulable: the remaining plugins still run; the last such status wins
        (
            [Pre("A", unschedulable("a")), Pre("B"), Pre("C", unschedulable("c"), nodes=["n1"]), Pre("D")],
            None,
            unschedulable("c", plugin="C"),
            [],
            "ABCD",
        ),
        (
            [Pre("A", unschedulable("a")), Pre("B", nodes=["n1"])],
            {"n1"},
            unschedulable("a", plugin="A"),
            ["B"],
            "AB",
        ),
        # ... but an empty intersection after it ends the run with its own status
        (
            [Pre("A", unschedulable("a")), Pre("B", nodes=[]), Pre("C")],
            set(),
            unresolvable("node(s) didn't satisfy plugin B"),
            ["B"],
            "AB",
        ),
        # UnschedulableAndUnresolvable stops at once and lists no plugins
        (
            [Pre("A", nodes=["n1"]), Pre("B", unresolvable("b")), Pre("C")],
            None,
            unresolvable("b", plugin="B"),
            [],
            "AB",
        ),
        (
            [Pre("A", unschedulable("a")), Pre("B", unresolvable("b")), Pre("C")],
            None,
            unresolvable("b", plugin="B"),
            [],
            "AB",
        ),
        # any other code is an error naming the plugin
        (
            [Pre("A", unschedulable("a")), Pre("B", error("boom")), Pre("C")],
            None,
            error('running PreFilter plugin "B": boom', plugin="B"),
            [],
            "AB",
        ),
        (
            [Pre("A", PENDING), Pre("B")],
            None,
            error('running PreFilter plugin "A": waiting', plugin="A"),
            [],
            "A",
        ),
        ([Pre("A", SKIP, nodes=["n1"]), Pre("B", nodes=["n2"])], {"n2"}, None, ["B"], "AB"),
    ],
    ids=[
        "all-nodes",
        "intersection",
        "empty-intersection",
        "one-plugin-empty",
        "unschedulable-runs-the-rest-last-wins",
        "unschedulable-with-a-result",
        "unschedulable-then-empty-result",
        "unresolvable-stops",
        "unresolvable-after-unschedulable",
        "error-after-unschedulable",
        "pending-is-an-error",
        "skip",
    ],
)
def test_run_pre_filter(
    plugins: list[Pre], nodes: set[str] | None, status: Status | None, with_nodes: list[str], ran: str
) -> None:
    state = CycleState()
    result, got, got_with_nodes = _framework(pre_filter=plugins).run_pre_filter(state, _pod(), [])
    assert (None if result is None or result.node_names is None else set(result.node_names)) == nodes
    assert got == status
    assert got_with_nodes == with_nodes
    assert "".join(p.name for p in plugins if p.ran) == ran
    if any(p.status is SKIP for p in plugins):
        assert state.skip_filter_plugins == {"A"}


# -- scoring --------------------------------------------------------------------------------------------
class Fixed(ScorePlugin):
    def __init__(self, name: str, scores: dict[str, int], normalize: Any = None) -> None:
        self.name = name
        self.scores = scores
        self.normalize = normalize
        self.has_normalize = normalize is not None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        if node.name not in self.scores:
            raise KeyError(node.name)
        return self.scores[node.name]

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        return self.normalize(scores)


class VectorFixed(Fixed, VectorScore):
    def __init__(self, name: str, scores: dict[str, int], snapshot: Snapshot) -> None:
        super().__init__(name, scores)
        self.snapshot = snapshot

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        raise AssertionError("the runtime prefers the vector form")

    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return np.array(
            [self.scores[self.snapshot.node_infos[r].name] for r in rows.tolist()], dtype=np.int64
        )


def _to_max_100(scores: np.ndarray) -> None:
    scores[:] = scores * 100 // scores.max()


def _invalid(plugin: str, score: int) -> str:
    # upstream's wording, grammar included
    return (
        f'applying score defaultWeights on Score plugins: plugin "{plugin}" returns an invalid score '
        f"{score}, it should in the range of [0, 100] after normalizing"
    )


def _add_100(scores: np.ndarray) -> None:
    scores += 100


def _score(framework: Framework, snapshot: Snapshot, names: list[str], explain: bool = False) -> Any:
    rows = np.array([snapshot.index_of(n) for n in names], dtype=np.int64)
    return framework.run_score(CycleState(), _pod(), NodeSet(snapshot, rows), explain=explain)


def test_weights_multiply_and_sum() -> None:
    snapshot = _snapshot(["n0", "n1", "n2"])
    framework = _framework(
        score=[
            Fixed("A", {"n0": 10, "n1": 50, "n2": 100}),
            VectorFixed("B", {"n0": 100, "n1": 0, "n2": 7}, snapshot),
        ],
        weights={"A": 2, "B": 3},
        snapshot=snapshot,
    )
    total, breakdown, status = _score(framework, snapshot, ["n2", "n0", "n1"], explain=True)
    assert status is None
    assert total.tolist() == [221, 320, 100]
    assert breakdown.weighted["A"].tolist() == [200, 20, 100]
    assert breakdown.weighted["B"].tolist() == [21, 300, 0]


def test_normalize_runs_before_the_range_check() -> None:
    snapshot = _snapshot(["n0", "n1"])
    framework = _framework(
        score=[Fixed("N", {"n0": 300, "n1": 1200}, normalize=_to_max_100)], snapshot=snapshot
    )
    total, breakdown, status = _score(framework, snapshot, ["n0", "n1"], explain=True)
    assert status is None
    assert total.tolist() == [25, 100]
    assert breakdown.raw["N"].tolist() == [300, 1200]
    assert breakdown.normalized["N"].tolist() == [25, 100]


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        (
            Fixed("Big", {"n0": 150, "n1": 3}),
            _invalid("Big", 150),
        ),
        (
            Fixed("Neg", {"n0": -1, "n1": 3}),
            _invalid("Neg", -1),
        ),
        (
            Fixed("Norm", {"n0": 1, "n1": 2}, normalize=_add_100),
            _invalid("Norm", 102),
        ),
        (Fixed("Raise", {"n0": 1}), "running Score plugins: plugin \"Raise\" failed with: 'n1'"),
    ],
    ids=["over-100", "negative", "after-normalize", "raises"],
)
def test_score_errors(plugin: Fixed, message: str) -> None:
    snapshot = _snapshot(["n0", "n1"])
    framework = _framework(score=[plugin], snapshot=snapshot)
    _, _, status = _score(framework, snapshot, ["n0", "n1"])
    assert status == error(message, plugin=plugin.name)


def test_normalize_rejection_is_an_error_naming_the_plugin() -> None:
    snapshot = _snapshot(["n0"])
    framework = _framework(
        score=[Fixed("N", {"n0": 1}, normalize=lambda s: unschedulable("bad"))], snapshot=snapshot
    )
    expected = error('running Normalize on Score plugins: plugin "N" failed with: bad', plugin="N")
    assert _score(framework, snapshot, ["n0"])[2] == expected


class PreScoreSkip(PreScorePlugin):
    def __init__(self, name: str, status: Status | None) -> None:
        self.name = name
        self.status = status

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        return self.status


def test_pre_score_skip_skips_the_score_plugin() -> None:
    snapshot = _snapshot(["n0"])
    framework = _framework(
        pre_score=[PreScoreSkip("A", SKIP), PreScoreSkip("B", None)],
        score=[Fixed("A", {}), Fixed("B", {"n0": 40})],
        snapshot=snapshot,
    )
    state = CycleState()
    nodes = NodeSet(snapshot, np.array([0]))
    assert framework.run_pre_score(state, _pod(), nodes) is None
    assert state.skip_score_plugins == {"A"}
    total, _, status = framework.run_score(state, _pod(), nodes)
    assert (total.tolist(), status) == ([40], None)


def test_pre_score_failure_is_an_error() -> None:
    framework = _framework(pre_score=[PreScoreSkip("A", unschedulable("no"))])
    status = framework.run_pre_score(CycleState(), _pod(), NodeSet(_snapshot(["n0"]), np.array([0])))
    assert status == error('running PreScore plugin "A": no', plugin="A")


# -- reserve --------------------------------------------------------------------------------------------
class Reserver(ReservePlugin):
    def __init__(
        self, name: str, log: list[str], status: Status | None = None, raise_on_unreserve: bool = False
    ) -> None:
        self.name = name
        self.log = log
        self.status = status
        self.raise_on_unreserve = raise_on_unreserve

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        self.log.append(f"reserve {self.name}")
        return self.status

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.log.append(f"unreserve {self.name}")
        if self.raise_on_unreserve:
            raise RuntimeError("unreserve must not fail, but one plugin did")


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (unschedulable("no room"), unschedulable("no room", plugin="R2")),
        (unresolvable("never"), unresolvable("never", plugin="R2")),
        (error("kaput"), error('running Reserve plugin "R2": kaput', plugin="R2")),
    ],
    ids=["unschedulable", "unresolvable", "error"],
)
def test_reserve_failure_then_unreserve_in_reverse_order(failure: Status, expected: Status) -> None:
    log: list[str] = []
    plugins = [
        Reserver("R1", log),
        Reserver("R2", log, failure),
        Reserver("R3", log, raise_on_unreserve=True),
    ]
    framework = _framework(reserve=plugins)
    assert framework.run_reserve(CycleState(), _pod(), "n0") == expected
    framework.run_unreserve(CycleState(), _pod(), "n0")
    assert log == ["reserve R1", "reserve R2", "unreserve R3", "unreserve R2", "unreserve R1"]


def test_reserve_success() -> None:
    log: list[str] = []
    framework = _framework(reserve=[Reserver("R1", log), Reserver("R2", log)])
    assert framework.run_reserve(CycleState(), _pod(), "n0") is None
    assert log == ["reserve R1", "reserve R2"]


# -- permit ---------------------------------------------------------------------------------------------
class Permit(PermitPlugin):
    def __init__(self, name: str, status: Status | None = None, timeout: float = 0.0) -> None:
        self.name = name
        self.status = status
        self.timeout = timeout

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        return self.status, self.timeout


async def _start_waiting(framework: Framework, pod: PodInfo) -> "asyncio.Task[Status | None]":
    task = asyncio.ensure_future(framework.wait_on_permit(pod))
    for _ in range(3):  # let the timers start sleeping on the virtual clock
        await asyncio.sleep(0)
    return task


async def test_permit_allow_after_wait() -> None:
    clock = VirtualClock()
    framework = _framework(permit=[Permit("P", WAIT, 10), Permit("Q", WAIT, 30), Permit("R")], clock=clock)
    pod = _pod()
    assert framework.run_permit(CycleState(), pod, "n0") == Status(Code.WAIT, (), "P")
    waiting = framework.waiting_pods.get(pod.uid)
    assert waiting is not None and sorted(waiting.pending_plugins()) == ["P", "Q"]
    task = await _start_waiting(framework, pod)
    assert clock.next_wakeup() == 1010.0  # P's 10 s timer is the first of the two
    waiting.allow("P")
    await asyncio.sleep(0)
    assert not task.done()
    waiting.allow("Q")
    assert await task is None
    assert framework.waiting_pods.get(pod.uid) is None
    await asyncio.sleep(0)  # the cancellations reach the sleeping timers
    assert clock.next_wakeup() is None  # both timers were cancelled: nothing left to fire later
    clock.advance(60)
    await asyncio.sleep(0)
    assert await waiting.wait() is None  # a late timer would have turned nothing into a rejection


async def test_permit_reject_while_waiting() -> None:
    framework = _framework(permit=[Permit("P", WAIT, 10)])
    pod = _pod()
    framework.run_permit(CycleState(), pod, "n0")
    task = await _start_waiting(framework, pod)
    framework.waiting_pods.get(pod.uid).reject("P", "not today")  # type: ignore[union-attr]
    assert await task == unschedulable("not today", plugin="P")
    assert framework.waiting_pods.all() == []


@pytest.mark.parametrize(
    ("timeout", "advance", "message"),
    [
        (10, 10, "rejected due to timeout after waiting 10s at plugin P"),
        (1.5, 1.5, "rejected due to timeout after waiting 1.5s at plugin P"),
        (3600, 900, "rejected due to timeout after waiting 15m0s at plugin P"),
    ],
    ids=["10s", "fractional", "capped-at-15-minutes"],
)
async def test_permit_timeout(timeout: float, advance: float, message: str) -> None:
    clock = VirtualClock()
    framework = _framework(permit=[Permit("P", WAIT, timeout)], clock=clock)
    pod = _pod()
    framework.run_permit(CycleState(), pod, "n0")
    task = await _start_waiting(framework, pod)
    clock.advance(advance - 0.001)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(0.001)
    assert await task == unschedulable(message, plugin="P")


@pytest.mark.parametrize(
    ("plugins", "expected"),
    [
        ([Permit("P"), Permit("Q")], None),
        ([Permit("P", WAIT, 5), Permit("Q", unschedulable("no"))], unschedulable("no", plugin="Q")),
        ([Permit("P", error("kaput"))], error('running Permit plugin "P": kaput', plugin="P")),
    ],
    ids=["all-allow", "reject-beats-wait", "error"],
)
async def test_run_permit_outcomes(plugins: list[Permit], expected: Status | None) -> None:
    framework = _framework(permit=plugins)
    pod = _pod()
    assert framework.run_permit(CycleState(), pod, "n0") == expected
    assert framework.waiting_pods.get(pod.uid) is None
    assert await framework.wait_on_permit(pod) is None


# -- queue, post-filter and binding points -------------------------------------------------------------
class Gate(PreEnqueuePlugin):
    def __init__(self, name: str, status: Status | None = None, raises: bool = False) -> None:
        self.name = name
        self.status = status
        self.raises = raises

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if self.raises:
            raise RuntimeError("gate broke")
        return self.status


@pytest.mark.parametrize(
    ("plugins", "expected"),
    [
        ([Gate("A"), Gate("B")], None),
        (
            [Gate("A"), Gate("B", unresolvable("gated")), Gate("C", unschedulable("x"))],
            unresolvable("gated", plugin="B"),
        ),
        ([Gate("A", raises=True)], error('running PreEnqueue plugin "A": gate broke', plugin="A")),
    ],
    ids=["admitted", "first-rejection", "raises"],
)
def test_run_pre_enqueue(plugins: list[Gate], expected: Status | None) -> None:
    framework = _framework()
    framework.pre_enqueue = plugins  # type: ignore[assignment]
    assert framework.run_pre_enqueue(_pod()) == expected


class Preempt(PostFilterPlugin):
    def __init__(self, name: str, status: Status | None, nominate: str = "") -> None:
        self.name = name
        self.status = status
        self.nominate = nominate
        self.called = False

    def post_filter(
        self, state: CycleState, pod: PodInfo, node_statuses: Any
    ) -> tuple[PostFilterResult | None, Status | None]:
        self.called = True
        return (PostFilterResult(self.nominate) if self.nominate else None), self.status


@pytest.mark.parametrize(
    ("plugins", "nominated", "expected", "called"),
    [
        (
            [Preempt("A", unschedulable("a1", "a2")), Preempt("B", unschedulable("b"))],
            None,
            unschedulable("a1, a2", "b", plugin="A"),
            "AB",
        ),
        (
            [Preempt("A", unschedulable("no")), Preempt("B", None, nominate="n1")],
            "n1",
            Status(Code.SUCCESS, (), "B"),
            "AB",
        ),
        (
            [Preempt("A", unresolvable("hopeless")), Preempt("B", None, nominate="n1")],
            None,
            unresolvable("hopeless", plugin="A"),
            "A",
        ),
        ([Preempt("A", error("kaput")), Preempt("B", None)], None, error("kaput", plugin="A"), "A"),
        ([], None, Status(Code.UNSCHEDULABLE, (), ""), ""),
    ],
    ids=["all-reject", "second-succeeds", "unresolvable-stops", "error-stops", "none"],
)
def test_run_post_filter(
    plugins: list[Preempt], nominated: str | None, expected: Status, called: str
) -> None:
    framework = _framework()
    framework.post_filter = plugins  # type: ignore[assignment]
    result, status = framework.run_post_filter(CycleState(), _pod(), _snapshot_statuses())
    assert status == expected
    assert (result.nominated_node_name if result else None) == nominated
    assert "".join(p.name for p in plugins if p.called) == called


def _snapshot_statuses() -> Any:
    return NodeStatuses(_framework(), CycleState(), _pod(), _snapshot(["n0"]))


class Binder(BindPlugin, PreBindPlugin, PostBindPlugin):
    def __init__(self, name: str, log: list[str], status: Status | None = None, raises: bool = False) -> None:
        self.name = name
        self.log = log
        self.status = status
        self.raises = raises

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        self.log.append(f"pre-bind {self.name}")
        if self.raises:
            raise RuntimeError("broke")
        return self.status

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        self.log.append(f"bind {self.name}")
        if self.raises:
            raise RuntimeError("broke")
        return self.status

    async def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.log.append(f"post-bind {self.name}")
        if self.raises:
            raise RuntimeError("broke")


@pytest.mark.parametrize(
    ("statuses", "expected", "ran"),
    [
        ([None, None], None, ["A"]),
        ([SKIP, None], None, ["A", "B"]),
        ([SKIP, SKIP], Status(Code.SKIP, ("no bind plugin bound the pod",)), ["A", "B"]),
        ([error("409: conflict"), None], error("409: conflict", plugin="A"), ["A"]),
        (["raise", None], error('running Bind plugin "A": broke', plugin="A"), ["A"]),
    ],
    ids=["first-binds", "skip-passes-on", "nobody-binds", "error", "raises"],
)
async def test_run_bind(statuses: list[Any], expected: Status | None, ran: list[str]) -> None:
    log: list[str] = []
    framework = _framework()
    framework.bind = [
        Binder(name, log, None if s == "raise" else s, raises=s == "raise")
        for name, s in zip("AB", statuses, strict=True)
    ]
    assert await framework.run_bind(CycleState(), _pod(), "n0") == expected
    assert log == [f"bind {n}" for n in ran]


@pytest.mark.parametrize(
    ("statuses", "expected", "ran"),
    [
        ([None, SKIP], None, ["A", "B"]),
        ([unschedulable("volume not ready"), None], unschedulable("volume not ready", plugin="A"), ["A"]),
        (["raise", None], error('running PreBind plugin "A": broke', plugin="A"), ["A"]),
    ],
    ids=["success-and-skip", "rejection", "raises"],
)
async def test_run_pre_bind(statuses: list[Any], expected: Status | None, ran: list[str]) -> None:
    log: list[str] = []
    framework = _framework()
    framework.pre_bind = [
        Binder(name, log, None if s == "raise" else s, raises=s == "raise")
        for name, s in zip("AB", statuses, strict=True)
    ]
    assert await framework.run_pre_bind(CycleState(), _pod(), "n0") == expected
    assert log == [f"pre-bind {n}" for n in ran]


async def test_run_post_bind_runs_every_plugin_even_after_a_failure() -> None:
    log: list[str] = []
    framework = _framework()
    framework.post_bind = [Binder("A", log, raises=True), Binder("B", log)]
    await framework.run_post_bind(CycleState(), _pod(), "n0")
    assert log == ["post-bind A", "post-bind B"]
