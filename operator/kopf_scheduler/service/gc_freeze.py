"""Keeping the cyclic garbage collector's pauses short in a process that holds a whole cluster.

The scheduler keeps every node and pod for as long as they exist, and CPython's collector walks every
live container object on each full pass: with thousands of pods that is 100-200 ms during which the
event loop stands still, which was the p99 latency of the pods arriving then. So objects that survived a
full pass are frozen (``gc.freeze``): later passes only walk what was created since. Frozen objects are
still freed by reference counting when the scheduler drops them; only reference cycles among them would
wait, so every ``compact_every`` seconds the heap is unfrozen, collected once and frozen again.

The watch intake process (``handlers.intake``) keeps nothing per object: it freezes once, when it has
started, what it loaded to run, and leaves every event's objects to reference counting and the collector.

While a process loads what lives on (the scheduling process's initial lists, ``simulate``'s input), the
collector is off (``collector_paused``): its full passes over a heap that only grows would free nothing,
and they come each time the heap has grown by a quarter, so loading 150,000 pods paid for several walks
of the whole heap.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Callable, Iterator
from typing import Any

from kopf_scheduler.service.after_quiet import cancel

log = logging.getLogger(__name__)

#: seconds between two full collections of the whole heap
DEFAULT_COMPACT_EVERY = 600.0


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """For loading objects that live on: the cyclic collector is off meanwhile, and what was loaded is
    then frozen (``gc.freeze``), so later passes walk only what is made after. Loaded objects are plain
    dicts, lists and the scheduler's records of them, without cycles: they are still freed when dropped."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


class HeapSettler:
    def __init__(self, compact_every: float = DEFAULT_COMPACT_EVERY) -> None:
        self.compact_every = compact_every
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        #: called with the compaction task once started (the operator's supervisor watches it)
        self.watch: Callable[[asyncio.Task[None]], object] | None = None

    def start(self, *, collect: bool = True) -> None:
        """Collects and freezes what exists now (the cluster just listed); from then on, freezes the
        survivors of every full pass and compacts periodically. Call from the event loop. ``collect``
        False: freezes without the full collection first, for a heap just loaded by ``collector_paused``
        (nothing there to free; at 150,000 pods the collection held the start-up up for seconds)."""
        self._loop = asyncio.get_running_loop()
        if collect:
            self.compact()
        else:
            gc.freeze()
        if self._after_collection not in gc.callbacks:
            gc.callbacks.append(self._after_collection)
        self._task = self._loop.create_task(self._compact_periodically(), name="heap-compaction")
        if self.watch is not None:
            self.watch(self._task)

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._after_collection)
        task, self._task = self._task, None
        await cancel(task)

    @staticmethod
    def compact() -> None:
        """One full collection of everything, frozen objects included; the survivors are frozen."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()

    def _after_collection(self, phase: str, info: dict[str, Any]) -> None:
        # Called by the collector, possibly on another thread: freeze once it has finished.
        if phase == "stop" and info.get("generation") == 2 and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to keep fast
                self._loop.call_soon_threadsafe(gc.freeze)

    async def _compact_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.compact_every)
            self.compact()
            log.debug("heap compacted: %d objects frozen", gc.get_freeze_count())
