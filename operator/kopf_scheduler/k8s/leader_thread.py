"""Leader election on its own thread, event loop and API connection, so that renewing the Lease never
waits for the scheduling loop to yield.

A scheduling cycle is synchronous CPU work; one long cycle (a pod with hundreds of affinity terms on a
big cluster) used to hold the event loop past the renew deadline, and the Lease was lost while the
instance was healthy. Here the ``LeaderElector`` runs on a thread of its own with its own ``RestClient``
(its own connection pool, created on that thread's loop), renewing on time however busy the main loop
is. The callbacks it calls when leading starts and stops run on the caller's loop; the elector waits for
them as before, so ``on_stopped_leading`` still finishes before the Lease is released. Cancelling
``run`` cancels the elector on its thread and waits until it has stopped (and released the Lease).
``is_leader`` (the fence every pod write checks) reads the elector's state from any thread: a float
and a flag, written by the elector's thread alone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from kopf_scheduler.k8s.leader import LeaderElector
from kopf_scheduler.k8s.rest import RestClient


class LeaderThread:
    def __init__(
        self, make_rest: Callable[[], RestClient], make_elector: Callable[[RestClient], LeaderElector]
    ) -> None:
        """``make_rest`` builds the elector's client (called on the elector's thread); ``make_elector``
        builds the elector around it."""
        self._make_rest = make_rest
        self._make_elector = make_elector
        self.elector: LeaderElector | None = None

    @property
    def is_leader(self) -> bool:
        return self.elector is not None and self.elector.is_leader

    async def run(
        self, on_started_leading: Callable[[], Awaitable[Any]], on_stopped_leading: Callable[[], Any]
    ) -> None:
        """``LeaderElector.run`` on the elector's thread; raises what it raises (``LeadershipLost``)."""
        caller = asyncio.get_running_loop()
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        loop = asyncio.new_event_loop()
        task: list[asyncio.Task[None]] = []

        def on_caller(fn: Callable[[], Any]) -> Callable[[], Awaitable[Any]]:
            async def call() -> Any:
                async def run_there() -> Any:
                    outcome = fn()
                    return await outcome if inspect.isawaitable(outcome) else outcome

                return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run_there(), caller))

            return call

        async def elect() -> None:
            rest = self._make_rest()
            try:
                self.elector = self._make_elector(rest)
                await self.elector.run(on_caller(on_started_leading), on_caller(on_stopped_leading))
            finally:
                await rest.close()

        def thread_main() -> None:
            asyncio.set_event_loop(loop)
            task.append(loop.create_task(elect(), name="leader-election"))
            try:
                loop.run_until_complete(task[0])
                done.set_result(None)
            except BaseException as e:
                if isinstance(e, asyncio.CancelledError):
                    done.cancel()
                else:
                    done.set_exception(e)
            finally:
                loop.close()

        thread = threading.Thread(target=thread_main, name="leader-election", daemon=True)
        thread.start()
        try:
            await asyncio.shield(asyncio.wrap_future(done))
        except asyncio.CancelledError:
            while not task and not done.done():  # the task is created first thing on the thread
                await asyncio.sleep(0.001)
            if not done.done():
                with contextlib.suppress(RuntimeError):  # its loop closed meanwhile: it has ended
                    loop.call_soon_threadsafe(task[0].cancel)
            # wait for it to stop: it calls back on_stopped_leading here, then releases the Lease
            await asyncio.wait([asyncio.wrap_future(done)])
            raise
        finally:
            await asyncio.to_thread(thread.join)
