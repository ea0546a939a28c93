"""The flush loops on a virtual clock: backoff flushes at window boundaries, leftovers every 30 s."""

from __future__ import annotations

import asyncio

from _queue_kit import START, FakeProfile, fail, make_pod, make_queue

from kopf_scheduler.backend.queue import ACTIVE, BACKOFF, UNSCHEDULABLE


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _advance(clock, seconds: float, step: float = 0.25) -> None:
    end = clock.now() + seconds
    while clock.now() < end:
        clock.set(min(end, clock.now() + step))
        await _settle()


async def test_run_flushes_backoff_and_leftovers_until_close():
    queue, clock = make_queue(FakeProfile())
    runner = asyncio.create_task(queue.run())
    await _settle()

    queue.add(make_pod("errored"))
    fail(queue, queue.pop_nowait(), error=True)
    queue.add(make_pod("rejected"))
    fail(queue, queue.pop_nowait(), "NodeResourcesFit")
    assert (queue.location("uid-errored"), queue.location("uid-rejected")) == (BACKOFF, UNSCHEDULABLE)

    await _advance(clock, 1.5)
    assert queue.location("uid-errored") == BACKOFF  # expiry window [1001, 1002) not over yet
    await _advance(clock, 0.5)
    assert queue.location("uid-errored") == ACTIVE

    await _advance(clock, 299.0 - 2.0)
    assert queue.location("uid-rejected") == UNSCHEDULABLE
    await _advance(clock, 31.0)  # the next 30 s leftover flush after the 5-minute mark
    assert queue.location("uid-rejected") == ACTIVE

    queue.close()
    await asyncio.wait_for(runner, 1)
    assert clock.next_wakeup() is None


async def test_simulation_can_jump_to_the_next_expiry():
    queue, clock = make_queue(FakeProfile())
    queue.add(make_pod("p"))
    qp = queue.pop_nowait()
    qp.attempts = 4
    fail(queue, qp, error=True)
    clock.set(queue.next_backoff_expiry())
    assert queue.flush_due() == 1
    assert clock.now() == START + 8 + 1
    assert queue.next_backoff_expiry() is None


async def test_run_after_close_returns_at_once():
    queue, _ = make_queue(FakeProfile())
    queue.close()
    await asyncio.wait_for(queue.run(), 1)
