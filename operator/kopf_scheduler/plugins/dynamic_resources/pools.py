"""The resource pools a node can allocate from (``GatherPools`` in the structured allocator at v0.37.2),
and the claim constraints that relate the devices allocated for one claim (``matchAttribute``,
``distinctAttribute``).

- A slice belongs to the pools of the nodes its ``nodeName``, ``allNodes`` or ``nodeSelector`` names, or
  with ``perDeviceNodeSelection`` of the nodes one of its devices names. Without partitionable devices
  (``DRAPartitionableDevices`` off) a slice with ``perDeviceNodeSelection`` or ``sharedCounters`` is
  skipped.
- Of a pool, only the slices of its highest generation count. A pool with fewer slices than its
  ``resourceSliceCount`` is looked up among all slices (those for other nodes count too): obsolete when
  one of them has a newer generation (then it is left out), else incomplete unless they are all there.
  An incomplete pool has no devices to allocate; ``All`` refuses it.
- A pool is invalid with a device name twice among the slices the node sees, and with partitionable
  devices when a counter set name comes twice or a device consumes a set or counter that is not there.
- With partitionable devices a pool keeps its counter sets (``sharedCounters`` of its slices) and the
  slices of other nodes (their allocated devices consume counters too).
- Pools come sorted by driver and pool name, those with devices that have binding conditions last; a
  pool's slices sorted by name (first fit: the names are the order of preference).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

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
    #: partitionable devices: the pool's counter sets (name -> counter -> amount); None without
    counter_sets: dict[str, dict[str, Fraction]] | None = None
    #: partitionable devices: the pool's slices of devices other nodes see
    others: list[ResourceSlice] = field(default_factory=list)

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.name}"


def gather_pools(
    slices: Sequence[ResourceSlice],
    labels: Mapping[str, str],
    node_name: str,
    partitionable: bool = True,
    all_slices: Sequence[ResourceSlice] | None = None,
    looked_up: list[bool] | None = None,
) -> list[Pool]:
    """``slices``: those that may concern the node (it may see them); ``all_slices``: every slice, where
    the rest of an incomplete pool is looked for (``slices`` when not given; ``looked_up`` gets an entry
    when it was)."""
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for slice_ in slices:
        if not partitionable and (slice_.per_device_node_selection or slice_.shared_counters):
            continue
        if slice_.reachable_from(labels, node_name):
            _add(pools, slice_)
    result: list[Pool] = []
    last: list[Pool] = []
    for (driver, name), found in pools.items():
        pool = Pool(driver, name)
        if len(found) != found[0].slice_count:
            if looked_up is not None:
                looked_up.append(True)
            everything = _pool_slices(
                slices if all_slices is None else all_slices, driver, name, found[0].generation
            )
            if everything is None:
                continue  # obsolete: a newer generation is on its way
            if len(everything) != found[0].slice_count:
                pool.incomplete = True
                result.append(pool)
                continue
            _build(pool, found, partitionable, everything)
        else:
            _build(pool, found, partitionable, ())
        has_conditions = any(d.binding_conditions for s in pool.slices for d in s.devices)
        (last if has_conditions else result).append(pool)
    result.sort(key=_pool_order)
    last.sort(key=_pool_order)
    return result + last


def _pool_order(pool: Pool) -> tuple[str, str]:
    return pool.driver, pool.name


def _add(pools: dict[tuple[str, str], list[ResourceSlice]], slice_: ResourceSlice) -> None:
    key = (slice_.driver, slice_.pool)
    found = pools.get(key)
    if found is None:
        pools[key] = [slice_]
        return
    generation = found[0].generation
    if slice_.generation < generation:
        return
    if slice_.generation > generation:
        pools[key] = [slice_]
        return
    found.append(slice_)


def _pool_slices(
    slices: Sequence[ResourceSlice], driver: str, name: str, generation: int
) -> list[ResourceSlice] | None:
    """Every slice of the pool of that generation; None when one has a newer one (``checkSlicesInPool``)."""
    out = []
    for slice_ in slices:
        if slice_.driver != driver or slice_.pool != name:
            continue
        if slice_.generation > generation:
            return None
        if slice_.generation == generation:
            out.append(slice_)
    return out


def _build(
    pool: Pool, slices: list[ResourceSlice], partitionable: bool, everything: Sequence[ResourceSlice]
) -> None:
    """``buildPool``: the device slices the node sees, sorted by name, and what makes the pool invalid."""
    slices = sorted(slices, key=_slice_name)
    seen = {id(s) for s in slices}
    others = [s for s in everything if id(s) not in seen]
    counter_slices = []
    if partitionable:
        counter_slices = [s for s in slices if s.shared_counters]
        counter_slices += [s for s in others if s.shared_counters]
        slices = [s for s in slices if not s.shared_counters]
        others = [s for s in others if not s.shared_counters]
    pool.slices = slices
    names: set[str] = set()
    for slice_ in slices:
        for device in slice_.devices:
            if device.name in names:
                pool.invalid = f"duplicate device name {device.name}"
                return
            names.add(device.name)
    if not partitionable:
        return
    sets: dict[str, dict[str, Fraction]] = {}
    for slice_ in counter_slices:
        for set_name, counters in slice_.shared_counters:
            if set_name in sets:
                pool.invalid = f"duplicate counter set name {set_name}"
                return
            sets[set_name] = dict(counters)
    for group in (slices, others):
        for slice_ in group:
            for device in slice_.devices:
                for set_name, counters in device.consumes_counters:
                    counter_set = sets.get(set_name)
                    if counter_set is None:
                        pool.invalid = f"counter set {set_name} not found"
                        return
                    for counter in counters:
                        if counter not in counter_set:
                            pool.invalid = f"counter {counter} not found in counter set {set_name}"
                            return
    pool.counter_sets = sets
    pool.others = others


def _slice_name(slice_: ResourceSlice) -> str:
    return slice_.name


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


class DistinctAttribute(MatchAttribute):
    """Every device of the requests named (all requests when none are) has the attribute, each with a
    value of its own (``distinctAttribute``, consumable capacity)."""

    __slots__ = ("values",)

    def __init__(self, requests: tuple[str, ...], name: str) -> None:
        super().__init__(requests, name)
        self.values: list[Attribute] = []

    def add(self, request: str, subrequest: str, device: Device, device_id: DeviceID) -> bool:
        if not self._applies(request, subrequest):
            return True
        attribute = lookup_attribute(device, device_id, self.name)
        if attribute is None or attribute in self.values:
            return False
        self.values.append(attribute)
        return True

    def remove(self, request: str, subrequest: str, device: Device, device_id: DeviceID) -> None:
        if self._applies(request, subrequest):
            self.values.pop()
