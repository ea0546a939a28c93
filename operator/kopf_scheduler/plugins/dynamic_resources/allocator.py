"""The structured allocator (``k8s.io/dynamic-resource-allocation/structured`` at v0.37.2, the
``incubating`` variant kube-scheduler v1.37.2 runs with its default features; ``Features`` and the
allocator's flags turn what the gates turn off back to the ``stable`` behaviour).

For one node and the claims a pod still needs allocated, it searches depth first, claim after claim and
request after request, one device at a time, for the first set of devices that satisfies everything:
the device is in a pool the node sees, not allocated to another claim (in the cluster, in flight, or in
this search), matches the class's and the request's selectors, has no NoSchedule or NoExecute taint the
request does not tolerate (DRADeviceTaints; with a DeviceTaintRule's taints: ``taints``), and keeps every
constraint of the claim; with partitionable devices its pool's counters must suffice (``sharing``), and
with consumable capacity a device that allows multiple allocations is taken as a share of its capacity
(``capacity``, ``sharing``).
A ``firstAvailable`` request takes the first of its subrequests that can be satisfied; ``All`` takes every
matching device of the node's pools (none incomplete or invalid). A claim holds at most 32 devices.

``allocate`` returns one ``AllocationResult`` (the API's ``status.allocation``) per claim, or None when the
node cannot satisfy them; ``AllocationError`` carries upstream's text for a claim or class that cannot
be allocated anywhere (a selector that fails, a missing class). ``find`` returns the devices picked
instead (``Found``), which become the results only for the node the pod goes to.

What does not depend on the pod is kept across cycles (``node_devices``: each node's pools and devices,
what selectors say of them); what does not depend on the node is done once per pod (``greedy.Plan``);
claims of the common kind are served by ``greedy``, which picks what the search would pick.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.objects import DeviceClass, ResourceClaim, ResourceSlice
from kopf_scheduler.framework.objects.device_taints import untolerated
from kopf_scheduler.framework.objects.dra import ALL
from kopf_scheduler.framework.objects.resource_slices import Device
from kopf_scheduler.plugins.dynamic_resources.cel_env import Clock, DeviceMatcher, SelectorTimeout
from kopf_scheduler.plugins.dynamic_resources.greedy import Plan, greedy, make_plan, one_request
from kopf_scheduler.plugins.dynamic_resources.node_devices import (
    NodeDevices,
    NodeView,
    selector_error,
    timeout_error,
    verdict,
)
from kopf_scheduler.plugins.dynamic_resources.pools import DeviceID, Pool, device_id_str
from kopf_scheduler.plugins.dynamic_resources.prepare import (
    FEATURES,
    MAX_DEVICES_PER_CLAIM,
    AllocationError,
    Features,
    FilterTimeout,
    Preparation,
    Request,
)
from kopf_scheduler.plugins.dynamic_resources.results import (
    DeviceResult,
    NodeSelectorError,
    allocation_result,
    node_selector,
)
from kopf_scheduler.plugins.dynamic_resources.sharing import NO_SHARES, CounterSets, Shares, Usage

__all__ = ["AllocationError", "Allocator", "FailedOnNode", "FilterTimeout"]

#: the allocator's text for a node where nothing could be allocated and some pool was invalid
INVALID_POOLS = "invalid resource pools were encountered"


class FailedOnNode(Exception):
    """The claims cannot be allocated on this node only (upstream's ``ErrFailedAllocationOnNode``): the
    node is unschedulable with this text, the other nodes are still tried."""


class _MaxSizeExceeded(Exception):
    pass


#: (pool, slice, device) positions in the search's order (upstream's ``deviceLocation``)
_Location = tuple[int, int, int]
_FIRST: _Location = (0, 0, 0)


@dataclass(slots=True, eq=False)
class Found:
    """The devices picked on one node for each claim, and per claim its requests' names and classes."""

    node: str
    claims: Sequence[ResourceClaim]
    results: Sequence[Sequence[DeviceResult]]
    classes: list[list[tuple[str, DeviceClass]]]

    def allocations(self) -> list[dict[str, Any]]:
        """The claims' ``status.allocation``, in order."""
        return [
            allocation_result(claim, self.results[c], self.classes[c], self.node)
            for c, claim in enumerate(self.claims)
        ]

    def check(self) -> None:
        """Raises the error building the results would raise (a node selector that cannot be made)."""
        for c, claim in enumerate(self.claims):
            results = self.results[c]
            if results and results[0].slice.node_name:
                continue  # the node by name: nothing to fail
            try:
                node_selector(results, self.node, claim.name)
            except NodeSelectorError as e:
                raise AllocationError(str(e)) from None


class Allocator:
    """The claims' shared inputs for one scheduling cycle: the classes, the slices and the devices
    allocated already. ``allocate`` may be called for any number of nodes; ``devices`` keeps what nodes
    see across cycles (one per scheduler), else it is made for this allocator."""

    def __init__(
        self,
        classes: Callable[[str], DeviceClass | None],
        slices: Sequence[ResourceSlice],
        allocated: AbstractSet[DeviceID],
        matcher: DeviceMatcher,
        timeout_seconds: float = 0.0,
        devices: NodeDevices | None = None,
        versions: Mapping[tuple[str, str], int] | None = None,
        *,
        device_taints: bool = True,
        binding_conditions: bool = False,
        features: Features = FEATURES,
        shares: Shares = NO_SHARES,
    ) -> None:
        self.classes = classes
        self.slices = slices
        self.devices = NodeDevices() if devices is None else devices
        self.devices.refresh(slices)
        self.allocated = allocated
        #: ``DraManager.pool_versions`` for ``allocated``: lets ``greedy`` reuse what it found on a node
        self.versions = versions
        self.matcher = matcher
        #: 0: no limit
        self.timeout_seconds = timeout_seconds
        #: the full search only (the reference ``greedy`` is checked against)
        self.search_only = False
        #: DRADeviceTaints: a device with a NoSchedule or NoExecute taint the request does not tolerate is
        #: not allocated
        self.device_taints = device_taints
        #: device binding conditions are on: devices with binding conditions may be allocated
        self.binding_conditions = binding_conditions
        #: partitionable devices, consumable capacity
        self.features = features
        #: the shares of devices allocated in the cluster (consumable capacity)
        self.shares = shares
        #: per pool: its counters less what devices allocated in the cluster consume (``sharing``)
        self.available: dict[tuple[str, str], CounterSets] = {}
        self._plan: Plan | None = None
        self._planned: Sequence[ResourceClaim] | None = None

    def allocate(
        self, node_name: str, labels: Mapping[str, str], claims: Sequence[ResourceClaim]
    ) -> list[dict[str, Any]] | None:
        """Raises ``AllocationError`` or ``FilterTimeout``."""
        found = self.find(node_name, labels, claims)
        return None if found is None else found.allocations()

    def find(
        self, node_name: str, labels: Mapping[str, str], claims: Sequence[ResourceClaim]
    ) -> Found | None:
        """Raises ``AllocationError``, ``FailedOnNode`` (nothing found, and the node sees an invalid pool,
        whose devices are never allocated) or ``FilterTimeout``. ``claims`` may be the same sequence on
        every call (what is derived from it is kept then), but must not change in place."""
        view = self.devices.view(node_name, labels, self.features.partitionable)
        found = self._find(view, node_name, labels, claims)
        if found is None and view.invalid:
            raise FailedOnNode(INVALID_POOLS)
        return found

    def _find(
        self, view: NodeView, node_name: str, labels: Mapping[str, str], claims: Sequence[ResourceClaim]
    ) -> Found | None:
        plan = self._plan if claims is self._planned else self._plan_for(claims)
        assert plan is not None
        if plan.error is not None:
            raise AllocationError(str(plan.error))
        fast = not self.search_only and not view.special  # counters, shares: the search decides
        if plan.single is not None and self.versions is not None and fast:
            picks = one_request(plan, view, self.allocated, self.matcher, self.versions)
            if picks is None:
                return None  # one request: what the scan does not find, the search does not either
            picked = Found(node_name, claims, (picks,), plan.classes)
            if not view.named:
                picked.check()
            return picked
        if plan.levels is not None and fast:
            results = greedy(plan, view, self.allocated, self.matcher, self.timeout_seconds)
            if results is not None:
                picked = Found(node_name, claims, results, plan.classes)
                if not view.named:
                    picked.check()
                return picked
            if plan.final:
                return None
        search = _Search(self, node_name, view.pools, claims)
        search.labels = labels
        if view.special or plan.capacity:
            search.usage = Usage(self.features, self.allocated, self.shares, view.pools, self.available)
        search.clocks = plan.clocks
        if self.timeout_seconds > 0:
            search.deadline = time.perf_counter() + self.timeout_seconds
        found = search.run()
        if found is not None:
            found.check()
        return found

    def _plan_for(self, claims: Sequence[ResourceClaim]) -> Plan:
        """The plan for these claims: made once for the claims a cycle asks about on every node."""
        plan = self._plan
        if claims is self._planned and plan is not None:
            return plan
        if plan is None or len(plan.claims) != len(claims) or any(map(_differ, plan.claims, claims)):
            plan = self._plan = make_plan(self.classes, claims, self.devices.slot)
            plan.taints = self.device_taints
            plan.binding_conditions = self.binding_conditions
        self._planned = claims
        return plan


def _differ(a: ResourceClaim, b: ResourceClaim) -> bool:
    return a is not b


class _Search(Preparation):
    def __init__(
        self, owner: Allocator, node: str, pools: list[Pool], claims: Sequence[ResourceClaim]
    ) -> None:
        super().__init__(owner.classes, pools, claims, owner.features)
        self.owner, self.node = owner, node
        self.selected: dict[tuple[int, int], int] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.results: list[list[DeviceResult]] = [[] for _ in claims]
        self.selectable_cache: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.deadline = 0.0
        self.steps = 0
        #: per claim: the evaluation time its selectors have left in this scheduling attempt
        self.clocks = [Clock() for _ in claims]
        self.labels: Mapping[str, str] = {}
        #: counters and shares taken (None: no device of the node has any, no request asks for capacity)
        self.usage: Usage | None = None

    def run(self) -> Found | None:
        for c, claim in enumerate(self.claims):
            self.prepare(c, claim)
        if not self._one(0, 0, 0, 0, False):
            return None
        classes = []
        for c, claim in enumerate(self.claims):
            named = []
            for r in range(len(claim.requests)):
                data = self.requests[(c, r, self.selected.get((c, r), 0))]
                named.append((data.full_name, data.device_class))
            classes.append(named)
        return Found(self.node, self.claims, self.results, classes)

    # -- the search (``allocateOne``) -------------------------------------------------------------------
    def _one(self, c: int, r: int, s: int, d: int, in_subrequest: bool, start: _Location = _FIRST) -> bool:
        """``start``: where the search for the request's next device begins, just past the one it took
        last (``startLocation``): a request's devices are tried as combinations, not permutations, and a
        device that allows multiple allocations is not taken twice for one request."""
        self.steps += 1
        if self.deadline and self.steps % 64 == 1 and time.perf_counter() > self.deadline:
            raise FilterTimeout
        if c >= len(self.claims):
            return True
        if r >= len(self.claims[c].requests):
            try:
                return self._one(c + 1, 0, 0, 0, False)
            except _MaxSizeExceeded:
                return False
        data = self.requests[(c, r, s)]
        if not in_subrequest and data.parent is not None:
            all_exceeded = True
            sub = 0
            while (c, r, sub) in self.requests:
                try:
                    done = self._one(c, r, sub, d, True)
                except _MaxSizeExceeded:
                    sub += 1
                    continue
                all_exceeded = False
                if done:
                    self.selected[(c, r)] = sub
                    return True
                sub += 1
            if all_exceeded:
                raise _MaxSizeExceeded
            return False
        do_all = data.spec.allocation_mode == ALL
        if do_all and not data.all_devices:
            return False
        if d >= data.count:
            return self._one(c, r + 1, 0, 0, False)
        if len(self.results[c]) + data.count - d > MAX_DEVICES_PER_CLAIM:
            raise _MaxSizeExceeded
        if do_all:
            device_id, device, slice_ = data.all_devices[d]
            undo = self._allocate_device(c, data, device_id, device, slice_, must=True)
            if undo is None:
                return False
            return self._continue(undo, c, r, s, d, in_subrequest)
        usage = self.usage if self.usage is not None and self.features.consumable else None
        pools = self.pools
        for p in range(start[0], len(pools)):
            pool = pools[p]
            if pool.invalid:
                continue  # no device of an invalid pool is allocated; ``find`` says so if nothing fits
            slices = pool.slices  # an incomplete pool has none
            for i in range(start[1] if p == start[0] else 0, len(slices)):
                slice_ = slices[i]
                devices = slice_.devices
                for j in range(start[2] if p == start[0] and i == start[1] else 0, len(devices)):
                    device = devices[j]
                    device_id = (pool.driver, pool.name, device.name)
                    if self._unavailable(c, data, device_id):
                        continue
                    if not self._selectable(c, data, device_id, device, slice_, (r, s)):
                        continue
                    if usage is not None and not usage.fits(data, device_id, device, self.claims[c].key):
                        continue
                    undo = self._allocate_device(c, data, device_id, device, slice_, must=False)
                    if undo is not None and self._continue(undo, c, r, s, d, in_subrequest, (p, i, j + 1)):
                        return True
        return False

    def _continue(
        self,
        undo: Callable[[], None],
        c: int,
        r: int,
        s: int,
        d: int,
        in_subrequest: bool,
        start: _Location = _FIRST,
    ) -> bool:
        try:
            done = self._one(c, r, s, d + 1, in_subrequest, start)
        except BaseException:
            undo()
            raise
        if not done:
            undo()
        return done

    def _unavailable(self, c: int, data: Request, device_id: DeviceID) -> bool:
        if data.spec.admin_access:
            return c in self.allocating.get(device_id, ())
        return device_id in self.owner.allocated or bool(self.allocating.get(device_id))

    def _selectable(
        self,
        c: int,
        data: Request,
        device_id: DeviceID,
        device: Device,
        slice_: ResourceSlice,
        at: tuple[int, int],
    ) -> bool:
        if device.binding_conditions and not self.owner.binding_conditions:  # binding conditions off
            return False
        key = (device_id, c, *at)
        found = self.selectable_cache.get(key)
        if found is None:
            found = self._selectors_match(c, data, device_id, device, slice_)
            self.selectable_cache[key] = found
        return found

    def _selectors_match(
        self, c: int, data: Request, device_id: DeviceID, device: Device, slice_: ResourceSlice
    ) -> bool:
        key = (data.device_class.selectors, data.spec.selectors)
        try:
            found = verdict(self.owner.matcher, key, slice_.driver, device, self.clocks[c])
        except SelectorTimeout as e:
            raise timeout_error(e, data.device_class.name, self.claims[c].key, device_id) from None
        if found is True and slice_.per_device_node_selection:
            return device.reachable_from(self.labels, self.node)
        if found is True or found is False:
            return found
        raise selector_error(found, data.device_class.name, self.claims[c].key, device_id)

    def _allocate_device(
        self, c: int, data: Request, device_id: DeviceID, device: Device, slice_: ResourceSlice, must: bool
    ) -> Callable[[], None] | None:
        if self._unavailable(c, data, device_id):
            return None
        usage = self.usage
        counters: Callable[[], None] | None = None
        if device.consumes_counters:
            if usage is None or not self.features.partitionable:
                return None
            if not (usage.multiple(device) and usage.in_use(device_id)):  # a later share takes none
                counters = usage.take_counters(device_id, device)
                if counters is None:
                    return None
        if self.owner.device_taints and device.taints and untolerated(device.taints, data.spec.tolerations):
            if counters is not None:
                counters()
            return None  # a taint not tolerated (``taintPreventsAllocation``), admin access or not
        request = data.parent.name if data.parent is not None else data.spec.name
        subrequest = data.spec.name if data.parent is not None else ""
        constraints = self.constraints[c]
        for i, constraint in enumerate(constraints):
            if not constraint.add(request, subrequest, device, device_id):
                if counters is not None:
                    counters()
                if must:
                    raise AllocationError(
                        f"claim {self.claims[c].key}, request {data.spec.name}: cannot add device "
                        f"{device_id_str(device_id)} because a claim constraint would not be satisfied"
                    )
                for earlier in constraints[:i]:
                    earlier.remove(request, subrequest, device, device_id)
                return None
        share = None
        multiple = usage is not None and usage.multiple(device)
        if multiple:
            assert usage is not None
            share = usage.share(data, device_id, device, self.claims[c].key)
            if share is None:
                for constraint in constraints:
                    constraint.remove(request, subrequest, device, device_id)
                if counters is not None:
                    counters()
                return None
        else:
            self.allocating.setdefault(device_id, set()).add(c)
        self.results[c].append(
            DeviceResult(
                data.full_name,
                device_id,
                bool(data.spec.admin_access),
                slice_,
                None if share is None else share[0],
                None if share is None else share[1],
                device,
            )
        )

        def undo() -> None:
            self.results[c].pop()
            if share is not None:
                share[2]()
            else:
                self.allocating[device_id].discard(c)
            for constraint in reversed(constraints):
                constraint.remove(request, subrequest, device, device_id)
            if counters is not None:
                counters()

        return undo
