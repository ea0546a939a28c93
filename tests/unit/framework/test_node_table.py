"""The node table, through the cache and its snapshot as the scheduling cycle reads it, with quantities that
do not fit an int64: every cell holds the int64 kube-scheduler holds (``Quantity.MilliValue`` for CPU,
``Value`` otherwise, see ``api.quantity``) and sums wrap around as upstream's int64 sums do. Before, such a
quantity raised OverflowError in ``NodeTable.set_row`` on every cycle."""

from __future__ import annotations

import numpy as np
import pytest

from kopf_scheduler.api.quantity import INT64_MAX, INT64_MIN, wrap_int64
from kopf_scheduler.backend.cache import Cache, Snapshot
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

GPU = "example.com/gpu"

#: (quantity, CPU in millicores, anything else) as kube-scheduler reads it
EXTREMES = [
    ("1e30", 0, 0),
    ("10Ei", -1000, INT64_MAX),  # the API server stores 10Ei as 2^63-1
    ("9223372036854775808", 0, INT64_MIN),  # 2^63
    ("9223372036854775807", -1000, INT64_MAX),  # 2^63-1
    ("-1", -1000, -1),
]
IDS = ["1e30", "10Ei", "2^63", "2^63-1", "negative"]


def _one_node() -> tuple[Cache, Snapshot]:
    cache = Cache(VirtualClock())
    cache.add_node(make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=110).obj())
    return cache, Snapshot()


def _pod(name: str, quantity: str) -> PodInfo:
    return PodInfo(make_pod().name(name).uid(name).node("n1").req(cpu=quantity, memory=quantity).obj())


def _cells(snapshot: Snapshot, array: np.ndarray) -> dict[str, int]:
    table = snapshot.table
    return {name: int(array[0, col]) for name, col in table.column.items()}


@pytest.mark.parametrize(("quantity", "milli", "value"), EXTREMES, ids=IDS)
def test_allocatable_beyond_int64_is_upstreams_int64(quantity: str, milli: int, value: int) -> None:
    cache = Cache(VirtualClock())
    resources = {"cpu": quantity, "memory": quantity, "pods": "110", GPU: quantity}
    cache.add_node(make_node().name("n1").capacity(**resources).obj())
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    cells = _cells(snapshot, snapshot.table.allocatable)
    assert cells == {"cpu": milli, "memory": value, "ephemeral-storage": 0, GPU: value}


@pytest.mark.parametrize(("quantity", "milli", "value"), EXTREMES, ids=IDS)
def test_requests_beyond_int64_are_upstreams_int64_and_their_sums_wrap(
    quantity: str, milli: int, value: int
) -> None:
    cache, snapshot = _one_node()
    cache.add_pod(_pod("a", quantity))
    cache.update_snapshot(snapshot)
    table = snapshot.table
    assert _cells(snapshot, table.requested) == {"cpu": milli, "memory": value, "ephemeral-storage": 0}
    assert table.non_zero[0].tolist() == [milli, value]

    cache.add_pod(_pod("b", quantity))  # Go's int64 += : two pods of 2^63-1 bytes make -2
    cache.update_snapshot(snapshot)
    twice = [wrap_int64(milli * 2), wrap_int64(value * 2)]
    assert [
        int(table.requested[0, table.column["cpu"]]),
        int(table.requested[0, table.column["memory"]]),
    ] == twice
    assert table.non_zero[0].tolist() == twice
    assert table.pod_count[0] == 2

    cache.remove_pod(_pod("b", quantity))  # and unwraps when one goes
    cache.update_snapshot(snapshot)
    assert _cells(snapshot, table.requested) == {"cpu": milli, "memory": value, "ephemeral-storage": 0}
    assert table.non_zero[0].tolist() == [milli, value]


def test_node_info_sums_never_leave_int64() -> None:
    node = NodeInfo(make_node().name("n1").capacity(memory="10Ei").obj())
    for name in "abc":
        node.add_pod(_pod(name, "10Ei"))
        assert all(INT64_MIN <= amount <= INT64_MAX for amount in node.requested.values())
        assert INT64_MIN <= node.non_zero_memory <= INT64_MAX
    assert node.requested["memory"] == INT64_MAX * 3 - 2**64  # 3 x (2^63-1), wrapped
    assert node.allocatable["memory"] == INT64_MAX


def test_set_row_wraps_what_does_not_fit_rather_than_raise() -> None:
    """``NodeInfo`` keeps int64 amounts, but a row must never stop a cycle: numpy refuses a larger int."""
    node = NodeInfo(make_node().name("n1").obj())
    node.allocatable = {"cpu": 10**33, "memory": 2**64 + 5}
    node.requested = {"cpu": -(2**63) - 1}
    node.non_zero_cpu, node.non_zero_memory, node.allowed_pod_number = 2**63, 2**65 + 1, 2**64 + 110
    table = NodeTable()
    table.reorder(1, [], [])
    table.set_row(0, node)
    cpu, memory = table.column["cpu"], table.column["memory"]
    assert int(table.allocatable[0, cpu]) == wrap_int64(10**33) == 4089650035136921600
    assert int(table.allocatable[0, memory]) == 5
    assert int(table.requested[0, cpu]) == INT64_MAX
    assert table.non_zero[0].tolist() == [INT64_MIN, 1]
    assert int(table.allowed_pods[0]) == 110
