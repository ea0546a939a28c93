"""What DynamicResources knows of claims beyond the store (upstream's ``DefaultDRAManager`` with its
claim assume cache and ``inFlightAllocations``), shared by every profile of one scheduler, as
upstream's is: two pods of two profiles must never be given one device either.

- In-flight allocations: from Reserve until PreBind wrote it (or Unreserve dropped it), a claim's
  allocation lives here only. Its devices count as allocated for every other pod, and another pod that
  needs the claim allocated waits (``is in the process of being allocated``).
- Assumed claims: the claim as PreBind's write returned it, shown instead of the store's until the store
  has a newer version (the watch caught up) or it is restored.
- ``allocated_devices``: the devices of every allocation in the cluster (claims as shown, plus in-flight
  ones), without admin-access results. Kept as a count per device, updated incrementally as upstream's
  ``allocatedDevices`` is from claim events: when the claims store's generation moved, its listing is
  compared with the one seen last (stored values are immutable: a changed claim is a new object), so
  additions, updates, deletions and a resync's drops alike reach the index; assuming, restoring and
  in-flight allocations update it directly. The comparison runs in C: equal runs of the two listings are
  skipped by tuple equality, halving down to the differing places (the store keeps its order, so an
  update differs in one place and an addition only at the end); many differences (a deletion shifts the
  rest) fall back to comparing the claims by identity. What is handed out is a snapshot (a copy of the
  index's keys), taken again only when a device came or went.
- ``shares``: the shares of devices that allow multiple allocations (results with a ``shareID``,
  consumable capacity), with what they consume, kept apart from the devices allocated whole.
- ``pool_versions``: per pool (driver, pool name), a number that grows whenever one of its devices is
  allocated or freed, snapshotted with ``allocated_devices``: what the allocator found on a node holds
  while the versions of the node's pools stay the same.
- ``matcher`` and ``devices``: selector results per device and what each node sees of the slices
  (``node_devices``), kept for every cycle of every profile.
- ``binding_wait_hooks`` and ``binding_allocation_hooks``: who hears how PreBind's waits for device binding
  conditions ended (the metrics ``scheduler_dra_bindingconditions_*``), for every profile.
- ``claim_create_hooks``: who hears of each claim PreBind created for a pod's extended resources, with
  ``success`` or ``failure`` (``dynamic_resource_allocation_resourceclaim_creates_total``).
- ``resource_slices``: the slices with the DeviceTaintRules' taints on their devices (``taints``).

A manager is kept per ``ClusterListers`` (one per scheduler) in a weak map, so a scheduler that goes
away takes its manager with it.
"""

from __future__ import annotations

import builtins
import weakref
from collections.abc import Callable, Mapping, Sequence, Set
from fractions import Fraction
from typing import Any

from kopf_scheduler.framework.objects import (
    DEVICE_TAINT_RULES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    ClusterListers,
    ResourceClaim,
    ResourceSlice,
)
from kopf_scheduler.plugins.dynamic_resources.binding_conditions import AllocationHook, WaitHook
from kopf_scheduler.plugins.dynamic_resources.cel_env import DeviceMatcher
from kopf_scheduler.plugins.dynamic_resources.node_devices import NodeDevices
from kopf_scheduler.plugins.dynamic_resources.pools import DeviceID
from kopf_scheduler.plugins.dynamic_resources.sharing import NO_SHARES, Shares
from kopf_scheduler.plugins.dynamic_resources.taints import PatchedSlices

_MANAGERS: weakref.WeakKeyDictionary[Any, DraManager] = weakref.WeakKeyDictionary()
#: differing places past which two listings are compared by identity instead
_MAX_PLACES = 64
#: runs this short are compared element by element
_RUN = 16


def manager_for(objects: ClusterListers) -> DraManager:
    found = _MANAGERS.get(objects)
    if found is None:
        found = _MANAGERS[objects] = DraManager(objects)
    return found


def _version(claim: ResourceClaim) -> int:
    text = claim.resource_version
    return int(text) if text.isdigit() else 0


def _devices(claim: ResourceClaim | None) -> tuple[DeviceID, ...]:
    """The devices an allocation takes whole (``foreachAllocatedDevice``: admin access takes none, a
    share of a device is not the device)."""
    if claim is None or not claim.allocated:
        return ()
    return tuple(
        (d.driver, d.pool, d.device) for d in claim.allocated if not d.admin_access and d.share_id is None
    )


#: one share of a device: the device, what it consumes
_Share = tuple[DeviceID, tuple[tuple[str, Fraction], ...] | None]


def _shares(claim: ResourceClaim | None) -> tuple[_Share, ...]:
    """The shares of devices an allocation takes (results with a ``shareID``; consumable capacity)."""
    if claim is None or not claim.allocated:
        return ()
    return tuple(
        ((d.driver, d.pool, d.device), d.consumed)
        for d in claim.allocated
        if not d.admin_access and d.share_id is not None
    )


class DraManager:
    def __init__(self, objects: ClusterListers) -> None:
        self._claims = objects.of(RESOURCE_CLAIMS)
        self._assumed: dict[tuple[str, str], ResourceClaim] = {}
        self._in_flight: dict[str, ResourceClaim] = {}
        self.version = 0
        # -- the allocated-device index
        #: the store's listing as last compared
        self._seen: Sequence[ResourceClaim] = ()
        #: the store generation ``_seen`` reflects
        self._synced = -1
        #: devices counted per claim key (the claim as shown) and per in-flight claim uid
        self._shown_devices: dict[tuple[str, str], tuple[DeviceID, ...]] = {}
        self._flight_devices: dict[str, tuple[DeviceID, ...]] = {}
        #: how many of the above take each device (one, unless the cluster double-books)
        self._counts: dict[DeviceID, int] = {}
        #: grows whenever a device enters or leaves ``_counts``
        self._revision = 0
        #: per (driver, pool): grows whenever one of its devices enters or leaves ``_counts``
        self._pool_versions: dict[tuple[str, str], int] = {}
        self._allocated: tuple[int, Set[DeviceID], Mapping[tuple[str, str], int]] | None = None
        #: the shares of devices per claim as shown and per in-flight claim (consumable capacity)
        self._share_owners: dict[Any, tuple[_Share, ...]] = {}
        self._shares: Shares | None = NO_SHARES
        #: selector results per device, shared by the profiles' allocators
        self.matcher = DeviceMatcher()
        #: what each node sees of the slices, likewise
        self.devices = NodeDevices()
        self.binding_wait_hooks: builtins.list[WaitHook] = []
        self.binding_allocation_hooks: builtins.list[AllocationHook] = []
        self.claim_create_hooks: builtins.list[Callable[[str], None]] = []
        self._slices = objects.of(RESOURCE_SLICES)
        self._taint_rules = objects.of(DEVICE_TAINT_RULES)
        self._patched = PatchedSlices()

    # -- slices ------------------------------------------------------------------------------------------
    def resource_slices(self, with_rules: bool) -> Sequence[ResourceSlice]:
        """The slices the allocator sees (upstream's ``ListWithDeviceTaintRules``); with ``with_rules``
        (DRADeviceTaintRules) each DeviceTaintRule's taint is on the devices it selects."""
        slices = self._slices.list()
        return self._patched.of(slices, self._taint_rules.list()) if with_rules else slices

    # -- claims as the scheduler sees them ---------------------------------------------------------------
    def get(self, namespace: str, name: str) -> ResourceClaim | None:
        return self._resolve((namespace, name), self._claims.get(namespace, name))

    def get_api(self, namespace: str, name: str) -> ResourceClaim | None:
        return self._claims.get(namespace, name)

    def list(self) -> list[ResourceClaim]:
        out = []
        for claim in self._claims.list():
            shown = self._resolve((claim.namespace, claim.name), claim)
            if shown is not None:
                out.append(shown)
        return out

    def _resolve(self, key: tuple[str, str], api: ResourceClaim | None) -> ResourceClaim | None:
        assumed = self._assumed.get(key)
        if assumed is None:
            return api
        if api is None or _version(api) > _version(assumed):
            del self._assumed[key]
            self.version += 1
            self._show(key, api)
            return api
        return assumed

    def assume(self, claim: ResourceClaim) -> None:
        """The claim as an API write returned it (upstream's ``AssumeClaimAfterAPICall``); an older
        version than shown, or an unknown claim, is ignored."""
        # the index first takes in the store as it is: a claim created since the last sync (the claim of
        # a pod's extended resources, made in PreBind) is then in the listing it compares with, so that
        # its deletion is seen even when no cycle ran in between
        self._sync()
        current = self.get(claim.namespace, claim.name)
        if current is None or _version(claim) < _version(current):
            return
        key = (claim.namespace, claim.name)
        self._assumed[key] = claim
        self.version += 1
        self._refresh(key)

    def restore(self, namespace: str, name: str) -> None:
        if self._assumed.pop((namespace, name), None) is not None:
            self.version += 1
            self._refresh((namespace, name))

    # -- in-flight allocations ---------------------------------------------------------------------------
    def has_pending_allocation(self, uid: str) -> bool:
        return uid in self._in_flight

    def signal_pending_allocation(self, uid: str, claim: ResourceClaim) -> None:
        self._in_flight[uid] = claim
        self.version += 1
        self._fly(uid, claim)

    def remove_pending_allocation(self, uid: str) -> bool:
        if self._in_flight.pop(uid, None) is None:
            return False
        self.version += 1
        self._fly(uid, None)
        return True

    def in_flight(self) -> builtins.list[ResourceClaim]:
        return list(self._in_flight.values())

    # -- allocated devices -------------------------------------------------------------------------------
    def allocated_devices(self) -> Set[DeviceID]:
        """Every allocated device (claims as shown, in-flight allocations); a snapshot, never changed."""
        return self._snapshot()[1]

    def pool_versions(self) -> Mapping[tuple[str, str], int]:
        """Per pool with devices allocated now or before, its version; a snapshot taken with
        ``allocated_devices``'s."""
        return self._snapshot()[2]

    def _snapshot(self) -> tuple[int, Set[DeviceID], Mapping[tuple[str, str], int]]:
        self._sync()
        if self._allocated is None or self._allocated[0] != self._revision:
            self._allocated = (self._revision, self._counts.copy().keys(), self._pool_versions.copy())
        return self._allocated

    def _sync(self) -> None:
        """Brings the index up to the claims store: every claim added, replaced or dropped since the
        last call is shown again."""
        generation = self._claims.generation
        if generation == self._synced:
            return
        listed = self._claims.list()
        seen = self._seen
        common = min(len(seen), len(listed))
        places: list[int] = []
        if not _differences(seen, listed, 0, common, places):
            moved = [seen[i] for i in places] + [listed[i] for i in places]
            moved += seen[common:]
            moved += listed[common:]
        else:  # too many places differ: compare the claims by identity
            now = {id(c): c for c in listed}
            before = {id(c): c for c in seen}
            moved = [before[i] for i in before.keys() - now.keys()] + [
                now[i] for i in now.keys() - before.keys()
            ]
        self._seen = listed
        self._synced = generation
        for key in {(c.namespace, c.name) for c in moved}:
            self._refresh(key)

    def _refresh(self, key: tuple[str, str]) -> None:
        """Counts the devices of the claim ``key`` as shown now (none when it is gone)."""
        shown = self._resolve(key, self._claims.get(*key))
        self._show(key, shown)

    def _show(self, key: tuple[str, str], claim: ResourceClaim | None) -> None:
        self._set(self._shown_devices, key, _devices(claim))
        self._set_shares(("shown", key), _shares(claim))

    def _fly(self, uid: str, claim: ResourceClaim | None) -> None:
        self._set(self._flight_devices, uid, _devices(claim))
        self._set_shares(("flight", uid), _shares(claim))

    def _set_shares(self, owner: Any, shares: tuple[_Share, ...]) -> None:
        if self._share_owners.get(owner, ()) == shares:
            return
        if shares:
            self._share_owners[owner] = shares
        else:
            del self._share_owners[owner]
        self._shares = None

    def shares(self) -> Shares:
        """The shares of devices in the cluster and in flight (consumable capacity): which devices have
        one, and what they consume per device; a snapshot, never changed."""
        self._sync()
        if self._shares is None:
            devices: set[DeviceID] = set()
            capacity: dict[DeviceID, dict[str, Fraction]] = {}
            for shares in self._share_owners.values():
                for device, consumed in shares:
                    devices.add(device)
                    if consumed is not None:
                        sums = capacity.setdefault(device, {})
                        for name, value in consumed:
                            sums[name] = sums.get(name, 0) + value
            self._shares = Shares(frozenset(devices), capacity) if devices else NO_SHARES
        return self._shares

    def _set(
        self, owners: dict[Any, tuple[DeviceID, ...]], owner: Any, devices: tuple[DeviceID, ...]
    ) -> None:
        old = owners.get(owner, ())
        if old == devices:
            return
        counts, versions = self._counts, self._pool_versions
        for device in old:
            left = counts[device] - 1
            if left:
                counts[device] = left
            else:
                del counts[device]
                self._revision += 1
                versions[device[:2]] = versions.get(device[:2], 0) + 1
        for device in devices:
            had = counts.get(device, 0)
            counts[device] = had + 1
            if not had:
                self._revision += 1
                versions[device[:2]] = versions.get(device[:2], 0) + 1
        if devices:
            owners[owner] = devices
        else:
            del owners[owner]


def _differences(a: Sequence[Any], b: Sequence[Any], lo: int, hi: int, out: builtins.list[int]) -> bool:
    """Adds to ``out`` the places in ``lo:hi`` where ``a`` and ``b`` hold different objects (a superset:
    places whose objects are equal but not the same may be included); True once there are too many."""
    if a[lo:hi] == b[lo:hi]:  # in C; identical objects compare equal without calling __eq__
        return False
    if hi - lo <= _RUN:
        out.extend(i for i in range(lo, hi) if a[i] is not b[i])
        return len(out) > _MAX_PLACES
    mid = (lo + hi) // 2
    return _differences(a, b, lo, mid, out) or _differences(a, b, mid, hi, out)
