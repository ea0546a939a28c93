"""Events seen while a pod is in flight decide where its failure report sends it; deletions stick."""

from __future__ import annotations

import pytest
from _queue_kit import (
    NODE_ADD,
    NODE_TAINT,
    POD_TOLERATION,
    QUEUE,
    SKIP,
    FakeProfile,
    fail,
    make_node,
    make_pod,
    make_queue,
)

from kopf_scheduler.backend.queue import ACTIVE, BACKOFF, IN_FLIGHT, UNSCHEDULABLE
from kopf_scheduler.framework.events import EVENT_UNSCHEDULABLE_TIMEOUT


def _own_toleration_hint(pod, old, new):
    return QUEUE if new is not None and new.uid == pod.uid and new.tolerations else SKIP


REGISTRATIONS = [("A", NODE_ADD, None), ("A", POD_TOLERATION, _own_toleration_hint), ("B", NODE_TAINT, None)]


@pytest.mark.parametrize(
    ("during", "rejected", "pending", "error", "expected"),
    [
        pytest.param(None, ["A"], [], False, UNSCHEDULABLE, id="no-event"),
        pytest.param("node-add", ["A"], [], False, BACKOFF, id="registered-event-requeues"),
        pytest.param("node-add", ["B"], [], False, UNSCHEDULABLE, id="event-of-other-plugin"),
        pytest.param("node-add", [], ["A"], False, ACTIVE, id="pending-plugin-goes-active"),
        pytest.param("node-taint", ["A", "B"], [], False, BACKOFF, id="second-rejector-matches"),
        pytest.param("own-toleration", ["A"], [], False, BACKOFF, id="own-update-requeues"),
        pytest.param("timeout", ["A"], [], False, BACKOFF, id="wildcard-requeues"),
        pytest.param(None, [], [], True, BACKOFF, id="error-backs-off-without-event"),
        pytest.param(None, [], [], False, BACKOFF, id="no-rejector-backs-off"),
    ],
)
def test_failure_report_uses_in_flight_events(during, rejected, pending, error, expected):
    queue, _ = make_queue(FakeProfile(REGISTRATIONS))
    queue.add(make_pod("p"))
    qp = queue.pop_nowait()
    assert queue.location("uid-p") == IN_FLIGHT
    if during == "node-add":
        queue.node_added(make_node("n1"))
    elif during == "node-taint":
        queue.node_updated(make_node("n1", taints=[{"key": "k", "effect": "NoSchedule"}]), make_node("n1"))
    elif during == "own-toleration":
        queue.update(make_pod("p"), make_pod("p", tolerations=[{"key": "k", "operator": "Exists"}]))
    elif during == "timeout":
        queue.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    assert fail(queue, qp, *rejected, pending=pending, error=error) == expected
    assert queue.location("uid-p") == expected
    assert queue.in_flight() == []


def test_events_before_the_pop_do_not_count():
    queue, _ = make_queue(FakeProfile(REGISTRATIONS))
    queue.add(make_pod("other"))
    queue.add(make_pod("p"))
    first = queue.pop_nowait()  # keeps the event log alive
    queue.node_added(make_node("n1"))
    second = queue.pop_nowait()
    assert fail(queue, second, "A") == UNSCHEDULABLE
    assert fail(queue, first, "A") == BACKOFF


def test_requeued_pod_is_the_latest_version():
    queue, _ = make_queue(FakeProfile(REGISTRATIONS))
    queue.add(make_pod("p", labels={"v": "1"}))
    qp = queue.pop_nowait()
    queue.update(make_pod("p", labels={"v": "1"}), make_pod("p", labels={"v": "2"}))
    fail(queue, qp, "A")
    assert queue.get("uid-p").pod.labels == {"v": "2"}


@pytest.mark.parametrize(
    "bound", [pytest.param(False, id="deleted"), pytest.param(True, id="bound-elsewhere")]
)
def test_pod_gone_while_in_flight_leaves_no_trace(bound):
    queue, _ = make_queue(FakeProfile(REGISTRATIONS))
    pod = make_pod("p", nominated="n1")
    queue.add(pod)
    assert queue.nominated_pods_for_node("n1") == [pod]
    qp = queue.pop_nowait()
    queue.delete(pod, bound=bound)
    queue.node_added(make_node("n1"))  # an event that would requeue it
    queue.update(pod, make_pod("p", labels={"late": "update"}))  # still in flight: ignored, no resurrection
    assert fail(queue, qp, "A") is None
    assert "uid-p" not in queue
    assert queue.location("uid-p") is None
    assert queue.counts() == {
        "active": 0,
        "backoff": 0,
        "unschedulable": 0,
        "gated": 0,
        "incomplete": 0,
        "pending": 0,
    }
    assert queue.nominated_pods_for_node("n1") == []
    assert queue.in_flight() == []


def test_done_without_failure_ends_the_attempt():
    queue, _ = make_queue(FakeProfile(REGISTRATIONS))
    queue.add(make_pod("p"))
    qp = queue.pop_nowait()
    queue.done(qp.pod.uid)
    queue.done(qp.pod.uid)  # idempotent
    assert queue.in_flight() == [] and len(queue) == 0


def test_activate_in_flight_pod_requeues_it_on_failure():
    queue, _ = make_queue(FakeProfile(REGISTRATIONS))
    pod = make_pod("p")
    queue.add(pod)
    qp = queue.pop_nowait()
    queue.activate([pod])
    assert fail(queue, qp, "A") == BACKOFF


def test_event_log_is_trimmed_when_pods_finish():
    queue, _ = make_queue(FakeProfile(REGISTRATIONS))
    for i in range(3):
        queue.add(make_pod(f"p{i}"))
    popped = [queue.pop_nowait() for _ in range(3)]
    for i in range(5000):
        queue.node_added(make_node(f"n{i}"))
    for qp in popped:
        queue.done(qp.pod.uid)
    assert queue._in_flight._events == []  # nothing in flight: nothing kept


def test_failure_report_for_a_pod_already_queued_is_ignored():
    queue, _ = make_queue(FakeProfile(REGISTRATIONS))
    queue.add(make_pod("p"))
    qp = queue.pop_nowait()
    queue.add(make_pod("p"))  # re-added while in flight: kept as an update of the in-flight pod
    assert fail(queue, qp, "A") == UNSCHEDULABLE
    assert fail(queue, qp, "A") is None
