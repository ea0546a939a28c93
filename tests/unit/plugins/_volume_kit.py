"""Storage objects, pods with volumes and a handle with object stores, for the volume plugins' tests
(the shapes of upstream's ``st.MakePod().PVC(...)`` and fake listers)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kopf_scheduler.api.feature_gates import DEFAULT_GATES
from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import WATCHED_KINDS
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import make_pod

_KINDS = {kind.kind: kind for kind in WATCHED_KINDS}


class VolumeHandle:
    """The handle the volume plugins use: the cycle's snapshot and the object listers."""

    def __init__(self, objects: ClusterObjects, snapshot: Snapshot | None = None) -> None:
        self.objects = objects
        self._snapshot = snapshot or Snapshot()
        self.feature_gates = DEFAULT_GATES

    def snapshot(self) -> Snapshot:
        return self._snapshot


def objects(*raws: Mapping[str, Any]) -> ClusterObjects:
    store = ClusterObjects(WATCHED_KINDS)
    for raw in raws:
        store.store(_KINDS[raw["kind"]]).upsert(raw)
    return store


def snapshot(*nodes: NodeInfo) -> Snapshot:
    snap = Snapshot()
    snap.rebuild(list(nodes))
    return snap


def node_with(
    *pods: Mapping[str, Any], name: str = "node-1", labels: Mapping[str, str] | None = None
) -> NodeInfo:
    info = NodeInfo({"metadata": {"name": name, "labels": dict(labels or {})}, "status": {}})
    for pod in pods:
        info.add_pod(PodInfo(pod))
    return info


# -- objects -------------------------------------------------------------------------------------------
def pvc(
    name: str,
    namespace: str = "default",
    *,
    volume: str = "",
    storage_class: str | None = None,
    access_modes: Iterable[str] = (),
    owner_uid: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner_uid is not None:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "p", "uid": owner_uid, "controller": True}]
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"accessModes": list(access_modes)}
    if volume:
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def pv(name: str, labels: Mapping[str, str] | None = None, **source: Any) -> dict[str, Any]:
    """A volume with ``source`` as its volume source (``csi={...}``, ``awsElasticBlockStore={...}``)."""
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": source,
    }


def csi_pv(name: str, driver: str, handle: str) -> dict[str, Any]:
    return pv(name, csi={"driver": driver, "volumeHandle": handle})


def storage_class(name: str, provisioner: str = "", mode: str | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {"kind": "StorageClass", "metadata": {"name": name}, "provisioner": provisioner}
    if mode is not None:
        raw["volumeBindingMode"] = mode
    return raw


def csi_node(name: str, limits: Mapping[str, int | None], migrated: Iterable[str] = ()) -> dict[str, Any]:
    drivers = []
    for driver, count in limits.items():
        entry: dict[str, Any] = {"name": driver, "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        drivers.append(entry)
    meta: dict[str, Any] = {"name": name}
    if migrated:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": ",".join(migrated)}
    return {"kind": "CSINode", "metadata": meta, "spec": {"drivers": drivers}}


def volume_attachment(name: str, node: str, attacher: str, pv_name: str | None) -> dict[str, Any]:
    source = {"persistentVolumeName": pv_name} if pv_name is not None else {"inlineVolumeSpec": {}}
    return {
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": attacher, "nodeName": node, "source": source},
    }


# -- pods ----------------------------------------------------------------------------------------------
def claim_volume(claim: str, name: str = "") -> dict[str, Any]:
    return {"name": name or f"vol-{claim}", "persistentVolumeClaim": {"claimName": claim}}


def ephemeral_volume(name: str) -> dict[str, Any]:
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}


def disk_volume(source: str, name: str = "disk", **fields: Any) -> dict[str, Any]:
    return {"name": name, source: dict(fields)}


def pod(
    *volumes: Mapping[str, Any],
    name: str = "p",
    namespace: str = "default",
    node: str = "",
    uid: str = "",
) -> dict[str, Any]:
    builder = make_pod().name(name).namespace(namespace)
    if uid:
        builder.uid(uid)
    if node:
        builder.node(node)
    raw = builder.obj()
    if volumes:
        raw["spec"]["volumes"] = [dict(v) for v in volumes]
    return raw


def pod_with_claims(
    *claims: str, name: str = "p", namespace: str = "default", node: str = ""
) -> dict[str, Any]:
    return pod(*(claim_volume(c) for c in claims), name=name, namespace=namespace, node=node)
