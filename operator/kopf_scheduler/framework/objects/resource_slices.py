"""ResourceSlices (``resource.k8s.io/v1``): the devices a DRA driver publishes, per pool, and which nodes
can reach them.

A slice is reachable from the nodes its ``nodeName``, ``allNodes`` or ``nodeSelector`` names, or, with
``perDeviceNodeSelection``, from those that one of its devices names (the device's own ``nodeName``,
``allNodes`` or ``nodeSelector``). Partitionable devices (``DRAPartitionableDevices``): a slice may publish
``sharedCounters`` (counter sets) instead of devices, and a device may consume counters of its pool's
sets (``consumesCounters``). Consumable capacity (``DRAConsumableCapacity``): a device may allow
multiple allocations, and each capacity may carry a ``requestPolicy`` (a default, a valid range with an
optional step, or valid values). Attributes are typed (``int``, ``bool``, ``string``, ``version``) under
their qualified names as published (a name without a domain is in the driver's); capacities and counters
are exact quantities, kept with their text where an allocation result quotes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

from kopf_scheduler.api.quantity import QuantityError, parse_quantity
from kopf_scheduler.framework.events import Resource
from kopf_scheduler.framework.objects.device_taints import DeviceTaint, parse_taint
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


class Amount(NamedTuple):
    """A quantity: its exact value and its text as published."""

    value: Fraction
    text: str


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A capacity's ``requestPolicy``: what a request for it is rounded up to, and what it may be."""

    default: Amount | None = None
    #: ``validValues``, ascending (API validation)
    valid_values: tuple[Amount, ...] = ()
    #: ``validRange``: min (None: no range), max, step
    minimum: Amount | None = None
    maximum: Amount | None = None
    step: Amount | None = None


#: a counter set of ``sharedCounters``, or a device's consumption of one: (set name, counter -> amount)
Counters = tuple[str, Mapping[str, Fraction]]


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Device:
    name: str
    attributes: Mapping[str, Attribute]
    capacity: Mapping[str, Fraction]
    #: ``consumesCounters``: per counter set, what the device consumes of it (partitionable devices)
    consumes_counters: tuple[Counters, ...] = ()
    #: ``bindingConditions`` is set (DRADeviceBindingConditions: selectable only with that gate on)
    binding_conditions: bool = False
    #: ``bindingConditions`` and ``bindingFailureConditions``: the condition types an allocation of the
    #: device names, which its driver sets in the claim's ``status.devices``
    binding_condition_types: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    #: ``bindsToNode``: an allocation of the device is limited to the node it was allocated for
    binds_to_node: bool = False
    #: ``taints`` (DRADeviceTaints), with those of the DeviceTaintRules that select the device once the
    #: slice is patched (``plugins.dynamic_resources.taints``)
    taints: tuple[DeviceTaint, ...] = ()
    #: the device's own node selection (a slice with ``perDeviceNodeSelection``)
    node_name: str = ""
    all_nodes: bool = False
    node_selector: NodeSelector | None = None
    #: ``allowMultipleAllocations: true`` (consumable capacity)
    allow_multiple_allocations: bool = False
    #: per capacity: its text (``capacity[name].value``), for the results that quote it
    capacity_text: Mapping[str, str] | None = None
    #: per capacity with a ``requestPolicy``: the policy (None: none has one)
    policies: Mapping[str, CapacityPolicy] | None = None

    def reachable_from(self, labels: Mapping[str, str], node_name: str) -> bool:
        """Whether a node sees the device of a slice with ``perDeviceNodeSelection`` (``NodeMatches``)."""
        if self.node_name:
            return self.node_name == node_name
        if self.all_nodes:
            return True
        return self.node_selector is not None and self.node_selector.matches(labels, node_name)


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
    #: ``perDeviceNodeSelection: true`` (partitionable devices: each device names its nodes)
    per_device_node_selection: bool
    devices: tuple[Device, ...]
    #: ``sharedCounters``: the counter sets the slice publishes (partitionable devices)
    shared_counters: tuple[Counters, ...] = ()

    def reachable_from(self, labels: Mapping[str, str], node_name: str) -> bool:
        """Whether a node sees the slice (``GatherPools``): the slice names it, or with
        ``perDeviceNodeSelection`` one of its devices does; a slice naming no node is seen by none."""
        if self.node_name:
            return self.node_name == node_name
        if self.all_nodes:
            return True
        if self.node_selector is not None:
            return self.node_selector.matches(labels, node_name)
        if self.per_device_node_selection:
            return any(device.reachable_from(labels, node_name) for device in self.devices)
        return False


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


def amount(value: Any, path: str) -> Amount:
    """A quantity field (a string or a number), refused with its path when it is not one."""
    try:
        return Amount(parse_quantity(value if isinstance(value, (str, int, float)) else ""), str(value))
    except QuantityError:
        raise ObjectParseError(f"{path}: invalid quantity {value!r}") from None


def _counters(raw: Any, path: str) -> Mapping[str, Fraction]:
    out = {}
    for name, value in _map(raw, path).items():
        at = f"{path}[{_key(name)}]"
        out[str(name)] = amount(_map(value, at).get("value"), f"{at}.value").value
    return out


def _counter_sets(raw: Any, path: str, key: str) -> tuple[Counters, ...]:
    out = []
    for i, item in enumerate(_list(raw, path)):
        item = _map(item, f"{path}[{i}]")
        name = _str(item.get(key), f"{path}[{i}].{key}")
        out.append((name, _counters(item.get("counters"), f"{path}[{i}].counters")))
    return tuple(out)


def _policy(raw: Any, path: str) -> CapacityPolicy:
    raw = _map(raw, path)
    default = raw.get("default")
    bounds: list[Amount | None] = [None, None, None]
    if raw.get("validRange") is not None:
        valid_range = _map(raw["validRange"], f"{path}.validRange")
        for i, key in enumerate(("min", "max", "step")):
            value = valid_range.get(key)
            bounds[i] = None if value is None else amount(value, f"{path}.validRange.{key}")
    values = _list(raw.get("validValues"), f"{path}.validValues")
    return CapacityPolicy(
        None if default is None else amount(default, f"{path}.default"),
        tuple(amount(v, f"{path}.validValues[{i}]") for i, v in enumerate(values)),
        *bounds,
    )


def _capacity(raw: Any, path: str) -> tuple[dict[str, Fraction], dict[str, str], dict[str, CapacityPolicy]]:
    capacity: dict[str, Fraction] = {}
    texts: dict[str, str] = {}
    policies: dict[str, CapacityPolicy] = {}
    for name, value in _map(raw, path).items():
        at = f"{path}[{_key(name)}]"
        value = _map(value, at)
        capacity[str(name)], texts[str(name)] = amount(value.get("value"), f"{at}.value")
        if value.get("requestPolicy") is not None:
            policies[str(name)] = _policy(value["requestPolicy"], f"{at}.requestPolicy")
    return capacity, texts, policies


def _bool(raw: Mapping[str, Any], key: str, path: str) -> bool:
    value = raw.get(key)
    if value is not None and not isinstance(value, bool):
        raise ObjectParseError(f"{path}.{key}: must be a boolean, not {value!r}")
    return value is True


def _device(raw: Any, path: str) -> Device:
    raw = _map(raw, path)
    attributes = {
        str(name): _attribute(value, f"{path}.attributes[{_key(name)}]")
        for name, value in _map(raw.get("attributes"), f"{path}.attributes").items()
    }
    capacity, texts, policies = _capacity(raw.get("capacity"), f"{path}.capacity")
    selector = raw.get("nodeSelector")
    return Device(
        name=_str(raw.get("name"), f"{path}.name"),
        attributes=attributes,
        capacity=capacity,
        consumes_counters=_counter_sets(
            raw.get("consumesCounters"), f"{path}.consumesCounters", "counterSet"
        ),
        binding_conditions=raw.get("bindingConditions") is not None,
        binding_condition_types=_names(raw.get("bindingConditions"), f"{path}.bindingConditions"),
        binding_failure_conditions=_names(
            raw.get("bindingFailureConditions"), f"{path}.bindingFailureConditions"
        ),
        binds_to_node=raw.get("bindsToNode") is True,
        taints=_taints(raw.get("taints"), f"{path}.taints"),
        node_name=_str(raw.get("nodeName"), f"{path}.nodeName"),
        all_nodes=_bool(raw, "allNodes", path),
        node_selector=None if selector is None else _node_selector(selector, f"{path}.nodeSelector"),
        allow_multiple_allocations=_bool(raw, "allowMultipleAllocations", path),
        capacity_text=texts or None,
        policies=policies or None,
    )


def _taints(raw: Any, path: str) -> tuple[DeviceTaint, ...]:
    return tuple(parse_taint(t, f"{path}[{i}]") for i, t in enumerate(_list(raw, path)))


def _names(raw: Any, path: str) -> tuple[str, ...]:
    return tuple(_str(name, f"{path}[{i}]") for i, name in enumerate(_list(raw, path)))


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
        per_device_node_selection=_per_device(spec.get("perDeviceNodeSelection")),
        devices=tuple(
            _device(d, f"spec.devices[{i}]") for i, d in enumerate(_list(spec.get("devices"), "spec.devices"))
        ),
        shared_counters=_counter_sets(spec.get("sharedCounters"), "spec.sharedCounters", "name"),
    )


def _per_device(value: Any) -> bool:
    if value is not None and not isinstance(value, bool):
        raise ObjectParseError(f"spec.perDeviceNodeSelection: must be a boolean, not {value!r}")
    return value is True


RESOURCE_SLICES: ObjectKind[ResourceSlice] = ObjectKind(
    "ResourceSlice", GROUP, VERSION, "resourceslices", False, parse_resource_slice, Resource.RESOURCE_SLICE
)
