"""Device taints for the allocator: the slices as DeviceTaintRules patch them (upstream's ResourceSlice
tracker, ``ListWithDeviceTaintRules``), and which taint kept a device from a request (for explanations).

- ``PatchedSlices.of(slices, rules)``: the slice listing with each rule's taint appended to the taints of
  every device it selects (after the driver's own, rule after rule in listing order). A slice no rule
  selects a device of is the stored value itself; a patched slice is made again only when the slice or
  the rules selecting it change, so what ``node_devices`` keeps per node (views are reused while a node
  sees the very same slice objects) survives a rule change on other nodes' devices.
- A taint's verdict depends on the request's tolerations, not only on the device: it is never kept with
  the selector verdicts (``NodeView.verdicts``), and a request's outcome on a node (``Outcome``) holds
  only for a request with the same tolerations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterable, Mapping, Sequence

from kopf_scheduler.framework.objects import DeviceTaintRule, ResourceClaim, ResourceSlice
from kopf_scheduler.framework.objects.device_taints import DeviceTaint, untolerated
from kopf_scheduler.framework.objects.dra import DeviceToleration
from kopf_scheduler.framework.objects.resource_slices import Device
from kopf_scheduler.plugins.dynamic_resources.cel_env import DeviceMatcher, SelectorTimeout
from kopf_scheduler.plugins.dynamic_resources.node_devices import verdict
from kopf_scheduler.plugins.dynamic_resources.pools import DeviceID, device_id_str, gather_pools


def _patch(slice_: ResourceSlice, rules: tuple[DeviceTaintRule, ...]) -> ResourceSlice:
    devices = []
    for device in slice_.devices:
        added = tuple(rule.taint for rule in rules if rule.device is None or rule.device == device.name)
        devices.append(dataclasses.replace(device, taints=device.taints + added) if added else device)
    return dataclasses.replace(slice_, devices=tuple(devices))


class PatchedSlices:
    """The patched listing, kept from one call to the next (one per scheduler, in its ``DraManager``)."""

    def __init__(self) -> None:
        self._inputs: tuple[Sequence[ResourceSlice], Sequence[DeviceTaintRule]] | None = None
        self._listing: Sequence[ResourceSlice] = ()
        #: per slice (by identity): the slice, the rules that selected a device of it, the patched slice
        self._patched: dict[int, tuple[ResourceSlice, tuple[DeviceTaintRule, ...], ResourceSlice]] = {}

    def of(
        self, slices: Sequence[ResourceSlice], rules: Sequence[DeviceTaintRule]
    ) -> Sequence[ResourceSlice]:
        """``slices`` and ``rules``: the stores' listings (the same objects while nothing changed)."""
        if not rules:
            self._inputs, self._patched = None, {}
            return slices
        inputs = self._inputs
        if inputs is not None and inputs[0] is slices and inputs[1] is rules:
            return self._listing
        listing: list[ResourceSlice] = []
        patched: dict[int, tuple[ResourceSlice, tuple[DeviceTaintRule, ...], ResourceSlice]] = {}
        for slice_ in slices:
            selecting = tuple(
                rule
                for rule in rules
                if rule.matches_slice(slice_.driver, slice_.pool)
                and any(rule.device is None or rule.device == d.name for d in slice_.devices)
            )
            if not selecting:
                listing.append(slice_)
                continue
            kept = self._patched.get(id(slice_))
            if kept is None or kept[0] is not slice_ or kept[1] != selecting:  # rules compare by identity
                kept = (slice_, selecting, _patch(slice_, selecting))
            patched[id(slice_)] = kept
            listing.append(kept[2])
        self._inputs, self._listing, self._patched = (slices, rules), tuple(listing), patched
        return self._listing


def rejected_by_taints(
    classes: Mapping[str, Sequence[str | None]],
    slices: Sequence[ResourceSlice],
    claims: Iterable[ResourceClaim],
    node_name: str,
    labels: Mapping[str, str],
    matcher: DeviceMatcher,
    allocated: Container[DeviceID] = (),
) -> list[str]:
    """For an explanation: each device the node sees that a pending request's selectors choose but a taint
    it does not tolerate keeps from it, as ``claim default/c, request gpu: device drv/pool/dev has taint
    key=value:NoSchedule, not tolerated``. ``classes``: each class's selectors. A selector that fails or
    runs out of time says nothing here (the filter's error says it), nor a device ``allocated`` already."""
    lines = []
    pools = gather_pools(slices, labels, node_name)
    for claim in claims:
        for request in claim.requests:
            specs = [(request.name, request.exactly)] if request.exactly is not None else []
            specs += [(f"{request.name}/{s.name}", s) for s in request.first_available]
            for name, spec in specs:
                assert spec is not None
                class_selectors = classes.get(spec.device_class_name)
                if class_selectors is None:
                    continue  # no such class: pre-filter says so
                key = (tuple(class_selectors), spec.selectors)
                if None in key[0] or None in key[1]:
                    continue
                for pool in pools:
                    for slice_ in pool.slices:
                        for device in slice_.devices:
                            taint = _blocking(device, spec.tolerations)
                            device_id = (slice_.driver, slice_.pool, device.name)
                            if taint is None or device_id in allocated:
                                continue
                            if not _chosen(matcher, key, slice_.driver, device):
                                continue
                            lines.append(
                                f"claim {claim.key}, request {name}: device {device_id_str(device_id)} has "
                                f"taint {taint}, not tolerated"
                            )
    return lines


def _blocking(device: Device, tolerations: tuple[DeviceToleration, ...]) -> DeviceTaint | None:
    return untolerated(device.taints, tolerations) if device.taints else None


def _chosen(
    matcher: DeviceMatcher,
    key: tuple[tuple[str | None, ...], tuple[str | None, ...]],
    driver: str,
    device: Device,
) -> bool:
    try:
        return verdict(matcher, key, driver, device) is True
    except SelectorTimeout:
        return False
