"""Device taints (``resource.k8s.io/v1``, gate DRADeviceTaints) and DeviceTaintRules (gate
DRADeviceTaintRules): a taint a DRA driver puts on a device in its ResourceSlice, or a rule puts on every
device its selector names, and whether a request's tolerations tolerate it.

A DeviceTaintRule's taint counts as if the driver had written it in the slice (upstream's ResourceSlice
tracker patches the slices the scheduler lists): ``plugins.dynamic_resources.taints`` makes those slices,
a new value only for a slice a rule touches. A rule without ``deviceSelector`` selects nothing; a
selector field left out matches any driver, pool or device. The scheduler writes nothing to a rule (its
``status`` conditions are kube-controller-manager's eviction controller's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.events import Resource
from kopf_scheduler.framework.objects.dra import (
    BLOCKING_EFFECTS,
    GROUP,
    VERSION,
    DeviceToleration,
    _map,
    _str,
)
from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    #: ``None``, ``NoSchedule``, ``NoExecute``; an unknown effect is treated as ``None``
    effect: str
    #: ``timeAdded`` as written (RFC 3339); "" when absent
    time_added: str = ""

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


def parse_taint(raw: Any, path: str) -> DeviceTaint:
    raw = _map(raw, path)
    return DeviceTaint(
        key=_str(raw.get("key"), f"{path}.key"),
        value=_str(raw.get("value"), f"{path}.value"),
        effect=_str(raw.get("effect"), f"{path}.effect"),
        time_added=_str(raw.get("timeAdded"), f"{path}.timeAdded"),
    )


def tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """``resourceclaim.ToleratesTaint``: an empty effect or key matches any; ``Exists`` any value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Equal":
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def untolerated(
    taints: tuple[DeviceTaint, ...], tolerations: tuple[DeviceToleration, ...]
) -> DeviceTaint | None:
    """The first taint that keeps the device from a request with ``tolerations``
    (``taintPreventsAllocation``: only NoSchedule and NoExecute do); None when every one is tolerated."""
    for taint in taints:
        if taint.effect in BLOCKING_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


@dataclass(frozen=True, slots=True, eq=False)
class DeviceTaintRule:
    name: str
    raw: Mapping[str, Any]
    #: False: no ``deviceSelector``, the rule selects no device
    selects: bool
    #: None: any
    driver: str | None
    pool: str | None
    device: str | None
    taint: DeviceTaint

    def matches_slice(self, driver: str, pool: str) -> bool:
        """Whether the rule may select devices of a slice of ``driver`` and ``pool``."""
        return (
            self.selects
            and (self.driver is None or self.driver == driver)
            and (self.pool is None or self.pool == pool)
        )

    def matches(self, driver: str, pool: str, device: str) -> bool:
        """Whether the rule selects the device ``driver/pool/device``."""
        return self.matches_slice(driver, pool) and (self.device is None or self.device == device)

    def same_effect(self, other: DeviceTaintRule) -> bool:
        """Whether the two select the same devices and taint them alike (an update that changes neither
        changes no slice)."""
        mine = (self.selects, self.driver, self.pool, self.device, self.taint)
        return mine == (other.selects, other.driver, other.pool, other.device, other.taint)


def _optional(raw: Mapping[str, Any], field: str, path: str) -> str | None:
    value = raw.get(field)
    return None if value is None else _str(value, f"{path}.{field}")


def parse_device_taint_rule(raw: Mapping[str, Any]) -> DeviceTaintRule:
    _, name = object_key(raw, namespaced=False)
    spec = _map(raw.get("spec"), "spec")
    selector = spec.get("deviceSelector")
    chosen = _map(selector, "spec.deviceSelector")
    if spec.get("taint") is None:
        raise ObjectParseError("spec.taint: required")
    return DeviceTaintRule(
        name=name,
        raw=raw,
        selects=selector is not None,
        driver=_optional(chosen, "driver", "spec.deviceSelector"),
        pool=_optional(chosen, "pool", "spec.deviceSelector"),
        device=_optional(chosen, "device", "spec.deviceSelector"),
        taint=parse_taint(spec.get("taint"), "spec.taint"),
    )


DEVICE_TAINT_RULES: ObjectKind[DeviceTaintRule] = ObjectKind(
    "DeviceTaintRule",
    GROUP,
    VERSION,
    "devicetaintrules",
    False,
    parse_device_taint_rule,
    Resource.DEVICE_TAINT_RULE,
)
