"""Between two cycles the scheduling loop lets the watch intake catch up: on asyncio's loop and on uvloop
(which Kopf's CLI picks for ``kopf run -m kopf_scheduler.handlers``), an event that takes several turns of
the loop to reach the cache is in it before the next cycle starts."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import uvloop

from kopf_scheduler.scheduling.scheduler import MAX_INTAKE_ROUNDS, yield_to_intake

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}

#: turns of the loop an event takes from the socket to the cache (Kopf: stream, queue, worker, handler)
STAGES = 6


def _work(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


async def _event(stages: int, cache: list[int]) -> None:
    """One watch event: each stage does some work, then hands the event on through a queue."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for stage in range(stages):
        _work(50e-6)
        queue.put_nowait(stage)
        await asyncio.sleep(0)
        await queue.get()
    cache.append(stages)


def _run(loop: str, main: Callable[[], object]) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.run(main())  # type: ignore[arg-type]


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_events_several_turns_from_the_cache_are_in_it_after_the_yield(loop: str) -> None:
    cache: list[int] = []

    async def main() -> None:
        for _ in range(20):
            await yield_to_intake()  # nothing else runs: what an idle turn costs here
        events = [asyncio.ensure_future(_event(STAGES, cache)) for _ in range(10)]
        await yield_to_intake()
        assert cache == [STAGES] * 10
        await asyncio.gather(*events)

    _run(loop, main)


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_an_intake_that_never_settles_gets_a_bounded_number_of_turns(loop: str) -> None:
    turns = 0

    async def busy() -> None:
        nonlocal turns
        while True:
            _work(20e-6)
            turns += 1
            await asyncio.sleep(0)

    async def main() -> None:
        for _ in range(20):
            await yield_to_intake()  # nothing else runs: what an idle turn costs here
        task = asyncio.ensure_future(busy())
        await asyncio.sleep(0)
        before = turns
        await yield_to_intake()
        assert turns - before == MAX_INTAKE_ROUNDS
        task.cancel()

    _run(loop, main)
