"""Pods a permit plugin told to wait: allowed by every waiting plugin, rejected by one, timed out, or
preempted (kube-scheduler v1.36 on: an error, so the pod is retried after backoff, not parked as
unschedulable)."""

from __future__ import annotations

import asyncio

from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.framework.go_duration import go_duration
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, error, unschedulable

#: upstream caps a permit wait at 15 minutes.
MAX_PERMIT_TIMEOUT = 15 * 60.0


class WaitingPod:
    def __init__(self, pod: PodInfo, timeouts: dict[str, float], clock: Clock) -> None:
        self.pod = pod
        self._pending = dict(timeouts)
        self._result: asyncio.Future[Status | None] = asyncio.get_running_loop().create_future()
        self._timers = [
            asyncio.ensure_future(self._expire(plugin, timeout, clock))
            for plugin, timeout in timeouts.items()
        ]

    async def _expire(self, plugin: str, timeout: float, clock: Clock) -> None:
        await clock.sleep(timeout)
        self.reject(
            plugin, f"rejected due to timeout after waiting {go_duration(timeout)} at plugin {plugin}"
        )

    def pending_plugins(self) -> list[str]:
        return list(self._pending)

    def allow(self, plugin: str) -> None:
        self._pending.pop(plugin, None)
        if not self._pending:
            self._finish(None)

    def reject(self, plugin: str, message: str) -> bool:
        """Declares the pod unschedulable; False when its wait was over already (allowed or stopped)."""
        return self._finish(unschedulable(message, plugin=plugin))

    def preempt(self, plugin: str, message: str) -> bool:
        """Stops the wait with an error (upstream's ``waitingPod.Preempt``); False when it was over
        already."""
        return self._finish(error(message, plugin=plugin))

    def _finish(self, status: Status | None) -> bool:
        # The timers go with the wait: each cancelled one would otherwise hold this pod through its
        # frame while the pod holds it, a reference cycle only a full collection frees.
        timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()
        if self._result.done():
            return False
        self._result.set_result(status)
        return True

    async def wait(self) -> Status | None:
        return await self._result


class WaitingPods:
    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, waiting: WaitingPod) -> None:
        self._pods[waiting.pod.uid] = waiting

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def all(self) -> list[WaitingPod]:
        return list(self._pods.values())
