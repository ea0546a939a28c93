"""Per-cycle state that plugins share between extension points of one scheduling attempt.

Each plugin owns typed keys (``StateKey[T]``); nobody else reads or writes them. Values that change during
the cycle (pre-filter data updated by add/remove-pod extensions) implement ``clone()`` so that preemption
can simulate on a copy without touching the original.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class StateKey(Generic[T]):
    """A typed key into ``CycleState``; identity-based, so two plugins never collide."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CycleState:
    __slots__ = ("_data", "record_metrics", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[StateKey[Any], Any] = {}
        #: plugins whose pre-filter returned Skip: their filter is not run for this pod.
        self.skip_filter_plugins: set[str] = set()
        #: plugins whose pre-score returned Skip: their score is not run for this pod.
        self.skip_score_plugins: set[str] = set()
        self.record_metrics = False

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key] = value

    def read(self, key: StateKey[T]) -> T:
        """The value under ``key``; ``KeyError`` if the owning plugin never wrote it (a plugin bug)."""
        return cast(T, self._data[key])

    def get(self, key: StateKey[T]) -> T | None:
        return cast("T | None", self._data.get(key))

    def delete(self, key: StateKey[Any]) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        """A copy whose cloneable values are independent of this state's."""
        new = CycleState()
        for key, value in self._data.items():
            clone = getattr(value, "clone", None)
            new._data[key] = clone() if callable(clone) else value
        new.skip_filter_plugins = set(self.skip_filter_plugins)
        new.skip_score_plugins = set(self.skip_score_plugins)
        new.record_metrics = self.record_metrics
        return new
