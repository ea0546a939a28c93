"""Heap compaction and PodGroup status writes are background tasks like the others: one that fails turns
the operator unhealthy with its name in the failure (``supervision``), instead of ending unseen."""

from __future__ import annotations

from typing import Any

import pytest
from fake_api import FakeAPI
from waiting import until

from kopf_scheduler.framework.objects import POD_GROUPS
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service import gc_freeze
from kopf_scheduler.service.podgroup_status import PodGroupStatusKeeper
from kopf_scheduler.service.supervision import Supervisor


async def test_a_failing_heap_compaction_is_a_supervised_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    compactions: list[int] = []

    def compact() -> None:
        compactions.append(1)
        if len(compactions) > 1:  # the start-up compaction works; a periodic one breaks
            raise MemoryError("compaction broke")

    monkeypatch.setattr(gc_freeze.HeapSettler, "compact", staticmethod(compact))
    supervisor = Supervisor()
    settler = gc_freeze.HeapSettler(compact_every=0.01)
    settler.watch = lambda task: supervisor.watch(task)
    settler.start()
    await until(lambda: not supervisor.healthy)
    assert "heap-compaction" in supervisor.failure and "compaction broke" in supervisor.failure
    await settler.stop()


async def test_a_stopped_heap_compaction_is_not_a_failure() -> None:
    supervisor = Supervisor()
    settler = gc_freeze.HeapSettler(compact_every=60)
    settler.watch = lambda task: supervisor.watch(task)
    settler.start()
    supervisor.stopping = True  # as the service does before stopping its parts
    await settler.stop()
    assert supervisor.healthy


async def test_a_podgroup_status_write_that_breaks_is_a_supervised_failure() -> None:
    scheduler = Scheduler(FakeAPI())
    group = {"metadata": {"name": "pg", "namespace": "default"}, "spec": {"minMember": 2}}
    scheduler.update_object(POD_GROUPS, group)

    async def write(namespace: str, name: str, patch: dict[str, Any]) -> None:
        raise RuntimeError("the status writer broke")

    supervisor = Supervisor()
    keeper = PodGroupStatusKeeper(scheduler, write, delay=0.0)
    keeper.watch = lambda task: supervisor.watch(task, forever=False)
    keeper.touch(("default", "pg"))
    await until(lambda: not supervisor.healthy)
    assert "podgroups" in supervisor.failure and "the status writer broke" in supervisor.failure
    await keeper.stop()
