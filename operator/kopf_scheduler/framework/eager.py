"""Running a coroutine to completion without an event loop, when it never waits on anything.

The scheduling cycle is written once, as coroutines: it awaits only where it consults a scheduler extender
over HTTP. A profile without extenders therefore never suspends, and the scheduler runs its cycle with
``run_eagerly`` as plain synchronous code (no task, no loop round trip); a profile with extenders awaits
it from the scheduling loop instead.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class SuspendedError(RuntimeError):
    """The coroutine waited on I/O: it must be awaited in a running loop instead."""


def run_eagerly(coro: Coroutine[Any, Any, T]) -> T:
    """The result of ``coro``, which must finish without suspending; raises ``SuspendedError`` (after
    closing ``coro``) if it tried to wait."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    name = getattr(coro, "__qualname__", repr(coro))
    raise SuspendedError(f"{name} waited on I/O: await it in the scheduling loop instead")
