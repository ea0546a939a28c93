"""Builders shaped like upstream's ``allocatortesting`` helpers (``device``, ``sliceWithDevices``,
``sliceWithCounterSets``, ``request``, ``subRequest``, ...), so that its allocator cases read the same
here, and ``allocate`` running one case through the allocator with the features it names."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from _dra_kit import objects

from kopf_scheduler.framework.objects import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from kopf_scheduler.plugins.dynamic_resources.allocator import Allocator
from kopf_scheduler.plugins.dynamic_resources.cel_env import DeviceMatcher
from kopf_scheduler.plugins.dynamic_resources.prepare import Features
from kopf_scheduler.plugins.dynamic_resources.sharing import NO_SHARES, Shares

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
POOL_1, POOL_2 = "pool-1", "pool-2"
NODE_1, NODE_2 = "node-1", "node-2"
REGION_KEY, REGION_1, REGION_2 = "region", "region-1", "region-2"
CLASS_A, CLASS_B = "class-a", "class-b"
#: ``nodeSelection`` values of ``slice_``
ALL_NODES, PER_DEVICE = "nodeSelectionAll", "nodeSelectionPerDevice"
#: ``capacity`` of ``device``: one capacity per counter it consumes, of that value
FROM_COUNTERS = "fromCounters"
SHARE_ID = "<share>"

ALL_FEATURES = Features(partitionable=True, consumable=True, fractional=True)


def device_class(name: str, driver: str) -> dict[str, Any]:
    """``class(name, driver)``: selects the driver's devices."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def device(
    name: str,
    capacity: Mapping[str, Any] | str | None = None,
    attributes: Mapping[str, Any] | None = None,
    *,
    counters: Sequence[tuple[str, Mapping[str, str]]] = (),
    node: str | Mapping[str, Any] | None = None,
    multiple: bool = False,
    binding: tuple[Sequence[str], Sequence[str]] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """``device(name, capacity, attributes)``; ``capacity``: name -> quantity text, or name -> a whole
    ``DeviceCapacity`` (with its ``requestPolicy``); ``counters``: ``withDeviceCounterConsumption``;
    ``node``: ``withNodeSelection`` (a node name, ``ALL_NODES`` or a node selector); ``multiple``:
    ``withAllowMultipleAllocations``; ``binding``: ``withBindingConditions`` (conditions, failure
    conditions); ``taints``: ``withTaints``."""
    out: dict[str, Any] = {"name": name}
    if attributes:
        out["attributes"] = {key: _attribute(v) for key, v in attributes.items()}
    if capacity == FROM_COUNTERS:
        out["capacity"] = {n: {"value": v} for _, used in counters for n, v in used.items()}
    elif capacity:
        assert isinstance(capacity, Mapping)
        out["capacity"] = {n: (v if isinstance(v, Mapping) else {"value": v}) for n, v in capacity.items()}
    if counters:
        out["consumesCounters"] = [
            {"counterSet": s, "counters": {n: {"value": v} for n, v in used.items()}} for s, used in counters
        ]
    if node == ALL_NODES:
        out["allNodes"] = True
    elif isinstance(node, str):
        out["nodeName"] = node
    elif node is not None:
        out["nodeSelector"] = node
    if multiple:
        out["allowMultipleAllocations"] = True
    if binding is not None:
        out["bindingConditions"], out["bindingFailureConditions"] = list(binding[0]), list(binding[1])
    if taints:
        out["taints"] = [dict(t) for t in taints]
    return out


def _attribute(value: Any) -> dict[str, Any]:
    """A string, bool or int value, or a whole ``DeviceAttribute`` (``{"version": ...}``)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        return {"string": value}
    return {"bool": value} if isinstance(value, bool) else {"int": value}


def region_selector(region: str) -> dict[str, Any]:
    """``nodeLabelSelector(regionKey, region)``."""
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": REGION_KEY, "operator": "In", "values": [region]}]}
        ]
    }


def slice_(
    name: str,
    selection: str | Mapping[str, Any],
    pool: str,
    driver: str,
    *devices: dict[str, Any],
    count: int = 1,
    generation: int = 1,
    counter_sets: Sequence[tuple[str, Mapping[str, str]]] = (),
) -> dict[str, Any]:
    """``sliceWithDevices`` (``count``: ``resourcePool(pool, count)``), or with ``counter_sets``
    ``sliceWithCounterSets``."""
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
    }
    if selection == ALL_NODES:
        spec["allNodes"] = True
    elif selection == PER_DEVICE:
        spec["perDeviceNodeSelection"] = True
    elif isinstance(selection, str):
        spec["nodeName"] = selection
    else:
        spec["nodeSelector"] = selection
    if devices:
        spec["devices"] = list(devices)
    if counter_sets:
        spec["sharedCounters"] = [
            {"name": s, "counters": {n: {"value": v} for n, v in counters.items()}}
            for s, counters in counter_sets
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def request(
    name: str,
    class_name: str,
    count: int = 1,
    *selectors: str,
    mode: str | None = None,
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``request(name, class, count, selectors...)``; ``capacity``: ``withCapacityRequest``."""
    exactly = _spec(class_name, count, selectors, mode, capacity)
    return {"name": name, "exactly": exactly}


def sub_request(
    name: str,
    class_name: str,
    count: int = 1,
    *selectors: str,
    mode: str | None = None,
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return {"name": name, **_spec(class_name, count, selectors, mode, capacity)}


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    """``requestWithPrioritizedList``."""
    return {"name": name, "firstAvailable": list(subs)}


def _spec(
    class_name: str,
    count: int,
    selectors: Sequence[str],
    mode: str | None,
    capacity: Mapping[str, str] | None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"deviceClassName": class_name}
    if mode == "All":
        spec["allocationMode"] = "All"
    else:
        spec["count"] = count
    if selectors:
        spec["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if capacity is not None:
        spec["capacity"] = {"requests": dict(capacity)}
    return spec


def claim(
    name: str, *requests: dict[str, Any], constraints: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = [dict(c) for c in constraints]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"devices": devices},
    }


def node_labels(region: str) -> dict[str, str]:
    """``node(name, region)``'s labels."""
    return {REGION_KEY: region}


def local(node: str) -> dict[str, Any]:
    """``localNodeSelector(node)``."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeSelectorTerms": [term]}


def result(
    request_name: str,
    driver: str,
    pool: str,
    device_name: str,
    *,
    share: bool = False,
    consumed: Mapping[str, str] | None = None,
    binding: tuple[Sequence[str], Sequence[str]] | None = None,
) -> dict[str, Any]:
    """``deviceAllocationResult``, or with ``share`` ``withConsumedCapacity`` (the share's ID is random:
    ``SHARE_ID`` stands for it)."""
    out: dict[str, Any] = {"request": request_name, "driver": driver, "pool": pool, "device": device_name}
    if share:
        out["shareID"] = SHARE_ID
    if consumed:
        out["consumedCapacity"] = dict(consumed)
    if binding is not None:
        out["bindingConditions"], out["bindingFailureConditions"] = list(binding[0]), list(binding[1])
    return out


def allocation(selector: dict[str, Any] | None, *results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"devices": {"results": list(results)}}
    if selector is not None:
        out["nodeSelector"] = selector
    return out


def allocate(
    claims: Sequence[dict[str, Any]],
    classes: Sequence[dict[str, Any]],
    slices: Sequence[dict[str, Any]],
    *,
    node: str = NODE_1,
    labels: Mapping[str, str] | None = None,
    allocated: Sequence[tuple[str, str, str]] = (),
    shares: Shares = NO_SHARES,
    features: Features = ALL_FEATURES,
    binding_conditions: bool = False,
) -> list[dict[str, Any]] | None:
    """The allocations of ``claims`` on ``node``, every share ID replaced by ``SHARE_ID`` (after checking
    that the share IDs are distinct UUIDs); None when they cannot be allocated. Raises
    ``AllocationError``."""
    store = objects(*classes, *slices, *claims)
    allocator = Allocator(
        lambda name: store.of(DEVICE_CLASSES).get("", name),
        store.of(RESOURCE_SLICES).list(),
        frozenset(allocated),
        DeviceMatcher(),
        features=features,
        shares=shares,
        binding_conditions=binding_conditions,
    )
    parsed = [store.of(RESOURCE_CLAIMS).get("default", c["metadata"]["name"]) for c in claims]
    found = allocator.allocate(node, dict(labels or node_labels(REGION_1)), parsed)  # type: ignore[arg-type]
    if found is None:
        return None
    found = copy.deepcopy(found)
    ids = [r["shareID"] for a in found for r in a["devices"]["results"] if "shareID" in r]
    assert len(set(ids)) == len(ids) and all(len(i) == 36 and i.count("-") == 4 for i in ids), ids
    for a in found:
        for r in a["devices"]["results"]:
            if "shareID" in r:
                r["shareID"] = SHARE_ID
    return found
