"""SchedulingProfiles served live: statuses, last good version, name conflicts, the built-in default."""

from __future__ import annotations

from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.profiles import ProfileManager
from kopf_scheduler.testing import make_node, make_pod


def profile(
    name: str, spec: dict[str, Any], generation: int = 1, created: str = "2026-01-01T00:00:00Z"
) -> dict:
    return {
        "apiVersion": "kopf-scheduler.io/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": name, "generation": generation, "creationTimestamp": created},
        "spec": spec,
    }


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


@pytest.fixture
def setup() -> tuple[ProfileManager, Scheduler, dict[str, list[dict[str, Any]]]]:
    written: dict[str, list[dict[str, Any]]] = {}

    async def write(name: str, status: dict[str, Any]) -> None:
        written.setdefault(name, []).append(status)

    scheduler = Scheduler(FakeAPI())
    return ProfileManager(scheduler, write, "kopf-scheduler"), scheduler, written


async def test_builtin_default_serves_until_a_profile_claims_the_name(setup: Any) -> None:
    manager, scheduler, _written = setup
    await manager.reconcile()
    assert set(scheduler.profiles) == {"kopf-scheduler"}
    assert manager.serving() == {"kopf-scheduler": "<built-in>"}
    await manager.on_event("ADDED", profile("mine", {"schedulerName": "kopf-scheduler"}))
    assert manager.serving() == {"kopf-scheduler": "mine"}
    await manager.on_event("DELETED", profile("mine", {"schedulerName": "kopf-scheduler"}))
    assert manager.serving() == {"kopf-scheduler": "<built-in>"}


async def test_accepted_profile_status(setup: Any) -> None:
    manager, scheduler, written = setup
    await manager.on_event("ADDED", profile("pack", {"schedulerName": "packer"}, generation=3))
    assert "packer" in scheduler.profiles
    status = written["pack"][-1]
    assert status["observedGeneration"] == 3
    assert condition(status, "Accepted")["status"] == "True"
    assert condition(status, "Ready")["status"] == "True"
    assert condition(status, "Stalled")["status"] == "False"
    assert status["effectivePlugins"]["bind"] == ["DefaultBinder"]


async def test_invalid_update_keeps_the_last_good_version(setup: Any) -> None:
    manager, scheduler, written = setup
    await manager.on_event("ADDED", profile("p", {"schedulerName": "s"}, generation=1))
    good = scheduler.profiles["s"]
    bad = {"schedulerName": "s", "plugins": {"score": {"enabled": [{"name": "Nope"}]}}}
    await manager.on_event("MODIFIED", profile("p", bad, generation=2))
    assert scheduler.profiles["s"] is good
    status = written["p"][-1]
    accepted = condition(status, "Accepted")
    assert accepted["status"] == "False"
    assert accepted["reason"] == "InvalidSpec"
    assert accepted["message"].startswith("spec.plugins.score.enabled[0].name: unknown plugin 'Nope'")
    assert "generation 1 keeps serving 's'" in accepted["message"]
    assert condition(status, "Ready")["status"] == "True"  # still serving, with the old version
    assert condition(status, "Stalled")["status"] == "True"


async def test_invalid_new_profile_serves_nothing(setup: Any) -> None:
    manager, scheduler, written = setup
    await manager.on_event("ADDED", profile("p", {"schedulerName": "s", "percentageOfNodesToScore": 101}))
    assert "s" not in scheduler.profiles
    status = written["p"][-1]
    assert (
        condition(status, "Accepted")["message"] == "spec.percentageOfNodesToScore: must be <= 100, not 101"
    )
    assert condition(status, "Ready")["status"] == "False"


async def test_older_profile_wins_a_scheduler_name(setup: Any) -> None:
    manager, _scheduler, written = setup
    await manager.on_event("ADDED", profile("new", {"schedulerName": "s"}, created="2026-02-01T00:00:00Z"))
    await manager.on_event("ADDED", profile("old", {"schedulerName": "s"}, created="2026-01-01T00:00:00Z"))
    assert manager.serving()["s"] == "old"
    refused = condition(written["new"][-1], "Accepted")
    assert refused["reason"] == "SchedulerNameConflict"
    assert "already served by SchedulingProfile 'old'" in refused["message"]
    await manager.on_event("DELETED", profile("old", {"schedulerName": "s"}))
    assert manager.serving()["s"] == "new"
    assert condition(written["new"][-1], "Accepted")["status"] == "True"


async def test_status_is_written_only_when_it_changes(setup: Any) -> None:
    manager, _scheduler, written = setup
    obj = profile("p", {"schedulerName": "s"})
    await manager.on_event("ADDED", obj)
    await manager.on_event("MODIFIED", obj)  # e.g. our own status update coming back
    await manager.on_event("MODIFIED", obj)
    assert len(written["p"]) == 1


async def _place(scheduler: Scheduler, name: str) -> str:
    """Schedules one 1-CPU / 4 GiB pod of scheduler name ``s``; returns the node it was bound to."""
    client: FakeAPI = scheduler.client  # type: ignore[assignment]
    scheduler.add_pod(make_pod().name(name).scheduler_name("s").req(cpu="1", memory="4Gi").obj())
    while (qp := scheduler.queue.pop_nowait()) is not None:
        scheduler.schedule_one(qp)
    await scheduler.wait_for_bindings()
    [(_, node)] = [b for b in client.bound if b[0] == f"default/{name}"]
    return node


async def test_profile_change_rebuilds_between_cycles(setup: Any) -> None:
    manager, scheduler, written = setup
    for node in ("busy", "empty"):
        scheduler.add_node(make_node().name(node).capacity(cpu="4", memory="16Gi", pods=110).obj())
    scheduler.add_pod(make_pod().name("load").req(cpu="2", memory="8Gi").node("busy").obj())
    await manager.on_event("ADDED", profile("p", {"schedulerName": "s"}, generation=1))
    first = scheduler.profiles["s"]
    # LeastAllocated (the default): busy scores 25 (cpu 1/4 free, memory 4/16 free), empty 75
    assert await _place(scheduler, "before") == "empty"
    spec = {
        "schedulerName": "s",
        "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
        ],
    }
    await manager.on_event("MODIFIED", profile("p", spec, generation=2))
    assert scheduler.profiles["s"] is not first
    assert written["p"][-1]["observedGeneration"] == 2
    # MostAllocated now serves: busy holds 3 of 4 CPUs and 12 of 16 GiB with the pod (75), empty 2 of 4
    # and 8 of 16 (50)
    assert await _place(scheduler, "after") == "busy"


async def test_deleted_profile_stops_serving(setup: Any) -> None:
    manager, scheduler, _written = setup
    await manager.on_event("ADDED", profile("p", {"schedulerName": "s"}))
    await manager.on_event("DELETED", profile("p", {"schedulerName": "s"}))
    assert "s" not in scheduler.profiles


async def test_a_refused_profile_is_told_once_in_a_warning_event() -> None:
    told: list[tuple[str, str, str]] = []
    leading = False

    def warn(obj: dict[str, Any], reason: str, message: str) -> bool:
        if leading:
            told.append((obj["metadata"]["name"], reason, message))
        return leading

    async def write(name: str, status: dict[str, Any]) -> None:
        return None

    manager = ProfileManager(Scheduler(FakeAPI()), write, "kopf-scheduler", warn=warn)
    bad = {"schedulerName": "s", "plugins": {"score": {"enabled": [{"name": "Nope"}]}}}
    await manager.on_event("ADDED", profile("p", bad))
    assert told == []  # a standby tells nothing, and will tell once it leads
    leading = True
    await manager.on_event("MODIFIED", profile("p", bad))
    await manager.on_event("MODIFIED", profile("p", bad))  # the same refusal: told once
    assert [(name, reason) for name, reason, _ in told] == [("p", "InvalidSpec")]
    assert told[0][2].startswith("spec.plugins.score.enabled[0].name: unknown plugin 'Nope'; known: ")
    await manager.on_event("MODIFIED", profile("p", {"schedulerName": "s"}, generation=2))
    await manager.on_event("MODIFIED", profile("p", bad, generation=3))  # refused again: told again
    assert len(told) == 2 and told[1][2].endswith("(generation 2 keeps serving 's')")


def test_a_profile_is_logged_in_one_short_line() -> None:
    from kopf_scheduler.api.profile import ProfileSpec
    from kopf_scheduler.service.profiles import summary

    line = summary(Scheduler(FakeAPI()).build_profile(ProfileSpec(scheduler_name="x")).describe())
    assert line.startswith("20 plugins; 14 filter; score TaintToleration=3, NodeAffinity=2, ")
    assert line.endswith("; bind DefaultBinder") and "\n" not in line and len(line) < 250


async def test_a_refusal_is_logged_once_while_it_stands(setup: Any, caplog: pytest.LogCaptureFixture) -> None:
    manager, _scheduler, _written = setup
    bad = {"schedulerName": "s", "plugins": {"score": {"enabled": [{"name": "Nope"}]}}}
    await manager.on_event("ADDED", profile("p", bad))
    for i in range(3):  # other profiles' events reconcile every profile
        await manager.on_event("ADDED", profile(f"other-{i}", {"schedulerName": f"o{i}"}))
    assert [r.getMessage()[:36] for r in caplog.records if "rejected" in r.getMessage()] == [
        "SchedulingProfile p rejected: Invali"
    ]
