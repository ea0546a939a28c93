"""Fault tier: a gang's binding cycles fail, and what its members reserved is given back.

When a binding cycle fails (the binding refused, or the wait at Permit rejected or timed out), the
scheduler unreserves: each plugin drops what its Reserve kept in memory for the pod. That state is
nowhere on the API server, so only what happens next shows whether it was dropped. Both cases run on the
cluster with kube-controller-manager (its PV controller completes the volume bindings the scheduler
writes) and check the API server's record; kube-scheduler has no Coscheduling, so there is nothing to
compare them with here (``test_gangs_vs_scheduler_plugins.py`` compares gangs without faults).

1. **The bindings of a whole gang refused.** Three members of a gang of three (one per node); a fault
   proxy answers every member's ``pods/binding`` POST with 409 until a pod outside the gang has taken
   one node. Then the bindings go through, but only two nodes are left: the gang must stay wholly
   unbound (Coscheduling counts the members it permitted, and must have stopped counting those whose
   binding failed), hold no node (another pod takes a second node), and be bound together once the two
   pods go. Each pod is bound by exactly one successful binding request.
2. **A gang that times out at Permit holding a volume and a device.** One member has a
   WaitForFirstConsumer claim that only a local volume on the node matches (VolumeBinding's Reserve
   assumes the volume bound to it), another a ResourceClaim for the node's only device (DynamicResources'
   Reserve holds it as an in-flight allocation); the third fits nowhere, so the two wait at Permit until
   the gang's ``scheduleTimeoutSeconds``. The third is then deleted (the gang gives up: the other two are
   held out of the queue, short of members), and two pods outside the gang, one with another claim for
   that volume and one with another claim for that device, must be bound: the volume bound to their
   claim, the device allocated to their claim and reserved for them only, and nothing of the gang's
   written (its claim Pending with no volume, its ResourceClaim without allocation).

If Unreserve is skipped after a failed binding cycle, case 1 binds two members of the gang alone and
case 2 leaves both outsiders unschedulable.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_harness import OPERATORS_KEY, Operators, Scope, settled_audit, wait_profile, wait_until

from kopf_scheduler.devcluster.fault_proxy import Fault, FaultProxy
from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"
RESOURCE = "/apis/resource.k8s.io/v1"
REFUSAL = 'admission webhook "deny.example.com" denied the request: node not ready for this tenant'
#: how long a gang that cannot be complete is watched staying unbound
WINDOW = 20.0
PERMIT_TIMEOUT = 3
TIMEOUT = 60.0


# -- this module's tests run on the cluster with kube-controller-manager ------------------------------------


@pytest.fixture
def scope(controller_plane: ClusterHarness) -> Iterator[Scope]:
    made = Scope(controller_plane)
    try:
        yield made
    finally:
        made.cleanup()


@pytest.fixture
def proxy(controller_plane: ClusterHarness) -> Iterator[FaultProxy]:
    with FaultProxy.of(controller_plane.cluster) as running:
        yield running


@pytest.fixture
def operators(
    controller_plane: ClusterHarness,
    scope: Scope,
    proxy: FaultProxy,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> Iterator[Operators]:
    """As conftest's ``operators``, on ``controller_plane``; stopped before the proxy and the scope go."""
    started = Operators(controller_plane.kubeconfig, tmp_path)
    request.node.stash[OPERATORS_KEY] = started
    try:
        yield started
    finally:
        killed = started.stop_all()
    assert not killed, f"operator(s) {', '.join(killed)} still running 15 s after SIGTERM"


def gang_profile(cp: ClusterHarness, scope: Scope, **args: int) -> str:
    """A gang-scheduling profile of this test; returns its schedulerName."""
    scheduler = scope.name("gang")
    scope.create_profile(
        scheduler,
        {
            "schedulerName": scheduler,
            "plugins": {
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
            },
            "pluginConfig": [{"name": "Coscheduling", "args": args}],
        },
    )
    wait_profile(cp, scheduler, "True")
    return scheduler


def pod_group(cp: ClusterHarness, scope: Scope, name: str, min_member: int, **spec: Any) -> None:
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": scope.namespace},
        "spec": {"minMember": min_member, **spec},
    }
    cp.post(PODGROUPS.format(namespace=scope.namespace), body)


def create(
    scope: Scope,
    name: str,
    scheduler: str,
    *,
    group: str = "",
    cpu: str = "100m",
    selector: dict[str, str] | None = None,
    **spec: Any,
) -> None:
    body = scope.pod(name, scheduler, requests={"cpu": cpu, "memory": "100Mi"}, selector=selector, **spec)
    if group:
        body["metadata"]["labels"] = {GROUP_LABEL: group}
    scope.cp.post(f"/api/v1/namespaces/{scope.namespace}/pods", body)


def delete_pod(scope: Scope, name: str) -> None:
    scope.cp.delete(f"/api/v1/namespaces/{scope.namespace}/pods/{name}")
    wait_until(lambda: name not in scope.pods(), 15, f"pod {name} deleted")


def successful_bindings(cp: ClusterHarness, namespace: str) -> Counter[str]:
    records = settled_audit(cp, namespace)
    return Counter(r.name for r in records if r.is_binding and r.namespace == namespace and r.succeeded)


# -- 1. the bindings of a whole gang refused ---------------------------------------------------------------


def test_a_gang_whose_bindings_failed_is_bound_together_or_not_at_all(
    controller_plane: ClusterHarness, scope: Scope, operators: Operators, proxy: FaultProxy, tmp_path: Path
) -> None:
    scope.nodes(3, cpu="2", memory="8Gi", pods="110")
    operator = operators.start(
        "op-gang", lease_namespace=scope.namespace, kubeconfig=proxy.kubeconfig(tmp_path / "kubeconfig")
    )
    operator.wait_leading()
    scheduler = gang_profile(controller_plane, scope)
    pod_group(controller_plane, scope, "train", 3)
    members = [f"train-{i}" for i in range(3)]
    bindings = rf"/api/v1/namespaces/{scope.namespace}/pods/train-\d/binding"
    refused = proxy.add(Fault("POST", bindings, "answer", status=409, message=REFUSAL, times=None))
    for name in members:
        create(scope, name, scheduler, group="train", cpu="1500m")

    def refused_members() -> set[str]:
        return {
            path.split("/")[-2]
            for _, _, path, action in proxy.requests
            if action and path.endswith("/binding")
        }

    wait_until(lambda: refused_members() == set(members), TIMEOUT, "a binding of every member refused")
    # while the gang's attempts keep failing, a pod outside it takes a node
    create(scope, "other", scheduler, cpu="1500m")
    scope.wait_bound("other", timeout=TIMEOUT)
    proxy.clear()
    assert refused.hits >= len(members), refused.hits

    deadline = time.monotonic() + WINDOW
    while time.monotonic() < deadline:
        assert scope.bound() == ["other"], f"bound while the gang cannot be complete: {scope.bound()}"
        time.sleep(0.5)
    create(scope, "other-2", scheduler, cpu="1500m")  # the gang holds no node either
    scope.wait_bound("other-2", timeout=TIMEOUT)
    assert sorted(scope.bound()) == ["other", "other-2"], scope.bound()

    for name in ("other", "other-2"):
        delete_pod(scope, name)
    wait_until(lambda: sorted(scope.bound()) == members, TIMEOUT, "the gang bound once there is room")
    assert successful_bindings(controller_plane, scope.namespace) == Counter(
        {name: 1 for name in [*members, "other", "other-2"]}
    )
    assert operator.alive, operator.tail()
    assert not operator.problems(), operator.problems()


# -- 2. a gang that times out at Permit holding a volume and a device -------------------------------------


def storage(cp: ClusterHarness, scope: Scope, node: str) -> str:
    """A WaitForFirstConsumer class of this test and one local volume of it on ``node``; returns the
    class."""
    name = scope.name("local")
    scope.delete_later(f"/apis/storage.k8s.io/v1/storageclasses/{name}")
    cp.post(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    scope.delete_later(f"/api/v1/persistentvolumes/{name}")
    hostname = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    cp.post(
        "/api/v1/persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": name,
                "persistentVolumeReclaimPolicy": "Retain",
                "local": {"path": "/mnt/disks/e2e"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [hostname]}]}},
            },
        },
    )
    return name


def devices(cp: ClusterHarness, scope: Scope, node: str) -> tuple[str, str]:
    """A device class of this test and one device of it on ``node``; returns (class, driver)."""
    name, driver = scope.name("gpu"), f"{scope.name('gpu')}.example.com"
    scope.delete_later(f"{RESOURCE}/deviceclasses/{name}")
    cp.post(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    scope.delete_later(f"{RESOURCE}/resourceslices/{name}")
    cp.post(
        f"{RESOURCE}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}],
            },
        },
    )
    return name, driver


def volume_claim(cp: ClusterHarness, scope: Scope, name: str, class_name: str) -> None:
    cp.post(
        f"/api/v1/namespaces/{scope.namespace}/persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": class_name,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )


def resource_claim(cp: ClusterHarness, scope: Scope, name: str, device_class: str) -> None:
    cp.post(
        f"{RESOURCE}/namespaces/{scope.namespace}/resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}
            },
        },
    )


def with_volume(claim: str) -> dict[str, Any]:
    return {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}


def with_device(claim: str) -> dict[str, Any]:
    return {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}


def test_a_gang_that_times_out_at_permit_gives_back_its_volume_and_device(
    controller_plane: ClusterHarness, scope: Scope, operators: Operators
) -> None:
    cp = controller_plane
    [node] = scope.nodes(1, cpu="4", memory="16Gi", pods="110")
    volume = storage(cp, scope, node)
    device_class, driver = devices(cp, scope, node)
    operator = operators.start("op-hold", lease_namespace=scope.namespace)
    operator.wait_leading()
    # 100 %: the member that fits nowhere does not reject the gang; the others wait out the timeout
    scheduler = gang_profile(cp, scope, podGroupRejectPercentage=100)
    pod_group(cp, scope, "hold", 3, scheduleTimeoutSeconds=PERMIT_TIMEOUT)
    volume_claim(cp, scope, "gang-data", volume)
    resource_claim(cp, scope, "gang-gpu", device_class)
    create(scope, "hold-volume", scheduler, group="hold", **with_volume("gang-data"))
    create(scope, "hold-device", scheduler, group="hold", **with_device("gang-gpu"))
    create(scope, "hold-never", scheduler, group="hold", selector={**scope.label, "never": "true"})
    for name in (
        "hold-volume",
        "hold-device",
    ):  # rejected at Permit: timed out, or by the sibling's Unreserve
        wait_until(
            lambda n=name: any(
                "at plugin Coscheduling" in e["message"] or "rejection in Unreserve" in e["message"]
                for e in scope.events("FailedScheduling", n)
            ),
            TIMEOUT,
            f"{name} rejected at Permit",
        )
    delete_pod(scope, "hold-never")
    time.sleep(PERMIT_TIMEOUT + 1)  # an attempt that began before the deletion has timed out too
    assert scope.bound() == [], scope.bound()

    volume_claim(cp, scope, "data", volume)
    resource_claim(cp, scope, "gpu", device_class)
    create(scope, "volume", scheduler, **with_volume("data"))
    create(scope, "device", scheduler, **with_device("gpu"))
    for name in ("volume", "device"):
        assert scope.wait_bound(name, timeout=TIMEOUT)["spec"]["nodeName"] == node

    claims = f"/api/v1/namespaces/{scope.namespace}/persistentvolumeclaims"
    data = wait_until(
        lambda: (c := cp.get(f"{claims}/data"))["status"].get("phase") == "Bound" and c, 30, "data Bound"
    )
    assert data["spec"]["volumeName"] == volume, dumps(data)
    claim_ref = cp.get(f"/api/v1/persistentvolumes/{volume}")["spec"]["claimRef"]
    assert (claim_ref["name"], claim_ref["uid"]) == ("data", data["metadata"]["uid"]), dumps(claim_ref)
    gang_data = cp.get(f"{claims}/gang-data")
    assert gang_data["status"].get("phase") == "Pending" and not gang_data["spec"].get("volumeName"), dumps(
        gang_data
    )

    resource_claims = f"{RESOURCE}/namespaces/{scope.namespace}/resourceclaims"
    gpu = cp.get(f"{resource_claims}/gpu")["status"]
    results = [(r["driver"], r["pool"], r["device"]) for r in gpu["allocation"]["devices"]["results"]]
    assert results == [(driver, node, "gpu-0")], dumps(gpu)
    device_uid = scope.get_pod("device")["metadata"]["uid"]
    assert [(r["name"], r["uid"]) for r in gpu["reservedFor"]] == [("device", device_uid)], dumps(gpu)
    assert not cp.get(f"{resource_claims}/gang-gpu").get("status"), "the gang's claim was written"

    assert successful_bindings(cp, scope.namespace) == Counter({"volume": 1, "device": 1})
    assert operator.alive, operator.tail()
    assert not operator.problems(), operator.problems()
