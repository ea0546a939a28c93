"""Volumes, claims and classes as API-shaped dicts for the VolumeBinding tests (the shapes of upstream's
``binder_test.go`` fixtures: ``makeTestPVC``, ``makeTestPV``, ``makeCapacity``), the stores they live in,
and a handle and client fake enough for the plugin."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from kopf_scheduler.api.feature_gates import DEFAULT_GATES, FeatureGates
from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import (
    CSI_DRIVERS,
    CSI_STORAGE_CAPACITIES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    WATCHED_KINDS,
    ObjectKind,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import make_node, make_pod

NS = "testns"
NODE_LABEL = "nodeKey"
WAIT = "waitClass"
IMMEDIATE = "immediateClass"
WAIT_PROVISIONER = "waitClassWithProvisioner"
TOPO_MISMATCH = "topoMismatchClass"
PROVISIONER = "test-provisioner"
CLAIM_UID = "pvc-uid"


def claim(
    name: str,
    size: str = "1G",
    *,
    storage_class: str | None = WAIT,
    volume: str = "",
    bound: bool = False,
    selected_node: str = "",
    version: str = "1",
    namespace: str = NS,
    uid: str = CLAIM_UID,
    **spec: Any,
) -> dict[str, Any]:
    """``makeTestPVC``: ``volume`` alone is pre-bound, with ``bound`` fully bound (``bind-completed``)."""
    annotations: dict[str, str] = {}
    if selected_node:
        annotations["volume.kubernetes.io/selected-node"] = selected_node
    if bound:
        annotations["pv.kubernetes.io/bind-completed"] = "yes"
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": version},
        "spec": {"resources": {"requests": {"storage": size}}, "volumeMode": "Filesystem", **spec},
    }
    if annotations:
        body["metadata"]["annotations"] = annotations
    if storage_class is not None:
        body["spec"]["storageClassName"] = storage_class
    if volume:
        body["spec"]["volumeName"] = volume
    return body


def volume(
    name: str,
    node: str = "",
    capacity: str = "1G",
    *,
    version: str = "1",
    bound_to: Mapping[str, Any] | None = None,
    storage_class: str = WAIT,
    phase: str = "Available",
    **spec: Any,
) -> dict[str, Any]:
    """``makeTestPV``: reachable from the node whose ``nodeKey`` label is ``node`` (every node for "")."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "resourceVersion": version},
        "spec": {
            "capacity": {"storage": capacity},
            "storageClassName": storage_class,
            "volumeMode": "Filesystem",
            **spec,
        },
        "status": {"phase": phase},
    }
    if node:
        body["spec"]["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": NODE_LABEL, "operator": "In", "values": [node]}]}
                ]
            }
        }
    if bound_to is not None:
        meta = bound_to["metadata"]
        body["spec"]["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "resourceVersion": meta["resourceVersion"],
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        }
        body["metadata"]["annotations"] = {"pv.kubernetes.io/bound-by-controller": "yes"}
    return body


def storage_class(
    name: str, provisioner: str = PROVISIONER, mode: str = "WaitForFirstConsumer", **fields: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        **fields,
    }


#: the classes of upstream's ``newTestBinder``
CLASSES = [
    storage_class(WAIT, "kubernetes.io/no-provisioner"),
    storage_class(IMMEDIATE, mode="Immediate"),
    storage_class(WAIT_PROVISIONER),
    storage_class(
        TOPO_MISMATCH,
        allowedTopologies=[{"matchLabelExpressions": [{"key": NODE_LABEL, "values": ["node-mismatch"]}]}],
    ),
]


def csi_driver(name: str = PROVISIONER, storage_capacity: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": {"storageCapacity": storage_capacity},
    }


def capacity(
    name: str, storage_class: str, node: str | None, size: str = "", maximum: str = "", topology: bool = True
) -> dict[str, Any]:
    """``makeCapacity``: for the node whose ``nodeKey`` is ``node`` (None: an empty selector, every node,
    network-attached storage); ``topology=False``: no ``nodeTopology`` at all (no node)."""
    body: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": NS},
        "storageClassName": storage_class,
    }
    if topology:
        body["nodeTopology"] = {"matchLabels": {NODE_LABEL: node}} if node is not None else {}
    if size:
        body["capacity"] = size
    if maximum:
        body["maximumVolumeSize"] = maximum
    return body


def pod_with_claims(*claim_names: str, name: str = "test-pod", uid: str = "pod-uid") -> PodInfo:
    volumes = [{"name": f"vol-{n}", "persistentVolumeClaim": {"claimName": n}} for n in claim_names]
    return PodInfo(make_pod().name(name).namespace(NS).uid(uid).set("spec.volumes", volumes).obj())


def node(name: str = "node1", **labels: str) -> NodeInfo:
    builder = make_node().name(name).label(NODE_LABEL, name)
    for key, value in labels.items():
        builder = builder.label(key, value)
    return NodeInfo(builder.obj())


def objects(*items: Mapping[str, Any], classes: Iterable[Mapping[str, Any]] = CLASSES) -> ClusterObjects:
    """The scheduler's stores holding ``items`` (and the test classes)."""
    stores = ClusterObjects(WATCHED_KINDS)
    kinds: dict[str, ObjectKind[Any]] = {
        "PersistentVolume": PERSISTENT_VOLUMES,
        "PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIMS,
        "StorageClass": STORAGE_CLASSES,
        "CSIDriver": CSI_DRIVERS,
        "CSIStorageCapacity": CSI_STORAGE_CAPACITIES,
    }
    for item in (*classes, *items):
        stores.store(kinds[item["kind"]]).upsert(copy.deepcopy(dict(item)))
    return stores


class FakeClient:
    """The API server of the pre-bind tests: PUTs of volumes and claims land in the stores (a new
    resourceVersion each, 409 on a stale one), or fail with ``fail``."""

    def __init__(self, stores: ClusterObjects) -> None:
        self.stores = stores
        self.writes: list[str] = []
        self.fail: APIError | None = None
        self._version = 100

    async def update_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.writes.append(path)
        if self.fail is not None:
            raise self.fail
        kind = PERSISTENT_VOLUMES if "/persistentvolumes/" in path else PERSISTENT_VOLUME_CLAIMS
        meta = obj["metadata"]
        current = self.stores.store(kind).get(meta.get("namespace", ""), meta["name"])
        if current is None:
            raise APIError(404, f'{kind.plural} "{meta["name"]}" not found')
        if current.resource_version != meta["resourceVersion"]:
            raise APIError(409, f'Operation cannot be fulfilled on {kind.plural} "{meta["name"]}"')
        self._version += 1
        stored = copy.deepcopy(dict(obj))
        stored["metadata"]["resourceVersion"] = str(self._version)
        self.stores.store(kind).upsert(stored)
        return stored


class FakeHandle:
    """The framework handle as VolumeBinding uses it (``gates``: v1.37's defaults unless given)."""

    def __init__(
        self, stores: ClusterObjects, nodes: Iterable[NodeInfo] = (), gates: FeatureGates = DEFAULT_GATES
    ) -> None:
        self.objects = stores
        self.feature_gates = gates
        self.client = FakeClient(stores)
        self.clock = VirtualClock()
        self.deleted: set[str] = set()
        self._snapshot = Snapshot()
        self._snapshot.rebuild(list(nodes))

    def snapshot(self) -> Snapshot:
        return self._snapshot

    def pod_exists(self, pod: PodInfo) -> bool:
        return pod.uid not in self.deleted
