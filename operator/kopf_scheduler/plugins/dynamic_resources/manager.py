"""What DynamicResources knows of claims beyond the store (upstream's ``DefaultDRAManager`` with its
claim assume cache and ``inFlightAllocations``), shared by every profile of one scheduler, as
upstream's is: two pods of two profiles must never be given one device either.

- In-flight allocations: from Reserve until PreBind wrote it (or Unreserve dropped it), a claim's
  allocation lives here only. Its devices count as allocated for every other pod, and another pod that
  needs the claim allocated waits (``is in the process of being allocated``).
- Assumed claims: the claim as PreBind's write returned it, shown instead of the store's until the store
  has a newer version (the watch caught up) or it is restored.
- ``allocated_devices``: the devices of every allocation in the cluster (claims as shown, plus in-flight
  ones), without admin-access results; memoised on the store's generation and this manager's version.

A manager is kept per ``ClusterListers`` (one per scheduler) in a weak map, so a scheduler that goes
away takes its manager with it.
"""

from __future__ import annotations

import builtins
import weakref
from typing import Any

from kopf_scheduler.framework.objects import RESOURCE_CLAIMS, ClusterListers, ResourceClaim
from kopf_scheduler.plugins.dynamic_resources.cel_env import DeviceMatcher
from kopf_scheduler.plugins.dynamic_resources.pools import DeviceID

_MANAGERS: weakref.WeakKeyDictionary[Any, DraManager] = weakref.WeakKeyDictionary()


def manager_for(objects: ClusterListers) -> DraManager:
    found = _MANAGERS.get(objects)
    if found is None:
        found = _MANAGERS[objects] = DraManager(objects)
    return found


def _version(claim: ResourceClaim) -> int:
    text = claim.resource_version
    return int(text) if text.isdigit() else 0


class DraManager:
    def __init__(self, objects: ClusterListers) -> None:
        self._claims = objects.of(RESOURCE_CLAIMS)
        self._assumed: dict[tuple[str, str], ResourceClaim] = {}
        self._in_flight: dict[str, ResourceClaim] = {}
        self.version = 0
        self._allocated: tuple[tuple[int, int], frozenset[DeviceID]] | None = None
        #: selector results per device, shared by the profiles' allocators
        self.matcher = DeviceMatcher()

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
            return api
        return assumed

    def assume(self, claim: ResourceClaim) -> None:
        """The claim as an API write returned it (upstream's ``AssumeClaimAfterAPICall``); an older
        version than shown, or an unknown claim, is ignored."""
        current = self.get(claim.namespace, claim.name)
        if current is None or _version(claim) < _version(current):
            return
        self._assumed[(claim.namespace, claim.name)] = claim
        self.version += 1

    def restore(self, namespace: str, name: str) -> None:
        if self._assumed.pop((namespace, name), None) is not None:
            self.version += 1

    # -- in-flight allocations ---------------------------------------------------------------------------
    def has_pending_allocation(self, uid: str) -> bool:
        return uid in self._in_flight

    def signal_pending_allocation(self, uid: str, claim: ResourceClaim) -> None:
        self._in_flight[uid] = claim
        self.version += 1

    def remove_pending_allocation(self, uid: str) -> bool:
        if self._in_flight.pop(uid, None) is None:
            return False
        self.version += 1
        return True

    def in_flight(self) -> builtins.list[ResourceClaim]:
        return list(self._in_flight.values())

    def allocated_devices(self) -> frozenset[DeviceID]:
        stamp = (self._claims.generation, self.version)
        if self._allocated is not None and self._allocated[0] == stamp:
            return self._allocated[1]
        devices = {
            (d.driver, d.pool, d.device)
            for claim in [*self.list(), *self._in_flight.values()]
            for d in claim.allocated
            if not d.admin_access
        }
        stamp = (self._claims.generation, self.version)  # listing may have dropped outdated assumptions
        self._allocated = (stamp, frozenset(devices))
        return self._allocated[1]
