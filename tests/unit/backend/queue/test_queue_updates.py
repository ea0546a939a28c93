"""Updates of pending pods: in place in activeQ/backoffQ, re-evaluated in the pool, added when unknown;
and the introspection the scheduler and metrics read."""

from __future__ import annotations

import pytest
from _queue_kit import (
    NODE_ADD,
    POD_LABEL,
    QUEUE,
    SKIP,
    FakeProfile,
    attempt_and_fail,
    fail,
    make_node,
    make_pod,
    make_queue,
)

from kopf_scheduler.backend.queue import ACTIVE, BACKOFF, UNSCHEDULABLE


def _label_hint(pod, old, new):
    return QUEUE if new.labels.get("ready") == "yes" else SKIP


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({"ready": "yes"}, BACKOFF, id="hint-queue"),
        pytest.param({"ready": "no"}, UNSCHEDULABLE, id="hint-skip"),
    ],
)
def test_update_in_pool_is_checked_against_hints(labels, expected):
    queue, _ = make_queue(FakeProfile([("A", POD_LABEL, _label_hint)]))
    attempt_and_fail(queue, make_pod("p"), "A")
    queue.update(make_pod("p"), make_pod("p", labels=labels))
    assert queue.location("uid-p") == expected
    assert queue.get("uid-p").pod.labels == labels


def test_update_in_pool_that_no_rejector_registered_keeps_pod():
    queue, _ = make_queue(FakeProfile([("A", NODE_ADD, None), ("B", POD_LABEL, None)]))
    attempt_and_fail(queue, make_pod("p"), "A")
    queue.update(make_pod("p"), make_pod("p", labels={"x": "y"}))
    assert queue.location("uid-p") == UNSCHEDULABLE


def test_update_in_backoff_keeps_pod_there():
    queue, _ = make_queue(FakeProfile([("A", NODE_ADD, None)]))
    attempt_and_fail(queue, make_pod("p"), "A")
    queue.node_added(make_node("n1"))
    queue.update(None, make_pod("p", labels={"v": "2"}))
    assert queue.location("uid-p") == BACKOFF
    assert queue.get("uid-p").pod.labels == {"v": "2"}


def test_update_of_unknown_pod_adds_it():
    queue, _ = make_queue(FakeProfile())
    queue.update(None, make_pod("p"))
    assert queue.location("uid-p") == ACTIVE


def test_duplicate_add_is_an_update():
    queue, _ = make_queue(FakeProfile())
    queue.add(make_pod("p", labels={"v": "1"}))
    queue.add(make_pod("p", labels={"v": "2"}))
    assert queue.counts()["active"] == 1
    assert queue.pop_nowait().pod.labels == {"v": "2"}


def test_delete_removes_from_every_pool():
    queue, _ = make_queue(FakeProfile([("A", NODE_ADD, None)]))
    attempt_and_fail(queue, make_pod("backoff"), "A")
    queue.node_added(make_node("n1"))
    attempt_and_fail(queue, make_pod("pool"), "A")
    queue.add(make_pod("active"))
    assert queue.counts() == {
        "active": 1,
        "backoff": 1,
        "unschedulable": 1,
        "gated": 0,
        "incomplete": 0,
        "pending": 0,
    }
    for name in ("active", "backoff", "pool"):
        queue.delete(make_pod(name))
    assert len(queue) == 0 and queue.pending() == []


def test_introspection():
    queue, _ = make_queue(FakeProfile([("A", NODE_ADD, None)]))
    attempt_and_fail(queue, make_pod("b"), "A")
    queue.node_added(make_node("n1"))
    attempt_and_fail(queue, make_pod("u"), "A")
    queue.add(make_pod("f", priority=1))
    queue.add(make_pod("a"))
    in_flight = queue.pop_nowait()
    assert in_flight.pod.name == "f"
    assert queue.counts() == {
        "active": 1,
        "backoff": 1,
        "unschedulable": 1,
        "gated": 0,
        "incomplete": 0,
        "pending": 0,
    }
    assert [qp.pod.name for qp in queue.pending()] == ["a", "b", "u"]
    assert [queue.location(f"uid-{n}") for n in "abfu"] == ["active", "backoff", "in_flight", "unschedulable"]
    assert queue.in_flight() == [in_flight.pod.uid]
    assert in_flight.pod.uid not in queue and "uid-u" in queue
    fail(queue, in_flight, error=True)
    assert len(queue) == 4
