"""Two shapes of the operator's background work: an action taken once a burst of signals has gone quiet,
and cancelling a task on stop.

``AfterQuiet`` serves what follows a watch's listing: every listed object moves the action's due time
``quiet`` seconds ahead, and one task waits until the clock passes it. A signal that arrives while the
action runs is not lost: the action runs again once that one has been quiet too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable


async def cancel(task: asyncio.Task[None] | None) -> None:
    """Cancels ``task`` if it still runs and waits for it to end (a task that failed was reported by its
    supervisor, so its exception is not raised again here)."""
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class AfterQuiet:
    def __init__(
        self,
        action: Callable[[], Awaitable[None]],
        *,
        quiet: float,
        name: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.action = action
        self.quiet = quiet
        self.name = name
        self.clock = clock
        self._due: float | None = None
        self._task: asyncio.Task[None] | None = None
        #: called with each task started (the operator's supervisor watches it)
        self.watch: Callable[[asyncio.Task[None]], object] | None = None

    def signal(self) -> None:
        """Something happened: the action runs once ``quiet`` seconds pass without another signal. Call
        from the event loop."""
        self._due = self.clock() + self.quiet
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
            if self.watch is not None:
                self.watch(self._task)

    async def _run(self) -> None:
        while self._due is not None:
            while (wait := self._due - self.clock()) > 0:
                await asyncio.sleep(wait)
            self._due = None
            await self.action()

    async def stop(self) -> None:
        """Drops a pending action, and cancels one that runs."""
        task, self._task, self._due = self._task, None, None
        await cancel(task)
