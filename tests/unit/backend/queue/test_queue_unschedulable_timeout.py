"""The leftover flush: pods that waited in the pool longer than the limit since their last attempt, or
since their last flush, are retried; gated pods run PreEnqueue again (kube-scheduler v1.37)."""

from __future__ import annotations

import pytest
from _queue_kit import START, FakeProfile, attempt_and_fail, fail, gates_gate, make_pod, make_queue

from kopf_scheduler.backend.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE


@pytest.mark.parametrize(
    ("waited", "expected"),
    [
        pytest.param(30.0, UNSCHEDULABLE, id="30s"),
        pytest.param(299.0, UNSCHEDULABLE, id="299s"),
        pytest.param(300.0, UNSCHEDULABLE, id="exactly-5min"),
        pytest.param(300.5, ACTIVE, id="just-over-5min"),
        pytest.param(3600.0, ACTIVE, id="an-hour"),
    ],
)
def test_rejected_pod_leaves_pool_after_five_minutes(waited, expected):
    queue, clock = make_queue(FakeProfile())
    attempt_and_fail(queue, make_pod("p"), "NodeResourcesFit")
    assert queue.location("uid-p") == UNSCHEDULABLE
    clock.set(START + waited)
    queue.flush_unschedulable_leftover()
    assert queue.location("uid-p") == expected


def test_timeout_sends_pod_still_backing_off_to_backoff():
    queue, clock = make_queue(FakeProfile(), max_in_unschedulable=0.5, pop_from_backoff=False)
    attempt_and_fail(queue, make_pod("p"), "NodeResourcesFit")
    clock.advance(0.75)  # over the limit, but the 1 s backoff is not over
    assert queue.flush_unschedulable_leftover() == 1
    assert queue.location("uid-p") == "backoff"


@pytest.mark.parametrize("limit", [pytest.param(60.0, id="1min"), pytest.param(600.0, id="10min")])
def test_limit_is_configurable(limit):
    queue, clock = make_queue(FakeProfile(), max_in_unschedulable=limit)
    attempt_and_fail(queue, make_pod("p"), "NodeResourcesFit")
    clock.set(START + limit)
    assert queue.flush_unschedulable_leftover() == 0
    clock.set(START + limit + 1)
    assert queue.flush_unschedulable_leftover() == 1


def test_gated_pod_is_flushed_once_per_limit():
    """Upstream's TestGatedPodFlushFrequency: a gated pod's PreEnqueue runs again 5 minutes after it
    arrived, then 5 minutes after that flush, not on every 30 s flush in between."""
    profile = FakeProfile(gates={"SchedulingGates": gates_gate})
    queue, clock = make_queue(profile)
    queue.add(make_pod("gated", gates=["example.com/wait"]))
    assert profile.pre_enqueue_runs == 1
    clock.advance(301)  # T=5:01
    assert queue.flush_unschedulable_leftover() == 0
    assert profile.pre_enqueue_runs == 2
    assert queue.location("uid-gated") == GATED
    clock.advance(240)  # T=9:01: 4 minutes since the flush
    queue.flush_unschedulable_leftover()
    assert profile.pre_enqueue_runs == 2
    clock.advance(61)  # T=10:02: over 5 minutes since the flush
    queue.flush_unschedulable_leftover()
    assert profile.pre_enqueue_runs == 3


@pytest.mark.parametrize(
    ("gated_before", "gated_after", "backing_off", "expected"),
    [
        pytest.param(False, False, False, ACTIVE, id="not-gated"),
        pytest.param(True, False, False, ACTIVE, id="no-longer-gated"),
        pytest.param(False, True, False, GATED, id="newly-gated"),
        pytest.param(True, True, False, GATED, id="still-gated"),
        pytest.param(False, False, True, BACKOFF, id="not-gated-backing-off"),
        pytest.param(True, False, True, BACKOFF, id="no-longer-gated-backing-off"),
        pytest.param(False, True, True, GATED, id="newly-gated-backing-off"),
        pytest.param(True, True, True, GATED, id="still-gated-backing-off"),
    ],
)
def test_flush_runs_pre_enqueue_of_gated_pods(gated_before, gated_after, backing_off, expected):
    """Upstream's TestFlushUnschedulablePodsLeftoverSetsFlag_GatedPod: the flush is a wildcard event, so
    a gated pod is re-evaluated too, and PreEnqueue decides on the way to activeQ or backoffQ."""
    allowed = {"uid-p"}
    profile = FakeProfile(gates={"Allow": lambda pod: None if pod.uid in allowed else "not allowed"})
    backoff = 360.0 if backing_off else 1.0  # the limit plus a minute: still backing off at the flush
    queue, clock = make_queue(profile, initial_backoff=backoff, max_backoff=backoff)
    queue.add(make_pod("p"))
    qp = queue.pop_nowait()
    assert qp is not None
    if gated_before:
        qp.gated_by = "Allow"
        qp.unschedulable_plugins.add("Allow")
    if gated_after:
        allowed.clear()
    assert fail(queue, qp, "foo") in (UNSCHEDULABLE, GATED)
    clock.advance(301)
    queue.flush_unschedulable_leftover()
    assert queue.location("uid-p") == expected


def test_timeout_counts_from_the_failure_not_from_creation():
    queue, clock = make_queue(FakeProfile())
    queue.add(make_pod("p"))
    clock.advance(250)  # waited in activeQ for a long time before its attempt
    qp = queue.pop_nowait()
    qp.unschedulable_plugins.add("NodeResourcesFit")
    queue.add_unschedulable_if_not_present(qp)
    clock.advance(100)
    assert queue.flush_unschedulable_leftover() == 0
    clock.advance(201)
    assert queue.flush_unschedulable_leftover() == 1
