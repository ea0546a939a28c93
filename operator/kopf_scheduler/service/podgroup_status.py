"""PodGroup status, kept current so that ``kubectl get podgroups`` tells where each gang stands.

The phases and counts are those of scheduler-plugins' PodGroup controller (``podgroup_controller.go``):
a new group is ``Pending``; with ``minMember`` pods it is ``Scheduling``; with ``minMember`` running or
succeeded it is ``Running``; ``Finished`` once ``minMember`` succeeded and ``Failed`` once a member failed
with ``minMember`` pods running or done, and both are final. Upstream reaches its answer over several
reconciles, each writing a step; here the same steps run at once and only the end state is written.
Beyond upstream: the counts (``scheduled``: members bound to a node, ``running``, ``succeeded``,
``failed``) are kept current in every phase, only the group's own namespace is counted, and
``scheduleStartTime`` is set when the gang first has ``minMember`` pods.

Guards: a status is written only when it differs from what the PodGroup shows (the write's own watch
event then changes nothing); only while this instance leads (``active``); changes within ``delay``
seconds are written together; a failed write is retried after ``retry`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.objects.podgroups import (
    PHASE_FAILED,
    PHASE_FINISHED,
    PHASE_PENDING,
    PHASE_RUNNING,
    PHASE_SCHEDULING,
    POD_GROUPS,
    PodGroup,
    pod_phase,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.after_quiet import cancel

log = logging.getLogger("kopf_scheduler.podgroups")

Group = tuple[str, str]
StatusWriter = Callable[[str, str, dict[str, Any]], Awaitable[None]]

_FINAL = (PHASE_FINISHED, PHASE_FAILED)


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _occupied_by(pods: Sequence[PodInfo]) -> str:
    """The owners of the first pod (by name): ``namespace/owner`` sorted and comma separated."""
    first = min(pods, key=lambda p: p.name)
    owners = (first.raw.get("metadata") or {}).get("ownerReferences") or ()
    refs = sorted(f"{first.namespace}/{o.get('name')}" for o in owners if isinstance(o, Mapping))
    return ",".join(refs)


def desired_status(group: PodGroup, pods: Sequence[PodInfo], now: float) -> dict[str, Any]:
    """The status ``group`` should show given its ``pods`` (finished ones included), at wall time ``now``."""
    status: dict[str, Any] = dict(group.status)
    phase = str(status.get("phase") or "")
    if phase in _FINAL:
        return status
    phases = [pod_phase(p) for p in pods]
    running, succeeded, failed = (phases.count(p) for p in ("Running", "Succeeded", "Failed"))
    status["scheduled"] = sum(1 for p in pods if p.node_name)
    status["running"], status["succeeded"], status["failed"] = running, succeeded, failed
    minimum = group.min_member
    if not phase:
        phase = PHASE_PENDING
    if phase == PHASE_PENDING and len(pods) >= minimum:
        phase = PHASE_SCHEDULING
        if pods:
            occupied = _occupied_by(pods)
            if occupied:
                status["occupiedBy"] = occupied
    if phase != PHASE_PENDING:
        if len(pods) < minimum:
            phase = PHASE_PENDING
        else:
            phase = PHASE_SCHEDULING if succeeded + running < minimum else PHASE_RUNNING
            if failed and failed + running + succeeded >= minimum:
                phase = PHASE_FAILED
            if succeeded >= minimum:
                phase = PHASE_FINISHED
    if phase != PHASE_PENDING and not status.get("scheduleStartTime"):
        status["scheduleStartTime"] = _rfc3339(now)
    status["phase"] = phase
    return status


def status_patch(group: PodGroup, desired: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``desired`` that ``group`` does not show yet (a 0 count equals an absent one)."""
    current = group.status
    return {k: v for k, v in desired.items() if current.get(k, 0 if isinstance(v, int) else None) != v}


class PodGroupStatusKeeper:
    def __init__(
        self,
        scheduler: Scheduler,
        write: StatusWriter,
        *,
        active: Callable[[], bool] = lambda: True,
        delay: float = 0.2,
        retry: float = 5.0,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.scheduler = scheduler
        self.write = write
        self.active = active
        self.delay = delay
        self.retry = retry
        self.wall = wall
        self._dirty: set[Group] = set()
        self._task: asyncio.Task[None] | None = None
        #: called with each write task started (the operator's supervisor watches it)
        self.watch: Callable[[asyncio.Task[None]], object] | None = None

    def touch(self, group: Group | None) -> None:
        """The group's PodGroup or one of its pods changed: its status is looked at shortly."""
        if group is None:
            return
        self._dirty.add(group)
        self._schedule(self.delay)

    def touch_all(self) -> None:
        """Every known group (after the start-up lists, or on becoming the leader)."""
        store = self.scheduler.objects.store(POD_GROUPS)
        self._dirty.update(store.names())
        self._dirty.update(self.scheduler.group_members.groups())
        if self._dirty:
            self._schedule(self.delay)

    def _schedule(self, delay: float) -> None:
        if self._task is None or self._task.done():
            with contextlib.suppress(RuntimeError):  # no running loop (a test feeding the scheduler)
                self._task = asyncio.get_running_loop().create_task(self._later(delay), name="podgroups")
                if self.watch is not None:
                    self.watch(self._task)

    async def _later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        failed = await self.flush()
        self._task = None
        if failed:
            self._dirty.update(failed)
            self._schedule(self.retry)
        elif self._dirty:  # changed while this flush was writing: its touch found this task running
            self._schedule(self.delay)

    async def flush(self) -> list[Group]:
        """Writes the status of every changed group; returns the groups whose write failed."""
        dirty, self._dirty = self._dirty, set()
        if not self.active():
            return []
        failed: list[Group] = []
        store = self.scheduler.objects.store(POD_GROUPS)
        for namespace, name in sorted(dirty):
            group = store.get(namespace, name)
            if group is None:
                continue
            members = self.scheduler.group_members.members(namespace, name)
            patch = status_patch(group, desired_status(group, members, self.wall()))
            if not patch:
                continue
            try:
                await self.write(namespace, name, patch)
            except APIError as e:
                if e.status != 404:  # 404: deleted meanwhile
                    log.warning("writing the status of PodGroup %s/%s: %s", namespace, name, e)
                    failed.append((namespace, name))
        return failed

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel(task)
