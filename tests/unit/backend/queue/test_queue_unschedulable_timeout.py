"""The leftover flush: rejected pods that waited longer than the limit are retried; gated pods are not."""

from __future__ import annotations

import pytest
from _queue_kit import START, FakeProfile, attempt_and_fail, gates_gate, make_pod, make_queue

from kopf_scheduler.backend.queue import ACTIVE, GATED, UNSCHEDULABLE


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


def test_gated_pod_is_not_moved_by_timeout():
    queue, clock = make_queue(FakeProfile(gates={"SchedulingGates": gates_gate}))
    queue.add(make_pod("gated", gates=["example.com/wait"]))
    clock.advance(3600)
    assert queue.flush_unschedulable_leftover() == 0
    assert queue.location("uid-gated") == GATED


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
