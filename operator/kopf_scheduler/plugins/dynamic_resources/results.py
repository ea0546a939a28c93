"""A claim's ``status.allocation`` as the structured allocator builds it once devices are picked:

- ``devices.results``: one entry per device, in the order picked (``request`` is ``<request>`` or
  ``<request>/<subrequest>``; ``adminAccess: true`` when the request asked for it);
- ``devices.config``: each class's config once (source ``FromClass``) listing every request that used the
  class, then the claim's config entries (source ``FromClaim``) for the requests they name (an entry
  naming several requests comes once per request allocated, as upstream appends it);
- ``nodeSelector``: the node by name when a device's slice names one node, else the requirements of the
  slices' node selectors (one term each), else none (devices reachable from all nodes).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from kopf_scheduler.framework.objects import DeviceClass, ResourceClaim, ResourceSlice

SOURCE_CLASS, SOURCE_CLAIM = "FromClass", "FromClaim"


class DeviceResult(NamedTuple):
    """One device picked (a tuple: made for every node a pod's claims are checked on)."""

    request: str
    device_id: tuple[str, str, str]
    admin_access: bool
    slice: ResourceSlice


class NodeSelectorError(Exception):
    pass


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
            if request.name in config.requests:
                configs.append(_config(SOURCE_CLAIM, list(config.requests), config.configuration))
                continue
            chosen = selected.get(request.name, request.name)
            if "/" in chosen and chosen in config.requests:
                configs.append(_config(SOURCE_CLAIM, list(config.requests), config.configuration))
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
        if slice_.node_name:
            term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
            return {"nodeSelectorTerms": [term]}
        raw = (slice_.raw.get("spec") or {}).get("nodeSelector")
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
