"""Dynamic Resource Allocation objects (``resource.k8s.io/v1``): DeviceClasses, ResourceClaims,
ResourceClaimTemplates and ResourceSlices, as the DynamicResources plugin reads them.

Each value keeps the API object (``raw``: a claim's status is written back from it) and the fields the
allocator works on, parsed once. Missing optional fields take the API server's defaults
(``allocationMode: ExactCount``, ``count: 1``). A selector that is not a CEL expression is kept as
``None`` (the allocator refuses it with upstream's message); fields of features that are off in v1.34
(consumable capacity, partitionable devices, binding conditions) are recorded only as far as the
allocator needs to refuse or skip what uses them; a request's device tolerations are parsed whole. A
field of the wrong type is refused with its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kopf_scheduler.api.quantity import QuantityError, parse_quantity
from kopf_scheduler.framework.events import Resource
from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key
from kopf_scheduler.framework.selectors import NodeSelector, node_selector_type_error

GROUP, VERSION = "resource.k8s.io", "v1"
EXACT_COUNT, ALL = "ExactCount", "All"
#: the finalizer the scheduler puts on a claim it allocates (``resourceapi.Finalizer``)
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
_EMPTY: Mapping[str, Any] = {}

#: a device attribute: its type (``int``, ``bool``, ``string``, ``version``) and value
Attribute = tuple[str, int | bool | str]


def _map(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise ObjectParseError(f"{path}: must be an object")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ObjectParseError(f"{path}: must be a list")
    return value


def _str(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ObjectParseError(f"{path}: must be a string, not {value!r}")
    return value


def _int(value: Any, path: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ObjectParseError(f"{path}: must be an integer, not {value!r}")
    return value


def _strings(value: Any, path: str) -> tuple[str, ...]:
    return tuple(_str(v, f"{path}[{i}]") for i, v in enumerate(_list(value, path)))


# -- tolerations (DRADeviceTaints) ------------------------------------------------------------------------
#: the device taint effects that keep a device from a claim that does not tolerate them; any other
#: (``None``, or one added later) is informational
NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "NoExecute"
BLOCKING_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    """A request's ``tolerations`` entry (``resourceapi.DeviceToleration``); ``operator`` defaults to
    ``Equal`` as the API server defaults it."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    #: "" tolerates every effect
    effect: str = ""
    toleration_seconds: int | None = None

    def as_api(self) -> dict[str, Any]:
        """The toleration as the API writes it (an allocation result carries its request's)."""
        out: dict[str, Any] = {}
        if self.key:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


def _tolerations(value: Any, path: str) -> tuple[DeviceToleration, ...]:
    out = []
    for i, item in enumerate(_list(value, path)):
        at = f"{path}[{i}]"
        item = _map(item, at)
        operator = _str(item.get("operator"), f"{at}.operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise ObjectParseError(f"{at}.operator: must be Equal or Exists, not {operator!r}")
        seconds = item.get("tolerationSeconds")
        out.append(
            DeviceToleration(
                key=_str(item.get("key"), f"{at}.key"),
                operator=operator,
                value=_str(item.get("value"), f"{at}.value"),
                effect=_str(item.get("effect"), f"{at}.effect"),
                toleration_seconds=None if seconds is None else _int(seconds, f"{at}.tolerationSeconds", 0),
            )
        )
    return tuple(out)


# -- requests, constraints, config ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RequestSpec:
    """An ``exactly`` request or one ``firstAvailable`` subrequest."""

    name: str
    device_class_name: str
    #: the CEL expression of each selector; None for a selector of another (future) type
    selectors: tuple[str | None, ...]
    allocation_mode: str
    count: int
    #: ``adminAccess`` as set (None: not set); subrequests have none
    admin_access: bool | None = None
    #: ``tolerations``: the device taints the request tolerates (``DRADeviceTaints``)
    tolerations: tuple[DeviceToleration, ...] = ()
    #: ``capacity.requests`` is set (consumable capacity)
    has_capacity: bool = False
    #: ``capacity.requests``: (capacity, the amount asked for, its text) each (consumable capacity);
    #: None when not set
    capacity_requests: tuple[tuple[str, Fraction, str], ...] | None = None


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: RequestSpec | None
    first_available: tuple[RequestSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...]
    match_attribute: str | None
    distinct_attribute: str | None


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """A class's or a claim's config entry: the requests it is for (empty: all) and its
    ``DeviceConfiguration`` (``{"opaque": {...}}``), carried into the allocation as it is."""

    requests: tuple[str, ...]
    configuration: Mapping[str, Any]


def _selectors(value: Any, path: str) -> tuple[str | None, ...]:
    out: list[str | None] = []
    for i, item in enumerate(_list(value, path)):
        cel = _map(item, f"{path}[{i}]").get("cel")
        out.append(None if cel is None else _str(_map(cel, f"{path}[{i}].cel").get("expression"), path))
    return tuple(out)


def _request_spec(raw: Mapping[str, Any], path: str, name: str, subrequest: bool) -> RequestSpec:
    mode = _str(raw.get("allocationMode"), f"{path}.allocationMode") or EXACT_COUNT
    admin = raw.get("adminAccess")
    if admin is not None and not isinstance(admin, bool):
        raise ObjectParseError(f"{path}.adminAccess: must be a boolean, not {admin!r}")
    capacity = _map(raw.get("capacity"), f"{path}.capacity")
    return RequestSpec(
        name=name,
        device_class_name=_str(raw.get("deviceClassName"), f"{path}.deviceClassName"),
        selectors=_selectors(raw.get("selectors"), f"{path}.selectors"),
        allocation_mode=mode,
        count=_int(raw.get("count"), f"{path}.count", 1 if mode == EXACT_COUNT else 0),
        admin_access=None if subrequest else admin,
        tolerations=_tolerations(raw.get("tolerations"), f"{path}.tolerations"),
        has_capacity=capacity.get("requests") is not None,
        capacity_requests=_capacity_requests(capacity.get("requests"), f"{path}.capacity.requests"),
    )


def _capacity_requests(value: Any, path: str) -> tuple[tuple[str, Fraction, str], ...] | None:
    if value is None:
        return None
    out = []
    for name, quantity in _map(value, path).items():
        text = quantity if isinstance(quantity, (str, int, float)) else ""
        try:
            out.append((str(name), parse_quantity(text), str(quantity)))
        except QuantityError:
            raise ObjectParseError(f"{path}[{name}]: invalid quantity {quantity!r}") from None
    return tuple(out)


def _device_request(raw: Any, path: str) -> DeviceRequest:
    raw = _map(raw, path)
    name = _str(raw.get("name"), f"{path}.name")
    exactly = raw.get("exactly")
    subs = []
    for i, sub in enumerate(_list(raw.get("firstAvailable"), f"{path}.firstAvailable")):
        sub_path = f"{path}.firstAvailable[{i}]"
        sub = _map(sub, sub_path)
        subs.append(_request_spec(sub, sub_path, _str(sub.get("name"), f"{sub_path}.name"), True))
    exact_path = f"{path}.exactly"
    spec = None if exactly is None else _request_spec(_map(exactly, exact_path), exact_path, name, False)
    return DeviceRequest(name, spec, tuple(subs))


def _constraint(raw: Any, path: str) -> DeviceConstraint:
    raw = _map(raw, path)
    match, distinct = raw.get("matchAttribute"), raw.get("distinctAttribute")
    return DeviceConstraint(
        requests=_strings(raw.get("requests"), f"{path}.requests"),
        match_attribute=None if match is None else _str(match, f"{path}.matchAttribute"),
        distinct_attribute=None if distinct is None else _str(distinct, f"{path}.distinctAttribute"),
    )


def _configs(value: Any, path: str) -> tuple[DeviceConfig, ...]:
    out = []
    for i, item in enumerate(_list(value, path)):
        item = _map(item, f"{path}[{i}]")
        requests = _strings(item.get("requests"), f"{path}[{i}].requests")
        out.append(DeviceConfig(requests, {k: v for k, v in item.items() if k != "requests"}))
    return tuple(out)


# -- DeviceClass ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False)
class DeviceClass:
    name: str
    raw: Mapping[str, Any]
    selectors: tuple[str | None, ...]
    config: tuple[DeviceConfig, ...]
    #: ``spec.extendedResourceName``: the extended resource pods may request to get devices of this
    #: class (``DRAExtendedResource``); None when not set
    extended_resource_name: str | None = None
    #: ``metadata.creationTimestamp`` as written (RFC 3339: compares in time order); "" when absent
    created: str = ""


def parse_device_class(raw: Mapping[str, Any]) -> DeviceClass:
    _, name = object_key(raw, namespaced=False)
    spec = _map(raw.get("spec"), "spec")
    extended = spec.get("extendedResourceName")
    return DeviceClass(
        name,
        raw,
        _selectors(spec.get("selectors"), "spec.selectors"),
        _configs(spec.get("config"), "spec.config"),
        None if extended is None else _str(extended, "spec.extendedResourceName"),
        _str(_map(raw.get("metadata"), "metadata").get("creationTimestamp"), "metadata.creationTimestamp"),
    )


# -- ResourceClaim and ResourceClaimTemplate --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Consumer:
    """A ``status.reservedFor`` entry."""

    api_group: str
    resource: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool
    #: ``shareID``: one share of a device that allows multiple allocations (consumable capacity)
    share_id: str | None = None
    #: ``consumedCapacity``: (capacity, amount) each, of that share
    consumed: tuple[tuple[str, Fraction], ...] | None = None


@dataclass(frozen=True, slots=True, eq=False)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    resource_version: str
    raw: Mapping[str, Any]
    deleting: bool
    #: the uid of the controlling owner ("" when none)
    controller_uid: str
    finalizers: tuple[str, ...]
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[DeviceConstraint, ...]
    config: tuple[DeviceConfig, ...]
    #: ``status.allocation`` as the API object has it; None when not allocated
    allocation: Mapping[str, Any] | None
    allocated: tuple[AllocatedDevice, ...]
    #: ``status.allocation.nodeSelector``; None when absent
    node_selector: NodeSelector | None
    reserved_for: tuple[Consumer, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def reserved_for_pod(self, uid: str) -> bool:
        return any(c.uid == uid for c in self.reserved_for)


def _allocated(allocation: Mapping[str, Any]) -> tuple[AllocatedDevice, ...]:
    out = []
    path = "status.allocation.devices.results"
    devices = _map(allocation.get("devices"), "status.allocation.devices")
    for i, result in enumerate(_list(devices.get("results"), path)):
        result = _map(result, f"{path}[{i}]")
        out.append(
            AllocatedDevice(
                request=_str(result.get("request"), f"{path}[{i}].request"),
                driver=_str(result.get("driver"), f"{path}[{i}].driver"),
                pool=_str(result.get("pool"), f"{path}[{i}].pool"),
                device=_str(result.get("device"), f"{path}[{i}].device"),
                admin_access=result.get("adminAccess") is True,
                share_id=None
                if result.get("shareID") is None
                else _str(result["shareID"], f"{path}[{i}].shareID"),
                consumed=_consumed(result.get("consumedCapacity"), f"{path}[{i}].consumedCapacity"),
            )
        )
    return tuple(out)


def _consumed(value: Any, path: str) -> tuple[tuple[str, Fraction], ...] | None:
    found = _capacity_requests(value, path)
    return None if found is None else tuple((name, amount) for name, amount, _ in found)


def _node_selector(value: Any, path: str) -> NodeSelector:
    """A node selector (a claim's allocation, a ResourceSlice's), its fields of the right JSON types."""
    raw = _map(value, path)
    wrong = node_selector_type_error(raw)
    if wrong is not None:
        raise ObjectParseError(f"{path}.{wrong}")
    return NodeSelector.parse(raw)


def parse_resource_claim(raw: Mapping[str, Any]) -> ResourceClaim:
    namespace, name = object_key(raw, namespaced=True)
    meta = _map(raw.get("metadata"), "metadata")
    controller_uid = ""
    for i, ref in enumerate(_list(meta.get("ownerReferences"), "metadata.ownerReferences")):
        ref = _map(ref, f"metadata.ownerReferences[{i}]")
        if ref.get("controller") is True:
            controller_uid = _str(ref.get("uid"), f"metadata.ownerReferences[{i}].uid")
    devices = _map(_map(raw.get("spec"), "spec").get("devices"), "spec.devices")
    status = _map(raw.get("status"), "status")
    allocation = status.get("allocation")
    allocation = None if allocation is None else _map(allocation, "status.allocation")
    node_selector = None
    if allocation is not None and allocation.get("nodeSelector") is not None:
        node_selector = _node_selector(allocation["nodeSelector"], "status.allocation.nodeSelector")
    reserved = []
    for i, ref in enumerate(_list(status.get("reservedFor"), "status.reservedFor")):
        ref = _map(ref, f"status.reservedFor[{i}]")
        fields = (
            _str(ref.get(f), f"status.reservedFor[{i}].{f}") for f in ("apiGroup", "resource", "name", "uid")
        )
        reserved.append(Consumer(*fields))
    requests = devices.get("requests")
    return ResourceClaim(
        namespace=namespace,
        name=name,
        uid=_str(meta.get("uid"), "metadata.uid"),
        resource_version=_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        raw=raw,
        deleting=meta.get("deletionTimestamp") is not None,
        controller_uid=controller_uid,
        finalizers=_strings(meta.get("finalizers"), "metadata.finalizers"),
        requests=tuple(
            _device_request(r, f"spec.devices.requests[{i}]")
            for i, r in enumerate(_list(requests, "spec.devices.requests"))
        ),
        constraints=tuple(
            _constraint(c, f"spec.devices.constraints[{i}]")
            for i, c in enumerate(_list(devices.get("constraints"), "spec.devices.constraints"))
        ),
        config=_configs(devices.get("config"), "spec.devices.config"),
        allocation=allocation,
        allocated=() if allocation is None else _allocated(allocation),
        node_selector=node_selector,
        reserved_for=tuple(reserved),
    )


@dataclass(frozen=True, slots=True, eq=False)
class ResourceClaimTemplate:
    namespace: str
    name: str
    raw: Mapping[str, Any]


def parse_resource_claim_template(raw: Mapping[str, Any]) -> ResourceClaimTemplate:
    namespace, name = object_key(raw, namespaced=True)
    return ResourceClaimTemplate(namespace, name, raw)


DEVICE_CLASSES: ObjectKind[DeviceClass] = ObjectKind(
    "DeviceClass", GROUP, VERSION, "deviceclasses", False, parse_device_class, Resource.DEVICE_CLASS
)
RESOURCE_CLAIMS: ObjectKind[ResourceClaim] = ObjectKind(
    "ResourceClaim", GROUP, VERSION, "resourceclaims", True, parse_resource_claim, Resource.RESOURCE_CLAIM
)
RESOURCE_CLAIM_TEMPLATES: ObjectKind[ResourceClaimTemplate] = ObjectKind(
    "ResourceClaimTemplate",
    GROUP,
    VERSION,
    "resourceclaimtemplates",
    True,
    parse_resource_claim_template,
    Resource.RESOURCE_CLAIM_TEMPLATE,
)
