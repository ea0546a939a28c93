"""Helpers of the unit tests that drive the Workload API's gangs through the real scheduler: a PodGroup
object as the API server serves it, and a loop that schedules what activeQ holds."""

from __future__ import annotations

import asyncio
from typing import Any

from kopf_scheduler.scheduling.scheduler import Scheduler


def pod_group_object(
    name: str, namespace: str, min_count: int, priority: int | None = None, whole: bool = False
) -> dict[str, Any]:
    """``scheduling.k8s.io/v1beta1`` PodGroup ``name`` with a gang of ``min_count``; ``whole``: its
    ``disruptionMode`` is ``all``."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if priority is not None:
        spec["priority"] = priority
    if whole:
        spec["disruptionMode"] = {"all": {}}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": spec,
    }


async def run_active(scheduler: Scheduler, rounds: int = 20) -> None:
    """Schedules what activeQ holds (not what waits out its backoff) and lets the coroutines the cycles
    leave (bindings, condition writes, evictions) run, until activeQ is empty."""
    for _ in range(rounds):
        if scheduler.queue.counts()["active"]:
            qp = scheduler.queue.pop_nowait()
            assert qp is not None
            scheduler.schedule_one(qp)
            continue
        for _ in range(20):
            await asyncio.sleep(0)
        if not scheduler.queue.counts()["active"]:
            return
