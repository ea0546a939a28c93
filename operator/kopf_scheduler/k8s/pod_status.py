"""Writing ``PodScheduled=False`` and ``nominatedNodeName`` in the background, without repeating itself.

``record_failure`` compares the wanted status with what the pod is known to hold: first what we last
patched (the scheduler's copy of the pod lags behind our own patches until the watch delivers them),
else the pod object the scheduler has. Nothing is sent when nothing changes, which is the common case
of a pod that keeps failing for the same reason. Patches for one pod that wait to be sent are merged
into one, so the queue holds at most one entry per pod and needs no bound; a pod that gets bound
meanwhile has its waiting patch cancelled. ``nominate`` (the binding cycle's announcement of its node)
is sent by the binding cycle itself, as kube-scheduler's ``updatePod`` is on the binding goroutine: it
follows the pod's own patch on the wire, takes in the pod's own waiting patch, and never waits behind other
pods' patches (a gang's members announce their nodes before their Permit wait; behind a queue of other
pods' failures their bindings lagged the gang's release by seconds). Retries follow upstream's
``PatchPodStatus``: conflicts, server errors and no answer are retried a few times.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.conditions import (
    POD_SCHEDULED,
    find_condition,
    merge_patches,
    pod_scheduled_false,
    status_patch,
)
from kopf_scheduler.k8s.rest import STRATEGIC_MERGE_PATCH, RestClient, resource_path
from kopf_scheduler.k8s.timestamps import rfc3339
from kopf_scheduler.k8s.workers import DEFAULT_RETRY_DELAYS, WorkerPool, retriable, with_retries

logger = logging.getLogger(__name__)

DEFAULT_WORKERS = 4
#: pods whose last patched status is remembered
DEFAULT_MEMORY = 50_000


@dataclass
class _Known:
    condition: Mapping[str, Any] | None = None
    nominated: str | None = None


@dataclass
class _Pending:
    namespace: str
    name: str
    patch: dict[str, Any]


class PodStatusWriter:
    def __init__(
        self,
        rest: RestClient,
        clock: Clock,
        *,
        workers: int = DEFAULT_WORKERS,
        memory: int = DEFAULT_MEMORY,
        retry_delays: Sequence[float] = DEFAULT_RETRY_DELAYS,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.rest = rest
        self.clock = clock
        self.memory = memory
        self.retry_delays = tuple(retry_delays)
        self.wall = wall
        self.known: OrderedDict[str, _Known] = OrderedDict()
        self.pending: dict[str, _Pending] = {}
        self.in_flight: set[str] = set()
        #: per pod: who waits until its patches are sent (``nominate``)
        self.waiters: dict[str, list[asyncio.Future[None]]] = {}
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self.pool = WorkerPool("pod-status", self.queue, self._handle, workers)
        self._closed = False

    def view(self, pod: PodInfo) -> dict[str, Any]:
        """The pod's status as far as we know: its object overlaid with what we patched since."""
        status = dict(pod.raw.get("status") or {})
        known = self.known.get(pod.uid)
        if known is not None:
            if known.condition is not None:
                conditions = list(status.get("conditions") or ())
                index, _ = find_condition(conditions, POD_SCHEDULED)
                if index >= 0:
                    conditions[index] = known.condition
                else:
                    conditions.append(known.condition)
                status["conditions"] = conditions
            if known.nominated is not None:
                status["nominatedNodeName"] = known.nominated
        return status

    def record_failure(
        self, pod: PodInfo, reason: str, message: str, nominated_node_name: str | None
    ) -> None:
        generation = (pod.raw.get("metadata") or {}).get("generation")
        condition = pod_scheduled_false(reason, message, generation if isinstance(generation, int) else None)
        self._update(pod, condition, nominated_node_name)

    async def nominate(self, pod: PodInfo, node_name: str) -> None:
        """Set ``status.nominatedNodeName`` now and wait for the answer: after the pod's own patch in
        flight, merged with its own waiting one, never behind other pods' patches; nothing is sent, and
        nothing awaited, when the pod holds that node already."""
        if self._closed:
            return
        patch = status_patch(self.view(pod), None, node_name, rfc3339(self.wall()))
        stats = self.rest.stats
        if patch is None:
            stats.status_patches_skipped += 1
            return
        self._remember(pod.uid, patch["status"])
        while pod.uid in self.in_flight:  # the pod's earlier patch goes first
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.waiters.setdefault(pod.uid, []).append(done)
            await done
            if self._closed:
                return
        waiting = self.pending.pop(pod.uid, None)  # its queue entry then sends nothing
        if waiting is not None:
            patch = merge_patches(waiting.patch, patch)
            stats.status_patches_coalesced += 1
        await self._send(pod.uid, _Pending(pod.namespace, pod.name, patch))

    def clear_nominated_node_name(self, pod: PodInfo) -> None:
        """Remove ``status.nominatedNodeName`` (upstream ``ClearNominatedNodeName``); nothing is sent
        when the pod has none."""
        self._update(pod, None, "")

    def _update(
        self, pod: PodInfo, condition: dict[str, Any] | None, nominated_node_name: str | None
    ) -> None:
        if self._closed:
            return
        patch = status_patch(self.view(pod), condition, nominated_node_name, rfc3339(self.wall()))
        stats = self.rest.stats
        if patch is None:
            stats.status_patches_skipped += 1
            return
        self._remember(pod.uid, patch["status"])
        waiting = self.pending.get(pod.uid)
        if waiting is not None:
            waiting.patch = merge_patches(waiting.patch, patch)
            stats.status_patches_coalesced += 1
        else:
            self.pending[pod.uid] = _Pending(pod.namespace, pod.name, patch)
            if pod.uid not in self.in_flight:  # else queued when that patch is done: keeps the order
                self.queue.put_nowait(pod.uid)
        self.pool.ensure_started()

    def forget(self, uid: str) -> None:
        """The pod is bound or gone: drop what we remember and any patch still waiting."""
        self.known.pop(uid, None)
        self.pending.pop(uid, None)
        if uid not in self.in_flight:
            self._wake(uid)

    def _wake(self, uid: str) -> None:
        for done in self.waiters.pop(uid, ()):
            if not done.done():
                done.set_result(None)

    def _remember(self, uid: str, status: Mapping[str, Any]) -> None:
        known = self.known.pop(uid, None) or _Known()
        for condition in status.get("conditions") or ():
            if condition.get("type") == POD_SCHEDULED:
                known.condition = condition
        if "nominatedNodeName" in status:
            known.nominated = status["nominatedNodeName"] or ""
        self.known[uid] = known  # most recent last
        while len(self.known) > self.memory:
            self.known.popitem(last=False)

    async def _handle(self, item: object) -> None:
        uid = str(item)
        pending = self.pending.pop(uid, None)
        if pending is None:
            self._wake(uid)
            return  # cancelled (the pod was bound), or sent by ``nominate``
        await self._send(uid, pending)

    async def _send(self, uid: str, pending: _Pending) -> None:
        path = resource_path("v1", "pods", pending.name, namespace=pending.namespace, subresource="status")
        self.in_flight.add(uid)
        try:
            response = await with_retries(
                lambda: self.rest.request("PATCH", path, pending.patch, content_type=STRATEGIC_MERGE_PATCH),
                self.clock,
                self.retry_delays,
                should_retry=lambda r: retriable(r.status) or r.status == 409,
            )
        finally:
            self.in_flight.discard(uid)
            if uid in self.pending:  # a later patch of the pod waited for this one
                self.queue.put_nowait(uid)
            self._wake(uid)
        stats = self.rest.stats
        if response.status == 200:
            stats.status_patches_sent += 1
            return
        # unknown state now: the next failure compares with the pod object again
        self.known.pop(uid, None)
        if response.status != 404:  # a deleted pod needs no status
            stats.status_patch_errors += 1
            logger.warning(
                "status of pod %s/%s not patched: %s", pending.namespace, pending.name, response.message()
            )

    async def close(self, timeout: float) -> bool:
        """Send the waiting patches within ``timeout``; failures recorded later are ignored."""
        self._closed = True
        done = await self.pool.drain(timeout)
        await self.pool.stop()
        for uid in list(self.waiters):
            self._wake(uid)
        return done
