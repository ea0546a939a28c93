"""Fault tier: a binding refused for a pod whose extended resource is backed by DRA (``DRAExtendedResource``),
under kube-scheduler v1.37.2 and under kopf-scheduler, each on a fresh identical cluster reaching its API
server through a fault proxy that answers the pod's first two ``pods/binding`` POSTs with 409 (as an
admission webhook refusing them would).

Before each binding, PreBind has created the pod's claim of extended resources
(``<pod>-extended-resources-<5>``), written its allocation and reservation and the pod's
``status.extendedResourceClaimStatus``. After the refused binding, Unreserve deletes that claim (its
finalizer removed first): the scheduler made it, and nothing else would. So, checked afterwards from the
API server's own record (objects and audit log) and compared between the two: three claims created, two
deleted, the pod bound once, exactly one claim left, owned by the pod, allocated on its node and reserved
for it, and the pod's status naming that claim.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from operator_harness import fresh_cluster, settled_audit, sized_nodes, wait_until
from side_by_side import Scheduler, SideBySide

from kopf_scheduler.devcluster.fault_proxy import Fault
from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e

NS = "ext-faults"
DRIVER = "gpu.e2e.example"
GPU = "example.com/gpu"
RESOURCE = "/apis/resource.k8s.io/v1"
FAILED_BINDINGS = 2
REFUSAL = 'admission webhook "deny.example.com" denied the request: node not ready for this tenant'
TIMEOUT = 60.0


def objects() -> list[tuple[str, dict[str, Any]]]:
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {
            "extendedResourceName": GPU,
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
        },
    }
    resource_slice = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"xf-0-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "xf-0",
            "pool": {"name": "xf-0", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
        },
    }
    return [(f"{RESOURCE}/deviceclasses", device_class), (f"{RESOURCE}/resourceslices", resource_slice)]


def own_cluster(state_dir: Path) -> contextlib.AbstractContextManager[ClusterHarness]:
    """One node, ``xf-0``, with two devices of the class ``gpu`` (which stands for ``example.com/gpu``)."""
    nodes = sized_nodes({"xf-0": (None, "4", "16Gi")})
    return fresh_cluster(state_dir, nodes, namespaces=[NS], objects=objects())


def run(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    assert scheduler.proxy is not None
    path = f"/api/v1/namespaces/{NS}/pods/ext/binding"
    fault = scheduler.proxy.add(
        Fault("POST", path, "answer", status=409, message=REFUSAL, times=FAILED_BINDINGS)
    )
    requests = {GPU: "1"}
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
    container["resources"] = {"requests": requests, "limits": requests}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ext"},
        "spec": {"containers": [container]},
    }
    cp.post(f"/api/v1/namespaces/{NS}/pods", pod)
    node = wait_until(
        lambda: cp.get(f"/api/v1/namespaces/{NS}/pods/ext")["spec"].get("nodeName"), TIMEOUT, "pod ext bound"
    )
    uid = cp.get(f"/api/v1/namespaces/{NS}/pods/ext")["metadata"]["uid"]

    def settled() -> list[dict[str, Any]] | None:
        """The pod's claims once only one is left and the pod's status names it."""
        owned = [
            c
            for c in cp.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims")["items"]
            if any(r.get("uid") == uid for r in c["metadata"].get("ownerReferences") or ())
        ]
        status = (cp.get(f"/api/v1/namespaces/{NS}/pods/ext").get("status") or {}).get(
            "extendedResourceClaimStatus"
        ) or {}
        if len(owned) == 1 and status.get("resourceClaimName") == owned[0]["metadata"]["name"]:
            return owned
        return None

    owned = wait_until(settled, TIMEOUT, "one claim left, named in the pod's status")
    records = settled_audit(cp, NS)
    claim_writes = [
        r for r in records if r.resource == "resourceclaims" and r.namespace == NS and r.succeeded
    ]
    claim = owned[0]
    results = claim["status"]["allocation"]["devices"]["results"]
    return {
        "failed bindings": fault.hits,
        "successful bindings": sum(1 for r in records if r.is_binding and r.name == "ext" and r.succeeded),
        "node": node,
        "claims created": sum(1 for r in claim_writes if r.verb == "create"),
        "claims deleted": sum(1 for r in claim_writes if r.verb == "delete"),
        "claim left": {
            "finalizers": claim["metadata"].get("finalizers"),
            "devices": [(r["driver"], r["pool"], r["device"]) for r in results],
            "reserved for the pod": [r["uid"] == uid for r in claim["status"].get("reservedFor") or ()],
        },
    }


SIDE_BY_SIDE = SideBySide("extended-faults", own_cluster, run, fault_proxy=True)

EXPECTED = {
    "failed bindings": FAILED_BINDINGS,
    "successful bindings": 1,
    "node": "xf-0",
    "claims created": FAILED_BINDINGS + 1,
    "claims deleted": FAILED_BINDINGS,
    "claim left": {
        "finalizers": ["resource.kubernetes.io/delete-protection"],
        "devices": [(DRIVER, "xf-0", "gpu-0")],
        "reserved for the pod": [True],
    },
}


@pytest.mark.parametrize("which", ["kube_scheduler", "kopf_scheduler"])
def test_a_refused_binding_leaves_no_claim_behind(which: str, request: pytest.FixtureRequest) -> None:
    got = request.getfixturevalue(which)
    assert got == EXPECTED, dumps(got)


def test_as_kube_scheduler(kube_scheduler: Any, kopf_scheduler: Any) -> None:
    assert kopf_scheduler == kube_scheduler, (
        f"kube-scheduler: {dumps(kube_scheduler)}\nkopf: {dumps(kopf_scheduler)}"
    )
