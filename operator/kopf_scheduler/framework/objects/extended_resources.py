"""Which DeviceClass an extended resource stands for (``DRAExtendedResource``; upstream's
``extendedresourcecache.ExtendedResourceCache`` behind ``SharedDRAManager.DeviceClassResolver``).

A pod asking for ``example.com/gpu: 2`` gets two devices of the class whose ``spec.extendedResourceName``
is ``example.com/gpu``, on a node that does not advertise the resource in ``status.allocatable``; every
class also stands for its implicit name ``deviceclass.resource.kubernetes.io/<class name>``. When several
classes name the same extended resource, the oldest (``creationTimestamp``, then the smaller name) wins.

Upstream keeps the map up to date event by event, so after the winning class is deleted no class stands
for its name until another one is added or updated, and a class added after an older one with the same
name gets no implicit name either; here the map is made again from the classes there are whenever the
DeviceClass store changes (the same in every other case). The resolver is shared by NodeResourcesFit
(which leaves such resources to DRA) and DynamicResources (which allocates them), one per object store.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from kopf_scheduler.framework import resources as res
from kopf_scheduler.framework.objects.dra import DEVICE_CLASSES, DeviceClass
from kopf_scheduler.framework.objects.listers import ClusterListers

#: ``resourceapi.ResourceDeviceClassPrefix``: the implicit extended resource name of every class
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"

_RESOLVERS: weakref.WeakKeyDictionary[Any, DeviceClassResolver] = weakref.WeakKeyDictionary()


def is_dra_extended_resource_name(name: str) -> bool:
    """``schedutil.IsDRAExtendedResourceName``: an extended resource name or a class's implicit one."""
    return name.startswith(DEVICE_CLASS_PREFIX) or res.is_extended(name)


class DeviceClassResolver:
    """``get(resource)``: the class an extended resource is backed by, or None."""

    def __init__(self, objects: ClusterListers) -> None:
        self._classes = objects.of(DEVICE_CLASSES)
        self._generation = -1
        self._by_resource: Mapping[str, DeviceClass] = {}

    def get(self, resource: str) -> DeviceClass | None:
        return self.mapping().get(resource)

    def mapping(self) -> Mapping[str, DeviceClass]:
        """Every resource name that stands for a class, with its class."""
        generation = self._classes.generation
        if generation != self._generation:
            self._by_resource = _mapping(self._classes.list())
            self._generation = generation
        return self._by_resource


def _mapping(classes: Any) -> dict[str, DeviceClass]:
    out: dict[str, DeviceClass] = {}
    for cls in sorted(classes, key=lambda c: (c.created, c.name)):
        out[DEVICE_CLASS_PREFIX + cls.name] = cls
        if cls.extended_resource_name is not None:
            out.setdefault(cls.extended_resource_name, cls)  # the oldest wins
    return out


def device_class_resolver(objects: ClusterListers) -> DeviceClassResolver:
    """The resolver of this object store (one per scheduler, shared by its profiles' plugins)."""
    found = _RESOLVERS.get(objects)
    if found is None:
        found = _RESOLVERS[objects] = DeviceClassResolver(objects)
    return found
