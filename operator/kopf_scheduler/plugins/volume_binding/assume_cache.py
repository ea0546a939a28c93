"""The volume binder's view of PersistentVolumes and PersistentVolumeClaims: what the API server said
(the scheduler's stores) overlaid with what the binder assumed (upstream's ``passiveAssumeCache`` in
``volumebinding/passive_assume_cache.go``).

Reserve assumes a volume bound to its claim, or a claim with the selected-node annotation, before any
API write, so that the next pods see the decision at once. An assumed value stands while the store holds
the object at the assumed value's ``resourceVersion``: any other version (the API server's answer to the
write, or any other change) or the object's deletion ends it, as does ``restore`` with that version.
``get`` and ``list`` give the assumed value while it stands, ``get_api`` always the store's.

Invariant: ``assume`` only accepts a value at the ``resourceVersion`` the store holds (upstream:
``"<key>" is out of sync``), so only an object not yet sent to the API server is assumed. Keys are
``(namespace, name)``; "" for the namespace of a cluster-scoped kind. A missing object is reported as the
cache's lister does (``persistentvolumes "pv-1" not found``, the key ``namespace/name`` for a claim).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from kopf_scheduler.framework.objects import ObjectLister, PersistentVolume, PersistentVolumeClaim
from kopf_scheduler.plugins._volumes import BETA_STORAGE_CLASS_ANNOTATION, not_found


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
    def __init__(self, lister: ObjectLister[T], resource: str, key: Callable[[T], tuple[str, str]]) -> None:
        self._lister = lister
        #: the resource upstream's not-found errors name (``persistentvolumes``)
        self.resource = resource
        self._key = key
        self._assumed: dict[tuple[str, str], T] = {}
        #: grows with every assume and restore (memoised lists key on it)
        self.version = 0

    def _resolve(self, key: tuple[str, str], api: T | None) -> T | None:
        assumed = self._assumed.get(key)
        if assumed is None:
            return api
        if api is None or api.resource_version != assumed.resource_version:  # gone, or changed since
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

    def not_found(self, namespace: str, name: str) -> str:
        """Upstream's error for an object the store does not hold."""
        return not_found(self.resource, cache_key(namespace, name))

    def list(self) -> list[T]:
        """Every object, assumed values in place of the store's."""
        return [
            value for api in self._lister.list() if (value := self._resolve(self._key(api), api)) is not None
        ]

    def assume(self, value: T) -> None:
        """Shows ``value`` instead of the stored object, which must be at the same ``resourceVersion``,
        until it is restored or the stored object changes."""
        key = self._key(value)
        stored = self._lister.get(*key)
        if stored is None:
            raise AssumeError(self.not_found(*key))
        if stored.resource_version != value.resource_version:
            raise AssumeError(
                f"{json.dumps(cache_key(*key))} is out of sync "
                f"(stored: {stored.resource_version}, assume: {value.resource_version})"
            )
        self._assumed[key] = value
        self.version += 1

    def restore(self, value: T) -> None:
        """Drops what was assumed for the object if it was assumed at ``value``'s ``resourceVersion``
        (nothing otherwise: a newer assumption stands)."""
        key = self._key(value)
        assumed = self._assumed.get(key)
        if assumed is not None and assumed.resource_version == value.resource_version:
            del self._assumed[key]
            self.version += 1

    def assumed(self) -> Sequence[tuple[str, str]]:
        """The keys of the objects shown with an assumed value (outdated ones are dropped first)."""
        for key in list(self._assumed):
            self.get(*key)
        return tuple(self._assumed)


def cache_key(namespace: str, name: str) -> str:
    """Upstream's cache key: ``namespace/name``, or the name of a cluster-scoped object."""
    return f"{namespace}/{name}" if namespace else name


def volume_class(volume: PersistentVolume) -> str:
    """``storagehelpers.GetPersistentVolumeClass``: the beta annotation, else ``spec.storageClassName``."""
    beta = volume.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    return beta if beta is not None else volume.storage_class


class VolumeCache(AssumeCache[PersistentVolume]):
    """PersistentVolumes, listed by storage class (upstream's ``storageclass`` index)."""

    def __init__(self, lister: ObjectLister[PersistentVolume]) -> None:
        super().__init__(lister, "persistentvolumes", lambda pv: ("", pv.name))
        self._by_class: dict[str, list[PersistentVolume]] = {}
        self._indexed = -1

    def list_by_class(self, storage_class: str) -> list[PersistentVolume]:
        """``ListPVs``: the stored volumes whose class is ``storage_class``, in store order, each shown
        with its assumed value where one stands (the index is the stored objects', as upstream's)."""
        if self._lister.generation != self._indexed:
            by_class: dict[str, list[PersistentVolume]] = {}
            for volume in self._lister.list():
                by_class.setdefault(volume_class(volume), []).append(volume)
            self._by_class, self._indexed = by_class, self._lister.generation
        stored = self._by_class.get(storage_class, ())
        if not self._assumed:
            return list(stored)
        return [shown for volume in stored if (shown := self._resolve(("", volume.name), volume)) is not None]


class ClaimCache(AssumeCache[PersistentVolumeClaim]):
    def __init__(self, lister: ObjectLister[PersistentVolumeClaim]) -> None:
        super().__init__(lister, "persistentvolumeclaims", lambda pvc: (pvc.namespace, pvc.name))
