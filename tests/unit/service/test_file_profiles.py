"""The profiles of ``run --config`` are the starting profiles: each serves its schedulerName while no
SchedulingProfile does; an accepted SchedulingProfile for the same name takes over, and when it goes (or
was never accepted) the file's profile serves again."""

from __future__ import annotations

from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.profile import ProfileSpec, parse_profile
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.profiles import FROM_FILE, ProfileManager


def profile(name: str, spec: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "kopf-scheduler.io/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": name, "generation": generation, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
    }


FILE = [
    parse_profile({"schedulerName": "file-a"}),
    parse_profile({"schedulerName": "file-b", "plugins": {"score": {"disabled": [{"name": "*"}]}}}),
]
Setup = tuple[ProfileManager, Scheduler, dict[str, list[dict[str, Any]]]]


def make(default_name: str, file_profiles: list[ProfileSpec]) -> Setup:
    written: dict[str, list[dict[str, Any]]] = {}

    async def write(name: str, status: dict[str, Any]) -> None:
        written.setdefault(name, []).append(status)

    scheduler = Scheduler(FakeAPI())
    return ProfileManager(scheduler, write, default_name, file_profiles=file_profiles), scheduler, written


def scores(scheduler: Scheduler, name: str) -> list[Any]:
    return list(scheduler.profiles[name].describe().get("score") or ())


async def test_the_files_profiles_serve_from_the_start() -> None:
    manager, scheduler, _ = make("", FILE)
    await manager.load([])
    assert manager.serving() == {"file-a": FROM_FILE, "file-b": FROM_FILE}
    assert set(scheduler.profiles) == {"file-a", "file-b"}
    assert scores(scheduler, "file-a") != [] and scores(scheduler, "file-b") == []


async def test_a_schedulingprofile_for_the_same_name_takes_over_while_it_exists() -> None:
    manager, scheduler, written = make("", FILE)
    await manager.load([])
    file_b = scheduler.profiles["file-b"]
    live = profile("live-b", {"schedulerName": "file-b"})  # kube-scheduler's default scores
    await manager.on_event("ADDED", live)
    assert manager.serving() == {"file-a": FROM_FILE, "file-b": "live-b"}
    assert scheduler.profiles["file-b"] is not file_b and scores(scheduler, "file-b") != []
    accepted = written["live-b"][-1]["conditions"][0]
    assert accepted["message"] == "serving schedulerName 'file-b' in place of the --config file's profile"
    await manager.on_event("DELETED", live)
    assert manager.serving() == {"file-a": FROM_FILE, "file-b": FROM_FILE}
    assert scheduler.profiles["file-b"] is file_b  # the file's, as built at start


async def test_an_invalid_schedulingprofile_leaves_the_files_profile_serving() -> None:
    manager, scheduler, written = make("", FILE)
    await manager.load([profile("bad-a", {"schedulerName": "file-a", "percentageOfNodesToScore": 101})])
    assert manager.serving()["file-a"] == FROM_FILE
    assert written["bad-a"][-1]["conditions"][0]["reason"] == "InvalidSpec"
    # accepted, then broken: its last good generation keeps serving, as for any SchedulingProfile
    await manager.on_event("MODIFIED", profile("bad-a", {"schedulerName": "file-a"}, generation=2))
    assert manager.serving()["file-a"] == "bad-a"
    broken = profile("bad-a", {"schedulerName": "file-a", "percentageOfNodesToScore": 101}, generation=3)
    await manager.on_event("MODIFIED", broken)
    assert manager.serving()["file-a"] == "bad-a"
    await manager.on_event("DELETED", broken)
    assert manager.serving()["file-a"] == FROM_FILE
    assert set(scheduler.profiles) == {"file-a", "file-b"}


async def test_the_builtin_default_serves_beside_the_file_only_when_asked() -> None:
    manager, scheduler, _ = make("kopf-scheduler", FILE)
    await manager.load([])
    assert manager.serving() == {"file-a": FROM_FILE, "file-b": FROM_FILE, "kopf-scheduler": "<built-in>"}
    manager, scheduler, _ = make("file-a", FILE)  # the file's profile, not the built-in, serves its name
    await manager.load([])
    assert manager.serving() == {"file-a": FROM_FILE, "file-b": FROM_FILE}
    assert scores(scheduler, "file-a") != []


async def test_a_file_profile_the_operator_cannot_build_stops_it_at_the_first_reconcile() -> None:
    bad = parse_profile(
        {"schedulerName": "x", "pluginConfig": [{"name": "NodeResourcesFit", "args": {"x": 1}}]}
    )
    manager, _, _ = make("", [bad])
    with pytest.raises(ProfileError, match="pluginConfig"):
        await manager.load([])
