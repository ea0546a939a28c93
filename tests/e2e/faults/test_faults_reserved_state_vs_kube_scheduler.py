"""Fault tier: a binding refused for a pod that holds reserved state, under kube-scheduler v1.37.2 and under
kopf-scheduler, each on a fresh identical cluster (with kube-controller-manager) and reaching its API
server through a fault proxy (``side_by_side``'s ``fault_proxy``) that answers the pod's first two
``pods/binding`` POSTs with 409, as an admission webhook refusing them would (a 500 would be sent again
within the binding cycle by kopf-scheduler, not by kube-scheduler; a 409 on a pod still unbound fails
the binding cycle in both). The API server never sees those two; the third goes through. Checked
afterwards from the API server's own record (objects and audit log), and compared between the two:

1. **A WaitForFirstConsumer claim to provision** (class ``zonal``, a test provisioner standing in for a
   CSI external-provisioner). Before each binding, PreBind has already written the claim's
   ``volume.kubernetes.io/selected-node`` and waited until the claim was Bound; neither scheduler takes
   that back after the failed binding (upstream: no API rollback; Unreserve only reverts the assume
   cache to the API server's objects). So the pod is bound once, to the claim's selected node, and
   exactly one volume was provisioned and bound, to that claim.
2. **A ResourceClaim the scheduler allocates in PreBind** (``x``: one device of the class ``gpu``; the
   fake driver publishes one device, on node ``rs-0``). After the first failed binding, a second pod
   with claim ``y`` for the same device is created. The allocation written in PreBind stays; the
   reservation does not: Unreserve removes the pod from ``status.reservedFor`` (a strategic-merge
   patch) and the next attempt reserves it again, so ``x``'s status is written reserve, unreserve,
   reserve, unreserve, reserve. In the end the pod is bound once, to the device's node, ``x`` is
   allocated that one device and reserved for that pod only, and ``y`` has no allocation (the device is
   never allocated twice): its pod is unschedulable, with the same message from both schedulers.

Without Unreserve after a failed binding, case 2 ends with a single reserve write (the claim still names
the pod from the failed attempt, which the retry then skips). Case 1 cannot tell: what Unreserve would
revert is the API server's already. ``test_faults_gang_unreserve.py`` covers state that exists only in
the scheduler's memory (an assumed volume, an in-flight allocation, a gang's count) when the binding
cycle fails before anything is written.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from operator_harness import condition, fresh_cluster, settled_audit, sized_nodes, wait_until
from side_by_side import Scheduler, SideBySide
from volume_provisioner import SELECTED_NODE, ZONE, TestProvisioner

from kopf_scheduler.devcluster.fault_proxy import Fault
from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest

pytestmark = pytest.mark.e2e

NS = "reserved"
NODES = {"rs-0": ("zone-a", "4", "16Gi"), "rs-1": ("zone-b", "4", "16Gi")}
DEVICE_NODE = "rs-0"
PROVISIONER = "provisioner.e2e.kopf-scheduler.dev"
ZONAL = "zonal"
DRIVER = "gpu.e2e.example"
RESOURCE = "/apis/resource.k8s.io/v1"
FAILED_BINDINGS = 2
REFUSAL = 'admission webhook "deny.example.com" denied the request: node not ready for this tenant'
TIMEOUT = 60.0


def refuse_bindings(scheduler: Scheduler, pod: str) -> Fault:
    """The pod's first ``FAILED_BINDINGS`` binding requests answered 409 by the proxy."""
    assert scheduler.proxy is not None
    path = f"/api/v1/namespaces/{NS}/pods/{pod}/binding"
    return scheduler.proxy.add(
        Fault("POST", path, "answer", status=409, message=REFUSAL, times=FAILED_BINDINGS)
    )


def objects() -> list[tuple[str, dict[str, Any]]]:
    zonal = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": ZONAL},
        "provisioner": PROVISIONER,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    one_device = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{DEVICE_NODE}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": DEVICE_NODE,
            "pool": {"name": DEVICE_NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}],
        },
    }
    return [
        ("/apis/storage.k8s.io/v1/storageclasses", zonal),
        (f"{RESOURCE}/deviceclasses", device_class),
        (f"{RESOURCE}/resourceslices", one_device),
    ]


def own_cluster(state_dir: Path) -> contextlib.AbstractContextManager[ClusterHarness]:
    """Two nodes in two zones, the class ``zonal``, the class ``gpu`` and one device on ``rs-0``."""
    return fresh_cluster(state_dir, sized_nodes(NODES), namespaces=[NS], objects=objects())


def bound_node(cp: ClusterHarness, pod: str) -> str:
    return str(
        wait_until(
            lambda: cp.get(f"/api/v1/namespaces/{NS}/pods/{pod}")["spec"].get("nodeName"),
            TIMEOUT,
            f"pod {pod} bound",
        )
    )


def successful_bindings(cp: ClusterHarness) -> Counter[str]:
    return Counter(
        r.name for r in settled_audit(cp, NS) if r.is_binding and r.namespace == NS and r.succeeded
    )


def claim_to_provision(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    """Case 1 of the module docstring; returns what is compared."""
    fault = refuse_bindings(scheduler, "wffc")
    claim_path = f"/api/v1/namespaces/{NS}/persistentvolumeclaims/data"
    with TestProvisioner(cp, NS, PROVISIONER) as provisioner:
        cp.post(
            f"/api/v1/namespaces/{NS}/persistentvolumeclaims",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": NS},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": ZONAL,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        pod = pod_manifest(
            "wffc",
            NS,
            requests={"cpu": "100m"},
            volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        )
        cp.post(f"/api/v1/namespaces/{NS}/pods", pod)
        node = bound_node(cp, "wffc")
    assert provisioner.errors == [], provisioner.errors
    claim = cp.get(claim_path)
    uid = claim["metadata"]["uid"]
    volumes = [
        v
        for v in cp.get("/api/v1/persistentvolumes")["items"]
        if (v["spec"].get("claimRef") or {}).get("uid") == uid
    ]
    zones = [
        term["matchExpressions"][0]["values"]
        for v in volumes
        for term in v["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    ]
    return {
        "failed bindings": fault.hits,
        "successful bindings": successful_bindings(cp)["wffc"],
        "bound to the claim's selected node": node
        == (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE),
        "claim": claim["status"].get("phase"),
        "volumes made": len(provisioner.made),
        "volumes naming the claim": len(volumes),
        "claim's volume is the one made for it": claim["spec"].get("volumeName") == f"pvc-{uid}",
        "volume's zone is the node's": zones
        == [[cp.get(f"/api/v1/nodes/{node}")["metadata"]["labels"][ZONE]]],
    }


def claim_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }


def claim_pod(name: str, claim: str) -> dict[str, Any]:
    body = pod_manifest(name, NS, requests={"cpu": "100m"})
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return body


def unschedulable_message(cp: ClusterHarness, pod: str) -> str:
    def message() -> str | None:
        scheduled = condition(cp.get(f"/api/v1/namespaces/{NS}/pods/{pod}"), "PodScheduled")
        return scheduled.get("message") if scheduled.get("status") == "False" else None

    return str(wait_until(message, TIMEOUT, f"pod {pod} reported unschedulable"))


def claim_allocated_in_pre_bind(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    """Case 2 of the module docstring; returns what is compared."""
    fault = refuse_bindings(scheduler, "dra-a")
    claims = f"{RESOURCE}/namespaces/{NS}/resourceclaims"
    for name in ("x", "y"):
        cp.post(claims, claim_body(name))
    cp.post(f"/api/v1/namespaces/{NS}/pods", claim_pod("dra-a", "x"))
    wait_until(lambda: fault.hits >= 1, TIMEOUT, "dra-a's first binding refused")
    cp.post(f"/api/v1/namespaces/{NS}/pods", claim_pod("dra-b", "y"))
    node = bound_node(cp, "dra-a")
    message = unschedulable_message(cp, "dra-b")
    uid = cp.get(f"/api/v1/namespaces/{NS}/pods/dra-a")["metadata"]["uid"]
    x, y = cp.get(f"{claims}/x"), cp.get(f"{claims}/y")
    allocation = (x.get("status") or {}).get("allocation") or {}
    records = settled_audit(cp, NS)
    writes = [
        r.verb
        for r in records
        if r.resource == "resourceclaims" and r.name == "x" and r.subresource == "status" and r.succeeded
    ]
    return {
        "failed bindings": fault.hits,
        "successful bindings": successful_bindings(cp)["dra-a"],
        "on the device's node": node == DEVICE_NODE,
        "x allocated": [(r["driver"], r["pool"], r["device"]) for r in allocation["devices"]["results"]],
        "x reserved for": [
            (r["name"], r["uid"] == uid) for r in (x.get("status") or {}).get("reservedFor") or ()
        ],
        "x status writes": writes,
        "y": y.get("status") or {},
        "dra-b": message,
    }


def run(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, dict[str, Any]]:
    return {
        "claim to provision": claim_to_provision(cp, scheduler),
        "claim allocated in pre-bind": claim_allocated_in_pre_bind(cp, scheduler),
    }


SIDE_BY_SIDE = SideBySide("reserved-state", own_cluster, run, fault_proxy=True)

EXPECTED: dict[str, dict[str, Any]] = {
    "claim to provision": {
        "failed bindings": FAILED_BINDINGS,
        "successful bindings": 1,
        "bound to the claim's selected node": True,
        "claim": "Bound",
        "volumes made": 1,
        "volumes naming the claim": 1,
        "claim's volume is the one made for it": True,
        "volume's zone is the node's": True,
    },
    "claim allocated in pre-bind": {
        "failed bindings": FAILED_BINDINGS,
        "successful bindings": 1,
        "on the device's node": True,
        "x allocated": [(DRIVER, DEVICE_NODE, "gpu-0")],
        "x reserved for": [("dra-a", True)],
        # reserve (with the allocation), then per failed binding: unreserve, reserve
        "x status writes": ["update", "patch", "update", "patch", "update"],
        "y": {},
    },
}


@pytest.mark.parametrize("which", ["kube_scheduler", "kopf_scheduler"])
def test_nothing_left_behind_by_a_failed_binding(which: str, request: pytest.FixtureRequest) -> None:
    outcome = request.getfixturevalue(which)
    for case, expected in EXPECTED.items():
        got = {k: v for k, v in outcome[case].items() if k in expected}
        assert got == expected, f"{case}: {dumps(got)}"


def test_outcomes_as_kube_scheduler(kube_scheduler: Any, kopf_scheduler: Any) -> None:
    assert kopf_scheduler == kube_scheduler, (
        f"kube-scheduler: {dumps(kube_scheduler)}\nkopf-scheduler: {dumps(kopf_scheduler)}"
    )
    message = kube_scheduler["claim allocated in pre-bind"]["dra-b"]
    assert "cannot allocate all claims" in message, message
