"""Bindings answered as done but never seen done: re-read and settled, so that no pod stays assumed.

A bind plugin or a scheduler extender's bind verb can answer success without the binding being stored
(an extender that lies, a binder that lost its request); upstream keeps such a pod assumed for ever, its
room held on the node and the pod itself never scheduled again. Here every ``interval`` seconds the pods
whose binding finished more than the scheduler's ``confirm_timeout`` ago without a confirming watch event
are read from the API server and settled by ``Scheduler.binding_unconfirmed``: bound (the watch is
late), gone, or still unbound (forgotten, reported, queued again). A read that fails is tried again at
the next round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.scheduling.scheduler import Scheduler

log = logging.getLogger(__name__)

#: reads a pod as the API server has it now; None when it is gone
ReadPod = Callable[[PodInfo], Awaitable[dict[str, Any] | None]]


class BindingConfirmation:
    def __init__(self, scheduler: Scheduler, read_pod: ReadPod, *, interval: float) -> None:
        self.scheduler = scheduler
        self.read_pod = read_pod
        self.interval = interval
        #: pods settled so far because their binding was never seen done
        self.settled = 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.check()

    async def check(self) -> int:
        """Settles the overdue assumed pods; returns how many it settled."""
        settled = 0
        for pod in self.scheduler.cache.overdue_assumed_pods():
            try:
                current = await self.read_pod(pod)
            except APIError as e:
                log.warning("pod %s: its binding is unconfirmed and it cannot be read: %s", pod.key, e)
                continue
            self.scheduler.binding_unconfirmed(pod, current)
            settled += 1
        self.settled += settled
        return settled
