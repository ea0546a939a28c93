"""A heap of items addressable by uid, on top of ``heapq``: O(log n) push, pop, update and removal.

Entries are lists ``[key, sequence, push_id, uid, item]`` so that comparisons run in C: the key decides,
then the item's sequence number, then a push counter that is unique per entry, so two entries never
compare their uids or items. Removal and update are lazy: the old entry is marked dead (its item set to
``None``) and skipped when it reaches the top; the heap is rebuilt from the live entries when dead ones
outnumber them, so memory stays proportional to the live size.

Invariants: at most one live entry per uid; ``len()`` counts live entries only; ``pop`` never returns a
removed or superseded item.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_KEY, _SEQ, _PUSH, _UID, _ITEM = range(5)
#: dead entries tolerated before a rebuild is considered (small heaps are never worth compacting)
_MIN_DEAD_BEFORE_COMPACT = 256


class LessKey:
    """Adapts a ``less(a, b)`` function into a key with ``<`` and ``==``, for queue-sort plugins without a
    fast ``sort_key``.

    Lists compare element by element with ``==`` first and ``<`` at the first difference, so equality must
    mean "neither is less" for the sequence number to break ties the way ``less`` leaves them.
    """

    __slots__ = ("item", "less")

    def __init__(self, item: Any, less: Callable[[Any, Any], bool]) -> None:
        self.item = item
        self.less = less

    def __lt__(self, other: LessKey) -> bool:
        return self.less(self.item, other.item)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LessKey):
            return NotImplemented
        return not self.less(self.item, other.item) and not self.less(other.item, self.item)

    __hash__ = None  # type: ignore[assignment]  # mutable comparison semantics: never a dict key


class KeyedHeap(Generic[T]):
    """A min-heap of items, each under a unique uid; the smallest ``(key, sequence)`` pops first."""

    __slots__ = ("_dead", "_entries", "_heap", "_pushes")

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []
        self._entries: dict[str, list[Any]] = {}
        self._dead = 0
        self._pushes = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, uid: object) -> bool:
        return uid in self._entries

    def __iter__(self) -> Iterator[T]:
        """Live items in no particular order."""
        for entry in self._entries.values():
            yield entry[_ITEM]

    def get(self, uid: str) -> T | None:
        entry = self._entries.get(uid)
        return None if entry is None else entry[_ITEM]

    def push(self, uid: str, key: Any, sequence: int, item: T) -> None:
        """Adds ``item`` under ``uid``, replacing (and re-positioning) any item already there."""
        old = self._entries.get(uid)
        if old is not None:
            old[_ITEM] = None
            self._dead += 1
        entry = [key, sequence, next(self._pushes), uid, item]
        self._entries[uid] = entry
        heapq.heappush(self._heap, entry)
        self._maybe_compact()

    def remove(self, uid: str) -> T | None:
        entry = self._entries.pop(uid, None)
        if entry is None:
            return None
        item = entry[_ITEM]
        entry[_ITEM] = None
        self._dead += 1
        self._maybe_compact()
        return item  # type: ignore[no-any-return]

    def peek(self) -> T | None:
        heap = self._heap
        while heap and heap[0][_ITEM] is None:
            heapq.heappop(heap)
            self._dead -= 1
        return heap[0][_ITEM] if heap else None

    def peek_key(self) -> Any:
        """The key of the smallest live item, or ``None`` when empty."""
        return self._heap[0][_KEY] if self.peek() is not None else None

    def pop(self) -> T | None:
        heap = self._heap
        while heap:
            entry = heapq.heappop(heap)
            item = entry[_ITEM]
            if item is None:
                self._dead -= 1
                continue
            del self._entries[entry[_UID]]
            return item  # type: ignore[no-any-return]
        return None

    def rekey(self, key_of: Callable[[T], Any]) -> None:
        """Recomputes every key (the ordering changed) and rebuilds the heap in O(n)."""
        for entry in self._entries.values():
            entry[_KEY] = key_of(entry[_ITEM])
        self._rebuild()

    def clear(self) -> None:
        self._heap.clear()
        self._entries.clear()
        self._dead = 0

    def _maybe_compact(self) -> None:
        if self._dead > _MIN_DEAD_BEFORE_COMPACT and self._dead > len(self._entries):
            self._rebuild()

    def _rebuild(self) -> None:
        self._heap = list(self._entries.values())
        heapq.heapify(self._heap)
        self._dead = 0
