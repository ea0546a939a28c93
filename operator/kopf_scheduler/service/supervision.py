"""Supervision of the operator's background tasks, and the start-up check of its ports.

A task that must run for as long as the service runs (the scheduling loop while leading, leader election,
the queue's flushes, the event and status writers, resyncs, heap compaction, PodGroup status writes) and
ends on its own, by an exception or by returning, leaves a process that looks alive and schedules
nothing. The ``Supervisor`` turns that into a failure: one error line naming the task (with its
traceback), ``/healthz`` red from then on, and the operator stopped with a non-zero exit code
(``on_fatal``; ``handlers.runner`` sets it to stop Kopf).

Guards: a task is watched only while it must run; the service stops watching it before it cancels it on
purpose (``release``), and nothing counts once the service is stopping (``stopping``). The first failure
is the one reported; later ones are logged only.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any

log = logging.getLogger("kopf_scheduler")


class Supervisor:
    def __init__(self, on_fatal: Callable[[], None] | None = None) -> None:
        #: called once, on the first failure: stops the operator
        self.on_fatal = on_fatal
        #: the first failure, as logged ("" while healthy)
        self.failure = ""
        #: set by the service when it stops: tasks ending from then on are expected to
        self.stopping = False
        self._released: set[asyncio.Task[Any]] = set()

    @property
    def healthy(self) -> bool:
        return not self.failure

    def watch(
        self, task: asyncio.Task[Any], name: str | None = None, *, forever: bool = True
    ) -> asyncio.Task[Any]:
        """Fail when ``task`` ends before ``release`` or ``stopping``: however it ends, or (``forever``
        False, a task that does one job) only when it raises or is cancelled."""
        what = name or task.get_name()
        task.add_done_callback(lambda t: self._ended(t, what, forever))
        return task

    def release(self, task: asyncio.Task[Any] | None) -> None:
        """Stop watching ``task``: it is about to be cancelled, or to end, on purpose."""
        if task is not None and not task.done():
            self._released.add(task)

    def _ended(self, task: asyncio.Task[Any], name: str, forever: bool) -> None:
        if task in self._released:
            self._released.discard(task)
            return
        if self.stopping:
            return
        if task.cancelled():
            self.fail(f"background task {name!r} was cancelled")
        elif (error := task.exception()) is not None:
            self.fail(f"background task {name!r} died: {type(error).__name__}: {error}", error)
        elif forever:
            self.fail(f"background task {name!r} ended")

    def fail(self, message: str, error: BaseException | None = None) -> None:
        """Report a failure the operator cannot carry on after: logged, /healthz red, the operator stops."""
        if self.failure:
            log.error("%s (after an earlier failure: %s)", message, self.failure, exc_info=error)
            return
        self.failure = message
        log.error("%s: the scheduler stops", message, exc_info=error)
        if self.on_fatal is not None:
            self.on_fatal()


def port_taken(port: int, host: str = "0.0.0.0") -> OSError | None:
    """The error binding ``port`` gives (another process listens on it), None when it is free. With
    ``SO_REUSEADDR``, as the metrics and health servers bind, so a port in TIME_WAIT counts as free."""
    if not port:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e
    return None
