"""A claim's ``status.allocation`` as the structured allocator builds it once devices are picked:

- ``devices.results``: one entry per device, in the order picked (``request`` is ``<request>`` or
  ``<request>/<subrequest>``; ``adminAccess: true`` when the request asked for it; for a device that
  allows multiple allocations its ``shareID`` and the ``consumedCapacity`` of that share);
- ``devices.config``: each class's config once (source ``FromClass``) listing every request that used the
  class, then the claim's config entries (source ``FromClaim``) naming a request of the claim or the
  subrequest it got, once each; an entry listing every request of the claim lists none (all);
- ``bindingConditions``, ``bindingFailureConditions``: copied from a device that has them (device binding
  conditions: its driver reports them in the claim's ``status.devices``);
- ``nodeSelector``: the node by name when a device's slice names one node or the device ``bindsToNode``,
  else the requirements of the slices' node selectors (one term each), else none (devices reachable from
  all nodes); in a slice with ``perDeviceNodeSelection`` the device's own ``nodeName`` or
  ``nodeSelector`` counts instead.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from kopf_scheduler.framework.objects import DeviceClass, ResourceClaim, ResourceSlice
from kopf_scheduler.framework.objects.dra import DeviceToleration
from kopf_scheduler.framework.objects.resource_slices import Device

SOURCE_CLASS, SOURCE_CLAIM = "FromClass", "FromClaim"


class DeviceResult(NamedTuple):
    """One device picked (a tuple: made for every node a pod's claims are checked on)."""

    request: str
    device_id: tuple[str, str, str]
    admin_access: bool
    slice: ResourceSlice
    #: a share of a device that allows multiple allocations: its ``shareID``
    share_id: str | None = None
    #: that share's ``consumedCapacity``: (capacity, quantity text) each
    consumed: tuple[tuple[str, str], ...] | None = None
    #: the device (needed for per-device node selection)
    device: Device | None = None


class NodeSelectorError(Exception):
    pass


def request_tolerations(claim: ResourceClaim, request: str) -> tuple[DeviceToleration, ...]:
    """The tolerations of the claim's request ``request`` (``<request>`` or ``<request>/<subrequest>``:
    upstream's ``lookupRequest``), which its allocation results carry."""
    name, _, sub = request.partition("/")
    for found in claim.requests:
        if found.name != name:
            continue
        if not sub:
            return found.exactly.tolerations if found.exactly is not None else ()
        for spec in found.first_available:
            if spec.name == sub:
                return spec.tolerations
    return ()


def _config(source: str, requests: list[str], configuration: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"source": source}
    if requests:
        entry["requests"] = requests
    entry.update(copy.deepcopy(dict(configuration)))
    return entry


def allocation_result(
    claim: ResourceClaim,
    devices: Sequence[DeviceResult],
    classes: Sequence[tuple[str, DeviceClass]],
    node_name: str,
) -> dict[str, Any]:
    """``classes``: for each request of the claim in order, its (possibly ``parent/sub``) name and the
    class of what was allocated for it."""
    results = []
    for device in devices:
        driver, pool, name = device.device_id
        entry: dict[str, Any] = {"request": device.request, "driver": driver, "pool": pool, "device": name}
        if device.admin_access:
            entry["adminAccess"] = True
        tolerations = request_tolerations(claim, device.request)
        if tolerations:  # upstream copies the request's in
            entry["tolerations"] = [t.as_api() for t in tolerations]
        if device.share_id is not None:
            entry["shareID"] = device.share_id
        if device.consumed:
            entry["consumedCapacity"] = dict(device.consumed)
        published = _device_of(device)
        if published is not None and published.binding_conditions:
            if published.binding_condition_types:
                entry["bindingConditions"] = list(published.binding_condition_types)
            if published.binding_failure_conditions:
                entry["bindingFailureConditions"] = list(published.binding_failure_conditions)
        results.append(entry)
    configs: list[dict[str, Any]] = []
    by_class: dict[str, list[dict[str, Any]]] = {}
    for request_name, device_class in classes:
        added = by_class.get(device_class.name)
        if added is not None:
            for entry in added:
                entry["requests"].append(request_name)
            continue
        added = by_class[device_class.name] = []
        for config in device_class.config:
            entry = _config(SOURCE_CLASS, [request_name], config.configuration)
            added.append(entry)
            configs.append(entry)
    selected = {name.partition("/")[0]: name for name, _ in classes}
    for config in claim.config:
        if not config.requests:
            configs.append(_config(SOURCE_CLAIM, [], config.configuration))
            continue
        for request in claim.requests:
            chosen = selected.get(request.name, request.name)
            if request.name in config.requests or ("/" in chosen and chosen in config.requests):
                configs.append(_config(SOURCE_CLAIM, list(config.requests), config.configuration))
                break
    for entry in configs:  # naming every request of the claim: all of them (``requests`` left out)
        named = entry.get("requests")
        if named and all(r.name in named or selected.get(r.name, r.name) in named for r in claim.requests):
            del entry["requests"]
    allocation: dict[str, Any] = {"devices": {"results": results}}
    if configs:
        allocation["devices"]["config"] = configs
    selector = node_selector(devices, node_name, claim.name)
    if selector is not None:
        allocation["nodeSelector"] = selector
    return allocation


def node_selector(devices: Sequence[DeviceResult], node_name: str, claim_name: str) -> dict[str, Any] | None:
    fields: list[Mapping[str, Any]] = []
    expressions: list[Mapping[str, Any]] = []
    for device in devices:
        slice_ = device.slice
        if slice_.per_device_node_selection and device.device is not None:
            named = device.device.node_name
            raw = _device_selector(slice_, device.device.name)
        else:
            named = slice_.node_name
            raw = (slice_.raw.get("spec") or {}).get("nodeSelector")
        if named or _binds_to_node(device):
            term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
            return {"nodeSelectorTerms": [term]}
        if not isinstance(raw, Mapping):
            continue
        terms = raw.get("nodeSelectorTerms") or []
        if len(terms) > 1:
            raise NodeSelectorError(
                f"create NodeSelector for claim {claim_name}: unsupported ResourceSlice.NodeSelector "
                f"with {len(terms)} terms"
            )
        if terms:
            _merge(terms[0].get("matchFields") or [], fields)
            _merge(terms[0].get("matchExpressions") or [], expressions)
    if not fields and not expressions:
        return None
    merged: dict[str, Any] = {}
    if expressions:
        merged["matchExpressions"] = [copy.deepcopy(dict(e)) for e in expressions]
    if fields:
        merged["matchFields"] = [copy.deepcopy(dict(f)) for f in fields]
    return {"nodeSelectorTerms": [merged]}


def _device_of(result: DeviceResult) -> Device | None:
    """The device picked, as its slice publishes it."""
    if result.device is not None:
        return result.device
    name = result.device_id[2]
    return next((d for d in result.slice.devices if d.name == name), None)


def _binds_to_node(result: DeviceResult) -> bool:
    published = _device_of(result)
    return published is not None and published.binds_to_node


def _device_selector(slice_: ResourceSlice, name: str) -> Any:
    for raw in (slice_.raw.get("spec") or {}).get("devices") or ():
        if isinstance(raw, Mapping) and raw.get("name") == name:
            return raw.get("nodeSelector")
    return None


def _merge(source: Sequence[Mapping[str, Any]], into: list[Mapping[str, Any]]) -> None:
    for requirement in source:
        values = set(requirement.get("values") or [])
        if not any(
            r.get("key") == requirement.get("key")
            and r.get("operator") == requirement.get("operator")
            and set(r.get("values") or []) == values
            for r in into
        ):
            into.append(requirement)
