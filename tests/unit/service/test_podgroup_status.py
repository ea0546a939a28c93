"""PodGroup status: the phases of scheduler-plugins' PodGroup controller (its ``Test_Run`` and
``TestFillOccupiedObj`` cases), the member counts, and the keeper that writes them only when they change
and only while leading."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_api import FakeAPI
from waiting import until

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.objects import POD_GROUPS
from kopf_scheduler.framework.objects.podgroups import POD_GROUP_LABEL, parse_pod_group
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.podgroup_status import PodGroupStatusKeeper, desired_status, status_patch
from kopf_scheduler.testing import make_pod

NOW = 1767225600.0  # 2026-01-01T00:00:00Z


def _group(min_member: int, phase: str = "", **status: Any) -> Any:
    raw: dict[str, Any] = {
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"minMember": min_member},
    }
    raw["status"] = {"phase": phase, **status} if phase else dict(status)
    return parse_pod_group(raw)


def _pods(names: list[str], phase: str, owners: list[str] = ()) -> list[PodInfo]:  # type: ignore[assignment]
    out = []
    for name in names:
        builder = make_pod().name(name).label(POD_GROUP_LABEL, "pg").set("status.phase", phase)
        if phase != "Pending":
            builder = builder.node("n1")
        if owners:
            builder = builder.set("metadata.ownerReferences", [{"kind": "Job", "name": o} for o in owners])
        out.append(PodInfo(builder.obj()))
    return out


@pytest.mark.parametrize(
    ("min_member", "pods", "phase", "previous", "want"),
    [
        pytest.param(2, 2, "Running", "Scheduling", "Running", id="group running"),
        pytest.param(2, 4, "Running", "Scheduling", "Running", id="running, more than min member"),
        pytest.param(2, 2, "Failed", "Scheduling", "Failed", id="group failed"),
        pytest.param(2, 2, "Succeeded", "Scheduling", "Finished", id="group finished"),
        pytest.param(2, 2, "Pending", "Pending", "Scheduling", id="pending to scheduling"),
        pytest.param(2, 2, "Succeeded", "Pending", "Finished", id="pending to finished"),
        pytest.param(3, 2, "Running", "Pending", "Pending", id="keeps pending"),
        pytest.param(3, 2, "Pending", "Pending", "Pending", id="min member more than pods"),
        pytest.param(4, 2, "Pending", "Running", "Pending", id="running back to pending"),
        pytest.param(2, 2, "Pending", "", "Scheduling", id="a new group with its pods"),
        pytest.param(2, 0, "Pending", "", "Pending", id="a new group without pods"),
        pytest.param(2, 2, "Running", "Finished", "Finished", id="finished is final"),
        pytest.param(2, 2, "Pending", "Failed", "Failed", id="failed is final"),
    ],
)
def test_phase(min_member: int, pods: int, phase: str, previous: str, want: str) -> None:
    members = _pods([f"pod{i}" for i in range(pods)], phase)
    assert desired_status(_group(min_member, previous), members, NOW)["phase"] == want


def test_counts_and_start_time() -> None:
    members = [*_pods(["a", "b"], "Running"), *_pods(["c"], "Succeeded"), *_pods(["d"], "Pending")]
    status = desired_status(_group(3), members, NOW)
    assert status == {
        "phase": "Running",
        "scheduled": 3,
        "running": 2,
        "succeeded": 1,
        "failed": 0,
        "scheduleStartTime": "2026-01-01T00:00:00Z",
    }
    later = desired_status(_group(3, "Running", scheduleStartTime="2025-12-31T00:00:00Z"), members, NOW + 5)
    assert later["scheduleStartTime"] == "2025-12-31T00:00:00Z"


@pytest.mark.parametrize(
    ("owners", "want"),
    [
        pytest.param(["new-occupied"], "default/new-occupied", id="a single ownerReference"),
        pytest.param(
            ["new-occupied-2", "new-occupied-1"], "default/new-occupied-1,default/new-occupied-2", id="two"
        ),
    ],
)
def test_occupied_by_names_the_owners_when_scheduling_starts(owners: list[str], want: str) -> None:
    status = desired_status(_group(2, "Pending"), _pods(["pod1", "pod2"], "Pending", owners), NOW)
    assert status["occupiedBy"] == want


def test_only_what_changed_is_patched() -> None:
    group = _group(2, "Scheduling", scheduled=2, scheduleStartTime="2026-01-01T00:00:00Z")
    desired = desired_status(group, _pods(["a", "b"], "Running"), NOW)
    assert status_patch(group, desired) == {"phase": "Running", "running": 2}
    shown = _group(2, **desired)
    assert status_patch(shown, desired_status(shown, _pods(["a", "b"], "Running"), NOW)) == {}


async def test_the_keeper_writes_changed_groups_while_leading_and_retries_failures() -> None:
    scheduler = Scheduler(FakeAPI())
    writes: list[tuple[str, str, dict[str, Any]]] = []
    attempts = 0
    leading = False
    flushes = 0  # how often the keeper looked (it asks whether it leads once per flush)
    failures = [APIError(500, "etcd is slow")]

    async def write(namespace: str, name: str, status: dict[str, Any]) -> None:
        nonlocal attempts
        attempts += 1
        if failures:
            raise failures.pop()
        writes.append((namespace, name, status))
        raw = {"metadata": {"name": name, "namespace": namespace}, "spec": {"minMember": 2}, "status": status}
        scheduler.update_object(POD_GROUPS, raw)  # the watch brings the written status back

    def active() -> bool:
        nonlocal flushes
        flushes += 1
        return leading

    keeper = PodGroupStatusKeeper(scheduler, write, active=active, delay=0.01, retry=0.01, wall=lambda: NOW)
    scheduler.group_members.on_change = keeper.touch
    scheduler.update_object(
        POD_GROUPS, {"metadata": {"name": "pg", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    for pod in _pods(["a", "b"], "Pending"):
        scheduler.add_pod(pod.raw)
    await until(lambda: flushes == 1)  # the keeper looked at the changed group...
    assert (attempts, writes) == (0, [])  # ...and, a standby, wrote nothing
    leading = True
    keeper.touch_all()
    await until(lambda: writes)  # the first write fails, the retry succeeds
    assert attempts == 2
    assert writes == [
        ("default", "pg", {"phase": "Scheduling", "scheduleStartTime": "2026-01-01T00:00:00Z"}),
    ]
    looked = flushes
    keeper.touch(("default", "pg"))
    await until(lambda: flushes > looked)
    assert (attempts, len(writes)) == (2, 1)  # nothing changed: nothing written
    await keeper.stop()


async def test_a_change_while_a_status_is_being_written_is_written_after_it() -> None:
    scheduler = Scheduler(FakeAPI())
    writes: list[dict[str, Any]] = []
    writing, release = asyncio.Event(), asyncio.Event()

    async def write(namespace: str, name: str, status: dict[str, Any]) -> None:
        writing.set()
        await release.wait()  # a slow API server: the change below arrives during this write
        writes.append(status)
        group = scheduler.objects.store(POD_GROUPS).get(namespace, name)
        raw = {"metadata": {"name": name, "namespace": namespace}, "spec": {"minMember": 2}}
        scheduler.update_object(POD_GROUPS, {**raw, "status": {**group.status, **status}})

    keeper = PodGroupStatusKeeper(scheduler, write, delay=0.01, wall=lambda: NOW)
    scheduler.group_members.on_change = keeper.touch
    scheduler.update_object(
        POD_GROUPS, {"metadata": {"name": "pg", "namespace": "default"}, "spec": {"minMember": 2}}
    )
    pending = _pods(["a", "b"], "Pending")
    for pod in pending:
        scheduler.add_pod(pod.raw)
    await until(writing.is_set)
    bound = make_pod().name("a").label(POD_GROUP_LABEL, "pg").uid(pending[0].uid).node("n1").obj()
    scheduler.update_pod(pending[0].raw, bound)
    release.set()
    await until(lambda: len(writes) == 2)
    assert writes[0]["phase"] == "Scheduling" and "scheduled" not in writes[0]
    assert writes[1] == {"scheduled": 1}
    await keeper.stop()
