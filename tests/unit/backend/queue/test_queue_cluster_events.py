"""Cluster events move pods out of the unschedulable pool only through their rejecting plugins' events."""

from __future__ import annotations

from typing import Any

import pytest
from _queue_kit import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_ALLOCATABLE,
    NODE_DELETE,
    NODE_TAINT,
    QUEUE,
    SKIP,
    START,
    FakeProfile,
    attempt_and_fail,
    make_node,
    make_pod,
    make_queue,
)

from kopf_scheduler.backend.queue import ACTIVE, BACKOFF, UNSCHEDULABLE
from kopf_scheduler.framework.events import (
    EVENT_FORCE_ACTIVATE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    OBJECT_EVENTS,
    Action,
    ClusterEvent,
    Resource,
)
from kopf_scheduler.framework.interface import FilterPlugin
from kopf_scheduler.framework.node_info import NodeInfo


def _raise(pod: Any, old: Any, new: Any) -> Any:
    raise RuntimeError("hint bug")


def _queue(pod, old, new):
    return QUEUE


def _skip(pod, old, new):
    return SKIP


@pytest.mark.parametrize(
    ("registrations", "event", "expected"),
    [
        pytest.param([("A", NODE_ADD, None)], NODE_ADD, BACKOFF, id="A-registered-no-hint"),
        pytest.param([("A", NODE_ADD, _queue)], NODE_ADD, BACKOFF, id="A-hint-queue"),
        pytest.param([("A", NODE_ADD, _skip)], NODE_ADD, UNSCHEDULABLE, id="A-hint-skip-keeps"),
        pytest.param([("A", NODE_ADD, _raise)], NODE_ADD, BACKOFF, id="A-hint-raises-moves"),
        pytest.param([("B", NODE_ADD, None)], NODE_ADD, UNSCHEDULABLE, id="only-B-registered"),
        pytest.param([("A", NODE_TAINT, None)], NODE_ADD, UNSCHEDULABLE, id="A-other-event"),
        pytest.param(
            [("A", ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_TAINT), None)],
            NODE_TAINT,
            BACKOFF,
            id="A-combined-actions",
        ),
        pytest.param(
            [("A", ClusterEvent(Resource.WILDCARD, Action.all()), None)], NODE_ADD, BACKOFF, id="A-wildcard"
        ),
        pytest.param(
            [("A", NODE_ADD, _skip), ("A", NODE_ADD, _queue)], NODE_ADD, BACKOFF, id="A-any-hint-queue"
        ),
        pytest.param([("B", NODE_ADD, None)], EVENT_UNSCHEDULABLE_TIMEOUT, BACKOFF, id="wildcard-event"),
    ],
)
def test_event_moves_pod_rejected_by_A(registrations, event, expected):
    queue, _ = make_queue(FakeProfile(registrations))
    attempt_and_fail(queue, make_pod("p"), "A")
    # A wildcard event that names an object is meant for that pod only: pass none.
    new = None if event.resource is Resource.WILDCARD else make_node("n1")
    queue.move_all_to_active_or_backoff(event, None, new)
    assert queue.location("uid-p") == expected


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        pytest.param("p", BACKOFF, id="names-this-pod"),
        pytest.param("other", UNSCHEDULABLE, id="names-another-pod"),
    ],
)
def test_wildcard_event_naming_a_pod_moves_only_that_pod(target, expected):
    queue, _ = make_queue(FakeProfile())
    attempt_and_fail(queue, make_pod("p"), "A")
    queue.move_all_to_active_or_backoff(EVENT_FORCE_ACTIVATE, None, make_pod(target))
    assert queue.location("uid-p") == expected


@pytest.mark.parametrize(
    ("elapsed", "pending", "expected"),
    [
        pytest.param(0.0, False, BACKOFF, id="backing-off"),
        pytest.param(5.0, False, ACTIVE, id="backoff-over"),
        pytest.param(0.0, True, ACTIVE, id="pending-skips-backoff"),
    ],
)
def test_destination_depends_on_backoff_and_pending(elapsed, pending, expected):
    queue, clock = make_queue(FakeProfile([("A", NODE_ADD, None)]))
    if pending:
        attempt_and_fail(queue, make_pod("p"), pending=["A"])
    else:
        attempt_and_fail(queue, make_pod("p"), "A")
    clock.advance(elapsed)
    queue.node_added(make_node("n1"))
    assert queue.location("uid-p") == expected


def test_hints_receive_pod_and_node_infos():
    seen = []

    def hint(pod, old, new):
        seen.append((pod.name, type(old).__name__, type(new).__name__))
        return QUEUE

    queue, _ = make_queue(FakeProfile([("A", NODE_ALLOCATABLE, hint)]))
    attempt_and_fail(queue, make_pod("p"), "A")
    queue.node_updated(make_node("n1", cpu="2"), make_node("n1", cpu="8"))
    assert seen == [("p", "NodeInfo", "NodeInfo")]
    assert queue.location("uid-p") == BACKOFF


def test_only_the_pods_own_profile_is_consulted():
    profiles = {
        "default-scheduler": FakeProfile([("A", NODE_ADD, None)]),
        "other": FakeProfile([("A", NODE_TAINT, None)]),
    }
    queue, _ = make_queue(profiles=profiles)
    attempt_and_fail(queue, make_pod("mine"), "A")
    attempt_and_fail(queue, make_pod("theirs", scheduler="other"), "A")
    queue.node_added(make_node("n1"))
    assert (queue.location("uid-mine"), queue.location("uid-theirs")) == (BACKOFF, UNSCHEDULABLE)


def test_pre_check_filters_candidates():
    queue, _ = make_queue(FakeProfile([("A", NODE_ADD, None)]))
    attempt_and_fail(queue, make_pod("keep"), "A")
    attempt_and_fail(queue, make_pod("move"), "A")
    queue.move_all_to_active_or_backoff(NODE_ADD, None, None, lambda pod: pod.name == "move")
    assert (queue.location("uid-keep"), queue.location("uid-move")) == (UNSCHEDULABLE, BACKOFF)


def test_pod_with_several_rejectors_moves_if_any_says_queue():
    queue, _ = make_queue(FakeProfile([("A", NODE_ADD, _skip), ("B", NODE_ADD, _queue)]))
    attempt_and_fail(queue, make_pod("p"), "A", "B")
    queue.node_added(make_node("n1"))
    assert queue.location("uid-p") == BACKOFF


def _node_info_with_name(name: str):
    def hint(pod, old, new):
        node = new if isinstance(new, NodeInfo) else old
        return QUEUE if node is not None and node.name == name else SKIP

    return hint


@pytest.mark.parametrize(
    ("call", "registered"),
    [
        pytest.param(lambda q: q.node_added(make_node("n1")), NODE_ADD, id="node-added"),
        pytest.param(lambda q: q.node_deleted(make_node("n1")), NODE_DELETE, id="node-deleted"),
        pytest.param(
            lambda q: q.node_updated(
                make_node("n1", taints=[{"key": "k", "effect": "NoSchedule"}]), make_node("n1")
            ),
            NODE_TAINT,
            id="node-untainted",
        ),
        pytest.param(
            lambda q: q.node_updated(make_node("n1", unschedulable=True), make_node("n1")),
            NODE_TAINT,
            id="node-uncordoned",
        ),
        pytest.param(
            lambda q: q.node_updated(make_node("n1", cpu="1"), make_node("n1", cpu="2")),
            NODE_ALLOCATABLE,
            id="node-allocatable",
        ),
    ],
)
def test_node_events(call, registered):
    queue, _ = make_queue(FakeProfile([("A", registered, _node_info_with_name("n1"))]))
    attempt_and_fail(queue, make_pod("p"), "A")
    call(queue)
    assert queue.location("uid-p") == BACKOFF


def test_node_update_with_no_relevant_change_moves_nothing():
    calls = []
    queue, _ = make_queue(
        FakeProfile([("A", ClusterEvent(Resource.NODE, Action.all()), lambda *a: calls.append(a))])
    )
    attempt_and_fail(queue, make_pod("p"), "A")
    queue.node_updated(make_node("n1"), make_node("n1"))
    queue.node_updated(make_node("n1"), make_node("n1", unschedulable=True))  # cordoning cannot help
    assert calls == []
    assert queue.location("uid-p") == UNSCHEDULABLE


@pytest.mark.parametrize(
    ("call", "registered", "expected"),
    [
        pytest.param(
            lambda q: q.assigned_pod_added(make_pod("x", node="n1")), ASSIGNED_POD_ADD, BACKOFF, id="add"
        ),
        pytest.param(
            lambda q: q.assigned_pod_deleted(make_pod("x", node="n1")),
            ASSIGNED_POD_DELETE,
            BACKOFF,
            id="delete",
        ),
        pytest.param(
            lambda q: q.assigned_pod_updated(
                make_pod("x", node="n1", labels={"a": "1"}), make_pod("x", node="n1", labels={"a": "2"})
            ),
            ClusterEvent(Resource.ASSIGNED_POD, Action.UPDATE_POD_LABEL),
            BACKOFF,
            id="label-update",
        ),
        pytest.param(
            lambda q: q.assigned_pod_updated(
                make_pod("x", node="n1", cpu="2"), make_pod("x", node="n1", cpu="1")
            ),
            ClusterEvent(Resource.ASSIGNED_POD, Action.UPDATE_POD_SCALE_DOWN),
            BACKOFF,
            id="scale-down",
        ),
        pytest.param(
            lambda q: q.assigned_pod_updated(
                make_pod("x", node="n1", cpu="1"), make_pod("x", node="n1", cpu="2")
            ),
            ClusterEvent(Resource.ASSIGNED_POD, Action.UPDATE_POD_SCALE_DOWN),
            UNSCHEDULABLE,
            id="scale-up-is-not-scale-down",
        ),
        pytest.param(
            lambda q: q.assigned_pod_deleted(make_pod("x", node="n1")),
            NODE_DELETE,
            UNSCHEDULABLE,
            id="wrong-resource",
        ),
    ],
)
def test_assigned_pod_events(call, registered, expected):
    queue, _ = make_queue(FakeProfile([("A", registered, None)]))
    attempt_and_fail(queue, make_pod("p"), "A")
    call(queue)
    assert queue.location("uid-p") == expected


def test_failing_hint_does_not_stop_other_pods():
    def picky(pod, old, new):
        if pod.name == "bad":
            raise ValueError("boom")
        return SKIP

    queue, _ = make_queue(FakeProfile([("A", NODE_ADD, picky)]))
    attempt_and_fail(queue, make_pod("bad"), "A")
    attempt_and_fail(queue, make_pod("good"), "A")
    queue.node_added(make_node("n1"))
    assert (queue.location("uid-bad"), queue.location("uid-good")) == (BACKOFF, UNSCHEDULABLE)


def test_moved_pod_keeps_its_failure_timestamp():
    queue, clock = make_queue(FakeProfile([("A", NODE_ADD, None)]))
    attempt_and_fail(queue, make_pod("p"), "A")
    clock.advance(0.3)
    queue.node_added(make_node("n1"))
    assert queue.get("uid-p").timestamp == START


ANY_POD_LABEL = ClusterEvent(Resource.POD, Action.UPDATE_POD_LABEL)
TARGET_POD_LABEL = ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_LABEL)
UNSCHEDULED_POD_LABEL = ClusterEvent(Resource.UNSCHEDULED_POD, Action.UPDATE_POD_LABEL)
ASSIGNED_POD_LABEL = ClusterEvent(Resource.ASSIGNED_POD, Action.UPDATE_POD_LABEL)


@pytest.mark.parametrize(
    ("registered", "incoming", "matches"),
    [
        pytest.param(ANY_POD_LABEL, TARGET_POD_LABEL, True, id="pod-matches-target"),
        pytest.param(ANY_POD_LABEL, UNSCHEDULED_POD_LABEL, True, id="pod-matches-unscheduled"),
        pytest.param(ANY_POD_LABEL, ASSIGNED_POD_LABEL, True, id="pod-matches-assigned"),
        pytest.param(TARGET_POD_LABEL, UNSCHEDULED_POD_LABEL, False, id="target-not-unscheduled"),
        pytest.param(TARGET_POD_LABEL, ASSIGNED_POD_LABEL, False, id="target-not-assigned"),
        pytest.param(ASSIGNED_POD_LABEL, TARGET_POD_LABEL, False, id="assigned-not-target"),
        pytest.param(ASSIGNED_POD_LABEL, ANY_POD_LABEL, False, id="specific-not-general"),
        pytest.param(
            ClusterEvent(Resource.TARGET_POD, Action.update()),
            ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_OTHER),
            True,
            id="update-matches-generic",
        ),
        pytest.param(
            ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_LABEL),
            ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_OTHER),
            False,
            id="specific-not-generic",
        ),
    ],
)
def test_pod_resources_match_as_upstream(registered, incoming, matches):
    """Upstream's ``MatchClusterEvents``: ``Pod`` covers AssignedPod, UnscheduledPod and TargetPod."""
    assert registered.matches(incoming) is matches


@pytest.mark.parametrize(
    ("registered", "expected"),
    [
        pytest.param(TARGET_POD_LABEL, BACKOFF, id="target"),
        pytest.param(ANY_POD_LABEL, BACKOFF, id="any-pod"),
        pytest.param(UNSCHEDULED_POD_LABEL, UNSCHEDULABLE, id="unscheduled-is-other-pods"),
        pytest.param(ASSIGNED_POD_LABEL, UNSCHEDULABLE, id="assigned"),
    ],
)
def test_own_update_is_a_target_pod_event(registered, expected):
    queue, _ = make_queue(FakeProfile([("A", registered, None)]))
    attempt_and_fail(queue, make_pod("p"), "A")
    queue.update(make_pod("p"), make_pod("p", labels={"a": "b"}))
    assert queue.location("uid-p") == expected


class _Rejector(FilterPlugin):
    """A filter plugin that does not say which events it waits for."""

    name = "A"

    def filter(self, state, pod, node):  # pragma: no cover - never run here
        return None


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(NODE_ADD, BACKOFF, id="node"),
        pytest.param(ASSIGNED_POD_DELETE, BACKOFF, id="assigned-pod"),
        pytest.param(OBJECT_EVENTS[Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD], BACKOFF, id="pvc"),
        pytest.param(OBJECT_EVENTS[Resource.CSI_NODE, Action.UPDATE], BACKOFF, id="csinode"),
        pytest.param(OBJECT_EVENTS[Resource.RESOURCE_CLAIM, Action.DELETE], BACKOFF, id="claim"),
        pytest.param(OBJECT_EVENTS[Resource.RESOURCE_SLICE, Action.ADD], UNSCHEDULABLE, id="slice"),
        pytest.param(
            OBJECT_EVENTS[Resource.VOLUME_ATTACHMENT, Action.DELETE], UNSCHEDULABLE, id="attachment"
        ),
        pytest.param(OBJECT_EVENTS[Resource.SERVICE, Action.ADD], UNSCHEDULABLE, id="service"),
        pytest.param(OBJECT_EVENTS[Resource.NAMESPACE, Action.UPDATE], UNSCHEDULABLE, id="namespace"),
    ],
)
def test_plugin_without_registrations_waits_for_the_unrolled_resources(event, expected):
    """Upstream's ``defaultEnqueueExtension``: ``UnrollWildCardResource``'s resources, every action."""
    profile = FakeProfile()
    profile.plugins = {"A": _Rejector()}  # type: ignore[attr-defined]
    queue, _ = make_queue(profile)
    attempt_and_fail(queue, make_pod("p"), "A")
    queue.move_all_to_active_or_backoff(event)
    assert queue.location("uid-p") == expected
