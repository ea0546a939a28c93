"""DRA device taints and DeviceTaintRules through the operator, side by side with kube-scheduler v1.37.2
(DRADeviceTaints and DRADeviceTaintRules on by default in both) on identical fresh clusters with
kube-controller-manager.

Two nodes of one size, one ResourceSlice each with one device of the fake driver ``taint.e2e.example``:
``dt-0``'s device carries the driver's own taint ``example.com/unhealthy=true:NoSchedule``; ``dt-1``'s is
tainted by the DeviceTaintRule ``dt-1-maintenance`` (``example.com/maintenance:NoSchedule``, its
selector naming the driver and ``dt-1``'s pool). NoSchedule only: a NoExecute taint would have
kube-controller-manager evict the pods of allocated devices, which is not the scheduler's part.

- ``plain`` (its claim tolerates nothing) fits nowhere: the same FailedScheduling message from both.
- The rule is deleted: that is a ResourceSlice update for the scheduler, which retries ``plain``; it gets
  ``dt-1``'s device, well before the five minutes after which a pod is retried anyway.
- ``tolerant`` (its claim tolerates ``example.com/unhealthy`` NoSchedule) gets ``dt-0``'s tainted device;
  its allocation result carries the request's tolerations, as kube-scheduler writes them.
- The rule's status as it stood before its deletion is the same under both (the scheduler writes none).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from operator_harness import condition, fresh_cluster, sized_nodes, wait_until
from side_by_side import Scheduler, SideBySide

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest

pytestmark = pytest.mark.e2e

NS = "dra-taints"
DRIVER = "taint.e2e.example"
RESOURCE = "/apis/resource.k8s.io/v1"
TIMEOUT = 60.0
#: kube-scheduler retries an unschedulable pod after at most this long without any event
POOL_FLUSH = 300.0
UNHEALTHY = {"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"}
TOLERATION = {"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSchedule"}
RULE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceTaintRule",
    "metadata": {"name": "dt-1-maintenance"},
    "spec": {
        "deviceSelector": {"driver": DRIVER, "pool": "dt-1"},
        "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
    },
}
UNSCHEDULABLE = (
    "0/2 nodes are available: 2 cannot allocate all claims. "
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)


def resource_slice(node: str, taints: list[dict[str, Any]]) -> dict[str, Any]:
    device: dict[str, Any] = {"name": "gpu-0"}
    if taints:
        device["taints"] = taints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [device],
        },
    }


def claim(name: str, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu"}
    if tolerations:
        exactly["tolerations"] = tolerations
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def own_cluster(state_dir: Path) -> contextlib.AbstractContextManager[ClusterHarness]:
    sizes = {f"dt-{index}": (None, "8", "32Gi") for index in range(2)}
    return fresh_cluster(state_dir, sized_nodes(sizes), namespaces=[NS])


def outcome(cp: ClusterHarness, name: str) -> str | None:
    pod = cp.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    if pod["spec"].get("nodeName"):
        return "node:" + pod["spec"]["nodeName"]
    cond = condition(pod, "PodScheduled")
    if cond.get("status") == "False" and cond.get("reason") == "Unschedulable" and cond.get("message"):
        return str(cond["message"])
    return None


def start_pod(cp: ClusterHarness, name: str) -> None:
    body = pod_manifest(name, NS, requests={"cpu": "100m"})
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
    cp.post(f"/api/v1/namespaces/{NS}/pods", body)


def run(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    cp.post(f"{RESOURCE}/resourceslices", resource_slice("dt-0", [UNHEALTHY]))
    cp.post(f"{RESOURCE}/resourceslices", resource_slice("dt-1", []))
    cp.post(f"{RESOURCE}/devicetaintrules", RULE)
    cp.post(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    cp.post(f"{RESOURCE}/namespaces/{NS}/resourceclaims", claim("plain", []))
    cp.post(f"{RESOURCE}/namespaces/{NS}/resourceclaims", claim("tolerant", [TOLERATION]))
    seen: dict[str, Any] = {}
    start_pod(cp, "plain")
    seen["plain"] = wait_until(lambda: outcome(cp, "plain"), TIMEOUT, "plain placed or reported")
    status = cp.get(f"{RESOURCE}/devicetaintrules/{RULE['metadata']['name']}").get("status") or {}
    seen["rule status"] = [
        {k: c.get(k) for k in ("type", "status", "reason")} for c in status.get("conditions") or ()
    ]
    cp.delete(f"{RESOURCE}/devicetaintrules/{RULE['metadata']['name']}")
    seen["plain after the rule went"] = wait_until(
        lambda: (found := outcome(cp, "plain")) and found.startswith("node:") and found,
        TIMEOUT,
        "plain bound once the rule is gone",
    )
    assert TIMEOUT < POOL_FLUSH  # bound by the rule's event, not by the pool's periodic flush
    start_pod(cp, "tolerant")
    seen["tolerant"] = wait_until(lambda: outcome(cp, "tolerant"), TIMEOUT, "tolerant placed or reported")
    for name in ("plain", "tolerant"):
        allocation = cp.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{name}")["status"]["allocation"]
        seen[f"{name} devices"] = allocation["devices"]["results"]
    return seen


#: the run under kube-scheduler, then on an identical fresh cluster under ``kopf-scheduler run``
SIDE_BY_SIDE = SideBySide("dra-taints", own_cluster, run)


def test_taints_and_rules_as_kube_scheduler(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kopf_scheduler == kube_scheduler, (
        f"kube-scheduler: {dumps(kube_scheduler)}\nours: {dumps(kopf_scheduler)}"
    )


def test_what_both_did(kube_scheduler: dict[str, Any]) -> None:
    """What the comparison above compares: the taint and the rule kept ``plain`` off both devices; the
    rule's deletion let it take ``dt-1``'s; the tolerating claim got the tainted one, with its toleration."""
    assert kube_scheduler["plain"] == UNSCHEDULABLE
    assert kube_scheduler["plain after the rule went"] == "node:dt-1"
    assert kube_scheduler["tolerant"] == "node:dt-0"
    assert kube_scheduler["plain devices"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "dt-1", "device": "gpu-0"}
    ]
    assert kube_scheduler["tolerant devices"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "dt-0", "device": "gpu-0", "tolerations": [TOLERATION]}
    ]
