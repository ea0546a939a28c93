"""Handing the C allocator's free memory back to the kernel, in both processes of ``kopf-scheduler run``.

The watch intake process (``handlers.intake``) keeps almost nothing: each watch event is read, decoded,
written to the pipe and dropped. Its live memory stays level, but glibc's allocator does not give back
the pages of free chunks between live ones, and the spread of those chunks grows with the mix of sizes
that passes through (event bodies, TLS records, pipe frames, connections made again after each
re-authentication): under hours of churn the process's resident set crept up by about half a MiB a
minute while the bytes in use did not move. ``malloc_trim(0)`` returns every whole free page
(``madvise``) of every arena; called every ``every`` seconds it keeps the resident set at what is in use.
That process allocates Python's objects with ``malloc`` too (``intake_link.intake_environment``), so what
a burst of events leaves between the objects that outlive it is among those pages.

The scheduling process (``SchedulerService``) trims as well: after a credential reload its heap grew by a
few MiB that stayed resident once free.

glibc only: where the C library has no ``malloc_trim`` (musl, macOS) nothing is started.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import time
from collections.abc import Callable

from kopf_scheduler.service.after_quiet import cancel

log = logging.getLogger(__name__)

#: seconds between two trims
DEFAULT_TRIM_EVERY = 30.0


def libc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


class MallocTrim:
    def __init__(self, every: float = DEFAULT_TRIM_EVERY, trim: Callable[[int], int] | None = None) -> None:
        self.every = every
        self._trim = trim if trim is not None else libc_malloc_trim()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Trims every ``every`` seconds from now on. Call from the event loop; nothing happens without
        ``malloc_trim``."""
        if self._trim is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="malloc-trim")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel(task)

    async def _run(self) -> None:
        assert self._trim is not None
        while True:
            await asyncio.sleep(self.every)
            began = time.perf_counter()
            returned = self._trim(0)
            log.debug(
                "malloc_trim: %s in %.1f ms",
                "pages returned" if returned else "nothing to return",
                (time.perf_counter() - began) * 1000,
            )
