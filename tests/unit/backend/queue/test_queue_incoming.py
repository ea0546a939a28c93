"""What the queue counts for the metrics, as kube-scheduler v1.37.2's queue records it: pods entering each
queue by event (``scheduler_queue_incoming_pods_total``, v1.37's event names), entities
(``scheduler_queue_incoming_entities_total``: only new pods and moves to another queue than the strategy
named), the queues entered (``scheduler_queued_entities`` series), the rejecting plugins of waiting pods
(``scheduler_unschedulable_pods``) and the leftover flush's mark (``pod_scheduled_after_flush_total``).
Upstream's ``TestIncomingPodsMetrics``, the pod cases of ``TestIncomingEntitiesMetrics`` and
``TestQueuedEntitiesMetrics``, ``TestFlushUnschedulableEntitiesLeftoverSetsFlag`` and
``TestFlushUnschedulablePodsLeftoverSetsFlag_GatedPod`` (``backend/queue/scheduling_queue_test.go``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _queue_kit import FakeProfile, attempt_and_fail, fail, make_pod, make_queue

from kopf_scheduler.backend.queue import ACTIVE, BACKOFF, GATED, UNSCHEDULABLE, SchedulingQueue
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.events import EVENT_UNSCHEDULABLE_TIMEOUT

PLUGIN = "unschedulable_plugin"
PODS = [make_pod(f"test-pod-{i}") for i in (1, 2, 3)]

Operation = Callable[[SchedulingQueue, VirtualClock, int], None]


def add(queue: SchedulingQueue, clock: VirtualClock, i: int) -> None:
    queue.add(PODS[i])


def pop_and_requeue_as_unschedulable(queue: SchedulingQueue, clock: VirtualClock, i: int) -> None:
    attempt_and_fail(queue, PODS[i], PLUGIN)


def pop_and_requeue_as_backoff(queue: SchedulingQueue, clock: VirtualClock, i: int) -> None:
    attempt_and_fail(queue, PODS[i])  # no rejecting plugin: backoff


def move_all_to_active_or_backoff(queue: SchedulingQueue, clock: VirtualClock, i: int) -> None:
    queue.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)


def move_clock_forward(queue: SchedulingQueue, clock: VirtualClock, i: int) -> None:
    clock.advance(3)


def flush_backoff_q(queue: SchedulingQueue, clock: VirtualClock, i: int) -> None:
    clock.advance(3)
    queue.flush_backoff_completed()


@pytest.mark.parametrize(
    ("operations", "want"),
    [
        pytest.param([add], {("active", "UnscheduledPodAdd"): 3}, id="add pods to activeQ"),
        pytest.param(
            [pop_and_requeue_as_unschedulable],
            {("active", "UnscheduledPodAdd"): 3, ("unschedulable", "ScheduleAttemptFailure"): 3},
            id="add unscheduled pods then make them unschedulable",
        ),
        pytest.param(
            [pop_and_requeue_as_unschedulable, move_all_to_active_or_backoff],
            {
                ("active", "UnscheduledPodAdd"): 3,
                ("unschedulable", "ScheduleAttemptFailure"): 3,
                ("backoff", "UnschedulableTimeout"): 3,
            },
            id="add unscheduled pods, make them unschedulable, and move them to backoffQ",
        ),
        pytest.param(
            [pop_and_requeue_as_unschedulable, move_clock_forward, move_all_to_active_or_backoff],
            {
                ("active", "UnscheduledPodAdd"): 3,
                ("unschedulable", "ScheduleAttemptFailure"): 3,
                ("active", "UnschedulableTimeout"): 3,
            },
            id="add unscheduled pods, make them unschedulable, and move them to activeQ",
        ),
        pytest.param(
            [pop_and_requeue_as_backoff, move_clock_forward, flush_backoff_q],
            {
                ("active", "UnscheduledPodAdd"): 3,
                ("active", "BackoffComplete"): 3,
                ("backoff", "ScheduleAttemptFailure"): 3,
            },
            id="make some pods subject to backoff and add them to backoffQ, then flush backoffQ",
        ),
    ],
)
def test_incoming_pods(operations: list[Operation], want: dict[tuple[str, str], int]) -> None:
    queue, clock = make_queue(FakeProfile(), pop_from_backoff=False)
    for operation in operations:
        for i in range(len(PODS)):
            operation(queue, clock, i)
    assert dict(queue.incoming.pods) == want


def test_an_individual_pod_made_unschedulable_is_one_incoming_entity() -> None:
    # upstream: "add individual pod to active queue"; the hint's own queue is not counted again
    queue, _ = make_queue(FakeProfile())
    attempt_and_fail(queue, make_pod("pod1"), PLUGIN)
    assert dict(queue.incoming.entities) == {("active", "UnscheduledPodAdd"): 1}
    assert dict(queue.incoming.pods) == {
        ("active", "UnscheduledPodAdd"): 1,
        ("unschedulable", "ScheduleAttemptFailure"): 1,
    }


def test_queued_entities_series_follow_the_queues_a_pod_entered() -> None:
    queue, _ = make_queue(FakeProfile())
    attempt_and_fail(queue, make_pod("pod1"), PLUGIN)
    # upstream: active 0, unschedulable 1
    assert queue.incoming.entered == {ACTIVE, UNSCHEDULABLE}
    assert queue.counts()[UNSCHEDULABLE] == 1 and queue.counts()[ACTIVE] == 0
    queue.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    # upstream: active 0, backoff 1, unschedulable 0
    assert queue.incoming.entered == {ACTIVE, UNSCHEDULABLE, BACKOFF}
    assert [queue.counts()[name] for name in (ACTIVE, BACKOFF, UNSCHEDULABLE)] == [0, 1, 0]


def test_a_hint_sending_a_pod_elsewhere_than_its_strategy_is_an_incoming_entity() -> None:
    """AFTER_BACKOFF for a pod whose backoff is over sends it to activeQ: counted as an entity too."""
    queue, clock = make_queue(FakeProfile(), pop_from_backoff=False)
    attempt_and_fail(queue, make_pod("p"), PLUGIN)
    clock.advance(3)
    queue.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    assert dict(queue.incoming.entities) == {
        ("active", "UnscheduledPodAdd"): 1,
        ("active", "UnschedulableTimeout"): 1,
    }


def test_pop_from_backoff_force_activate_and_gated_pods() -> None:
    gated = {"on": False}
    profile = FakeProfile(gates={"Gate": lambda pod: "held" if gated["on"] else None})
    queue, _ = make_queue(profile)
    attempt_and_fail(queue, make_pod("p"), PLUGIN)
    queue.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)  # still backing off: backoffQ
    qp = queue.pop_nowait()  # activeQ is empty: popped from backoffQ, a rejected pod
    assert qp is not None
    assert queue.incoming.pods[("active", "PopFromBackoffQ")] == 1
    assert queue.incoming.entities[("active", "PopFromBackoffQ")] == 1
    fail(queue, qp, PLUGIN)
    queue.activate([make_pod("p")])
    assert queue.incoming.pods[("active", "ForceActivate")] == 1
    gated["on"] = True
    queue.add(make_pod("q"))
    assert queue.location("uid-q") == GATED
    assert queue.incoming.pods[("unschedulable", "UnscheduledPodAdd")] == 1
    assert GATED in queue.incoming.entered


def test_rejectors_count_waiting_pods_until_popped() -> None:
    queue, _ = make_queue(FakeProfile(gates={"Gate": lambda pod: "held" if pod.name == "g" else None}))
    attempt_and_fail(queue, make_pod("a"), "NodeResourcesFit", "TaintToleration")
    attempt_and_fail(queue, make_pod("b"), "NodeResourcesFit", pending=["DynamicResources"])
    queue.add(make_pod("g"))
    assert queue.rejectors() == {
        ("NodeResourcesFit", "default-scheduler"): 2,
        ("TaintToleration", "default-scheduler"): 1,
        ("DynamicResources", "default-scheduler"): 1,
        ("Gate", "default-scheduler"): 1,
    }
    queue.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT)
    while queue.pop_nowait() is not None:
        pass
    assert queue.rejectors() == {("Gate", "default-scheduler"): 1}


def test_the_leftover_flush_marks_the_pod_until_it_fails_again() -> None:
    queue, clock = make_queue(FakeProfile())
    qp = attempt_and_fail(queue, make_pod("test-pod"), "fakePlugin")
    assert not qp.was_flushed
    clock.advance(300 + 1)
    queue.flush_unschedulable_leftover()
    popped = queue.pop_nowait()
    assert popped is qp and popped.was_flushed
    fail(queue, popped, "fakePlugin")
    assert queue.location("uid-test-pod") == UNSCHEDULABLE and not qp.was_flushed


@pytest.mark.parametrize(
    ("gated_before_flush", "gated_after_flush", "backing_off", "want_flushed", "want_queue"),
    [
        pytest.param(False, False, False, True, ACTIVE, id="flag is set when pod is not gated"),
        pytest.param(True, False, False, True, ACTIVE, id="flag is set when pod is no longer gated"),
        pytest.param(False, True, False, False, GATED, id="flag is unset when pod is newly gated"),
        pytest.param(True, True, False, False, GATED, id="flag is unset when pod is still gated"),
        pytest.param(
            False, False, True, True, BACKOFF,
            id="flag is set when pod is not gated and backoff is not complete",
        ),
        pytest.param(
            True, False, True, True, BACKOFF,
            id="flag is set when pod is no longer gated and backoff is not complete",
        ),
        pytest.param(
            False, True, True, False, GATED,
            id="flag is unset when pod is newly gated and backoff is not complete",
        ),
        pytest.param(
            True, True, True, False, GATED,
            id="flag is unset when pod is still gated and backoff is not complete",
        ),
    ],
)  # fmt: skip
def test_the_leftover_flush_mark_of_gated_pods(
    gated_before_flush: bool, gated_after_flush: bool, backing_off: bool, want_flushed: bool, want_queue: str
) -> None:
    backoff = 300.0 + 60.0 if backing_off else 0.0
    allowed = {"pod1": True}
    profile = FakeProfile(gates={"preEnqueuePlugin": lambda pod: None if allowed["pod1"] else "not allowed"})
    queue, clock = make_queue(profile, initial_backoff=backoff, max_backoff=backoff)
    queue.add(make_pod("pod1"))
    qp = queue.pop_nowait()
    assert qp is not None
    if gated_before_flush:
        qp.gated_by = "preEnqueuePlugin"
    if gated_after_flush:
        allowed["pod1"] = False
    fail(queue, qp, "foo")
    clock.advance(300 + 1)
    queue.flush_unschedulable_leftover()
    assert queue.location("uid-pod1") == want_queue
    assert qp.was_flushed is want_flushed
