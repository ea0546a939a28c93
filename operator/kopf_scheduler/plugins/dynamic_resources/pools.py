"""The resource pools a node can allocate from (``GatherPools`` in the structured allocator), and the
claim constraints that relate the devices allocated for one claim (``matchAttribute``).

- A slice belongs to the pools of the nodes its ``nodeName``, ``allNodes`` or ``nodeSelector`` names;
  a slice with ``perDeviceNodeSelection`` is skipped (partitionable devices are off in v1.34).
- Of a pool, only the slices of its highest generation count; a pool with fewer slices than its
  ``resourceSliceCount`` is incomplete, one with a device name twice is invalid.
- Pools come in the order their first slice was listed (upstream ranges over a map, so its order is
  random; ours is stable), pools with devices that have binding conditions last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kopf_scheduler.framework.objects import ResourceSlice
from kopf_scheduler.framework.objects.dra import Attribute
from kopf_scheduler.framework.objects.resource_slices import Device

#: (driver, pool, device)
DeviceID = tuple[str, str, str]


def device_id_str(device_id: DeviceID) -> str:
    return "/".join(device_id)


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    slices: list[ResourceSlice] = field(default_factory=list)
    incomplete: bool = False
    #: why the pool is invalid ("" when it is not)
    invalid: str = ""

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.name}"


def gather_pools(slices: Sequence[ResourceSlice], labels: Mapping[str, str], node_name: str) -> list[Pool]:
    pools: dict[tuple[str, str], Pool] = {}
    with_conditions: list[ResourceSlice] = []
    for slice_ in slices:
        if slice_.per_device_node_selection or not slice_.reachable_from(labels, node_name):
            continue
        if any(d.binding_conditions for d in slice_.devices):
            with_conditions.append(slice_)
            continue
        _add(pools, slice_)
    for slice_ in with_conditions:
        _add(pools, slice_)
    result: list[Pool] = []
    last: list[Pool] = []
    for pool in pools.values():
        pool.incomplete = len(pool.slices) != pool.slices[0].slice_count
        seen: set[str] = set()
        for slice_ in pool.slices:
            for device in slice_.devices:
                if device.name in seen and not pool.invalid:
                    pool.invalid = f"duplicate device name {device.name}"
                seen.add(device.name)
        has_conditions = any(d.binding_conditions for s in pool.slices for d in s.devices)
        (last if has_conditions else result).append(pool)
    return result + last


def _add(pools: dict[tuple[str, str], Pool], slice_: ResourceSlice) -> None:
    key = (slice_.driver, slice_.pool)
    pool = pools.get(key)
    if pool is None:
        pools[key] = Pool(slice_.driver, slice_.pool, [slice_])
        return
    generation = pool.slices[0].generation
    if slice_.generation < generation:
        return
    if slice_.generation > generation:
        pool.slices = []
    pool.slices.append(slice_)


def lookup_attribute(device: Device, device_id: DeviceID, name: str) -> Attribute | None:
    """A fully qualified attribute of the device; its driver's own attributes may be published without
    the domain (``lookupAttribute``)."""
    found = device.attributes.get(name)
    if found is not None:
        return found
    domain, sep, ident = name.partition("/")
    if not sep or domain != device_id[0]:
        return None
    return device.attributes.get(ident)


class MatchAttribute:
    """Every device of the requests named (all requests when none are) has the attribute, with one value;
    the first device picked sets it."""

    __slots__ = ("attribute", "count", "name", "requests")

    def __init__(self, requests: tuple[str, ...], name: str) -> None:
        self.requests = frozenset(requests)
        self.name = name
        self.attribute: Attribute | None = None
        self.count = 0

    def _applies(self, request: str, subrequest: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (bool(subrequest) and f"{request}/{subrequest}" in self.requests)

    def add(self, request: str, subrequest: str, device: Device, device_id: DeviceID) -> bool:
        if not self._applies(request, subrequest):
            return True
        attribute = lookup_attribute(device, device_id, self.name)
        if attribute is None:
            return False
        if self.count == 0:
            self.attribute, self.count = attribute, 1
            return True
        if self.attribute != attribute:  # the type and the value (a version compares as written)
            return False
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str, device: Device, device_id: DeviceID) -> None:
        if self._applies(request, subrequest):
            self.count -= 1
