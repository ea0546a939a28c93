"""What one search takes of devices beyond whole devices (the structured allocator at v0.37.2,
``allocateDevice`` and ``checkAvailableCounters``):

- Partitionable devices: a device that consumes counters takes them from its pool's counter sets. What
  is available is the sets' counters less what the devices allocated in the cluster consume (every
  device of the pool, those of other nodes too; worked out once per pool and scheduling cycle, kept by
  the ``Allocator``); what the search has taken so far is added, and a device is not taken when any
  counter of its pool would go below zero (one already below zero blocks every device of the pool).
- Consumable capacity: a device that allows multiple allocations is never taken whole; each allocation
  is a share with a ``shareID`` of its own and the capacity it consumes. A share fits while what the
  shares in the cluster (``Shares``) and in this search consume stays within the capacity. The counters
  of such a device are taken by its first share only: once it has one (in the cluster or the search),
  later shares take none.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from fractions import Fraction

from kopf_scheduler.framework.objects.resource_slices import Amount, Device
from kopf_scheduler.plugins.dynamic_resources.capacity import CapacityError, consumed, fits
from kopf_scheduler.plugins.dynamic_resources.pools import DeviceID, Pool, device_id_str
from kopf_scheduler.plugins.dynamic_resources.prepare import AllocationError, Features, Request

#: per counter set, per counter: an amount
CounterSets = dict[str, dict[str, Fraction]]


@dataclass(frozen=True, slots=True)
class Shares:
    """The shares of devices allocated in the cluster and in flight (upstream's
    ``AllocatedSharedDeviceIDs`` and ``AggregatedCapacity``)."""

    #: the devices that have at least one share
    devices: AbstractSet[DeviceID] = frozenset()
    #: per device: what its shares consume, summed
    capacity: Mapping[DeviceID, Mapping[str, Fraction]] = field(default_factory=dict)


NO_SHARES = Shares()


class Usage:
    """The counters and capacity one search has taken; ``available`` is the owner's cache of each
    pool's available counters (the same for every node)."""

    def __init__(
        self,
        features: Features,
        allocated: AbstractSet[DeviceID],
        shares: Shares,
        pools: Sequence[Pool],
        available: dict[tuple[str, str], CounterSets],
    ) -> None:
        self.features = features
        self.allocated = allocated
        self.shares = shares
        self.pools = {(pool.driver, pool.name): pool for pool in pools}
        self.available = available
        self.counters: dict[tuple[str, str], CounterSets] = {}
        #: per device shared in this search: how many shares, and what they consume
        self.share_counts: dict[DeviceID, int] = {}
        self.capacity: dict[DeviceID, dict[str, Fraction]] = {}

    # -- consumable capacity ----------------------------------------------------------------------------
    def multiple(self, device: Device) -> bool:
        return self.features.consumable and device.allow_multiple_allocations

    def fits(self, data: Request, device_id: DeviceID, device: Device, claim_key: str) -> bool:
        """``CmpRequestOverCapacity``: the request fits what is left of the device's capacity."""
        take = self._consumed(data, device_id, device, claim_key, "checking")
        return take is not None and fits(
            take,
            device,
            self.features.fractional,
            self.shares.capacity.get(device_id),
            self.capacity.get(device_id),
        )

    def _consumed(
        self, data: Request, device_id: DeviceID, device: Device, claim_key: str, verb: str
    ) -> dict[str, Amount] | None:
        try:
            return consumed(data.spec.capacity_requests, device, self.features.fractional)
        except CapacityError as e:
            raise AllocationError(
                f"claim {claim_key}, request {data.spec.name}: {verb} capacity for device "
                f"{device_id_str(device_id)}: {e}"
            ) from None

    def in_use(self, device_id: DeviceID) -> bool:
        """The device has a share (``deviceCapacityInUse``)."""
        return (
            device_id in self.shares.devices
            or device_id in self.shares.capacity
            or bool(self.share_counts.get(device_id))
        )

    def share(
        self, data: Request, device_id: DeviceID, device: Device, claim_key: str
    ) -> tuple[str, tuple[tuple[str, str], ...], Callable[[], None]] | None:
        """A share of the device for the request: its ID, what it consumes and how to give it back; None
        when it does not fit."""
        take = self._consumed(data, device_id, device, claim_key, "computing consumed")
        if take is None or not fits(
            take,
            device,
            self.features.fractional,
            self.shares.capacity.get(device_id),
            self.capacity.get(device_id),
        ):
            return None
        sums = self.capacity.setdefault(device_id, {})
        for name, amount in take.items():
            sums[name] = sums.get(name, 0) + amount.value
        self.share_counts[device_id] = self.share_counts.get(device_id, 0) + 1

        def undo() -> None:
            for name, amount in take.items():
                sums[name] -= amount.value
            self.share_counts[device_id] -= 1

        used = tuple((name, amount.text) for name, amount in take.items())
        return str(uuid.uuid4()), used, undo

    # -- partitionable devices --------------------------------------------------------------------------
    def take_counters(self, device_id: DeviceID, device: Device) -> Callable[[], None] | None:
        """Takes the device's counters; None when they are not there (``checkAvailableCounters``)."""
        key = (device_id[0], device_id[1])
        available = self.available.get(key)
        if available is None:
            available = self.available[key] = self._available(self.pools[key])
        taken = self.counters.setdefault(key, {})
        for set_name, counters in device.consumes_counters:
            into = taken.setdefault(set_name, {})
            for name, value in counters.items():
                into[name] = into.get(name, 0) + value

        def undo() -> None:
            for set_name, counters in device.consumes_counters:
                into = taken[set_name]
                for name, value in counters.items():
                    into[name] -= value

        for set_name, counters in available.items():
            used = taken.get(set_name, {})
            for name, value in counters.items():
                if value < used.get(name, 0):
                    undo()
                    return None
        return undo

    def _available(self, pool: Pool) -> CounterSets:
        """The pool's counters less what its devices allocated in the cluster consume."""
        available = {name: dict(counters) for name, counters in (pool.counter_sets or {}).items()}
        for slice_ in [*pool.slices, *pool.others]:
            for device in slice_.devices:
                if not device.consumes_counters:
                    continue
                device_id = (slice_.driver, slice_.pool, device.name)
                if not (
                    device_id in self.allocated
                    or device_id in self.shares.devices
                    or device_id in self.shares.capacity
                ):
                    continue
                for set_name, counters in device.consumes_counters:
                    into = available.get(set_name)
                    if into is None:
                        continue
                    for name, value in counters.items():
                        if name in into:
                            into[name] -= value
        return available
