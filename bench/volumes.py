"""Volumes for the volume workloads.

``CSIPersistentVolumes`` is upstream scheduler_perf's SchedulingCSIPVs (``volumes/performance-config.yaml``):
every node gets a CSINode with the driver ``ebs.csi.aws.com`` and an attach limit of 39 (upstream's
``nodeAllocatableStrategy``: ``csiNodeAllocatable``, plus ``attachable-volumes-csi-ebs.csi.aws.com: 39``
in the node's allocatable), and every pod, initial or measured, a claim already bound to a CSI volume of
its own, made as upstream's ``CreatePodWithPersistentVolume`` (``test/utils/runners.go``) makes them with
``bindVolume``: the claim is ``templates/pvc.yaml`` (ReadOnlyMany, 1 Gi, annotation
``pv.kubernetes.io/bind-completed``) with ``spec.volumeName``, created first; the volume is
``templates/pv-csi.yaml`` (CSI ``ebs.csi.aws.com``, ReadOnlyMany, 1 Gi, Retain) named
``<namespace>-<claim>`` with its ``volumeHandle`` the same and a ``claimRef`` to the claim. Creating an
object resets its status, so both get a second request for it: the claim ``Bound`` (with the capacity
and access modes the PV controller would copy from the volume), the volume ``Bound``. No controller
needs to run: that is the state the PV controller leaves a bound pair in, and kube-scheduler's
VolumeBinding counts a claim bound when it has a volume name and ``bind-completed``
(``isPVCFullyBound``). Unlike upstream, which makes each pod's pair just before the pod inside the
measured op, every pair is made during setup, before the scheduler starts: the measured phase creates
pods only, as in the other workloads.

``DelayedBindingVolumes`` has no upstream counterpart: a StorageClass with ``WaitForFirstConsumer``
binding whose provisioner is this harness's stand-in for a CSI external-provisioner
(``bench.provisioner``), and one unbound claim (ReadWriteOnce, 1 Gi) per measured pod. The scheduler
picks a node and writes ``volume.kubernetes.io/selected-node`` on the claim; kube-controller-manager's
PV controller hands the claim to the provisioner; the provisioner makes a volume in the node's zone; the
PV controller binds the two; the scheduler, waiting in PreBind, then binds the pod.
"""

from __future__ import annotations

from typing import Any

from bench.objects import Companion, Extras, Setup
from bench.provisioner import SELECTED_NODE, ZONE, Provisioner
from kopf_scheduler.devcluster import ApiClient

#: upstream's templates/pv-csi.yaml and the workload's csiNodeAllocatable
CSI_DRIVER = "ebs.csi.aws.com"
CSI_ATTACH_LIMIT = 39
ATTACH_LIMIT_RESOURCE = f"attachable-volumes-csi-{CSI_DRIVER}"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
#: v1.MigratedPluginsAnnotationKey; upstream writes it (empty for SchedulingCSIPVs) on every CSINode
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
VOLUME_SIZE = "1Gi"

DELAYED_CLASS = "bench-wait-for-first-consumer"
DELAYED_DRIVER = "provisioner.bench.kopf-scheduler.dev"


def claim_name(pod_name: str) -> str:
    """Each pod's claim is named after it (upstream: ``pvc-<i>``)."""
    return f"pvc-{pod_name}"


def with_claim(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod with upstream's volume ``vol`` over its claim (no mount: nothing runs it)."""
    claim = claim_name(pod["metadata"]["name"])
    pod["spec"]["volumes"] = [{"name": "vol", "persistentVolumeClaim": {"claimName": claim}}]
    return pod


def csi_node(node: str, driver: str, limit: int) -> dict[str, Any]:
    """upstream's ``NodeAllocatableStrategy.createCSINode``."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node, "annotations": {ANN_MIGRATED_PLUGINS: ""}},
        "spec": {"drivers": [{"name": driver, "nodeID": node, "allocatable": {"count": limit}}]},
    }


def bound_claim(name: str, volume: str) -> dict[str, Any]:
    """``templates/pvc.yaml`` pre-bound to ``volume``."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "annotations": {ANN_BIND_COMPLETED: "true"}},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "resources": {"requests": {"storage": VOLUME_SIZE}},
            "volumeName": volume,
        },
    }


def bound_volume(name: str, namespace: str, claim: str, claim_uid: str) -> dict[str, Any]:
    """``templates/pv-csi.yaml`` (``volumeHandle`` = its name) pre-bound to the claim."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "capacity": {"storage": VOLUME_SIZE},
            "csi": {"driver": CSI_DRIVER, "volumeHandle": name},
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": namespace,
                "name": claim,
                "uid": claim_uid,
            },
        },
    }


class CSIPersistentVolumes(Extras):
    """SchedulingCSIPVs: CSINodes, and a bound claim and volume for every pod."""

    async def before_pods(self, setup: Setup) -> None:
        loader = setup.loader
        await loader.each(
            setup.nodes,
            lambda node: loader.create(
                "/apis/storage.k8s.io/v1/csinodes", csi_node(node, CSI_DRIVER, CSI_ATTACH_LIMIT)
            ),
        )
        pods = [(setup.init_namespace, name) for name in setup.init_pods]
        pods += [(setup.measured_namespace, name) for name in setup.measured_pods]
        await loader.each(pods, lambda item: self._bound_pair(setup, *item))

    async def _bound_pair(self, setup: Setup, namespace: str, pod: str) -> None:
        loader, claim = setup.loader, claim_name(pod)
        volume = f"{namespace}-{claim}"
        claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
        created = await loader.create(claims, bound_claim(claim, volume))
        status = {
            "phase": "Bound",
            "accessModes": ["ReadOnlyMany"],
            "capacity": {"storage": VOLUME_SIZE},
        }
        await loader.patch_status(f"{claims}/{claim}", status)
        uid = created["metadata"]["uid"]
        await loader.create("/api/v1/persistentvolumes", bound_volume(volume, namespace, claim, uid))
        await loader.patch_status(f"/api/v1/persistentvolumes/{volume}", {"phase": "Bound"})


def delayed_class() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": DELAYED_CLASS},
        "provisioner": DELAYED_DRIVER,
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
    }


def unbound_claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": VOLUME_SIZE}},
            "storageClassName": DELAYED_CLASS,
        },
    }


def volume_zones(volume: dict[str, Any]) -> set[str]:
    """The zones a volume's required node affinity allows."""
    terms = (((volume["spec"].get("nodeAffinity") or {}).get("required")) or {}).get("nodeSelectorTerms", [])
    return {
        value
        for term in terms
        for expression in term.get("matchExpressions") or []
        if expression["key"] == ZONE and expression["operator"] == "In"
        for value in expression["values"]
    }


class DelayedBindingVolumes(Extras):
    """SchedulingWaitForFirstConsumer: the class, CSINodes for its driver, an unbound claim per
    measured pod, and the provisioner beside the scheduler."""

    async def before_pods(self, setup: Setup) -> None:
        loader = setup.loader
        await loader.create("/apis/storage.k8s.io/v1/storageclasses", delayed_class())
        await loader.each(
            setup.nodes,
            lambda node: loader.create(
                "/apis/storage.k8s.io/v1/csinodes", csi_node(node, DELAYED_DRIVER, CSI_ATTACH_LIMIT)
            ),
        )
        claims = f"/api/v1/namespaces/{setup.measured_namespace}/persistentvolumeclaims"
        await loader.each(
            setup.measured_pods, lambda pod: loader.create(claims, unbound_claim(claim_name(pod)))
        )

    def companion(self, api: ApiClient, setup: Setup) -> Companion | None:
        return Provisioner(api, setup.measured_namespace, DELAYED_DRIVER)

    async def check(self, setup: Setup) -> list[str]:
        """Every measured pod's claim names the pod's node as selected and is bound to a volume of that
        node's zone."""
        loader, ns, problems = setup.loader, setup.measured_namespace, []
        pods = (await loader.request("GET", f"/api/v1/namespaces/{ns}/pods"))["items"]
        claims = (await loader.request("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims"))["items"]
        volumes = (await loader.request("GET", "/api/v1/persistentvolumes"))["items"]
        nodes = (await loader.request("GET", "/api/v1/nodes"))["items"]
        zones = {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE) for n in nodes}
        by_claim = {c["metadata"]["name"]: c for c in claims}
        by_name = {v["metadata"]["name"]: v for v in volumes}
        for pod in pods:
            name, node = pod["metadata"]["name"], pod["spec"].get("nodeName")
            claim = by_claim.get(claim_name(name)) or {}
            selected = (claim.get("metadata", {}).get("annotations") or {}).get(SELECTED_NODE)
            volume = by_name.get((claim.get("spec") or {}).get("volumeName") or "")
            if (claim.get("status") or {}).get("phase") != "Bound" or volume is None:
                problems.append(f"pod {name} on {node}: claim not bound ({claim.get('status')})")
            elif selected != node:
                problems.append(f"pod {name} on {node}: claim's selected node is {selected}")
            elif zones.get(node) not in volume_zones(volume):
                problems.append(f"pod {name} on {node}: volume {volume['metadata']['name']} in another zone")
        return problems
