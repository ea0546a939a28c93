"""DynamicResources' Score (``computeScore`` in v1.37.2's ``dynamicresources.go``, with
``DRAPrioritizedList``): a node scores higher the earlier the ``firstAvailable`` subrequests that its
allocation picks come in their requests' lists. Each subrequest picked at index ``i`` adds
``8 - i`` (``FirstAvailableDeviceRequestMaxSize`` less its index); requests ``exactly`` add nothing.
NormalizeScore scales the scores to [0, 100] against the highest (``helper.DefaultNormalizeScore``).

An allocated claim counts with its allocation; the others with what Filter found for them on the node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kopf_scheduler.framework.objects import ResourceClaim

#: ``resourceapi.FirstAvailableDeviceRequestMaxSize``
FIRST_AVAILABLE_MAX = 8


def _allocated_requests(claim: ResourceClaim) -> Iterable[str]:
    allocation = claim.allocation or {}
    for result in (allocation.get("devices") or {}).get("results") or ():
        if isinstance(result, Mapping):
            yield str(result.get("request") or "")


def compute_score(claims: Sequence[ResourceClaim], found: Sequence[Sequence[Any]]) -> int:
    """``found``: per claim not allocated, in order, the devices Filter picked on the node (each with its
    ``request``, ``<request>/<subrequest>`` for a subrequest)."""
    score = 0
    unallocated = 0
    for claim in claims:
        if claim.allocation is not None:
            requests = set(_allocated_requests(claim))
        else:
            if unallocated >= len(found):
                raise ValueError(
                    f"number of allocations {len(found)} is smaller than number of claims needing allocation"
                )
            requests = {device.request for device in found[unallocated]}
            unallocated += 1
        picked = {name for name in requests if "/" in name}
        if not picked:
            continue
        for request in claim.requests:
            for i, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in picked:
                    score += FIRST_AVAILABLE_MAX - i
    return score
