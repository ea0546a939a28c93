"""Extended resources backed by DRA (``DRAExtendedResource``, GA and locked on in 1.37) compared with
kube-scheduler v1.37.2, on two identical fresh clusters (``side_by_side``): one under kube-scheduler, then
one under ``kopf-scheduler run --default-scheduler-name default-scheduler``.

The DeviceClass ``gpu`` stands for ``example.com/gpu`` (``spec.extendedResourceName``) and, implicitly, for
``deviceclass.resource.kubernetes.io/gpu``. Node ``dra-0`` advertises no such resource; a fake driver
publishes four devices for it. Node ``plugin-1`` advertises ``example.com/gpu: 4`` in its allocatable (a
device plugin's), and has no devices. Each pod is created once the one before it is bound or reported:

- ``two`` (on dra-0): ``example.com/gpu: 2``: the scheduler allocates two devices through a ResourceClaim
  it creates, owned by the pod, and writes the pod's ``status.extendedResourceClaimStatus``;
- ``implicit`` (on dra-0): ``deviceclass.resource.kubernetes.io/gpu: 1``, the class's implicit name;
- ``init`` (on dra-0): an init container and a container each asking for one: one device, shared;
- ``native`` (on plugin-1): the node has the resource itself: no claim, no status, as for any extended
  resource;
- ``too-many``: ``example.com/gpu: 5`` fits nowhere: the FailedScheduling message is compared;
- ``late-class`` (on dra-0): ``example.com/fpga: 1`` before any class stands for it (``Insufficient
  example.com/fpga``); the class ``fpga`` is then created, and the DeviceClass event requeues the pod,
  which gets the one device of a second driver on dra-0.

Compared field by field: each claim's metadata (name pattern ``<pod>-extended-resources-<5>``, owner,
annotations, labels, finalizers), spec, ``status.allocation`` and ``status.reservedFor``, and each pod's
``status.extendedResourceClaimStatus``; only generated names, uids and the allocation's timestamp (the
time of the write) are normalised.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import pytest
from operator_harness import condition, fresh_cluster, sized_nodes, wait_until
from side_by_side import Scheduler, SideBySide

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e

NS = "dra-ext"
DRIVER = "gpu.e2e.example"
FPGA_DRIVER = "fpga.e2e.example"
GPU = "example.com/gpu"
IMPLICIT = "deviceclass.resource.kubernetes.io/gpu"
RESOURCE = "/apis/resource.k8s.io/v1"
TIMEOUT = 60.0
PAUSE = "registry.k8s.io/pause:3.10"


def container(name: str, **requests: str) -> dict[str, Any]:
    # extended resources cannot be overcommitted: the limit equals the request
    return {"name": name, "image": PAUSE, "resources": {"requests": requests, "limits": requests}}


#: pod -> (containers, init containers, node it is pinned to or None); in creation order
PODS: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], str | None]] = [
    ("two", [container("main", **{GPU: "2"})], [], "dra-0"),
    ("implicit", [container("main", **{IMPLICIT: "1"})], [], "dra-0"),
    ("init", [container("main", **{GPU: "1"})], [container("setup", **{GPU: "1"})], "dra-0"),
    ("native", [container("main", **{GPU: "1"})], [], "plugin-1"),
    ("too-many", [container("main", **{GPU: "5"})], [], None),
]


def own_cluster(state_dir: Path) -> contextlib.AbstractContextManager[ClusterHarness]:
    nodes = sized_nodes({"dra-0": (None, "8", "32Gi"), "plugin-1": (None, "8", "32Gi")})
    for body in nodes:
        if body["metadata"]["name"] == "plugin-1":
            for field in ("capacity", "allocatable"):
                body["status"][field] = {**body["status"][field], GPU: "4"}
    # the slice and the class exist before the scheduler starts: one created with the pods could reach
    # a scheduler's watch after them (its first attempt then finds no class)
    return fresh_cluster(state_dir, nodes, namespaces=[NS], objects=published())


def published() -> list[tuple[str, dict[str, Any]]]:
    devices = [{"name": f"gpu-{d}", "attributes": {"model": {"string": "t4"}}} for d in range(4)]
    slice_ = (
        f"{RESOURCE}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"dra-0-{DRIVER}"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "dra-0",
                "pool": {"name": "dra-0", "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        },
    )
    device_class = (
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "extendedResourceName": GPU,
                "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
            },
        },
    )
    fpga_slice = (
        f"{RESOURCE}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"dra-0-{FPGA_DRIVER}"},
            "spec": {
                "driver": FPGA_DRIVER,
                "nodeName": "dra-0",
                "pool": {"name": "dra-0-fpga", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "fpga-0"}],
            },
        },
    )
    return [slice_, device_class, fpga_slice]


#: made during the run, once the pod asking for ``example.com/fpga`` was reported unschedulable
FPGA_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "fpga"},
    "spec": {
        "extendedResourceName": "example.com/fpga",
        "selectors": [{"cel": {"expression": 'device.driver == "fpga.e2e.example"'}}],
    },
}


def outcome(cp: ClusterHarness, name: str) -> str | None:
    pod = cp.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    if pod["spec"].get("nodeName"):
        return "node:" + pod["spec"]["nodeName"]
    cond = condition(pod, "PodScheduled")
    if cond.get("status") == "False" and cond.get("reason") == "Unschedulable" and cond.get("message"):
        return str(cond["message"])
    return None


def normalised_claim(claim: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """The fields compared, generated name suffix and uids replaced by placeholders."""
    uid = pod["metadata"]["uid"]
    meta = claim["metadata"]
    name = re.sub(r"-[a-z0-9]{5}$", "-<generated>", meta["name"])
    owners = [
        {**ref, "uid": "<pod uid>" if ref.get("uid") == uid else ref.get("uid")}
        for ref in meta.get("ownerReferences") or ()
    ]
    status = claim.get("status") or {}
    reserved = [
        {**ref, "uid": "<pod uid>" if ref.get("uid") == uid else ref.get("uid")}
        for ref in status.get("reservedFor") or ()
    ]
    return {
        "name": name,
        "generateName": meta.get("generateName"),
        "namespace": meta.get("namespace"),
        "ownerReferences": owners,
        "annotations": meta.get("annotations"),
        "labels": meta.get("labels"),
        "finalizers": meta.get("finalizers"),
        "spec": claim.get("spec"),
        "allocation": _stamped(status.get("allocation")),
        "reservedFor": reserved,
        "devices": status.get("devices"),
    }


def _stamped(allocation: dict[str, Any] | None) -> dict[str, Any] | None:
    """The allocation with its ``allocationTimestamp`` (the time of the write, written by both with
    binding conditions on, as at 1.37) kept as present or absent only."""
    if allocation is None or "allocationTimestamp" not in allocation:
        return allocation
    return {**allocation, "allocationTimestamp": "<time of the write>"}


def normalised_status(pod: dict[str, Any]) -> dict[str, Any] | None:
    found = (pod.get("status") or {}).get("extendedResourceClaimStatus")
    if found is None:
        return None
    return {
        **found,
        "resourceClaimName": re.sub(r"-[a-z0-9]{5}$", "-<generated>", found["resourceClaimName"]),
    }


def run_pods(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    run: dict[str, Any] = {"outcomes": {}, "claims": {}, "status": {}}
    for name, containers, init, pinned in PODS:
        spec: dict[str, Any] = {"containers": containers}
        if init:
            spec["initContainers"] = init
        if pinned:
            spec["nodeSelector"] = {"kubernetes.io/hostname": pinned}
        cp.post(
            f"/api/v1/namespaces/{NS}/pods",
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec},
        )
        run["outcomes"][name] = wait_until(
            lambda n=name: outcome(cp, n), TIMEOUT, f"pod {name} placed or reported"
        )

        def settled(n: str = name) -> dict[str, Any] | None:
            """The pod with its status written, once its claim (if it has one) is reserved for it."""
            pod = cp.get(f"/api/v1/namespaces/{NS}/pods/{n}")
            if not pod["spec"].get("nodeName") or pod["metadata"]["name"] == "native":
                return pod
            claim_status = (pod.get("status") or {}).get("extendedResourceClaimStatus")
            return pod if claim_status else None

        record(cp, run, name, wait_until(settled, TIMEOUT, f"pod {name}'s extendedResourceClaimStatus"))
    # a class that comes after the pod asking for its resource: NodeResourcesFit's DeviceClass event
    # requeues the pod, which then gets the device
    late = {"containers": [container("main", **{"example.com/fpga": "1"})]}
    late["nodeSelector"] = {"kubernetes.io/hostname": "dra-0"}
    cp.post(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "late-class", "namespace": NS},
            "spec": late,
        },
    )
    run["late class"] = wait_until(lambda: outcome(cp, "late-class"), TIMEOUT, "late-class reported")
    cp.post(f"{RESOURCE}/deviceclasses", FPGA_CLASS)

    def bound_with_status() -> dict[str, Any] | None:
        pod = cp.get(f"/api/v1/namespaces/{NS}/pods/late-class")
        claimed = (pod.get("status") or {}).get("extendedResourceClaimStatus")
        return pod if pod["spec"].get("nodeName") and claimed else None

    pod = wait_until(bound_with_status, TIMEOUT, "late-class bound once its class exists")
    run["outcomes"]["late-class"] = "node:" + pod["spec"]["nodeName"]
    record(cp, run, "late-class", pod)
    return run


def record(cp: ClusterHarness, run: dict[str, Any], name: str, pod: dict[str, Any]) -> None:
    """The pod's ``extendedResourceClaimStatus`` and the claims it owns, normalised."""
    run["status"][name] = normalised_status(pod)
    owned = [
        c
        for c in cp.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims")["items"]
        if any(ref.get("uid") == pod["metadata"]["uid"] for ref in c["metadata"].get("ownerReferences") or ())
    ]
    run["claims"][name] = [normalised_claim(c, pod) for c in owned]


#: the pods under kube-scheduler, then on an identical fresh cluster under ``kopf-scheduler run
#: --default-scheduler-name default-scheduler`` (the fixtures ``kube_scheduler`` and ``kopf_scheduler``)
SIDE_BY_SIDE = SideBySide("dra-extended", own_cluster, run_pods)

TOO_MANY = (
    "0/2 nodes are available: 1 Insufficient example.com/gpu, 1 cannot allocate all claims. preemption: "
    "0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)


def test_outcomes_as_kube_scheduler(kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]) -> None:
    assert kopf_scheduler["outcomes"] == kube_scheduler["outcomes"], dumps(kube_scheduler["outcomes"])
    assert kube_scheduler["outcomes"] == {
        "two": "node:dra-0",
        "implicit": "node:dra-0",
        "init": "node:dra-0",
        "native": "node:plugin-1",
        "too-many": TOO_MANY,
        "late-class": "node:dra-0",
    }
    assert kopf_scheduler["late class"] == kube_scheduler["late class"] == LATE_CLASS


LATE_CLASS = (
    "0/2 nodes are available: 1 Insufficient example.com/fpga, 1 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)


@pytest.mark.parametrize("pod", [*(name for name, *_ in PODS), "late-class"])
def test_claim_and_pod_status_as_kube_scheduler(
    pod: str, kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    kube, ours = kube_scheduler["claims"][pod], kopf_scheduler["claims"][pod]
    assert ours == kube, f"kube-scheduler: {dumps(kube)}\nkopf-scheduler: {dumps(ours)}"
    assert kopf_scheduler["status"][pod] == kube_scheduler["status"][pod]


def test_what_kube_scheduler_wrote(kube_scheduler: dict[str, Any]) -> None:
    """What the comparison holds to (so that it compares something): the claims made and left alone."""
    claims = kube_scheduler["claims"]
    assert [c["name"] for c in claims["two"]] == ["two-extended-resources-<generated>"]
    assert claims["two"][0]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert len(claims["two"][0]["allocation"]["devices"]["results"]) == 2
    assert kube_scheduler["status"]["two"] == {
        "requestMappings": [
            {"containerName": "main", "requestName": "container-0-request-0", "resourceName": GPU}
        ],
        "resourceClaimName": "two-extended-resources-<generated>",
    }
    assert len(claims["init"][0]["allocation"]["devices"]["results"]) == 1
    assert claims["native"] == [] and kube_scheduler["status"]["native"] is None
    assert claims["too-many"] == [] and kube_scheduler["status"]["too-many"] is None
