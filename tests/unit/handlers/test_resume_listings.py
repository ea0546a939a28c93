"""Kopf's watches go on from the service's start-up lists (``handlers.resume``), run through Kopf's own
``continuous_watch``: the first listing of a resumed kind asks the API server for nothing and the watch
starts at the service's resourceVersion; a kind without a resume point, and any later listing of a
resumed one (a 410 Gone), list as Kopf does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import fetching, watching
from kopf._cogs.structs import references

from kopf_scheduler.handlers.resume import ResumeListings
from kopf_scheduler.service.intake_link import channel

PODS = references.Resource("", "v1", "pods", namespaced=True)
NODES = references.Resource("", "v1", "nodes", namespaced=False)
CLAIMS = references.Resource("resource.k8s.io", "v1", "resourceclaims", namespaced=True)


class FakeApi:
    """Kopf's list (``fetch_objs``) and watch (``watch_objs``) of one resource, recorded."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, watch_answers: list[list[dict[str, Any]]]) -> None:
        self.listed: list[str] = []
        self.watched_since: list[str | None] = []
        self.watch_answers = watch_answers
        monkeypatch.setattr(fetching, "fetch_objs", self.fetch_objs)
        monkeypatch.setattr(watching, "watch_objs", self.watch_objs)

    async def fetch_objs(self, *, resource: Any, **_: Any) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        self.listed.append(resource.plural)
        yield [{"metadata": {"name": "listed", "resourceVersion": "50"}}], "50"

    async def watch_objs(self, *, since: str | None, **_: Any) -> AsyncIterator[dict[str, Any]]:
        self.watched_since.append(since)
        for raw in self.watch_answers.pop(0) if self.watch_answers else []:
            yield raw


async def stream(resource: Any) -> list[Any]:
    """What one ``continuous_watch`` of Kopf yields until its watch ends."""
    pause = asyncio.get_running_loop().create_future()
    settings = kopf.OperatorSettings()
    out = []
    async for item in watching.continuous_watch(
        settings=settings, resource=resource, namespace=None, operator_pause_waiter=pause
    ):
        out.append(item)
        if len(out) > 10:
            break
    return out


def added(name: str, version: str) -> dict[str, Any]:
    return {"type": "ADDED", "object": {"metadata": {"name": name, "resourceVersion": version}}}


GONE = {"type": "ERROR", "object": {"code": 410}}


def test_a_resumed_watch_lists_nothing_and_starts_at_the_services_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(monkeypatch, watch_answers=[[added("new", "101"), GONE]])
    resume = ResumeListings({"pods": "100"})
    assert resume.install()
    try:
        events = asyncio.run(stream(PODS))
    finally:
        resume.uninstall()
    assert api.listed == []
    assert api.watched_since == ["100"]
    assert events == [watching.Bookmark.LISTED, added("new", "101")]
    assert resume.resumed == ["pods"]


def test_the_next_listing_of_a_resumed_kind_and_other_kinds_list_as_kopf_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(monkeypatch, watch_answers=[[GONE], [GONE], [GONE]])
    resume = ResumeListings({"pods": "100", "nodes": ""})  # no version: nothing to resume from
    resume.install()
    try:
        first = asyncio.run(stream(PODS))
        again = asyncio.run(stream(PODS))  # after 410 Gone, Kopf's infinite watch starts over
        nodes = asyncio.run(stream(NODES))
    finally:
        resume.uninstall()
    assert first == [watching.Bookmark.LISTED]
    listed = {"type": None, "object": {"metadata": {"name": "listed", "resourceVersion": "50"}}}
    assert again == [listed, watching.Bookmark.LISTED]
    assert nodes == [listed, watching.Bookmark.LISTED]
    assert api.listed == ["pods", "nodes"]
    assert api.watched_since == ["100", "50", "50"]


def test_uninstall_gives_kopf_its_own_listing_back(monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeApi(monkeypatch, watch_answers=[])
    original = fetching.fetch_objs
    resume = ResumeListings({"pods": "100"})
    resume.install()
    ResumeListings({"nodes": "7"}).install()  # a second one wraps Kopf's, not the first replacement
    assert fetching.fetch_objs.resumes_from is original  # type: ignore[attr-defined]
    resume.uninstall()  # replaced meanwhile: left in place
    assert fetching.fetch_objs is not original
    monkeypatch.setattr(fetching, "fetch_objs", original)
    resume.install()
    resume.uninstall()
    assert fetching.fetch_objs is original
    assert api.listed == []


def test_channels_are_named_as_the_intake_names_them() -> None:
    assert channel(PODS) == "pods"
    assert channel(CLAIMS) == "resourceclaims.resource.k8s.io"


def test_without_kopfs_listing_function_nothing_is_replaced(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delattr(fetching, "fetch_objs")
    assert not ResumeListings({"pods": "100"}).install()
    assert "lists each watched kind once more" in caplog.text
