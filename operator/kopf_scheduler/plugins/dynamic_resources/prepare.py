"""What the allocator checks of the claims before it searches a node (the first part of upstream's
``Allocate``): per request or subrequest its class, how many devices it needs (``All``: which ones, from
pools that must be complete and valid, whose capacity the request fits), selectors that are CEL, capacity
requests only with consumable capacity, at most 32 devices per claim, and the claim's constraints
(``distinctAttribute`` only with consumable capacity). Upstream's texts when a claim cannot be allocated
at all. ``Features``: the allocator features the feature gates turn on (upstream's ``structured.Features``).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kopf_scheduler.framework.objects import DeviceClass, ResourceClaim, ResourceSlice
from kopf_scheduler.framework.objects.dra import ALL, EXACT_COUNT, DeviceRequest, RequestSpec
from kopf_scheduler.framework.objects.resource_slices import Device
from kopf_scheduler.plugins.dynamic_resources.capacity import CapacityError, consumed, fits
from kopf_scheduler.plugins.dynamic_resources.pools import DeviceID, DistinctAttribute, MatchAttribute, Pool

#: ``resourceapi.AllocationResultsMaxSize``
MAX_DEVICES_PER_CLAIM = 32


@dataclass(frozen=True, slots=True)
class Features:
    """What the allocator does beyond v1.34's defaults; the defaults are kube-scheduler v1.37.2's
    (``DRAFractionalCapacityRange`` is on from 1.37 only once the minimum compatibility version is 1.37,
    so off at 1.37 itself)."""

    #: ``DRAPartitionableDevices``: counter sets, devices consuming counters, per-device node selection
    partitionable: bool = True
    #: ``DRAConsumableCapacity``: shared devices, capacity requests, ``distinctAttribute``
    consumable: bool = True
    #: ``DRAFractionalCapacityRange``: request-policy steps counted in thousandths
    fractional: bool = False


FEATURES = Features()


class AllocationError(Exception):
    """The claims cannot be allocated on any node; the message is upstream's."""


class FilterTimeout(Exception):
    """The search of one node took longer than ``filterTimeout``."""


@dataclass(slots=True)
class Request:
    spec: RequestSpec
    #: the request a subrequest belongs to
    parent: DeviceRequest | None
    device_class: DeviceClass
    count: int
    #: ``All``: the devices, picked before the search
    all_devices: list[tuple[DeviceID, Device, ResourceSlice]] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.parent.name}/{self.spec.name}" if self.parent is not None else self.spec.name


class Preparation(abc.ABC):
    def __init__(
        self,
        classes: Callable[[str], DeviceClass | None],
        pools: list[Pool],
        claims: Sequence[ResourceClaim],
        features: Features = FEATURES,
    ) -> None:
        self.classes, self.pools, self.claims = classes, pools, claims
        self.features = features
        #: (claim, request, subrequest) -> what it needs
        self.requests: dict[tuple[int, int, int], Request] = {}
        #: per claim, its constraints
        self.constraints: list[list[MatchAttribute]] = []

    @abc.abstractmethod
    def _selectable(
        self,
        c: int,
        data: Request,
        device_id: DeviceID,
        device: Device,
        slice_: ResourceSlice,
        at: tuple[int, int],
    ) -> bool: ...

    def prepare(self, c: int, claim: ResourceClaim) -> None:
        minimum = 0
        for r, request in enumerate(claim.requests):
            if not self.features.consumable:
                _refuse_capacity(claim, request)
            if request.first_available:
                fewest = None
                for s, sub in enumerate(request.first_available):
                    data = self._validate(claim, c, sub, request, (r, s))
                    self.requests[(c, r, s)] = data
                    fewest = data.count if fewest is None else min(fewest, data.count)
                needed = fewest or 0
            else:
                assert request.exactly is not None  # pre-filter refused requests of neither kind
                data = self._validate(claim, c, request.exactly, None, (r, 0))
                self.requests[(c, r, 0)] = data
                needed = data.count
            # compared with what is left, as upstream does (its sum cannot overflow so)
            if needed > MAX_DEVICES_PER_CLAIM - minimum:
                raise AllocationError(
                    f"claim {claim.key}, request {request.name}: adding {needed} devices exceeds the claim "
                    f"limit of {MAX_DEVICES_PER_CLAIM}, with {minimum} already accounted for"
                )
            minimum += needed
        constraints = []
        for i, constraint in enumerate(claim.constraints):
            if constraint.match_attribute is not None:
                constraints.append(MatchAttribute(constraint.requests, constraint.match_attribute))
            elif constraint.distinct_attribute is not None and self.features.consumable:
                constraints.append(DistinctAttribute(constraint.requests, constraint.distinct_attribute))
            elif constraint.distinct_attribute is not None:
                raise AllocationError(
                    f"claim {claim.key}, constraint #{i}: distinctAttribute needs the DRAConsumableCapacity "
                    "feature, which is disabled"
                )
            else:
                raise AllocationError(
                    f"claim {claim.key}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )
        self.constraints.append(constraints)

    def _static_fit(self, prefix: str, data: Request, device: Device) -> bool:
        """The request fits the device's capacity when nothing of it is allocated (``All``: a device
        without room now is still one of all, and fails the request in the search)."""
        try:
            take = consumed(data.spec.capacity_requests, device, self.features.fractional)
        except CapacityError as e:
            raise AllocationError(f"{prefix}: checking capacity for device {device.name}: {e}") from None
        return take is not None and fits(take, device, self.features.fractional, None, None)

    def _validate(
        self,
        claim: ResourceClaim,
        c: int,
        spec: RequestSpec,
        parent: DeviceRequest | None,
        at: tuple[int, int],
    ) -> Request:
        prefix = f"claim {claim.key}, request {spec.name}"
        for i, selector in enumerate(spec.selectors):
            if selector is None:
                raise AllocationError(
                    f"{prefix}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )
        if not spec.device_class_name:
            raise AllocationError(f"{prefix}: missing device class name (unsupported request type?)")
        device_class = self.classes(spec.device_class_name)
        if device_class is None:
            raise AllocationError(
                f"{prefix}: could not retrieve device class {spec.device_class_name}: "
                f'deviceclass.resource.k8s.io "{spec.device_class_name}" not found'
            )
        data = Request(spec, parent, device_class, 0)
        if spec.allocation_mode == EXACT_COUNT:
            data.count = spec.count
        elif spec.allocation_mode == ALL:
            for pool in self.pools:
                problem = "being updated" if pool.incomplete else "invalid" if pool.invalid else ""
                if problem:
                    what = f"resource pool {pool.pool_id} is currently {problem}"
                    raise AllocationError(f"{prefix}: asks for all devices, but {what}")
                for slice_ in pool.slices:
                    for device in slice_.devices:
                        device_id = (slice_.driver, slice_.pool, device.name)
                        if not self._selectable(c, data, device_id, device, slice_, at):
                            continue
                        if self.features.consumable and not self._static_fit(prefix, data, device):
                            continue
                        data.all_devices.append((device_id, device, slice_))
            data.count = len(data.all_devices)
        else:
            raise AllocationError(f"{prefix}: unsupported count mode {spec.allocation_mode}")
        return data


def _refuse_capacity(claim: ResourceClaim, request: DeviceRequest) -> None:
    if request.exactly is not None and request.exactly.has_capacity:
        raise AllocationError(
            f"claim {claim.key}, request {request.name}: has capacity requests, but the "
            "DRAConsumableCapacity feature is disabled"
        )
    for sub in request.first_available:
        if sub.has_capacity:
            raise AllocationError(
                f"claim {claim.key}, subrequest {sub.name}: has capacity requests, but the "
                "DRAConsumableCapacity feature is disabled"
            )
