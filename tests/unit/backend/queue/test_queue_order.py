"""activeQ order: the queue-sort plugin (fast key or ``less``), then arrival; re-sorting live."""

from __future__ import annotations

import pytest
from _queue_kit import (
    FakeProfile,
    FastPrioritySort,
    LessOnlyPrioritySort,
    LowestPriorityFirst,
    make_pod,
    make_queue,
    pop_all_names,
)

SORTS = [
    pytest.param(FastPrioritySort(), id="sort-key"),
    pytest.param(LessOnlyPrioritySort(), id="less-only"),
]


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize(
    ("arrivals", "expected"),
    [
        pytest.param(
            [("low", 0, 0), ("high", 100, 0), ("mid", 50, 0)], ["high", "mid", "low"], id="by-priority"
        ),
        pytest.param(
            [("first", 5, 0), ("second", 5, 1), ("third", 5, 2)], ["first", "second", "third"], id="by-time"
        ),
        pytest.param(
            [("late-high", 9, 5), ("early-low", 1, 0)], ["late-high", "early-low"], id="priority-beats-time"
        ),
        pytest.param([("a", 0, 0), ("b", 0, 0), ("c", 0, 0)], ["a", "b", "c"], id="same-instant-by-arrival"),
        pytest.param([("neg", -10, 0), ("zero", 0, 0)], ["zero", "neg"], id="negative-priority"),
    ],
)
def test_pop_order(sort, arrivals, expected):
    queue, clock = make_queue(FakeProfile(), sort=sort)
    for name, priority, at in arrivals:
        clock.set(1000.0 + at)
        queue.add(make_pod(name, priority=priority))
    assert pop_all_names(queue) == expected


@pytest.mark.parametrize("sort", SORTS)
def test_priority_update_repositions_pod_in_active_queue(sort):
    queue, _ = make_queue(FakeProfile(), sort=sort)
    for name in ("a", "b", "c"):
        queue.add(make_pod(name, priority=1))
    queue.update(make_pod("c", priority=1), make_pod("c", priority=10))
    assert pop_all_names(queue) == ["c", "a", "b"]


def test_set_queue_sort_resorts_waiting_pods():
    queue, _ = make_queue(FakeProfile())
    for name, priority in (("p1", 1), ("p3", 3), ("p2", 2)):
        queue.add(make_pod(name, priority=priority))
    queue.set_queue_sort(LowestPriorityFirst())
    assert pop_all_names(queue) == ["p1", "p2", "p3"]


def test_set_queue_sort_to_less_only_plugin():
    queue, _ = make_queue(FakeProfile(), sort=LowestPriorityFirst())
    for name, priority in (("p1", 1), ("p3", 3), ("p2", 2)):
        queue.add(make_pod(name, priority=priority))
    queue.set_queue_sort(LessOnlyPrioritySort())
    queue.add(make_pod("p9", priority=9))
    assert pop_all_names(queue) == ["p9", "p3", "p2", "p1"]


def test_sort_key_declined_falls_back_to_less():
    class Moody(FastPrioritySort):
        def sort_key(self, qp):
            return None if qp.pod.name == "odd" else super().sort_key(qp)

    queue, _ = make_queue(FakeProfile(), sort=Moody())
    queue.add(make_pod("a", priority=1))
    queue.add(make_pod("odd", priority=5))
    queue.add(make_pod("b", priority=3))
    assert pop_all_names(queue) == ["odd", "b", "a"]


def test_many_pods_pop_in_order():
    queue, clock = make_queue(FakeProfile())
    priorities = [(i * 7919) % 101 for i in range(500)]
    for i, priority in enumerate(priorities):
        clock.advance(0.001)
        queue.add(make_pod(f"p{i}", priority=priority))
    popped = []
    while (qp := queue.pop_nowait()) is not None:
        popped.append((-qp.pod.priority, qp.timestamp))
    assert popped == sorted(popped)
    assert len(popped) == 500
