"""Popping: blocking until a pod arrives, closing, attempts, and popping from backoffQ."""

from __future__ import annotations

import asyncio

import pytest
from _queue_kit import NODE_ADD, FakeProfile, fail, make_node, make_pod, make_queue


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_pop_blocks_until_a_pod_is_added():
    queue, _ = make_queue(FakeProfile())
    waiter = asyncio.create_task(queue.pop())
    await _settle()
    assert not waiter.done()
    queue.add(make_pod("p"))
    qp = await asyncio.wait_for(waiter, 1)
    assert qp.pod.name == "p"


async def test_pop_returns_none_after_close():
    queue, _ = make_queue(FakeProfile())
    waiter = asyncio.create_task(queue.pop())
    await _settle()
    queue.close()
    assert await asyncio.wait_for(waiter, 1) is None
    assert await queue.pop() is None


async def test_pop_still_returns_waiting_pods_after_close():
    queue, _ = make_queue(FakeProfile())
    queue.add(make_pod("p"))
    queue.close()
    assert (await queue.pop()).pod.name == "p"
    assert await queue.pop() is None


async def test_pop_wakes_when_a_rejected_pod_enters_backoff():
    queue, _ = make_queue(FakeProfile([("A", NODE_ADD, None)]))
    queue.add(make_pod("p"))
    qp = await queue.pop()
    fail(queue, qp, "A")
    waiter = asyncio.create_task(queue.pop())
    await _settle()
    assert not waiter.done()
    queue.node_added(make_node("n1"))  # moves it to backoffQ; activeQ is empty, so pop takes it
    again = await asyncio.wait_for(waiter, 1)
    assert (again.pod.name, again.attempts) == ("p", 2)


async def test_cancelled_pop_leaves_no_waiter():
    queue, _ = make_queue(FakeProfile())
    waiter = asyncio.create_task(queue.pop())
    await _settle()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert queue._waiters == []
    queue.add(make_pod("p"))
    assert queue.pop_nowait().pod.name == "p"


async def test_several_waiters_each_get_a_pod():
    queue, _ = make_queue(FakeProfile())
    waiters = [asyncio.create_task(queue.pop()) for _ in range(3)]
    await _settle()
    for name in ("a", "b", "c"):
        queue.add(make_pod(name))
    got = await asyncio.wait_for(asyncio.gather(*waiters), 1)
    assert sorted(qp.pod.name for qp in got) == ["a", "b", "c"]


def test_pop_counts_attempts_and_clears_last_verdict():
    queue, clock = make_queue(FakeProfile(), pop_from_backoff=False)
    queue.add(make_pod("p"))
    for attempt in (1, 2, 3):
        qp = queue.pop_nowait()
        assert qp.attempts == attempt
        assert (qp.unschedulable_plugins, qp.pending_plugins, qp.last_failure_was_error) == (
            set(),
            set(),
            False,
        )
        fail(queue, qp, "A", pending=["B"], error=True)
        clock.advance(20)
        queue.flush_backoff_completed()
    assert queue.get("uid-p").attempts == 3


def test_pop_nowait_on_empty_queue():
    queue, _ = make_queue(FakeProfile())
    assert queue.pop_nowait() is None


def test_pop_from_backoff_takes_window_then_priority_order():
    queue, clock = make_queue(FakeProfile([("A", NODE_ADD, None)]))
    for name, priority, at in (("early-low", 1, 0.1), ("early-high", 9, 0.2), ("late-high", 99, 1.5)):
        clock.set(1000.0 + at)
        queue.add(make_pod(name, priority=priority))
        fail(queue, queue.pop_nowait(), "A")
    queue.node_added(make_node("n1"))
    assert queue.counts()["backoff"] == 3
    names = [queue.pop_nowait().pod.name for _ in range(3)]
    assert names == ["early-high", "early-low", "late-high"]
