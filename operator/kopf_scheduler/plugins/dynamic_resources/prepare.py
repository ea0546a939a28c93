"""What the allocator checks of the claims before it searches a node (the first part of upstream's
``Allocate``): per request or subrequest its class, how many devices it needs (``All``: which ones, from
pools that must be complete and valid), selectors that are CEL, no capacity requests (consumable
capacity is off), at most 32 devices per claim, and the claim's constraints. Upstream's texts when a
claim cannot be allocated at all.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kopf_scheduler.framework.objects import DeviceClass, ResourceClaim, ResourceSlice
from kopf_scheduler.framework.objects.dra import ALL, EXACT_COUNT, DeviceRequest, RequestSpec
from kopf_scheduler.framework.objects.resource_slices import Device
from kopf_scheduler.plugins.dynamic_resources.pools import DeviceID, MatchAttribute, Pool

#: ``resourceapi.AllocationResultsMaxSize``
MAX_DEVICES_PER_CLAIM = 32


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
        self, classes: Callable[[str], DeviceClass | None], pools: list[Pool], claims: Sequence[ResourceClaim]
    ) -> None:
        self.classes, self.pools, self.claims = classes, pools, claims
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
            if (request.exactly is not None and request.exactly.has_capacity) or any(
                s.has_capacity for s in request.first_available
            ):
                raise AllocationError(
                    f"claim {claim.key}, request {request.name}: has capacity requests, but the "
                    "DRAConsumableCapacity feature is disabled"
                )
            if request.first_available:
                fewest = None
                for s, sub in enumerate(request.first_available):
                    # upstream caches selector results under the previous subrequest's key here
                    data = self._validate(claim, c, sub, request, (r, max(s - 1, 0)))
                    self.requests[(c, r, s)] = data
                    fewest = data.count if fewest is None else min(fewest, data.count)
                minimum += fewest or 0
            else:
                assert request.exactly is not None  # pre-filter refused requests of neither kind
                data = self._validate(claim, c, request.exactly, None, (r, 0))
                self.requests[(c, r, 0)] = data
                minimum += data.count
        if minimum > MAX_DEVICES_PER_CLAIM:
            raise AllocationError(
                f"claim {claim.key}: number of requested devices {minimum} exceeds the claim limit of "
                f"{MAX_DEVICES_PER_CLAIM}"
            )
        constraints = []
        for i, constraint in enumerate(claim.constraints):
            if constraint.match_attribute is not None:
                constraints.append(MatchAttribute(constraint.requests, constraint.match_attribute))
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
                        if self._selectable(c, data, device_id, device, slice_, at):
                            data.all_devices.append((device_id, device, slice_))
            data.count = len(data.all_devices)
        else:
            raise AllocationError(f"{prefix}: unsupported count mode {spec.allocation_mode}")
        return data
