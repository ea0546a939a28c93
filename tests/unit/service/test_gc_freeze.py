"""HeapSettler: what survives a full collection is frozen, so the next full passes walk only new objects;
compaction still reclaims reference cycles among frozen objects. FreezeAfterListing: what exists once a
listing has been quiet is frozen, once per listing."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator

import pytest

from kopf_scheduler.service.gc_freeze import FreezeAfterListing, HeapSettler, collector_paused


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
async def settler() -> AsyncIterator[HeapSettler]:
    heap = HeapSettler(compact_every=3600)
    heap.start()
    yield heap
    await heap.stop()
    gc.unfreeze()


async def test_start_freezes_what_exists() -> None:
    gc.unfreeze()  # whatever an earlier test left frozen
    assert gc.get_freeze_count() == 0
    kept = [_Node() for _ in range(1000)]
    heap = HeapSettler(compact_every=3600)
    heap.start()
    try:
        assert gc.get_freeze_count() >= len(kept)
    finally:
        await heap.stop()
        gc.unfreeze()


async def test_survivors_of_a_full_collection_are_frozen(settler: HeapSettler) -> None:
    kept = [_Node() for _ in range(1000)]
    before = gc.get_freeze_count()
    gc.collect()  # a full pass; the freeze follows on the loop
    await asyncio.sleep(0)
    assert gc.get_freeze_count() >= before + len(kept)


async def test_compaction_reclaims_cycles_among_frozen_objects(settler: HeapSettler) -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gc.collect()
    await asyncio.sleep(0)  # now frozen
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is not None  # a frozen cycle waits for compaction
    settler.compact()
    assert gone() is None


async def test_stop_removes_the_collector_hook() -> None:
    heap = HeapSettler()
    heap.start()
    await heap.stop()
    gc.unfreeze()
    assert heap._after_collection not in gc.callbacks


async def _frozen_within(seconds: float) -> bool:
    for _ in range(int(seconds / 0.01)):
        if gc.get_freeze_count():
            return True
        await asyncio.sleep(0.01)
    return False


async def test_what_a_listing_made_is_frozen_once_it_is_quiet() -> None:
    gc.unfreeze()
    now = [0.0]  # the freezer's clock: the quiet period is measured on it, not on the machine's
    freezer = FreezeAfterListing(quiet=0.05, clock=lambda: now[0])
    try:
        listed = [_Node() for _ in range(1000)]
        freezer.listed()
        now[0] = 0.04
        freezer.listed()  # the listing goes on: quiet from here
        now[0] = 0.08
        assert not await _frozen_within(0.2)  # the task woke, and found it not quiet for 0.05 yet
        now[0] = 0.1
        assert await _frozen_within(5)
        assert gc.get_freeze_count() >= len(listed)
        gc.unfreeze()
        now[0] = 10.0
        assert not await _frozen_within(0.2)  # once per listing
        freezer.listed()  # a watch lists again
        now[0] = 11.0
        assert await _frozen_within(5)
    finally:
        await freezer.stop()
        gc.unfreeze()


async def test_stopping_drops_a_pending_freeze() -> None:
    gc.unfreeze()
    now = [0.0]
    freezer = FreezeAfterListing(quiet=0.05, clock=lambda: now[0])
    freezer.listed()
    await asyncio.sleep(0)
    await freezer.stop()
    now[0] = 1.0
    assert not await _frozen_within(0.2)


async def test_start_after_a_paused_load_freezes_without_a_full_collection() -> None:
    """The scheduling process's start-up lists are loaded with the collector paused (and frozen): the
    settler then freezes what came since without walking the whole heap once more."""
    gc.unfreeze()
    full_passes: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info.get("generation") == 2:
            full_passes.append(1)

    gc.callbacks.append(count)
    heap = HeapSettler(compact_every=3600)
    try:
        with collector_paused():
            loaded = [_Node() for _ in range(1000)]
        made_after = [_Node() for _ in range(10)]
        heap.start(collect=False)
        assert not full_passes
        assert gc.get_freeze_count() >= len(loaded) + len(made_after)
        heap.compact()
        assert full_passes  # a compaction is one full pass
    finally:
        gc.callbacks.remove(count)
        await heap.stop()
        gc.unfreeze()
