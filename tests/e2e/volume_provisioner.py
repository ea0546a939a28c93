"""A stand-in for a CSI external-provisioner, for the e2e tier: a thread that makes the volume of every
claim the scheduler selected a node for, the way external-provisioner does with delayed binding.

Every ``interval`` seconds it lists the claims of one namespace and, for each claim that
kube-controller-manager's PV controller has handed to this provisioner (annotation
``volume.kubernetes.io/storage-provisioner``, set once the claim has ``volume.kubernetes.io/selected-node``)
and that has no volume yet, creates a PersistentVolume ``pvc-<claim uid>``: the claim's size, access
modes, mode and class, a claimRef to the claim, and node affinity to the selected node's zone
(``topology.kubernetes.io/zone``). The PV controller then binds the two. Volumes it made carry the label
``e2e.kopf-scheduler.dev/provisioned-by``, for cleanup.
"""

from __future__ import annotations

import threading
from typing import Any

from kopf_scheduler.devcluster.harness import ClusterHarness

ZONE = "topology.kubernetes.io/zone"
PROVISIONED_LABEL = "e2e.kopf-scheduler.dev/provisioned-by"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"


class TestProvisioner:
    __test__ = False  # not a test class for pytest

    def __init__(self, cp: ClusterHarness, namespace: str, name: str, interval: float = 0.2) -> None:
        self.cp = cp
        self.namespace = namespace
        self.name = name
        self.interval = interval
        self.made: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"provisioner-{name}", daemon=True)

    def __enter__(self) -> TestProvisioner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.provision_pending()
            except Exception as e:  # report in the test, keep serving
                self.errors.append(f"{type(e).__name__}: {e}")

    def provision_pending(self) -> None:
        claims = self.cp.get(f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims")["items"]
        for claim in claims:
            annotations = claim["metadata"].get("annotations") or {}
            if annotations.get(STORAGE_PROVISIONER) != self.name or claim["spec"].get("volumeName"):
                continue
            node = annotations.get(SELECTED_NODE)
            name = f"pvc-{claim['metadata']['uid']}"
            if not node or name in self.made:
                continue
            zone = self.cp.get(f"/api/v1/nodes/{node}")["metadata"]["labels"][ZONE]
            resp = self.cp.api.request("POST", "/api/v1/persistentvolumes", self.volume(claim, name, zone))
            if resp.status not in (201, 409):
                raise AssertionError(f"creating {name}: HTTP {resp.status}: {resp.text()[:300]}")
            self.made.append(name)

    def volume(self, claim: dict[str, Any], name: str, zone: str) -> dict[str, Any]:
        meta, spec = claim["metadata"], claim["spec"]
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "labels": {PROVISIONED_LABEL: self.name},
                "annotations": {"pv.kubernetes.io/provisioned-by": self.name},
            },
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec["accessModes"],
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "storageClassName": spec["storageClassName"],
                "persistentVolumeReclaimPolicy": "Delete",
                "csi": {"driver": self.name, "volumeHandle": name},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
                        ]
                    }
                },
            },
        }


def selected_node(cp: ClusterHarness, namespace: str, claim: str) -> str:
    """The node the scheduler selected for the claim (``volume.kubernetes.io/selected-node``), "" before."""
    body = cp.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}")
    return str((body["metadata"].get("annotations") or {}).get(SELECTED_NODE) or "")
