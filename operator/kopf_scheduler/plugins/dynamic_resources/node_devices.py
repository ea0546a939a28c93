"""What each node sees of the ResourceSlices, kept across scheduling cycles: the per-node half of the
allocator's work that does not depend on the pod (``GatherPools``, the devices in search order, and what
each set of selectors says of each device), computed once instead of once per pod and node.

- ``refresh(slices)`` takes the slices store's listing, a tuple that stays the same object until a slice
  changes; a new listing rebuilds the index of slices by node (one pass) and forgets the views made from
  slices no longer listed, not the others.
- ``view(node, labels)`` is the node's ``NodeView``: its pools as ``gather_pools`` makes them, their
  devices flattened in the order the search visits them, with their ids and slices (none of invalid
  pools), and whether a pool was invalid. A view is reused while the node sees the very same slice
  objects: stored values are immutable (an update is a new object), so a slice added, updated or
  deleted, or a node whose labels change what a node-selector slice says, gets a new view, and the other
  nodes keep theirs.
- ``NodeView.verdicts``: per selector set (the class's and the request's expressions), what they say of
  each device, filled as the search reaches devices (None: not asked yet). A verdict depends only on the
  device and the expressions, so it holds as long as the view does. Class changes need nothing: a
  changed class has other expressions, hence another key (``NodeDevices.slot`` numbers the keys).
- ``NodeView.outcomes``: what a claim's one request found last on the node (``greedy``), with the
  versions of the node's pools then (``DraManager.pool_versions``): a device of theirs allocated or freed
  since changes a version, and the request is looked at again.
- ``NodeView.special``: a device of the view consumes counters, allows multiple allocations, has a
  capacity request policy, or is selected per device (``perDeviceNodeSelection``): whether it can be
  taken depends on more than being free and selectable, so claims on that node go to the full search.
- A view made with the rest of an incomplete pool (slices other nodes see) is made anew whenever a
  slice changes anywhere; a view depends on whether partitionable devices are on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kopf_scheduler.framework.objects import ResourceSlice
from kopf_scheduler.framework.objects.dra import DeviceToleration
from kopf_scheduler.framework.objects.resource_slices import Device
from kopf_scheduler.plugins.dynamic_resources.cel_env import (
    Clock,
    DeviceMatcher,
    SelectorError,
    SelectorTimeout,
)
from kopf_scheduler.plugins.dynamic_resources.pools import DeviceID, Pool, device_id_str, gather_pools
from kopf_scheduler.plugins.dynamic_resources.prepare import AllocationError
from kopf_scheduler.plugins.dynamic_resources.results import DeviceResult

#: a selector failure: (the failing selector is the request's, not the class's; its index; the error)
Failure = tuple[bool, int, SelectorError]
#: True: selectable; False: not; a ``Failure``; None: not asked yet
Verdict = bool | Failure | None
#: the class's selector expressions, the request's
SelectorKey = tuple[tuple[str | None, ...], tuple[str | None, ...]]
#: selector sets remembered per view, past which they are forgotten (all of them, then refilled)
MAX_SELECTOR_SETS = 32
#: selector sets given a slot, past which the slots start anew (new numbers: old verdicts are not reused)
MAX_SLOTS = 4096


@dataclass(frozen=True, slots=True, eq=False)
class Outcome:
    """What one request (a claim's only one) found on a node: the devices it picked, as positions in the
    view and as results for the request so named; None when there were too few. It holds while the
    versions of the node's pools are ``state`` (``DraManager.pool_versions``)."""

    state: object
    count: int
    positions: list[int] | None
    request: str
    picks: tuple[DeviceResult, ...] | None
    #: the request's tolerations: a device's taints are judged by them (``taints``)
    tolerations: tuple[DeviceToleration, ...] = ()


@dataclass(slots=True, eq=False)
class NodeView:
    #: the slices the node sees, in listing order: what the view was made from
    slices: tuple[ResourceSlice, ...]
    pools: list[Pool]
    #: every device of the pools, in search order (pool, slice, device), with its id and slice
    ids: list[DeviceID] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    device_slices: list[ResourceSlice] = field(default_factory=list)
    #: where the devices of invalid pools would start: ``len(ids)``, as they are left out
    invalid_at: int = 0
    #: the first invalid pool the node sees, and why ("" when none is): when nothing can be allocated on
    #: the node, it fails with ``invalid resource pools were encountered``
    invalid: str = ""
    #: every device is in a slice that names the node (an allocation's node selector is the node's name)
    named: bool = True
    #: (driver, pool) of each pool
    pool_keys: tuple[tuple[str, str], ...] = ()
    #: per selector set's slot (``NodeDevices.slot``), per device: its verdict
    verdicts: dict[int, list[Verdict]] = field(default_factory=dict)
    #: per slot: what one request found last (``greedy``)
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    #: a device whose allocation ``greedy`` cannot judge (counters, shares, capacity policies, per-device
    #: node selection): the full search decides
    special: bool = False
    #: made with slices the node does not see (the rest of an incomplete pool): made anew on any change
    volatile: bool = False
    partitionable: bool = True

    def verdicts_for(self, slot: int) -> list[Verdict]:
        found = self.verdicts.get(slot)
        if found is None:
            if len(self.verdicts) >= MAX_SELECTOR_SETS:
                self.verdicts.clear()
            found = self.verdicts[slot] = [None] * len(self.ids)
        return found

    def remember(self, slot: int, outcome: Outcome) -> None:
        if slot not in self.outcomes and len(self.outcomes) >= MAX_SELECTOR_SETS:
            self.outcomes.clear()
        self.outcomes[slot] = outcome


def verdict(
    matcher: DeviceMatcher, key: SelectorKey, driver: str, device: Device, clock: Clock | None = None
) -> bool | Failure:
    """Whether the device is selectable for the class's and the request's selectors (``isSelectable``):
    the selectors in order, the first false or failing one decides (a device with binding conditions
    while they are off is left out before, by the caller). Raises ``SelectorTimeout`` when the claim's
    ``clock`` runs out: not a verdict to keep."""
    for of_request, selectors in ((False, key[0]), (True, key[1])):
        for i, expression in enumerate(selectors):
            assert expression is not None  # refused when the claim was prepared
            try:
                if not matcher.matches(expression, driver, device, clock):
                    return False
            except SelectorError as e:
                return of_request, i, e
            except SelectorTimeout as e:
                e.of_request, e.index = of_request, i
                raise
    return True


def _owner(of_request: bool, class_name: str, claim_key: str) -> str:
    return f"claim {claim_key}" if of_request else f"class {class_name}"


def enhance_runtime_error(detail: str) -> str:
    """Upstream's ``EnhanceRuntimeError`` (dynamic-resource-allocation's ``cel/errors.go`` at v0.37.2): a
    runtime error whose text contains ``no such key:`` gets a hint; any other is unchanged."""
    if "no such key:" not in detail:
        return detail
    return (
        f"{detail}. consider using CEL optional chaining (.? followed by orValue()) or guarding the check "
        "with has() for optional fields"
    )


def selector_error(failure: Failure, class_name: str, claim_key: str, device_id: DeviceID) -> AllocationError:
    """Upstream's text for a selector that failed (``selectorsMatch`` in the structured allocator at
    v0.37.2): a compile error names the selector, a runtime error also the device, with the hint for a
    missing key."""
    of_request, i, e = failure
    owner = _owner(of_request, class_name, claim_key)
    if e.compile_error:
        return AllocationError(f"{owner}: selector #{i}: CEL compile error: {e.detail}")
    return AllocationError(
        f"{owner}: selector #{i} on device {device_id_str(device_id)}: CEL runtime error: "
        f"{enhance_runtime_error(e.detail)}"
    )


def timeout_error(
    e: SelectorTimeout, class_name: str, claim_key: str, device_id: DeviceID
) -> AllocationError:
    """The text for a claim whose selectors ran out of time, shaped as upstream's runtime errors are
    (cel-go says ``operation interrupted`` when an evaluation's context is done)."""
    return AllocationError(
        f"{_owner(e.of_request, class_name, claim_key)}: selector #{e.index} on device "
        f"{device_id_str(device_id)}: CEL runtime error: operation interrupted: the selectors of claim "
        f"{claim_key} took more than {e.seconds * 1000:g}ms to evaluate in this scheduling attempt"
    )


def make_view(
    slices: tuple[ResourceSlice, ...],
    labels: Mapping[str, str],
    node_name: str,
    partitionable: bool = True,
    all_slices: Sequence[ResourceSlice] | None = None,
) -> NodeView:
    """``all_slices``: every slice listed (where the rest of an incomplete pool is looked for;
    ``slices`` when not given)."""
    looked_up: list[bool] = []
    view = NodeView(slices, gather_pools(slices, labels, node_name, partitionable, all_slices, looked_up))
    view.volatile = bool(looked_up)
    view.partitionable = partitionable
    view.pool_keys = tuple((pool.driver, pool.name) for pool in view.pools)
    for pool in view.pools:
        if pool.invalid:  # skipped: no device of an invalid pool is allocated (``allocateOne``)
            view.invalid = view.invalid or f"pool {pool.name} is invalid: {pool.invalid}"
            continue
        for slice_ in pool.slices:
            view.named = view.named and bool(slice_.node_name)
            view.special = view.special or slice_.per_device_node_selection
            for device in slice_.devices:
                view.ids.append((pool.driver, pool.name, device.name))
                view.devices.append(device)
                view.device_slices.append(slice_)
                view.special = view.special or _special(device)
    view.invalid_at = len(view.ids)
    return view


def _special(device: Device) -> bool:
    return bool(device.consumes_counters or device.allow_multiple_allocations or device.policies)


class NodeDevices:
    """The views of every node, for one scheduler (kept by its ``DraManager``)."""

    def __init__(self) -> None:
        self._listed: Sequence[ResourceSlice] | None = None
        #: per node name: the positions in the listing and the slices that name it
        self._by_node: dict[str, tuple[tuple[int, ...], tuple[ResourceSlice, ...]]] = {}
        #: slices for several nodes (``allNodes``, ``nodeSelector``), with their positions
        self._shared: list[tuple[int, ResourceSlice]] = []
        self._views: dict[str, NodeView] = {}
        self._slots: dict[SelectorKey, int] = {}
        self._next_slot = 0

    def slot(self, key: SelectorKey) -> int:
        """The number the views keep this selector set's verdicts under."""
        found = self._slots.get(key)
        if found is None:
            if len(self._slots) >= MAX_SLOTS:
                self._slots.clear()
            found = self._slots[key] = self._next_slot
            self._next_slot += 1
        return found

    def refresh(self, slices: Sequence[ResourceSlice]) -> None:
        if slices is self._listed:
            return
        by_node: dict[str, list[tuple[int, ResourceSlice]]] = {}
        shared = []
        for index, slice_ in enumerate(slices):
            if slice_.node_name:
                by_node.setdefault(slice_.node_name, []).append((index, slice_))
            else:
                shared.append((index, slice_))
        self._listed = slices
        self._by_node = {
            name: (tuple(i for i, _ in found), tuple(s for _, s in found)) for name, found in by_node.items()
        }
        self._shared = shared
        # a view made from a slice that is gone is made anew when asked for: forget it now, with the views
        # of no slices (nodes that are gone keep no memory); a view holds its slices, so their ids are theirs
        listed = {id(slice_) for slice_ in slices}
        self._views = {
            name: view
            for name, view in self._views.items()
            if view.slices and not view.volatile and all(id(slice_) in listed for slice_ in view.slices)
        }

    def view(self, node_name: str, labels: Mapping[str, str], partitionable: bool = True) -> NodeView:
        own = self._by_node.get(node_name)
        if not self._shared:
            seen = own[1] if own is not None else ()
        else:
            reachable = [(i, s) for i, s in self._shared if s.reachable_from(labels, node_name)]
            if own is not None:
                reachable += zip(*own, strict=True)
                reachable.sort(key=lambda item: item[0])
            seen = tuple(s for _, s in reachable)
        found = self._views.get(node_name)
        # slices compare by identity
        if found is None or found.slices != seen or found.partitionable != partitionable:
            listed = self._listed if self._listed is not None else ()
            found = self._views[node_name] = make_view(seen, labels, node_name, partitionable, listed)
        return found
