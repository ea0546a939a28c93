"""The action after a quiet period: it waits on its own clock, runs once per quiet burst, runs again for a
signal that came while it ran, and is dropped by stop; and cancelling a task on stop."""

from __future__ import annotations

import asyncio

from waiting import until

from kopf_scheduler.service.after_quiet import AfterQuiet, cancel


async def test_the_action_runs_once_the_signals_have_been_quiet_on_its_clock() -> None:
    now = [0.0]
    runs: list[float] = []

    async def action() -> None:
        runs.append(now[0])

    after = AfterQuiet(action, quiet=0.05, name="test", clock=lambda: now[0])
    after.signal()
    now[0] = 0.04
    after.signal()  # the burst goes on: quiet from here
    now[0] = 0.08
    await asyncio.sleep(0.1)
    assert runs == []  # the task woke and found it not quiet for 0.05 yet on its clock
    now[0] = 0.1
    await until(lambda: runs)
    await asyncio.sleep(0.05)
    assert runs == [0.1]  # once per burst
    after.signal()
    now[0] = 1.0
    await until(lambda: len(runs) == 2)
    await after.stop()


async def test_a_signal_while_the_action_runs_runs_it_again() -> None:
    running, release = asyncio.Event(), asyncio.Event()
    runs = 0

    async def action() -> None:
        nonlocal runs
        runs += 1
        running.set()
        await release.wait()

    after = AfterQuiet(action, quiet=0.01, name="test")
    after.signal()
    await until(running.is_set)
    after.signal()  # a new listing while the last one's action runs
    release.set()
    await until(lambda: runs == 2)
    await after.stop()


async def test_stop_drops_a_pending_action_and_cancels_a_running_one() -> None:
    runs = 0
    started = asyncio.Event()

    async def action() -> None:
        nonlocal runs
        runs += 1
        started.set()
        await asyncio.sleep(60)

    pending = AfterQuiet(action, quiet=0.05, name="test")
    pending.signal()
    await pending.stop()
    await asyncio.sleep(0.1)
    assert runs == 0

    running = AfterQuiet(action, quiet=0.0, name="test")
    running.signal()
    await until(started.is_set)
    async with asyncio.timeout(1):
        await running.stop()  # does not wait out the action's sleep
    assert runs == 1


async def test_cancel_ends_a_running_task_and_leaves_a_finished_one_alone() -> None:
    async def forever() -> None:
        await asyncio.sleep(60)

    async def fails() -> None:
        raise RuntimeError("reported by its supervisor")

    task = asyncio.get_running_loop().create_task(forever())
    await cancel(task)
    assert task.cancelled()
    failed = asyncio.get_running_loop().create_task(fails())
    await asyncio.wait([failed])
    await cancel(failed)  # not raised again
    await cancel(None)
    failed.exception()  # retrieved: no "never retrieved" warning
