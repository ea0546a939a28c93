"""The read-only view plugins get of the cluster objects the scheduler keeps (upstream's informer listers
behind ``framework.Handle.SharedInformerFactory``): ``handle.objects.of(SERVICES).list("default")``.

Contract: values are immutable and shared (never mutate them); ``list`` returns the same tuple until the
store changes, so reading it every cycle costs nothing; ``generation`` grows with every change to the
kind, so a plugin can memoise what it derives from a kind on ``(generation, ...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from kopf_scheduler.framework.objects.kind import ObjectKind

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class ObjectLister(Protocol[T_co]):
    @property
    def generation(self) -> int: ...

    def get(self, namespace: str, name: str) -> T_co | None:
        """The object ``namespace/name`` (``namespace`` is "" for cluster-scoped kinds)."""

    def list(self, namespace: str | None = None) -> Sequence[T_co]:
        """Every object, or those of one namespace."""


class ClusterListers(Protocol):
    def of(self, kind: ObjectKind[T]) -> ObjectLister[T]:
        """The lister of ``kind``; an empty one for a kind nobody feeds."""

    def generation(self, *kinds: ObjectKind[Any]) -> int:
        """A number that changes whenever any of ``kinds`` changes."""


class _EmptyLister:
    generation = 0

    def get(self, namespace: str, name: str) -> None:
        return None

    def list(self, namespace: str | None = None) -> Sequence[object]:
        return ()


class NoObjects:
    """Listers of a scheduler that knows no cluster objects (a framework built without a scheduler)."""

    _EMPTY = _EmptyLister()

    def of(self, kind: ObjectKind[T]) -> ObjectLister[T]:
        return self._EMPTY  # type: ignore[return-value]

    def generation(self, *kinds: ObjectKind[Any]) -> int:
        return 0
