"""Vectorised filters that fail on some nodes (``filter_errors``) or have no vector form for a pod
(``filter_rows`` returning None): filtering gives what the per-node chain gives, node by node in
examination order, stopping at the first error as ``findNodesThatPassFilters`` does upstream."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import FilterPlugin, VectorFilter
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime import framework as runtime_framework
from kopf_scheduler.framework.runtime.framework import FilterOutcome, Framework
from kopf_scheduler.framework.status import Code, Status, error, unresolvable, unschedulable
from kopf_scheduler.testing import make_node, make_pod
from kopf_scheduler.testing.framework import make_framework

NAMES = [f"n{i}" for i in range(8)]


class Verdicts(FilterPlugin):
    """A per-node filter returning a fixed status per node name; records its calls."""

    def __init__(self, name: str, verdicts: Mapping[str, Status | None], snapshot: Snapshot) -> None:
        self.name = name
        self.verdicts = dict(verdicts)
        self.snapshot = snapshot
        self.calls: list[str] = []

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        self.calls.append(node.name)
        return self.verdicts.get(node.name)

    def _names(self, rows: np.ndarray) -> list[str]:
        return [self.snapshot.node_infos[r].name for r in rows.tolist()]


class VectorVerdicts(Verdicts, VectorFilter):
    """The same verdicts, vectorised, with its errors said by ``filter_errors``; ``declines``: no vector
    form for the pod."""

    def __init__(
        self, name: str, verdicts: Mapping[str, Status | None], snapshot: Snapshot, declines: bool = False
    ) -> None:
        super().__init__(name, verdicts, snapshot)
        self.declines = declines
        self.vector_calls = 0

    def filter_rows(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> np.ndarray | None:
        self.vector_calls += 1
        if self.declines:
            return None
        return np.array([self.verdicts.get(n) is None for n in self._names(rows)], dtype=bool)

    def filter_errors(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> np.ndarray | None:
        statuses = [self.verdicts.get(n) for n in self._names(rows)]
        failing = [s is not None and s.code == Code.ERROR for s in statuses]
        return np.array(failing, dtype=bool) if any(failing) else None


def _snapshot(names: Sequence[str] = NAMES) -> Snapshot:
    snapshot = Snapshot()
    snapshot.rebuild([NodeInfo(make_node().name(n).capacity(cpu="4", pods=10).obj()) for n in names])
    return snapshot


def _framework(filters: Sequence[FilterPlugin]) -> Framework:
    return make_framework(filter=filters)


POD = PodInfo(make_pod().name("p").obj())


def _find(framework: Framework, snapshot: Snapshot, order: Sequence[int], num_to_find: int) -> FilterOutcome:
    rows = np.asarray(order, dtype=np.int64)
    return framework.find_feasible(CycleState(), POD, snapshot, rows, num_to_find)


def _names(snapshot: Snapshot, rows: np.ndarray) -> list[str]:
    return [snapshot.node_infos[r].name for r in rows.tolist()]


# -- examples ------------------------------------------------------------------------------------------
def test_the_first_error_in_examination_order_ends_filtering() -> None:
    snapshot = _snapshot()
    boom = error("n3 broke")
    plugin = VectorVerdicts("V", {"n1": unschedulable("full"), "n3": boom, "n5": error("n5 broke")}, snapshot)
    outcome = _find(_framework([plugin]), snapshot, range(8), 8)
    assert outcome.statuses.error == boom.with_plugin("V")
    assert _names(snapshot, outcome.feasible) == ["n0", "n2"]
    assert plugin.calls == ["n3"]  # the per-node chain runs only where the vector form said "error"


def test_an_error_after_enough_feasible_nodes_is_never_reached() -> None:
    snapshot = _snapshot()
    plugin = VectorVerdicts("V", {"n3": error("n3 broke")}, snapshot)
    outcome = _find(_framework([plugin]), snapshot, range(8), 2)
    assert outcome.statuses.error is None
    assert _names(snapshot, outcome.feasible) == ["n0", "n1"]
    assert outcome.examined == 2


def test_an_earlier_filter_that_rejects_the_node_hides_the_error() -> None:
    snapshot = _snapshot()
    earlier = Verdicts("A", {"n2": unresolvable("not here")}, snapshot)
    vector = VectorVerdicts("V", {"n2": error("n2 broke")}, snapshot)
    outcome = _find(_framework([earlier, vector]), snapshot, range(8), 8)
    assert outcome.statuses.error is None
    assert outcome.statuses.get("n2") == unresolvable("not here", plugin="A")
    assert len(outcome.feasible) == 7


def test_a_per_node_filter_failing_on_a_node_a_later_vector_filter_pruned_ends_filtering() -> None:
    snapshot = _snapshot()
    earlier = Verdicts("A", {"n2": error("n2 broke")}, snapshot)
    vector = VectorVerdicts("V", {"n2": unschedulable("full"), "n4": unschedulable("full")}, snapshot)
    outcome = _find(_framework([earlier, vector]), snapshot, range(8), 8)
    assert outcome.statuses.error == error("n2 broke", plugin="A")
    assert _names(snapshot, outcome.feasible) == ["n0", "n1"]
    assert earlier.calls == ["n0", "n1", "n2"]


def test_a_filter_without_a_vector_form_for_the_pod_runs_node_by_node() -> None:
    snapshot = _snapshot()
    plugin = VectorVerdicts("V", {"n1": unschedulable("full")}, snapshot, declines=True)
    outcome = _find(_framework([plugin]), snapshot, range(8), 3)
    assert plugin.vector_calls == 1
    assert plugin.calls == ["n0", "n1", "n2", "n3"]
    assert _names(snapshot, outcome.feasible) == ["n0", "n2", "n3"]
    assert dict(outcome.statuses.items()) == {"n1": unschedulable("full", plugin="V")}


# -- property: any chain of per-node, vectorised and declining filters ---------------------------------
def _reference(
    framework: Framework, snapshot: Snapshot, order: Sequence[int], num_to_find: int
) -> tuple[list[int], dict[str, Status], Status | None, int]:
    """Node by node, in order: (feasible rows, statuses, the error that stopped filtering, examined)."""
    feasible: list[int] = []
    statuses: dict[str, Status] = {}
    for i, row in enumerate(order):
        node = snapshot.node_infos[row]
        status = framework.run_filter_chain(CycleState(), POD, node)
        if status is None:
            feasible.append(row)
            if len(feasible) >= num_to_find:
                return feasible, statuses, None, i + 1
            continue
        statuses[node.name] = status
        if status.code == Code.ERROR:
            return feasible, statuses, status, len(order)
    return feasible, statuses, None, len(order)


VERDICTS = st.sampled_from(["ok", "ok", "ok", "ok", "unschedulable", "unresolvable", "error"])


@st.composite
def chains(draw: Any) -> tuple[Snapshot, list[FilterPlugin]]:
    snapshot = _snapshot(NAMES[: draw(st.integers(1, len(NAMES)))])
    plugins: list[FilterPlugin] = []
    for k in range(draw(st.integers(1, 4))):
        name = f"F{k}"
        verdicts: dict[str, Status | None] = {}
        for node in snapshot.node_infos:
            verdict = draw(VERDICTS)
            if verdict == "unschedulable":
                verdicts[node.name] = unschedulable(f"{name} rejects {node.name}")
            elif verdict == "unresolvable":
                verdicts[node.name] = unresolvable(f"{name} never takes {node.name}")
            elif verdict == "error":
                verdicts[node.name] = error(f"{name} broke on {node.name}")
        kind = draw(st.sampled_from(["scalar", "vector", "declining"]))
        if kind == "scalar":
            plugins.append(Verdicts(name, verdicts, snapshot))
        else:
            plugins.append(VectorVerdicts(name, verdicts, snapshot, declines=kind == "declining"))
    return snapshot, plugins


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chain=chains(),
    data=st.data(),
    num_to_find=st.integers(1, 8),
    chunk=st.sampled_from([1, 2, 3, 256]),
)
def test_vectorised_filtering_equals_the_per_node_chain(
    chain: tuple[Snapshot, list[FilterPlugin]], data: Any, num_to_find: int, chunk: int
) -> None:
    snapshot, plugins = chain
    order = data.draw(st.permutations(range(len(snapshot.node_infos))))
    order = order[: data.draw(st.integers(1, len(order)))]
    framework = _framework(plugins)
    with mock.patch.object(runtime_framework, "MIN_FILTER_CHUNK", chunk):
        outcome = _find(framework, snapshot, order, num_to_find)
    feasible, statuses, failure, examined = _reference(framework, snapshot, order, num_to_find)
    assert outcome.statuses.error == failure
    assert outcome.feasible.tolist() == feasible
    if failure is None:  # on an error the attempt fails: only the error is read
        assert outcome.examined == examined
        assert dict(outcome.statuses.items()) == statuses


@pytest.mark.parametrize("declines", [False, True])
def test_a_raising_vector_form_still_fails_every_candidate(declines: bool) -> None:
    class Raises(VectorVerdicts):
        def filter_errors(self, *args: Any) -> np.ndarray | None:
            raise RuntimeError("no verdicts")

    snapshot = _snapshot(NAMES[:3])
    plugin = Raises("R", {"n1": unschedulable("full")}, snapshot, declines=declines)
    outcome = _find(_framework([plugin]), snapshot, range(3), 3)
    if declines:  # no vector form: filter_errors is never asked
        assert outcome.statuses.error is None
        assert _names(snapshot, outcome.feasible) == ["n0", "n2"]
    else:
        expected = error('running "R" filter plugin: no verdicts', plugin="R")
        assert outcome.statuses.error == expected
        assert dict(outcome.statuses.items()) == {n: expected for n in NAMES[:3]}
