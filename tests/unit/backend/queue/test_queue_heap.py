"""The keyed heap under the queues: order, replacement, lazy removal and compaction."""

from __future__ import annotations

import random

import pytest

from kopf_scheduler.backend.queue.heap import KeyedHeap, LessKey


def _drain(heap: KeyedHeap[str]) -> list[str]:
    out = []
    while (item := heap.pop()) is not None:
        out.append(item)
    return out


@pytest.mark.parametrize(
    ("pushes", "expected"),
    [
        pytest.param([("a", 3), ("b", 1), ("c", 2)], ["b", "c", "a"], id="by-key"),
        pytest.param([("a", 1), ("b", 1), ("c", 1)], ["a", "b", "c"], id="ties-by-sequence"),
        pytest.param([("a", 1), ("b", 2), ("a", 3)], ["b", "a"], id="replace-repositions"),
    ],
)
def test_order(pushes, expected):
    heap: KeyedHeap[str] = KeyedHeap()
    for seq, (uid, key) in enumerate(pushes):
        heap.push(uid, key, seq, uid)
    assert len(heap) == len(expected)
    assert _drain(heap) == expected


def test_remove_and_peek():
    heap: KeyedHeap[str] = KeyedHeap()
    for seq, uid in enumerate("abc"):
        heap.push(uid, seq, seq, uid)
    assert heap.remove("a") == "a" and heap.remove("a") is None
    assert ("a" in heap, "b" in heap, len(heap)) == (False, True, 2)
    assert heap.peek() == "b" and heap.peek_key() == 1
    assert _drain(heap) == ["b", "c"]
    assert heap.peek() is None and heap.peek_key() is None


def test_many_removals_compact_and_keep_order():
    rng = random.Random(7)
    heap: KeyedHeap[str] = KeyedHeap()
    keys = {}
    for i in range(5000):
        uid = f"u{i}"
        keys[uid] = rng.random()
        heap.push(uid, keys[uid], i, uid)
    for uid in rng.sample(sorted(keys), 4000):
        heap.remove(uid)
        del keys[uid]
    assert len(heap._heap) < 5000  # dead entries were dropped
    assert _drain(heap) == sorted(keys, key=keys.__getitem__)


def test_rekey_and_less_key():
    heap: KeyedHeap[int] = KeyedHeap()
    for seq, value in enumerate([5, 1, 4, 1, 3]):
        heap.push(f"u{seq}", value, seq, value)

    def greater(a: int, b: int) -> bool:
        return a > b

    heap.rekey(lambda v: LessKey(v, greater))
    assert _drain(heap) == [5, 4, 3, 1, 1]
