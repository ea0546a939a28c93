"""One store per kind of cluster object, and the set of them the scheduler owns.

A store keeps the parsed value of every object of its kind by ``(namespace, name)``, with a per-namespace
index, and counts a generation that grows with every change. ``list`` hands out a cached tuple that is
rebuilt only after a change, so plugins reading a kind on every cycle pay nothing while it is quiet.

Written only by the scheduler's event intake (watch events, start-up lists, resync, or ``simulate``'s
files); read by plugins through ``ClusterObjects``, which is the ``ClusterListers`` of the framework
handle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from kopf_scheduler.framework.objects import ObjectKind, object_key

T = TypeVar("T")


class ObjectStore(Generic[T]):
    __slots__ = ("_by_namespace", "_items", "_listed", "_listed_ns", "generation", "kind")

    def __init__(self, kind: ObjectKind[T]) -> None:
        self.kind = kind
        self._items: dict[tuple[str, str], T] = {}
        self._by_namespace: dict[str, dict[str, T]] = {}
        self._listed: tuple[T, ...] | None = ()
        self._listed_ns: dict[str, tuple[T, ...]] = {}
        self.generation = 0

    # -- writes ----------------------------------------------------------------------------------------
    def upsert(self, raw: Mapping[str, Any]) -> tuple[T | None, T]:
        """Parses and stores ``raw``; returns (previous value, new value). Raises ``ObjectParseError``
        (the store is unchanged then)."""
        key = object_key(raw, self.kind.namespaced)
        value = self.kind.parse(raw)
        old = self._items.get(key)
        self._items[key] = value
        self._by_namespace.setdefault(key[0], {})[key[1]] = value
        self._changed(key[0])
        return old, value

    def delete(self, namespace: str, name: str) -> T | None:
        key = (namespace if self.kind.namespaced else "", name)
        old = self._items.pop(key, None)
        if old is not None:
            names = self._by_namespace.get(key[0])
            if names is not None:
                names.pop(name, None)
                if not names:
                    del self._by_namespace[key[0]]
            self._changed(key[0])
        return old

    def _changed(self, namespace: str) -> None:
        self.generation += 1
        self._listed = None
        self._listed_ns.pop(namespace, None)

    # -- reads (the ObjectLister protocol) -------------------------------------------------------------
    def get(self, namespace: str, name: str) -> T | None:
        return self._items.get((namespace if self.kind.namespaced else "", name))

    def list(self, namespace: str | None = None) -> Sequence[T]:
        if namespace is None:
            if self._listed is None:
                self._listed = tuple(self._items.values())
            return self._listed
        found = self._listed_ns.get(namespace)
        if found is None:
            found = self._listed_ns[namespace] = tuple((self._by_namespace.get(namespace) or {}).values())
        return found

    def names(self) -> Sequence[tuple[str, str]]:
        """The (namespace, name) of every object."""
        return tuple(self._items)

    def __len__(self) -> int:
        return len(self._items)


class ClusterObjects:
    """A store for each kind the scheduler reads; the ``ClusterListers`` plugins get from the handle."""

    def __init__(self, kinds: Iterable[ObjectKind[Any]]) -> None:
        self._kinds = tuple(kinds)
        self._stores: dict[ObjectKind[Any], ObjectStore[Any]] = {k: ObjectStore(k) for k in self._kinds}

    @property
    def kinds(self) -> tuple[ObjectKind[Any], ...]:
        """The kinds fed here: listed at start, watched and resynced."""
        return self._kinds

    def feed_only(self, kinds: Iterable[ObjectKind[Any]]) -> None:
        """Of the kinds fed here, only those in ``kinds`` are from now on (a kind whose feature gate is
        off); the others' stores stay, empty."""
        keep = set(kinds)
        self._kinds = tuple(kind for kind in self._kinds if kind in keep)

    def store(self, kind: ObjectKind[T]) -> ObjectStore[T]:
        store = self._stores.get(kind)
        if store is None:  # a kind a plugin reads that nobody feeds here: empty, and stays so
            store = self._stores[kind] = ObjectStore(kind)
        return store

    def of(self, kind: ObjectKind[T]) -> ObjectStore[T]:
        return self.store(kind)

    def generation(self, *kinds: ObjectKind[Any]) -> int:
        return sum(self.store(kind).generation for kind in kinds)
