"""ResourceSlices (``resource.k8s.io/v1``): the devices a DRA driver publishes, per pool, and which nodes
can reach them.

A slice is reachable from the nodes its ``nodeName``, ``allNodes`` or ``nodeSelector`` names;
``perDeviceNodeSelection`` belongs to partitionable devices (off in v1.34), so such a slice is recorded
as such and the allocator skips it, as upstream does. Attributes are typed (``int``, ``bool``,
``string``, ``version``) under their qualified names as published (a name without a domain is in the
driver's); capacities are exact quantities.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kopf_scheduler.api.quantity import QuantityError, parse_quantity
from kopf_scheduler.framework.events import Resource
from kopf_scheduler.framework.objects.dra import (
    GROUP,
    VERSION,
    Attribute,
    _int,
    _list,
    _map,
    _node_selector,
    _str,
)
from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key
from kopf_scheduler.framework.selectors import NodeSelector


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Device:
    name: str
    attributes: Mapping[str, Attribute]
    capacity: Mapping[str, Fraction]
    #: ``consumesCounters`` is set (partitionable devices, off in v1.34: never allocated)
    consumes_counters: bool = False
    #: ``bindingConditions`` is set (off in v1.34: never selectable)
    binding_conditions: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class ResourceSlice:
    name: str
    raw: Mapping[str, Any]
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str
    all_nodes: bool
    node_selector: NodeSelector | None
    #: ``perDeviceNodeSelection`` is set (partitionable devices, off in v1.34: the slice is skipped)
    per_device_node_selection: bool
    devices: tuple[Device, ...]

    def reachable_from(self, labels: Mapping[str, str], node_name: str) -> bool:
        """Whether a node sees the slice (``nodeMatches``); a slice naming no node sees none."""
        if self.node_name:
            return self.node_name == node_name
        if self.all_nodes:
            return True
        return self.node_selector is not None and self.node_selector.matches(labels, node_name)


def _attribute(raw: Any, path: str) -> Attribute:
    raw = _map(raw, path)
    if raw.get("int") is not None:
        return "int", _int(raw["int"], f"{path}.int", 0)
    if raw.get("bool") is not None:
        if not isinstance(raw["bool"], bool):
            raise ObjectParseError(f"{path}.bool: must be a boolean, not {raw['bool']!r}")
        return "bool", raw["bool"]
    if raw.get("string") is not None:
        return "string", _str(raw["string"], f"{path}.string")
    if raw.get("version") is not None:
        return "version", _str(raw["version"], f"{path}.version")
    raise ObjectParseError(f"{path}: exactly one of int, bool, string or version is required")


def _key(name: Any) -> str:
    """A map key as a field path shows it (``capacity[memory]``): quoted unless a printable string, so
    that a message stays one line."""
    return name if isinstance(name, str) and name.isprintable() else repr(name)


def _device(raw: Any, path: str) -> Device:
    raw = _map(raw, path)
    attributes = {
        str(name): _attribute(value, f"{path}.attributes[{_key(name)}]")
        for name, value in _map(raw.get("attributes"), f"{path}.attributes").items()
    }
    capacity: dict[str, Fraction] = {}
    for name, value in _map(raw.get("capacity"), f"{path}.capacity").items():
        quantity = _map(value, f"{path}.capacity[{_key(name)}]").get("value")
        try:
            capacity[str(name)] = parse_quantity(quantity if isinstance(quantity, (str, int, float)) else "")
        except QuantityError:
            raise ObjectParseError(
                f"{path}.capacity[{_key(name)}].value: invalid quantity {quantity!r}"
            ) from None
    return Device(
        name=_str(raw.get("name"), f"{path}.name"),
        attributes=attributes,
        capacity=capacity,
        consumes_counters=bool(_list(raw.get("consumesCounters"), f"{path}.consumesCounters")),
        binding_conditions=raw.get("bindingConditions") is not None,
    )


def parse_resource_slice(raw: Mapping[str, Any]) -> ResourceSlice:
    _, name = object_key(raw, namespaced=False)
    spec = _map(raw.get("spec"), "spec")
    pool = _map(spec.get("pool"), "spec.pool")
    selector = spec.get("nodeSelector")
    all_nodes = spec.get("allNodes")
    if all_nodes is not None and not isinstance(all_nodes, bool):
        raise ObjectParseError(f"spec.allNodes: must be a boolean, not {all_nodes!r}")
    return ResourceSlice(
        name=name,
        raw=raw,
        driver=_str(spec.get("driver"), "spec.driver"),
        pool=_str(pool.get("name"), "spec.pool.name"),
        generation=_int(pool.get("generation"), "spec.pool.generation", 0),
        slice_count=_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 0),
        node_name=_str(spec.get("nodeName"), "spec.nodeName"),
        all_nodes=bool(all_nodes),
        node_selector=None if selector is None else _node_selector(selector, "spec.nodeSelector"),
        per_device_node_selection=spec.get("perDeviceNodeSelection") is not None,
        devices=tuple(
            _device(d, f"spec.devices[{i}]") for i, d in enumerate(_list(spec.get("devices"), "spec.devices"))
        ),
    )


RESOURCE_SLICES: ObjectKind[ResourceSlice] = ObjectKind(
    "ResourceSlice", GROUP, VERSION, "resourceslices", False, parse_resource_slice, Resource.RESOURCE_SLICE
)
