"""The volume binder's view of PersistentVolumes and PersistentVolumeClaims: what the API server said
(the scheduler's stores) overlaid with what the binder assumed (upstream's
``pkg/scheduler/util/assumecache``).

Reserve assumes a volume bound to its claim, or a claim with the selected-node annotation, before any
API write, so that the next pods see the decision at once. An assumed value stands until:
- ``restore`` drops it (unreserve, a failed write), or
- the store holds a version of the object with a greater ``resourceVersion`` (the API server's answer
  to the write, or any newer change), or the object is gone from the store.
``get`` and ``list`` give the assumed value while it stands, ``get_api`` always the store's.

Invariant: ``assume`` only accepts a value derived from the current one, not older than what the cache
shows (upstream: ``<kind> "<name>" is out of sync``). Keys are ``(namespace, name)``; "" for the
namespace of a cluster-scoped kind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from kopf_scheduler.framework.objects import ObjectLister, PersistentVolume, PersistentVolumeClaim
from kopf_scheduler.plugins._volumes import BETA_STORAGE_CLASS_ANNOTATION


class _Versioned(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def resource_version(self) -> str: ...


T = TypeVar("T", bound=_Versioned)


class AssumeError(Exception):
    """An assume the cache refuses; the message is upstream's."""


def version_of(value: _Versioned) -> int:
    """``resourceVersion`` as a number (the API server's are decimal); 0 when unset."""
    text = value.resource_version
    return int(text) if text.isdigit() else 0


class AssumeCache(Generic[T]):
    def __init__(
        self, lister: ObjectLister[T], description: str, key: Callable[[T], tuple[str, str]]
    ) -> None:
        self._lister = lister
        #: how upstream names the kind in its errors (``v1.PersistentVolume``)
        self.description = description
        self._key = key
        self._assumed: dict[tuple[str, str], T] = {}
        #: grows with every assume and restore (memoised lists key on it)
        self.version = 0

    def _resolve(self, key: tuple[str, str], api: T | None) -> T | None:
        assumed = self._assumed.get(key)
        if assumed is None:
            return api
        if api is None or version_of(api) > version_of(assumed):  # gone, or the API server moved on
            del self._assumed[key]
            self.version += 1
            return api
        return assumed

    def get(self, namespace: str, name: str) -> T | None:
        """The assumed value while it stands, else the store's."""
        key = (namespace, name)
        return self._resolve(key, self._lister.get(namespace, name))

    def get_api(self, namespace: str, name: str) -> T | None:
        """What the API server said last (the store's value)."""
        return self._lister.get(namespace, name)

    def list(self) -> list[T]:
        """Every object, assumed values in place of the store's."""
        return [
            value for api in self._lister.list() if (value := self._resolve(self._key(api), api)) is not None
        ]

    def assume(self, value: T) -> None:
        """Shows ``value`` instead of the stored object until it is restored or outdated."""
        key = self._key(value)
        current = self.get(*key)
        if current is None:
            raise AssumeError(f"could not find {self.description} {json.dumps(_cache_key(key))}")
        stored, assumed = version_of(current), version_of(value)
        if assumed < stored:
            raise AssumeError(
                f"{self.description} {json.dumps(_cache_key(key))} is out of sync "
                f"(stored: {stored}, assume: {assumed})"
            )
        self._assumed[key] = value
        self.version += 1

    def restore(self, namespace: str, name: str) -> None:
        """Drops what was assumed for the object (nothing when nothing was)."""
        if self._assumed.pop((namespace, name), None) is not None:
            self.version += 1

    def assumed(self) -> Sequence[tuple[str, str]]:
        """The keys of the objects shown with an assumed value (outdated ones are dropped first)."""
        for key in list(self._assumed):
            self.get(*key)
        return tuple(self._assumed)


def _cache_key(key: tuple[str, str]) -> str:
    """Upstream's cache key: ``namespace/name``, or the name of a cluster-scoped object."""
    return f"{key[0]}/{key[1]}" if key[0] else key[1]


def volume_class(volume: PersistentVolume) -> str:
    """``storagehelpers.GetPersistentVolumeClass``: the beta annotation, else ``spec.storageClassName``."""
    beta = volume.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    return beta if beta is not None else volume.storage_class


class VolumeCache(AssumeCache[PersistentVolume]):
    """PersistentVolumes, listed by storage class (upstream indexes them so)."""

    def __init__(self, lister: ObjectLister[PersistentVolume]) -> None:
        super().__init__(lister, "v1.PersistentVolume", lambda pv: ("", pv.name))
        self._by_class: dict[str, list[PersistentVolume]] = {}
        self._indexed: tuple[int, int] = (-1, -1)

    def list_by_class(self, storage_class: str) -> list[PersistentVolume]:
        """The volumes of ``storage_class`` (assumed values in place), in store order."""
        if (self._lister.generation, self.version) != self._indexed:  # the store or an assumption moved
            by_class: dict[str, list[PersistentVolume]] = {}
            for volume in self.list():  # may drop outdated assumptions, so stamp after it
                by_class.setdefault(volume_class(volume), []).append(volume)
            self._by_class, self._indexed = by_class, (self._lister.generation, self.version)
        return list(self._by_class.get(storage_class, ()))


class ClaimCache(AssumeCache[PersistentVolumeClaim]):
    def __init__(self, lister: ObjectLister[PersistentVolumeClaim]) -> None:
        super().__init__(lister, "v1.PersistentVolumeClaim", lambda pvc: (pvc.namespace, pvc.name))
