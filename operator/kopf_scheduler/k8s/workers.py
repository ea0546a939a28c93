"""Background senders shared by events and status patches: started lazily inside the running loop,
retrying what the API server may accept later, and drained (with a deadline) at shutdown."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence

from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.k8s.fence import FencedWrite
from kopf_scheduler.k8s.rest import Response

logger = logging.getLogger(__name__)

#: waits between tries of a write the server may accept later (no answer, 429, 5xx)
DEFAULT_RETRY_DELAYS: tuple[float, ...] = (0.2, 1.0, 3.0)


def retriable(status: int) -> bool:
    """No answer, throttled, or a server-side failure: worth another try (409 is the caller's call)."""
    return status == 0 or status == 429 or status >= 500


async def with_retries(
    send: Callable[[], Awaitable[Response]],
    clock: Clock,
    delays: Sequence[float] = DEFAULT_RETRY_DELAYS,
    should_retry: Callable[[Response], bool] = lambda r: retriable(r.status),
) -> Response:
    """``send`` until it answers something final; waits ``delays`` (±25 % jitter, like client-go's
    event sink) between tries; returns the last response."""
    response = await send()
    for delay in delays:
        if not should_retry(response):
            break
        await clock.sleep(delay * random.uniform(0.75, 1.25))
        response = await send()
    return response


class WorkerPool:
    """``count`` tasks taking items from ``queue`` and handing them to ``handle``; never dies on an
    exception from ``handle`` (it is logged)."""

    def __init__(
        self, name: str, queue: asyncio.Queue[object], handle: Callable[[object], Awaitable[None]], count: int
    ):
        self.name = name
        self.queue = queue
        self.handle = handle
        self.count = count
        self.tasks: list[asyncio.Task[None]] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        #: called with each task started (the operator's supervisor watches them)
        self.watch: Callable[[asyncio.Task[None]], object] | None = None

    def ensure_started(self) -> bool:
        """Start the tasks if there is a running loop; False when called outside one."""
        if self.tasks:
            return True
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        self.tasks = [
            self.loop.create_task(self._run(), name=f"kopf-scheduler-{self.name}-{i}")
            for i in range(self.count)
        ]
        if self.watch is not None:
            for task in self.tasks:
                self.watch(task)
        return True

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            try:
                await self.handle(item)
            except asyncio.CancelledError:
                raise
            except FencedWrite as e:  # the Lease is lost or released: the write is dropped
                logger.debug("%s: %s", self.name, e)
            except Exception:
                logger.exception("%s: unexpected failure while sending", self.name)
            finally:
                self.queue.task_done()

    async def drain(self, timeout: float) -> bool:
        """Wait until everything queued was handled; False if ``timeout`` passed first."""
        if not self.ensure_started():
            return self.queue.empty()
        try:
            await asyncio.wait_for(self.queue.join(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
