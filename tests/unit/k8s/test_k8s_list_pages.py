"""``KubeClient.list_pages``: the next page is asked for while the caller works through the current one,
at most one ahead; a background listing (``pause``) asks for the next page only after its pause; a caller
that stops early leaves no request running."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kopf_scheduler.k8s.client import KubeClient


class _Pages:
    """A fake API server's list: ``pages`` pages of two pods, chained by ``continue`` tokens. Each GET
    is logged when sent; the pages in ``held`` are never answered."""

    def __init__(self, pages: int, held: frozenset[int] = frozenset()) -> None:
        self.pages = pages
        self.held = held
        self.log: list[str] = []
        self.cancelled: list[str] = []

    async def get_json(self, path: str, params: Mapping[str, str], *, accept: str = "") -> Any:
        index = int(params.get("continue", "0"))
        self.log.append(f"GET {index}")
        try:
            if index in self.held:
                await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(f"GET {index}")
            raise
        items = [{"metadata": {"name": f"p{index}-{i}"}} for i in range(2)]
        metadata = {"continue": str(index + 1)} if index + 1 < self.pages else {}
        return {"apiVersion": "v1", "kind": "PodList", "metadata": metadata, "items": items}


async def test_the_next_page_is_asked_for_before_the_caller_takes_this_one() -> None:
    api = _Pages(3)
    client = KubeClient(api)  # type: ignore[arg-type]
    seen: list[str] = []
    async for page in client.list_pages("/api/v1/pods"):
        await asyncio.sleep(0)  # the caller's turn of the loop while it works through the page
        seen.append(f"page {page[0]['metadata']['name'].split('-')[0]} after {len(api.log)} GETs")
    assert seen == ["page p0 after 2 GETs", "page p1 after 3 GETs", "page p2 after 3 GETs"]
    assert page[0]["kind"] == "Pod" and page[0]["apiVersion"] == "v1"


async def test_no_more_than_one_request_is_ahead_of_the_caller() -> None:
    api = _Pages(5)
    client = KubeClient(api)  # type: ignore[arg-type]
    taken = 0
    async for _page in client.list_pages("/api/v1/pods"):
        taken += 1
        for _turn in range(10):  # a slow caller: time for any number of requests to go out
            await asyncio.sleep(0)
        assert len(api.log) <= taken + 1
    assert api.log == [f"GET {i}" for i in range(5)]


async def test_a_background_listing_asks_for_the_next_page_only_after_its_pause() -> None:
    api = _Pages(3)
    client = KubeClient(api)  # type: ignore[arg-type]
    gets_when_taken: list[int] = []
    async for _page in client.list_pages("/api/v1/pods", pause=0.01):
        for _turn in range(5):
            await asyncio.sleep(0)
        gets_when_taken.append(len(api.log))
    assert gets_when_taken == [1, 2, 3]


async def test_a_caller_that_stops_early_leaves_no_request_running() -> None:
    api = _Pages(3, held=frozenset({1}))
    client = KubeClient(api)  # type: ignore[arg-type]
    pages = client.list_pages("/api/v1/pods")
    await pages.__anext__()
    await asyncio.sleep(0)  # the request for the second page is on its way
    await pages.aclose()
    assert api.log == ["GET 0", "GET 1"]
    assert api.cancelled == ["GET 1"]
