"""Backoff: durations, expiry in 1-second ordering windows, the flush to activeQ, and the two heaps."""

from __future__ import annotations

import pytest
from _queue_kit import START, FakeProfile, fail, make_pod, make_queue, pop_all_names

from kopf_scheduler.backend.queue import ACTIVE, BACKOFF, backoff_duration
from kopf_scheduler.backend.queue.backoff import align_to_window
from kopf_scheduler.framework.events import EVENT_FORCE_ACTIVATE


@pytest.mark.parametrize(
    ("attempts", "seconds"),
    [
        pytest.param(0, 0, id="never-tried"),
        pytest.param(1, 1, id="1st"),
        pytest.param(2, 2, id="2nd"),
        pytest.param(3, 4, id="3rd"),
        pytest.param(4, 8, id="4th"),
        pytest.param(5, 10, id="5th-capped"),
        pytest.param(6, 10, id="6th-capped"),
        pytest.param(200, 10, id="huge-capped"),
    ],
)
def test_default_backoff_durations(attempts, seconds):
    assert backoff_duration(attempts) == seconds


@pytest.mark.parametrize(
    ("initial", "maximum", "expected"),
    [
        pytest.param(0.5, 3.0, [0.5, 1.0, 2.0, 3.0, 3.0], id="half-second-to-3"),
        pytest.param(2.0, 2.0, [2.0, 2.0, 2.0, 2.0, 2.0], id="flat"),
    ],
)
def test_configured_backoff_durations(initial, maximum, expected):
    assert [backoff_duration(n, initial, maximum) for n in range(1, 6)] == expected


def _fail_repeatedly(queue, clock, name, failures):
    """Adds a pod and fails it ``failures`` times, each time as soon as it is back in activeQ."""
    queue.add(make_pod(name))
    durations = []
    for _ in range(failures):
        qp = queue.pop_nowait()
        assert qp is not None
        failed_at = clock.now()
        assert fail(queue, qp, error=True) == BACKOFF
        ready_at = queue.next_backoff_expiry()
        clock.set(ready_at - 0.001)
        assert queue.flush_backoff_completed() == 0, "moved before its backoff ended"
        clock.set(ready_at)
        assert queue.flush_backoff_completed() == 1
        assert queue.location(qp.pod.uid) == ACTIVE
        durations.append(round(ready_at - failed_at, 6))
    return durations


def test_backoff_timings_without_windows():
    queue, clock = make_queue(FakeProfile(), pop_from_backoff=False)
    assert _fail_repeatedly(queue, clock, "p", 6) == [1, 2, 4, 8, 10, 10]


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        # A failure right at a window start completes at the end of its expiry's window.
        pytest.param(0.0, [2, 3, 5, 9, 11, 11], id="failure-at-window-start"),
        pytest.param(0.25, [1.75, 2.75, 4.75, 8.75, 10.75, 10.75], id="failure-inside-window"),
    ],
)
def test_backoff_timings_with_ordering_windows(offset, expected):
    queue, clock = make_queue(FakeProfile())
    clock.set(START + offset)
    durations = []
    queue.add(make_pod("p"))
    for _ in range(6):
        qp = queue.pop_nowait()
        failed_at = clock.now()
        assert fail(queue, qp, error=True) == BACKOFF
        ready_at = queue.next_backoff_expiry()
        assert ready_at == align_to_window(ready_at)  # flushes happen at window boundaries
        clock.set(ready_at - 0.001)
        assert queue.flush_backoff_completed() == 0
        clock.set(ready_at)
        assert queue.flush_backoff_completed() == 1
        durations.append(round(ready_at - failed_at, 6))
        clock.set(ready_at + offset)  # keep each failure at the same place in its window
    assert durations == expected


def test_expiry_is_failure_timestamp_plus_backoff():
    queue, clock = make_queue(FakeProfile(), pop_from_backoff=False)
    queue.add(make_pod("p"))
    qp = queue.pop_nowait()
    clock.advance(3.5)  # the attempt itself took a while
    fail(queue, qp, error=True)
    assert qp.timestamp == START + 3.5
    assert queue.next_backoff_expiry() == START + 3.5 + 1


@pytest.mark.parametrize("windowed", [pytest.param(False, id="exact"), pytest.param(True, id="windowed")])
def test_flush_moves_only_completed_pods(windowed):
    queue, clock = make_queue(FakeProfile(), pop_from_backoff=windowed)
    for name, attempts in (("after-1s", 1), ("after-2s", 2), ("after-4s", 3)):
        queue.add(make_pod(name))
        qp = queue.pop_nowait()
        qp.attempts = attempts  # as if it had failed before
        fail(queue, qp, error=True)
    slack = 1.0 if windowed else 0.0  # a window is flushed once the clock has left it
    moved = {}
    for step in range(12):
        clock.set(START + step * 0.5)
        queue.flush_backoff_completed()
        for name in pop_all_names(queue):
            moved[name] = clock.now() - START
    assert moved == {"after-1s": 1 + slack, "after-2s": 2 + slack, "after-4s": 4 + slack}


def test_pods_in_one_window_flush_in_queue_sort_order():
    queue, clock = make_queue(FakeProfile())
    pods = [("low", 1, 0.1), ("high", 9, 0.5), ("mid", 5, 0.9)]
    for name, priority, at in pods:
        clock.set(START + at)
        queue.add(make_pod(name, priority=priority))
        qp = queue.pop_nowait()
        fail(queue, qp, "SomePlugin")
        queue.move_all_to_active_or_backoff(EVENT_FORCE_ACTIVATE)
    assert queue.counts()[BACKOFF] == 3
    clock.set(START + 2.0)
    assert queue.flush_backoff_completed() == 3
    assert pop_all_names(queue) == ["high", "mid", "low"]


@pytest.mark.parametrize(
    ("error", "heap_poppable"),
    [pytest.param(False, True, id="rejected-pod"), pytest.param(True, False, id="error-pod")],
)
def test_pop_from_backoff_takes_only_rejected_pods(error, heap_poppable):
    queue, _ = make_queue(FakeProfile([("SomePlugin", EVENT_FORCE_ACTIVATE, None)]))
    queue.add(make_pod("p"))
    qp = queue.pop_nowait()
    if error:
        assert fail(queue, qp, error=True) == BACKOFF
    else:
        fail(queue, qp, "SomePlugin")
        queue.move_all_to_active_or_backoff(EVENT_FORCE_ACTIVATE)
        assert queue.location(qp.pod.uid) == BACKOFF
    again = queue.pop_nowait()
    assert (again is not None) == heap_poppable
    if again is not None:
        assert again.attempts == 2


def test_no_pop_from_backoff_when_disabled():
    queue, _ = make_queue(FakeProfile(), pop_from_backoff=False)
    queue.add(make_pod("p"))
    qp = queue.pop_nowait()
    fail(queue, qp, "SomePlugin")
    queue.move_all_to_active_or_backoff(EVENT_FORCE_ACTIVATE)
    assert queue.location("uid-p") == BACKOFF
    assert queue.pop_nowait() is None


def test_pop_from_backoff_prefers_active_queue():
    queue, _ = make_queue(FakeProfile())
    queue.add(make_pod("backing-off", priority=100))
    qp = queue.pop_nowait()
    fail(queue, qp, "SomePlugin")
    queue.move_all_to_active_or_backoff(EVENT_FORCE_ACTIVATE)
    queue.add(make_pod("fresh", priority=0))
    assert [queue.pop_nowait().pod.name, queue.pop_nowait().pod.name] == ["fresh", "backing-off"]


def test_next_backoff_expiry_empty():
    queue, _ = make_queue(FakeProfile())
    assert queue.next_backoff_expiry() is None
