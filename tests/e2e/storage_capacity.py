"""The storage-capacity case of the 1.37 e2e tests: two nodes, each alone in its zone, a CSI driver that
publishes capacity (CSIStorageCapacity per zone: 10Gi in ``cap-x``, 100Gi in ``cap-y``) and a
WaitForFirstConsumer class, and a pod of 100m / 128Mi with an unbound claim of 1Gi kept to those zones.

``cap-x-2`` (16 cpu) beats ``cap-y-3`` (8 cpu) by one point of LeastAllocated (99 against 98; their
BalancedAllocation scores tie at 74). With StorageCapacityScoring (on from 1.37) VolumeBinding scores the
claim's utilization of each zone's capacity with the default shape (utilization 0 scores 10, 100 scores
0, times 10): 90 on ``cap-x`` (10 %), 99 on ``cap-y`` (1 %), so the pod goes to ``cap-y-3``; without it
(1.36's defaults) VolumeBinding scores 0 everywhere and the pod goes to ``cap-x-2``.
"""

from __future__ import annotations

from typing import Any

from kopf_scheduler.devcluster.harness import pod_manifest

ZONE = "topology.kubernetes.io/zone"
PROVISIONER = "capacity.e2e.kopf-scheduler.dev"
CLASS = "capacity"
CAPACITY = {"cap-x": "10Gi", "cap-y": "100Gi"}
#: name -> (zone, cpu, memory), for ``operator_harness.sized_nodes`` (after two other nodes)
NODES = {"cap-x-2": ("cap-x", "16", "32Gi"), "cap-y-3": ("cap-y", "8", "32Gi")}


def in_zones(*zones: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": list(zones)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def objects(namespace: str) -> list[tuple[str, dict[str, Any]]]:
    """The CSIDriver, the class and the capacities, as ``(collection path, body)``."""
    driver = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": PROVISIONER},
        "spec": {"attachRequired": False, "storageCapacity": True},
    }
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": CLASS},
        "provisioner": PROVISIONER,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    capacities = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIStorageCapacity",
            "metadata": {"name": f"{zone}-capacity", "namespace": namespace},
            "storageClassName": CLASS,
            "nodeTopology": {"matchLabels": {ZONE: zone}},
            "capacity": capacity,
        }
        for zone, capacity in CAPACITY.items()
    ]
    return [
        ("/apis/storage.k8s.io/v1/csidrivers", driver),
        ("/apis/storage.k8s.io/v1/storageclasses", storage_class),
        *((f"/apis/storage.k8s.io/v1/namespaces/{namespace}/csistoragecapacities", c) for c in capacities),
    ]


def claim(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": CLASS,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def pod_with_claim(namespace: str) -> dict[str, Any]:
    return pod_manifest(
        "with-claim", namespace, requests={"cpu": "100m", "memory": "128Mi"}, affinity=in_zones(*CAPACITY),
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    )  # fmt: skip
