"""Keeping the cyclic garbage collector's pauses short in a process that holds a whole cluster.

The scheduler keeps every node and pod for as long as they exist, and CPython's collector walks every
live container object on each full pass: with thousands of pods that is 100-200 ms during which the
event loop stands still, which was the p99 latency of the pods arriving then. So objects that survived a
full pass are frozen (``gc.freeze``): later passes only walk what was created since. Frozen objects are
still freed by reference counting when the scheduler drops them; only reference cycles among them would
wait, so every ``compact_every`` seconds the heap is unfrozen, collected once and frozen again.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: seconds between two full collections of the whole heap
DEFAULT_COMPACT_EVERY = 600.0


class HeapSettler:
    def __init__(self, compact_every: float = DEFAULT_COMPACT_EVERY) -> None:
        self.compact_every = compact_every
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        #: called with the compaction task once started (the operator's supervisor watches it)
        self.watch: Callable[[asyncio.Task[None]], object] | None = None

    def start(self) -> None:
        """Collects and freezes what exists now (the cluster just listed); from then on, freezes the
        survivors of every full pass and compacts periodically. Call from the event loop."""
        self._loop = asyncio.get_running_loop()
        self.compact()
        if self._after_collection not in gc.callbacks:
            gc.callbacks.append(self._after_collection)
        self._task = self._loop.create_task(self._compact_periodically(), name="heap-compaction")
        if self.watch is not None:
            self.watch(self._task)

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._after_collection)
        task, self._task = self._task, None
        if task is not None and not task.done():  # one that failed was reported by its supervisor
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

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
