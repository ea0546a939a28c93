"""The allocator's short way for the claims pods have most often: no constraints, and every request
``exactly`` some count of devices (``ExactCount``) without admin access. For those the depth-first search
(``allocator._Search``) picks, request after request, the first devices in search order that are free
(not allocated, not picked already in this search) and selectable, and it goes back on a pick only when
a later request finds too few; ``greedy`` makes those same picks by scanning the node's devices
(``NodeView``) once per request, with the verdicts the view remembers.

- Same picks, same errors: each request scans from the first device, and on past each device it takes,
  as the search's loop does, so it visits the devices the search visits, in its order (none of an
  invalid pool): a failing selector fails the request that reaches that device (while it is free), with
  the search's text.
- Not for what being free and selectable does not settle: a node with devices that consume counters,
  allow multiple allocations, have capacity policies or name their nodes (``NodeView.special``), and
  requests for capacity (``Plan.capacity``) go to the full search.
- When a request finds too few devices, backtracking cannot help if every request has the same class
  and selectors (``Plan.final``): they all choose among the same devices, and there are too few. Else
  the caller runs the full search, which retraces these steps first and then goes back.
- What preparing the claims checks (classes, counts, selectors, constraints) does not depend on the node
  without ``All`` requests, so the plan is made once per pod; its error is the one every node gets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field

from kopf_scheduler.framework.objects import DeviceClass, ResourceClaim, ResourceSlice
from kopf_scheduler.framework.objects.device_taints import untolerated
from kopf_scheduler.framework.objects.dra import ALL, EXACT_COUNT, DeviceRequest
from kopf_scheduler.framework.objects.resource_slices import Device
from kopf_scheduler.plugins.dynamic_resources.cel_env import Clock, DeviceMatcher, SelectorTimeout
from kopf_scheduler.plugins.dynamic_resources.node_devices import (
    Failure,
    NodeView,
    Outcome,
    SelectorKey,
    selector_error,
    timeout_error,
    verdict,
)
from kopf_scheduler.plugins.dynamic_resources.pools import DeviceID
from kopf_scheduler.plugins.dynamic_resources.prepare import (
    AllocationError,
    FilterTimeout,
    Preparation,
    Request,
)
from kopf_scheduler.plugins.dynamic_resources.results import DeviceResult


@dataclass(slots=True, eq=False)
class Plan:
    claims: tuple[ResourceClaim, ...]
    #: what preparing the claims raised: every node's answer
    error: AllocationError | None = None
    #: per request of every claim, in search order: (claim index, request, its selectors and their slot in
    #: ``NodeView.verdicts``); None: the claims need the full search
    levels: list[tuple[int, Request, SelectorKey, int]] | None = None
    #: every level has the same class and selectors: when the scan finds too few, so would the search
    final: bool = False
    #: one claim with one request: that level, for ``one_request``
    single: tuple[int, Request, SelectorKey, int] | None = None
    #: per claim, per request: its name and class (for ``allocation_result``)
    classes: list[list[tuple[str, DeviceClass]]] = field(default_factory=list)
    #: per claim: the evaluation time its selectors have left in this scheduling attempt
    clocks: list[Clock] = field(default_factory=list)
    #: a request asks for capacity (consumable capacity: the full search decides)
    capacity: bool = False
    #: DRADeviceTaints: a device with a taint the request does not tolerate is not taken
    taints: bool = True
    #: device binding conditions are on: a device with binding conditions may be taken
    binding_conditions: bool = False

    def __post_init__(self) -> None:
        self.clocks = [Clock() for _ in self.claims]


class _Prepared(Preparation):
    """Preparation without pools: valid only for claims without ``All`` requests."""

    def _selectable(self, *args: object) -> bool:  # type: ignore[override]
        raise AssertionError("no All requests here")


def _asks_for_all(request: DeviceRequest) -> bool:
    exactly = request.exactly
    return (exactly is not None and exactly.allocation_mode == ALL) or any(
        sub.allocation_mode == ALL for sub in request.first_available
    )


def _asks_for_capacity(request: DeviceRequest) -> bool:
    exactly = request.exactly
    return (exactly is not None and exactly.has_capacity) or any(
        s.has_capacity for s in request.first_available
    )


def _simple(request: DeviceRequest) -> bool:
    exactly = request.exactly
    return (
        not request.first_available
        and exactly is not None
        and exactly.allocation_mode == EXACT_COUNT
        and not exactly.admin_access
        and not exactly.has_capacity
    )


def make_plan(
    classes: Callable[[str], DeviceClass | None],
    claims: Sequence[ResourceClaim],
    slot: Callable[[SelectorKey], int],
) -> Plan:
    """``slot``: the number ``NodeView.verdicts`` keeps a selector set's verdicts under."""
    plan = Plan(tuple(claims))
    plan.capacity = any(_asks_for_capacity(request) for claim in claims for request in claim.requests)
    if any(_asks_for_all(request) for claim in claims for request in claim.requests):
        return plan  # prepared per node by the full search: which devices ``All`` means is the node's
    prepared = _Prepared(classes, [], claims)
    try:
        for c, claim in enumerate(claims):
            prepared.prepare(c, claim)
    except AllocationError as e:
        plan.error = e
        return plan
    if any(claim.constraints or not all(map(_simple, claim.requests)) for claim in claims):
        return plan
    plan.levels = []
    for c, claim in enumerate(claims):
        named = []
        for r in range(len(claim.requests)):
            data = prepared.requests[(c, r, 0)]
            key = (data.device_class.selectors, data.spec.selectors)
            plan.levels.append((c, data, key, slot(key)))
            named.append((data.full_name, data.device_class))
        plan.classes.append(named)
    plan.final = len({key for _, _, key, _ in plan.levels}) <= 1
    if len(claims) == 1 and len(plan.levels) == 1:
        plan.single = plan.levels[0]
    return plan


def greedy(
    plan: Plan,
    view: NodeView,
    allocated: Container[DeviceID],
    matcher: DeviceMatcher,
    timeout: float,
) -> list[Sequence[DeviceResult]] | None:
    """Per claim, the devices picked; None when a request finds too few. Raises ``AllocationError`` and
    ``FilterTimeout`` (``timeout`` in seconds, 0: none; checked before each request but the first, as
    the search checks its clock every few steps)."""
    assert plan.levels is not None
    results: list[list[DeviceResult]] = []
    for _ in plan.claims:
        results.append([])
    taken: set[DeviceID] = set()
    ids, slices = view.ids, view.device_slices
    deadline = time.perf_counter() + timeout if timeout > 0 and len(plan.levels) > 1 else 0.0
    first = True
    for c, data, key, slot in plan.levels:
        if not data.count:
            continue
        if deadline and not first and time.perf_counter() > deadline:
            raise FilterTimeout
        first = False
        positions = _scan(plan, c, data, key, slot, view, allocated, taken, matcher)
        if positions is None:
            return None
        name = data.full_name
        results[c] += [DeviceResult(name, ids[i], False, slices[i]) for i in positions]
    return list(results)


def one_request(
    plan: Plan,
    view: NodeView,
    allocated: Container[DeviceID],
    matcher: DeviceMatcher,
    versions: Mapping[tuple[str, str], int],
) -> tuple[DeviceResult, ...] | None:
    """``greedy`` for a plan of one claim with one request (``Plan.single``), the devices it picks; what it
    found on the node is kept in the view, and is the answer while the versions of the node's pools
    (``versions``: ``DraManager.pool_versions``, taken with ``allocated``) stay the same."""
    assert plan.single is not None
    c, data, key, slot = plan.single
    pools = view.pool_keys
    state: object = versions.get(pools[0]) if len(pools) == 1 else tuple(map(versions.get, pools))
    name = data.full_name
    kept = view.outcomes.get(slot)
    tolerations = data.spec.tolerations
    if (
        kept is not None
        and kept.state == state
        and kept.count == data.count
        and kept.tolerations == tolerations
    ):
        if kept.picks is None or kept.request == name:
            return kept.picks
        positions: list[int] | None = kept.positions
    else:
        positions = _scan(plan, c, data, key, slot, view, allocated, set(), matcher)
    ids, slices = view.ids, view.device_slices
    picks = (
        None if positions is None else tuple(DeviceResult(name, ids[i], False, slices[i]) for i in positions)
    )
    view.remember(slot, Outcome(state, data.count, positions, name, picks, tolerations))
    return picks


def _scan(
    plan: Plan,
    c: int,
    data: Request,
    key: SelectorKey,
    slot: int,
    view: NodeView,
    allocated: Container[DeviceID],
    taken: set[DeviceID],
    matcher: DeviceMatcher,
) -> list[int] | None:
    """The positions of the devices one request picks (added to ``taken``), or None when too few."""
    need = data.count
    picked: list[int] = []
    if not need:
        return picked
    ids = view.ids
    end = len(ids)
    verdicts = view.verdicts.get(slot) or view.verdicts_for(slot)
    devices, tolerations = view.devices, data.spec.tolerations if plan.taints else None
    i = 0
    while True:
        if i == end:  # devices of invalid pools are not in the view
            return None
        device_id = ids[i]
        if device_id in allocated or (taken and device_id in taken):
            i += 1
            continue
        if not plan.binding_conditions and devices[i].binding_conditions:
            i += 1  # not selectable while binding conditions are off (``isSelectable``)
            continue
        found = verdicts[i]
        if found is None:
            try:
                found = _selectable(matcher, key, view.device_slices[i], view.devices[i], plan.clocks[c])
            except SelectorTimeout as e:
                raise timeout_error(e, data.device_class.name, plan.claims[c].key, device_id) from None
            verdicts[i] = found
        if found is True:
            if tolerations is not None and devices[i].taints and untolerated(devices[i].taints, tolerations):
                i += 1  # tainted: judged after the selectors, as the search's ``allocateDevice`` does
                continue
            taken.add(device_id)
            picked.append(i)
            need -= 1
            if not need:
                return picked
        elif found is not False:
            raise selector_error(found, data.device_class.name, plan.claims[c].key, device_id)
        i += 1


def _selectable(
    matcher: DeviceMatcher, key: SelectorKey, slice_: ResourceSlice, device: Device, clock: Clock
) -> bool | Failure:
    """The selectors' verdict. A node with a device that consumes counters goes to the full search
    (``NodeView.special``); should one come here, it is not taken, its selectors run first as the
    search runs them before it looks at counters."""
    found = verdict(matcher, key, slice_.driver, device, clock)
    return False if found is True and device.consumes_counters else found
