"""PreEnqueue gating: gated pods wait in the pool until an update or event lets PreEnqueue pass."""

from __future__ import annotations

import pytest
from _queue_kit import (
    NODE_ADD,
    POD_GATES_GONE,
    FakeProfile,
    attempt_and_fail,
    gates_gate,
    gates_removed_hint,
    make_node,
    make_pod,
    make_queue,
)

from kopf_scheduler.backend.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE


def _gated_queue(**options):
    profile = FakeProfile(
        [("SchedulingGates", POD_GATES_GONE, gates_removed_hint), ("A", NODE_ADD, None)],
        gates={"SchedulingGates": gates_gate},
    )
    return (*make_queue(profile, **options), profile)


def test_gated_pod_waits_out_of_active_queue():
    queue, _, _ = _gated_queue()
    queue.add(make_pod("g", gates=["example.com/a"]))
    assert queue.counts() == {
        "active": 0,
        "backoff": 0,
        "unschedulable": 0,
        "gated": 1,
        "incomplete": 0,
        "pending": 0,
    }
    qp = queue.get("uid-g")
    assert qp.gated_by == "SchedulingGates"
    assert "SchedulingGates" in qp.unschedulable_plugins
    assert queue.pop_nowait() is None


@pytest.mark.parametrize(
    ("new_gates", "labels", "expected"),
    [
        pytest.param([], {}, ACTIVE, id="all-gates-removed"),
        pytest.param(["example.com/b"], {}, GATED, id="one-gate-left"),
        pytest.param(["example.com/a", "example.com/b"], {"x": "y"}, GATED, id="label-change-only"),
    ],
)
def test_update_releases_pod_only_when_gates_are_gone(new_gates, labels, expected):
    queue, _, _ = _gated_queue()
    old = make_pod("g", gates=["example.com/a", "example.com/b"])
    queue.add(old)
    queue.update(old, make_pod("g", gates=new_gates, labels=labels))
    assert queue.location("uid-g") == expected
    if expected == ACTIVE:
        assert queue.counts()["gated"] == 0
        assert queue.pop_nowait().pod.name == "g"


def test_gated_pod_ignores_events_its_gate_did_not_register():
    queue, _, _ = _gated_queue()
    queue.add(make_pod("g", gates=["example.com/a"]))
    queue.node_added(make_node("n1"))
    assert queue.location("uid-g") == GATED


def test_gated_pod_keeps_its_queue_timestamp():
    queue, clock, _ = _gated_queue()
    old = make_pod("g", gates=["example.com/a"])
    queue.add(old)
    clock.advance(60)
    queue.add(make_pod("fresh"))
    queue.update(old, make_pod("g"))
    # The gated pod arrived first, so it is tried first once released.
    assert [queue.pop_nowait().pod.name, queue.pop_nowait().pod.name] == ["g", "fresh"]


def test_pre_enqueue_runs_again_when_a_rejected_pod_moves():
    queue, _, profile = _gated_queue()
    attempt_and_fail(queue, make_pod("p"), "A")
    profile.gates["Quota"] = lambda pod: "over quota"
    queue.node_added(make_node("n1"))
    qp = queue.get("uid-p")
    assert (queue.location("uid-p"), qp.gated_by) == (GATED, "Quota")
    assert queue.counts() == {
        "active": 0,
        "backoff": 0,
        "unschedulable": 0,
        "gated": 1,
        "incomplete": 0,
        "pending": 0,
    }


def test_pre_enqueue_runs_on_entering_backoff_not_on_leaving_it():
    queue, clock, profile = _gated_queue()
    attempt_and_fail(queue, make_pod("p"), "A")
    queue.node_added(make_node("n1"))
    assert queue.location("uid-p") == BACKOFF
    runs = profile.pre_enqueue_runs
    clock.advance(5)
    assert queue.flush_backoff_completed() == 1
    assert profile.pre_enqueue_runs == runs


def test_pre_enqueue_runs_when_leaving_backoff_without_pop_from_backoff():
    queue, clock, profile = _gated_queue(pop_from_backoff=False)
    attempt_and_fail(queue, make_pod("p"), "A")
    queue.node_added(make_node("n1"))
    runs = profile.pre_enqueue_runs
    clock.advance(5)
    queue.flush_backoff_completed()
    assert profile.pre_enqueue_runs == runs + 1


def test_activate_respects_gates():
    queue, _, _ = _gated_queue()
    gated = make_pod("g", gates=["example.com/a"])
    queue.add(gated)
    attempt_and_fail(queue, make_pod("r"), "A")
    queue.activate([gated, make_pod("r"), make_pod("unknown")])
    assert (queue.location("uid-g"), queue.location("uid-r"), queue.location("uid-unknown")) == (
        GATED,
        ACTIVE,
        None,
    )


def test_pod_of_unknown_profile_is_queued_without_pre_enqueue():
    queue, _, _ = _gated_queue()
    queue.add(make_pod("stray", scheduler="nobody", gates=["example.com/a"]))
    assert queue.location("uid-stray") == ACTIVE
    qp = queue.pop_nowait()
    qp.unschedulable_plugins.add("A")
    assert queue.add_unschedulable_if_not_present(qp) == UNSCHEDULABLE
    queue.node_added(make_node("n1"))  # no profile: no registrations to consult, no crash
    assert queue.location("uid-stray") == UNSCHEDULABLE


def test_time_spent_gated_is_not_scheduling_latency():
    queue, clock, _ = _gated_queue()
    old = make_pod("g", gates=["example.com/a"])
    queue.add(old)
    assert queue.get("uid-g").initial_timestamp == 1000.0
    clock.advance(42)
    queue.update(old, make_pod("g"))
    qp = queue.pop_nowait()
    assert (qp.timestamp, qp.initial_timestamp) == (1000.0, 1042.0)
