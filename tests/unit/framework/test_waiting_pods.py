"""A pod's wait at Permit leaves nothing behind once it is over: the scheduler freezes the survivors of
each full collection (``service.gc_freeze``), so a finished wait caught in a reference cycle would keep
its pod in memory until the next compaction (a held gang's members wait and are rejected again and
again)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable, Iterator

import pytest

from kopf_scheduler.framework.clock import RealClock
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.waiting_pods import WaitingPod
from kopf_scheduler.testing import make_pod


@pytest.fixture
def no_collector() -> Iterator[None]:
    """Only reference counting frees objects meanwhile."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


ENDINGS: dict[str, Callable[[WaitingPod], object]] = {
    "allowed": lambda w: [w.allow("P"), w.allow("Q")],
    "rejected": lambda w: w.reject("P", "the gang cannot fit"),
    "preempted": lambda w: w.preempt("Q", "preempted"),
    "timed-out": lambda w: None,
}


@pytest.mark.parametrize("ending", list(ENDINGS))
async def test_a_finished_wait_is_freed_without_the_cyclic_collector(no_collector: None, ending: str) -> None:
    pod = PodInfo(make_pod().name("member-0").uid("uid-member-0").obj())
    waiting = WaitingPod(pod, {"P": 0.01 if ending == "timed-out" else 60.0, "Q": 60.0}, RealClock())
    await asyncio.sleep(0)  # the timers start sleeping
    ENDINGS[ending](waiting)
    await asyncio.wait_for(waiting.wait(), timeout=5)
    await asyncio.sleep(0.05)  # the cancelled timers finish
    gone = weakref.ref(waiting)
    del waiting
    assert gone() is None
