"""The requests of the claim of a pod's extended resources backed by DRA, and the pod's request mappings
(upstream's ``createRequestsAndMappings`` in ``extendeddynamicresources.go``).

For each resource DRA serves on the node (in name order), each container asking for it gets a request
``container-<i>-request-<j>`` of its class with its count: ``i`` the container's index among init
containers then containers, ``j`` the resource's index among the container's requests sorted by name.
Long-lived containers (regular ones and sidecars) each get their own devices. An init container that
runs to completion first uses the devices of the long-lived containers after it; only what they do not
cover becomes a request of its own, and of those requests only the largest is kept, the mappings of the
others pointing to it. A request that is not a whole number is left out, as upstream's ``AsInt64``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Protocol

from kopf_scheduler.api.quantity import QuantityError, parse_quantity
from kopf_scheduler.framework.objects import DeviceClass
from kopf_scheduler.framework.objects.dra import EXACT_COUNT

#: a ``status.extendedResourceClaimStatus.requestMappings`` entry
RequestMapping = dict[str, str]


class Classes(Protocol):
    """Which class an extended resource stands for (``DeviceClassResolver``)."""

    def get(self, resource: str) -> DeviceClass | None: ...


def _count(container: Mapping[str, Any], resource: str) -> int:
    """The container's request of ``resource`` as a whole number (0: none, or not whole)."""
    requests = (container.get("resources") or {}).get("requests") or {}
    if resource not in requests:
        return 0
    try:
        amount = parse_quantity(requests[resource])
    except QuantityError:
        return 0
    if amount.denominator != 1 or not -(2**63) <= amount < 2**63:
        return 0
    return int(Fraction(amount))


def _request_and_mappings(
    index: int, container: Mapping[str, Any], resource: str, class_name: str, reusable: Sequence[Any]
) -> tuple[dict[str, Any] | None, list[RequestMapping]]:
    """``createResourceRequestAndMappings``: the container's request of ``resource`` (None: it needs no
    devices of its own, using ``reusable`` requests of later long-lived containers) and its mappings."""
    wanted = _count(container, resource)
    if wanted == 0:
        return None, []
    name = str(container.get("name") or "")
    mappings: list[RequestMapping] = []
    total = 0
    for request in reusable:
        if request is None:
            continue
        total += request["exactly"]["count"]
        mappings.append({"containerName": name, "resourceName": resource, "requestName": request["name"]})
        if total >= wanted:
            return None, mappings
    keys = sorted((container.get("resources") or {}).get("requests") or {})
    request_name = f"container-{index}-request-{keys.index(resource)}"
    request = {
        "name": request_name,
        "exactly": {"deviceClassName": class_name, "allocationMode": EXACT_COUNT, "count": wanted - total},
    }
    mappings.append({"containerName": name, "resourceName": resource, "requestName": request_name})
    return request, mappings


def requests_and_mappings(
    spec: Mapping[str, Any], resources: Sequence[str], classes: Classes
) -> tuple[list[dict[str, Any]], list[RequestMapping]]:
    """``createRequestsAndMappings``: the claim's requests (sorted by name) and the pod's mappings, for
    the extended ``resources`` DRA serves."""
    init = list(spec.get("initContainers") or ())
    containers = init + list(spec.get("containers") or ())
    short_lived = [
        i for i, c in enumerate(containers) if i < len(init) and c.get("restartPolicy") != "Always"
    ]
    long_lived = [i for i in range(len(containers)) if i not in short_lived]
    requests: list[dict[str, Any]] = []
    mappings: list[RequestMapping] = []
    for resource in sorted(resources):
        cls = classes.get(resource)
        if cls is None:
            continue
        long_requests: list[dict[str, Any] | None] = [None] * len(containers)
        long_mappings: list[RequestMapping] = []
        for i in long_lived:
            request, found = _request_and_mappings(i, containers[i], resource, cls.name, ())
            long_requests[i] = request
            long_mappings += found
        largest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_mappings: list[RequestMapping] = []
        for i in short_lived:
            request, found = _request_and_mappings(i, containers[i], resource, cls.name, long_requests[i:])
            if request is not None:
                short_names.add(request["name"])
                if largest is None or largest["exactly"]["count"] < request["exactly"]["count"]:
                    largest = request
            short_mappings += found
        if largest is not None and len(short_names) > 1:
            short_names.discard(largest["name"])
            for mapping in short_mappings:
                if mapping["requestName"] in short_names:
                    mapping["requestName"] = largest["name"]
        if largest is not None:
            requests.append(largest)
        requests += [r for r in long_requests if r is not None]
        mappings += long_mappings + short_mappings
    requests.sort(key=lambda r: str(r["name"]))
    return requests, mappings
