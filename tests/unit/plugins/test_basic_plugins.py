"""NodeName, NodeUnschedulable, SchedulingGates, PrioritySort and DefaultBinder, one extension point per
test."""

from typing import Any

import pytest
from fake_api import Answer, FakeAPI, status

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import PreFilterResult
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.status import Code, Status, error
from kopf_scheduler.plugins import (
    default_binder,
    node_name,
    node_unschedulable,
    priority_sort,
    scheduling_gates,
)
from kopf_scheduler.testing import make_node, make_pod

UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def _pod(builder: Any) -> PodInfo:
    return PodInfo(builder.name("p").obj())


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (make_pod(), None),
        (make_pod().node("n1"), None),
        (make_pod().node("n2"), Status(UAU, ("node(s) didn't match the requested node name",))),
    ],
    ids=["no-node-name", "matching", "other-node"],
)
def test_node_name_filter(pod: Any, expected: Status | None) -> None:
    plugin = node_name.new(node_name.Args(), None)
    assert plugin.filter(CycleState(), _pod(pod), NodeInfo(make_node().name("n1").obj())) == expected


@pytest.mark.parametrize(
    ("pod", "result"),
    [(make_pod().node("foo"), PreFilterResult(frozenset({"foo"}))), (make_pod(), None)],
    ids=[
        "assigned pod with nodeName set, prefilter restricts to assigned node",
        "unassigned pod without nodeName set, prefilter returns nil",
    ],
)
def test_node_name_pre_filter(pod: Any, result: PreFilterResult | None) -> None:
    """Upstream v1.37.2's ``TestNodeName_PreFilter``."""
    plugin = node_name.new(node_name.Args(), None)
    assert plugin.pre_filter(CycleState(), _pod(pod), []) == (result, None)


CORDONED = Status(UAU, ("node(s) were unschedulable",))
_KEY = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(
    ("node", "pod", "expected"),
    [
        (make_node(), make_pod(), None),
        (make_node().unschedulable(), make_pod(), CORDONED),
        (make_node().unschedulable(False), make_pod(), None),
        (make_node().unschedulable(), make_pod().toleration(_KEY, "Exists", effect="NoSchedule"), None),
        (make_node().unschedulable(), make_pod().toleration(_KEY, "Exists"), None),
        (make_node().unschedulable(), make_pod().toleration(operator="Exists"), None),
        (make_node().unschedulable(), make_pod().toleration(_KEY, "Exists", effect="NoExecute"), CORDONED),
        (make_node().unschedulable(), make_pod().toleration(_KEY, "Equal", "true"), CORDONED),
        (make_node().unschedulable(), make_pod().toleration("other", "Exists"), CORDONED),
    ],
    ids=[
        "schedulable",
        "cordoned",
        "explicitly-schedulable",
        "tolerates-unschedulable-taint",
        "tolerates-any-effect",
        "tolerates-everything",
        "wrong-effect",
        "wrong-value",
        "other-key",
    ],
)
def test_node_unschedulable_filter(node: Any, pod: Any, expected: Status | None) -> None:
    plugin = node_unschedulable.new(node_unschedulable.Args(), None)
    assert plugin.pre_filter(CycleState(), _pod(pod), []) == (None, None)
    assert plugin.filter(CycleState(), _pod(pod), NodeInfo(node.name("n1").obj())) == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (make_pod(), None),
        (make_pod().gate("a"), Status(UAU, ("waiting for scheduling gates: [a]",))),
        (
            make_pod().gate("a").gate("example.com/b"),
            Status(UAU, ("waiting for scheduling gates: [a example.com/b]",)),
        ),
    ],
    ids=["no-gates", "one-gate", "two-gates"],
)
def test_scheduling_gates_pre_enqueue(pod: Any, expected: Status | None) -> None:
    assert scheduling_gates.new(scheduling_gates.Args(), None).pre_enqueue(_pod(pod)) == expected


def _queued(priority: int, timestamp: float) -> QueuedPodInfo:
    return QueuedPodInfo(
        PodInfo(make_pod().name(f"p{priority}-{timestamp}").priority(priority).obj()), timestamp, timestamp
    )


@pytest.mark.parametrize(
    ("a", "b", "less"),
    [
        (_queued(10, 5.0), _queued(0, 1.0), True),
        (_queued(0, 1.0), _queued(10, 5.0), False),
        (_queued(5, 1.0), _queued(5, 2.0), True),
        (_queued(5, 2.0), _queued(5, 1.0), False),
        (_queued(5, 1.0), _queued(5, 1.0), False),
        (_queued(-1, 0.0), _queued(0, 9.0), False),
    ],
    ids=[
        "higher-priority-first",
        "lower-priority-later",
        "earlier-first",
        "later-after",
        "equal",
        "negative-priority",
    ],
)
def test_priority_sort_queue_sort(a: QueuedPodInfo, b: QueuedPodInfo, less: bool) -> None:
    plugin = priority_sort.new(priority_sort.Args(), None)
    assert plugin.less(a, b) is less
    assert (plugin.sort_key(a) < plugin.sort_key(b)) is less


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (None, None),
        (
            status(409, 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned'),
            error(
                '409: binding default/p to n1: Operation cannot be fulfilled on pods/binding "p": '
                "pod p is already assigned",
                plugin="DefaultBinder",
            ),
        ),
    ],
    ids=["bound", "conflict"],
)
async def test_default_binder_bind(answer: Answer | None, expected: Status | None) -> None:
    api = FakeAPI()
    if answer is not None:
        api.script("POST", "*/binding", answer)
    plugin = default_binder.new(default_binder.Args(), type("Handle", (), {"client": api})())
    status_ = await plugin.bind(CycleState(), _pod(make_pod()), "n1")
    assert status_ == expected
    assert api.bind_attempts() == [("default/p", "n1")]
    assert api.bound == ([] if answer else [("default/p", "n1")])
    if answer is not None:
        assert status_ is not None and isinstance(status_.cause, APIError) and status_.cause.status == 409
