"""Classifying pod and node updates into the events plugins register for (upstream v1.37's
``PodSchedulingPropertiesChange`` and ``NodeSchedulingPropertiesChange``, labels as ``Label()`` gives
them)."""

from __future__ import annotations

import pytest
from _queue_kit import make_node, make_pod

from kopf_scheduler.backend.queue import node_update_events, pod_update_events
from kopf_scheduler.framework.events import Action, Resource
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo


def _claims(pod: PodInfo, claims: list) -> PodInfo:
    raw = dict(pod.raw)
    raw["status"] = {"resourceClaimStatuses": claims}
    return PodInfo(raw)


TOLERATION = {"key": "k", "operator": "Exists"}


def _requests(**requests: str) -> PodInfo:
    from kopf_scheduler.testing import make_pod as build

    return PodInfo(build().name("p").uid("uid-p").req(**requests).obj())


@pytest.mark.parametrize(
    ("old", "new", "actions"),
    [
        pytest.param(make_pod("p"), make_pod("p"), [Action.UPDATE_POD_OTHER], id="nothing-specific"),
        pytest.param(make_pod("p"), make_pod("p", labels={"a": "b"}), [Action.UPDATE_POD_LABEL], id="labels"),
        pytest.param(
            make_pod("p", cpu="2"), make_pod("p", cpu="1"), [Action.UPDATE_POD_SCALE_DOWN], id="scale-down"
        ),
        pytest.param(
            make_pod("p", cpu="2"), make_pod("p"), [Action.UPDATE_POD_SCALE_DOWN], id="request-removed"
        ),
        pytest.param(
            make_pod("p", cpu="1"), make_pod("p", cpu="2"), [Action.UPDATE_POD_SCALE_UP], id="scale-up"
        ),
        pytest.param(
            _requests(cpu="1"), _requests(cpu="1", memory="1Gi"), [Action.UPDATE_POD_SCALE_UP], id="added"
        ),
        pytest.param(
            _requests(cpu="2"),
            _requests(cpu="1", memory="1Gi"),
            [Action.UPDATE_POD_SCALE_DOWN, Action.UPDATE_POD_SCALE_UP],
            id="down-and-up",
        ),
        pytest.param(
            make_pod("p", gates=["a", "b"]),
            make_pod("p"),
            [Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED],
            id="gates-eliminated",
        ),
        pytest.param(
            make_pod("p", gates=["a", "b"]),
            make_pod("p", gates=["a"]),
            [Action.UPDATE_POD_OTHER],
            id="one-gate",
        ),
        pytest.param(
            make_pod("p"),
            make_pod("p", tolerations=[TOLERATION]),
            [Action.UPDATE_POD_TOLERATION],
            id="toleration",
        ),
        pytest.param(
            make_pod("p"),
            _claims(make_pod("p"), [{"name": "c", "resourceClaimName": "p-c"}]),
            [Action.UPDATE_POD_GENERATED_RESOURCE_CLAIM],
            id="generated-claim",
        ),
        pytest.param(
            make_pod("p", labels={"a": "1"}, cpu="2"),
            make_pod("p", labels={"a": "2"}, cpu="1", tolerations=[TOLERATION]),
            [Action.UPDATE_POD_LABEL, Action.UPDATE_POD_SCALE_DOWN, Action.UPDATE_POD_TOLERATION],
            id="several",
        ),
    ],
)
@pytest.mark.parametrize("resource", [Resource.ASSIGNED_POD, Resource.UNSCHEDULED_POD, Resource.TARGET_POD])
def test_pod_update_events(old, new, actions, resource):
    events = pod_update_events(old, new, resource)
    assert [e.action for e in events] == actions
    assert {e.resource for e in events} == {resource}


@pytest.mark.parametrize(
    ("resource", "new", "labels"),
    [
        pytest.param(Resource.TARGET_POD, make_pod("p"), ["TargetPodUpdate"], id="target-generic"),
        pytest.param(
            Resource.TARGET_POD,
            make_pod("p", labels={"a": "b"}, tolerations=[TOLERATION]),
            ["TargetPodUpdatePodLabel", "TargetPodUpdatePodToleration"],
            id="target",
        ),
        pytest.param(
            Resource.ASSIGNED_POD, make_pod("p", cpu="2"), ["AssignedPodUpdatePodScaleUp"], id="assigned"
        ),
        pytest.param(
            Resource.UNSCHEDULED_POD,
            make_pod("p", labels={"a": "b"}),
            ["UnscheduledPodUpdatePodLabel"],
            id="unscheduled",
        ),
    ],
)
def test_pod_update_event_labels(resource, new, labels):
    """The names kube-scheduler v1.37 logs and counts these events by."""
    assert [e.label for e in pod_update_events(make_pod("p"), new, resource)] == labels


TAINT = {"key": "k", "value": "v", "effect": "NoSchedule"}


def _spec(node: NodeInfo, **fields: object) -> NodeInfo:
    raw = dict(node.node or {})
    raw["spec"] = {**(raw.get("spec") or {}), **fields}
    return NodeInfo(raw)


def _status(node: NodeInfo, **fields: object) -> NodeInfo:
    raw = dict(node.node or {})
    raw["status"] = {**(raw.get("status") or {}), **fields}
    return NodeInfo(raw)


@pytest.mark.parametrize(
    ("old", "new", "actions"),
    [
        pytest.param(make_node("n"), make_node("n"), [], id="nothing"),
        pytest.param(
            make_node("n", cpu="2"), make_node("n", cpu="4"), [Action.UPDATE_NODE_ALLOCATABLE], id="alloc"
        ),
        pytest.param(
            make_node("n"), make_node("n", labels={"z": "a"}), [Action.UPDATE_NODE_LABEL], id="labels"
        ),
        pytest.param(
            make_node("n", taints=[TAINT]), make_node("n"), [Action.UPDATE_NODE_TAINT], id="taint-removed"
        ),
        pytest.param(
            make_node("n"), make_node("n", taints=[TAINT]), [Action.UPDATE_NODE_TAINT], id="taint-added"
        ),
        pytest.param(
            make_node("n", unschedulable=True), make_node("n"), [Action.UPDATE_NODE_TAINT], id="uncordon"
        ),
        pytest.param(make_node("n"), make_node("n", unschedulable=True), [], id="cordon"),
        pytest.param(
            make_node("n", conditions={"Ready": "False"}),
            make_node("n", conditions={"Ready": "True"}),
            [Action.UPDATE_NODE_CONDITION],
            id="condition",
        ),
        pytest.param(
            make_node("n"),
            make_node("n", annotations={"a": "b"}),
            [Action.UPDATE_NODE_ANNOTATION],
            id="annotation",
        ),
        pytest.param(
            make_node("n"),
            _spec(make_node("n"), podPreemptionPolicy="Never"),
            [Action.UPDATE_NODE_PREEMPTION_POLICY],
            id="preemption-policy",
        ),
        pytest.param(
            _status(make_node("n"), declaredFeatures=["A"]),
            _status(make_node("n"), declaredFeatures=["A", "B"]),
            [Action.UPDATE_NODE_DECLARED_FEATURE],
            id="declared-features",
        ),
        pytest.param(
            make_node("n", unschedulable=True, labels={"a": "1"}),
            make_node("n", labels={"a": "2"}, taints=[TAINT]),
            [Action.UPDATE_NODE_TAINT, Action.UPDATE_NODE_LABEL, Action.UPDATE_NODE_TAINT],
            id="several-in-upstream-order",
        ),
    ],
)
def test_node_update_events(old, new, actions):
    events = node_update_events(old, new)
    assert [e.action for e in events] == actions
    assert all(e.resource is Resource.NODE for e in events)


def test_node_update_event_labels():
    old, new = make_node("n"), _spec(make_node("n", labels={"z": "a"}), podPreemptionPolicy="Never")
    assert [e.label for e in node_update_events(old, new)] == [
        "NodeUpdateNodeLabel",
        "NodeUpdateNodePreemptionPolicy",
    ]


def _resized(cpu: str, running: str | None = None, allocated: str | None = None, condition: str = ""):
    """A bound pod with spec request ``cpu`` and the kubelet's view of an in-place resize."""
    from kopf_scheduler.testing import make_pod as build

    builder = build().name("p").uid("uid-p").node("n1").req(cpu=cpu)
    if running is not None or allocated is not None:
        builder.container_status(
            "c",
            {"cpu": running} if running is not None else None,
            {"cpu": allocated} if allocated is not None else None,
        )
    if condition:
        builder.condition("PodResizePending", condition)
    return PodInfo(builder.obj())


@pytest.mark.parametrize(
    ("old", "new", "actions"),
    [
        # desired 2 -> 1, still running with 2: nothing freed yet (upstream compares the effective requests)
        pytest.param(
            _resized("2", "2", "2"),
            _resized("1", "2", "1"),
            [Action.UPDATE_POD_OTHER],
            id="down-not-actuated",
        ),
        pytest.param(
            _resized("1", "2", "1"),
            _resized("1", "1", "1"),
            [Action.UPDATE_POD_SCALE_DOWN],
            id="down-actuated",
        ),
        pytest.param(
            _resized("3", "1", "1"),
            _resized("3", "1", "1", "Infeasible"),
            [Action.UPDATE_POD_SCALE_DOWN],
            id="up-found-infeasible",
        ),
        pytest.param(
            _resized("3", "1", "1"),
            _resized("3", "1", "1", "Deferred"),
            [Action.UPDATE_POD_OTHER],
            id="up-deferred",
        ),
        pytest.param(
            _resized("3", "1", "1", "Infeasible"),
            _resized("1", "1", "1"),
            [Action.UPDATE_POD_OTHER],
            id="infeasible-resize-withdrawn",
        ),
        pytest.param(_resized("0"), _resized("1"), [Action.UPDATE_POD_SCALE_UP], id="zero-raised"),
        pytest.param(
            _resized("0"),
            PodInfo(
                {"metadata": {"name": "p", "uid": "uid-p"}, "spec": {"nodeName": "n1", "containers": [{}]}}
            ),
            [Action.UPDATE_POD_SCALE_DOWN],
            id="explicit-zero-removed",
        ),
    ],
)
def test_in_place_resize_events(old, new, actions):
    """``extractPodScaleDown`` and ``extractPodScaleUp`` with ``UseStatusResources``: what the pod holds on
    its node went down or up."""
    assert [e.action for e in pod_update_events(old, new, Resource.ASSIGNED_POD)] == actions
