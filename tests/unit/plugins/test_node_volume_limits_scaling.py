"""NodeVolumeLimits with the VolumeLimitScaling gate (beta, on at 1.37): a CSIDriver with
``preventPodSchedulingIfMissing`` keeps pods with its volumes off nodes whose CSINode does not list it.
Upstream v1.37.2's ``TestVolumeLimitScalingGate`` (``nodevolumelimits/csi_test.go``) with its fixtures:
four claims bound to CSI volumes ``csi-ebs.csi.aws.com-<j>``, the pod using the first, the node's CSINode
without drivers (``no-csi-driver``) or listing the driver with a limit (``csinode``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _volume_kit import VolumeHandle, csi_node, node_with, objects, pod_with_claims, pv, pvc, snapshot

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.objects.storage import parse_csi_driver
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, unschedulable
from kopf_scheduler.plugins.node_volume_limits import new

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
NODE = "node-for-max-pd-test-1"


def _driver(name: str, prevent: bool | None) -> dict[str, Any]:
    spec = {} if prevent is None else {"preventPodSchedulingIfMissing": prevent}
    return {"kind": "CSIDriver", "metadata": {"name": name}, "spec": spec}


def _claims(driver: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for j in range(4):
        name = f"csi-{driver}-{j}"
        out += [pv(name, csi={"driver": driver, "volumeHandle": name}), pvc(name, volume=name)]
    return out


def _csi_node(source: str, limit: int) -> list[dict[str, Any]]:
    if source == "csinode":
        return [csi_node(NODE, {EBS: limit})]
    if source == "no-csi-driver":
        return [csi_node(NODE, {})]
    return []


def _filter(gate: bool, raws: list[dict[str, Any]], new_pod: dict[str, Any]) -> Status | None:
    handle = VolumeHandle(objects(*raws))
    handle.feature_gates = FeatureGates.resolve((1, 37), {"VolumeLimitScaling": gate})
    plugin = new(None, handle)  # type: ignore[arg-type]
    node = node_with(name=NODE)
    state, info = CycleState(), PodInfo(new_pod)
    assert plugin.pre_filter(state, info, [node]) == (None, None)
    return plugin.filter(state, info, node)


NOT_INSTALLED = unschedulable("ebs.csi.aws.com CSI driver is not installed on the node")


@pytest.mark.parametrize(
    ("gate", "source", "limit", "driver_present", "prevent", "want"),
    [
        (True, "no-csi-driver", 0, True, False, None),
        (True, "no-csi-driver", 0, True, True, NOT_INSTALLED),
        (False, "no-csi-driver", 0, True, True, None),
        (True, "csinode", 2, True, True, None),
        (True, "no-csi-driver", 0, False, False, None),
    ],
    ids=[
        "gate enabled - allow scheduling when CSIDriver exists but PreventPodSchedulingIfMissing is not set",
        "gate enabled - fail when driver not installed and PreventPodSchedulingIfMissing is true",
        "gate disabled - skip driver presence check (regardless of CSIDriver presence)",
        "gate enabled - driver installed within limit",
        "gate enabled - allow scheduling when CSIDriver object missing",
    ],
)
def test_volume_limit_scaling_gate(
    gate: bool, source: str, limit: int, driver_present: bool, prevent: bool, want: Status | None
) -> None:
    raws = _claims(EBS) + _csi_node(source, limit)
    if driver_present:
        raws.append(_driver(EBS, True if prevent else None))
    assert _filter(gate, raws, pod_with_claims(f"csi-{EBS}-0")) == want


def test_a_node_without_a_csi_node_lacks_every_driver() -> None:
    raws = [*_claims(EBS), _driver(EBS, True)]
    assert _filter(True, raws, pod_with_claims(f"csi-{EBS}-0")) == NOT_INSTALLED


def test_the_check_comes_before_the_limits_and_names_the_first_missing_driver() -> None:
    # the GCE volume comes first in the pod: its driver is named (upstream picks one at random)
    raws = [
        *_claims(EBS),
        *_claims(GCE),
        _driver(EBS, True),
        _driver(GCE, True),
        csi_node(NODE, {"other": 0}),
    ]
    want = unschedulable("pd.csi.storage.gke.io CSI driver is not installed on the node")
    assert _filter(True, raws, pod_with_claims(f"csi-{GCE}-0", f"csi-{EBS}-0")) == want
    # the node lists the driver with no room: the limit rejects it
    raws = [*_claims(EBS), _driver(EBS, True), csi_node(NODE, {EBS: 0})]
    assert _filter(True, raws, pod_with_claims(f"csi-{EBS}-0")) == unschedulable(
        "node(s) exceed max volume count"
    )


@pytest.mark.parametrize(("prevent", "parsed"), [(True, True), (False, False), (None, False)])
def test_the_csi_driver_store_keeps_prevent_pod_scheduling_if_missing(
    prevent: bool | None, parsed: bool
) -> None:
    assert parse_csi_driver(_driver(EBS, prevent)).prevent_pod_scheduling_if_missing is parsed


@pytest.mark.parametrize("prevent", [True, False])
def test_a_pod_of_a_driver_that_opts_in_is_filtered_node_by_node(prevent: bool) -> None:
    with_driver = node_with(name="with")
    without = node_with(name="without")
    raws = [*_claims(EBS), _driver(EBS, prevent), csi_node("with", {EBS: 5}), csi_node("without", {})]
    handle = VolumeHandle(objects(*raws), snapshot(with_driver, without))
    plugin = new(None, handle)  # type: ignore[arg-type]
    state, info = CycleState(), PodInfo(pod_with_claims(f"csi-{EBS}-0"))
    assert plugin.pre_filter(state, info, [with_driver, without]) == (None, None)
    rows = np.arange(2, dtype=np.int64)
    passed = plugin.filter_rows(state, info, handle.snapshot().table, rows)
    verdicts = [plugin.filter(state, info, node) for node in (with_driver, without)]
    if prevent:
        assert passed is None
        assert verdicts == [None, NOT_INSTALLED]
    else:
        assert passed is not None and passed.tolist() == [True, True]
        assert verdicts == [None, None]
