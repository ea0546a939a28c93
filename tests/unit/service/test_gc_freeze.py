"""HeapSettler: what survives a full collection is frozen, so the next full passes walk only new objects;
compaction still reclaims reference cycles among frozen objects."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator

import pytest

from kopf_scheduler.service.gc_freeze import HeapSettler, collector_paused


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
