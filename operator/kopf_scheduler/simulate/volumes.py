"""PersistentVolumes and claims in the simulated cluster: the API server's writes, and what the
controllers of a real cluster would do next, so ``simulate`` can tell which volume each claim gets.

- ``update`` is the PUT the volume binder makes: 404 for an unknown object, 409 when
  ``metadata.resourceVersion`` is not the stored one (the API server's messages), else stored with a new
  resourceVersion (``status`` kept: a PUT of the object does not change it) and echoed to the scheduler.
- The PV controller: a volume whose claimRef names an existing claim is bound to it (volume ``Bound``;
  claim ``volumeName``, ``bind-completed``, ``Bound``).
- A provisioner: a claim with ``volume.kubernetes.io/selected-node`` of a class whose provisioner is set
  (not ``kubernetes.io/no-provisioner``) gets a volume ``pvc-<claim uid>`` of its size, class, access
  modes and mode, reachable from the selected node's topology: the CSINode topology keys of the
  provisioner on that node, else the keys of the class's ``allowedTopologies``, else from every node.
- The ephemeral volume controller: ``ephemeral_claims`` makes a pending pod's generic ephemeral claims.

Objects without ``metadata.uid`` or ``resourceVersion`` get them when loaded, as the API server gives.
"""

from __future__ import annotations

import copy
import itertools
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.objects import (
    CSI_NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    ObjectKind,
    object_key,
)
from kopf_scheduler.framework.objects.storage import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_DYNAMICALLY_PROVISIONED,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
)
from kopf_scheduler.simulate.conditional import check_update

NO_PROVISIONER = "kubernetes.io/no-provisioner"
#: how this run bound a claim: to an existing volume, or to one provisioned for it
STATIC, PROVISIONED = "static", "provisioned"
_TRACKED = (PERSISTENT_VOLUMES, PERSISTENT_VOLUME_CLAIMS, STORAGE_CLASSES, CSI_NODES)


@dataclass
class SimulatedVolumes:
    #: the scheduler's watch of the other kinds: called with every object written
    on_object: Callable[[ObjectKind[Any], Mapping[str, Any]], None] | None = None
    #: node name -> labels (provisioned volumes follow the selected node's topology)
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    #: volume name -> how this run bound it (``STATIC`` or ``PROVISIONED``)
    bound_by_run: dict[str, str] = field(default_factory=dict)
    _objects: dict[ObjectKind[Any], dict[tuple[str, str], dict[str, Any]]] = field(
        default_factory=lambda: {kind: {} for kind in _TRACKED}
    )
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def load(self, kind: ObjectKind[Any], obj: dict[str, Any]) -> dict[str, Any]:
        """An object of the input: kept (volumes, claims, classes, CSINodes), with a uid and a
        resourceVersion when it had none; returned for the scheduler."""
        if kind not in self._objects:
            return obj
        meta = obj.setdefault("metadata", {})
        if kind.namespaced:
            meta.setdefault("namespace", "default")
        meta.setdefault(
            "uid",
            str(
                uuid.uuid5(
                    uuid.NAMESPACE_URL, f"{kind.plural}/{meta.get('namespace', '')}/{meta.get('name')}"
                )
            ),
        )
        if not str(meta.get("resourceVersion") or "").isdigit():
            meta["resourceVersion"] = str(next(self._versions))
        self._objects[kind][object_key(obj, kind.namespaced)] = obj
        return obj

    def get(self, kind: ObjectKind[Any], namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects[kind].get((namespace if kind.namespaced else "", name))

    def update(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        kind, key = self._locate(path)
        current = check_update(self._objects[kind].get(key), obj, f"{kind.plural} {json.dumps(key[1])}")
        stored = copy.deepcopy(dict(obj))
        stored["status"] = copy.deepcopy(current.get("status") or {})
        self._store(kind, stored)
        if kind is PERSISTENT_VOLUMES:
            self._bind(stored, STATIC)
        else:
            self._provision(stored)
        return copy.deepcopy(self._objects[kind][key])

    def _locate(self, path: str) -> tuple[ObjectKind[Any], tuple[str, str]]:
        parts = path.strip("/").split("/")
        if parts[:3] == ["api", "v1", "persistentvolumes"] and len(parts) == 4:
            return PERSISTENT_VOLUMES, ("", parts[3])
        if (
            parts[:3] == ["api", "v1", "namespaces"]
            and len(parts) == 6
            and parts[4] == "persistentvolumeclaims"
        ):
            return PERSISTENT_VOLUME_CLAIMS, (parts[3], parts[5])
        raise APIError(404, f"the server could not find the requested resource ({path})")

    def _store(self, kind: ObjectKind[Any], obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        self._objects[kind][object_key(obj, kind.namespaced)] = obj
        if self.on_object is not None:
            self.on_object(kind, copy.deepcopy(obj))

    def _bind(self, volume: dict[str, Any], how: str) -> None:
        """The PV controller binding a volume to the claim its claimRef names."""
        ref = (volume.get("spec") or {}).get("claimRef") or {}
        claim = self.get(
            PERSISTENT_VOLUME_CLAIMS, str(ref.get("namespace") or ""), str(ref.get("name") or "")
        )
        if claim is None or (ref.get("uid") and ref["uid"] != claim["metadata"].get("uid")):
            return
        if claim.get("spec", {}).get("volumeName") not in (None, "", volume["metadata"]["name"]):
            return
        volume = copy.deepcopy(volume)
        volume["status"] = {**(volume.get("status") or {}), "phase": "Bound"}
        self._store(PERSISTENT_VOLUMES, volume)
        claim = copy.deepcopy(claim)
        claim.setdefault("spec", {})["volumeName"] = volume["metadata"]["name"]
        annotations = claim["metadata"].setdefault("annotations", {})
        annotations.update({ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"})
        spec = volume.get("spec") or {}
        claim["status"] = {
            "phase": "Bound",
            "accessModes": list(spec.get("accessModes") or ()),
            "capacity": dict(spec.get("capacity") or {}),
        }
        self._store(PERSISTENT_VOLUME_CLAIMS, claim)
        self.bound_by_run[volume["metadata"]["name"]] = how

    def _provision(self, claim: dict[str, Any]) -> None:
        meta, spec = claim["metadata"], claim.get("spec") or {}
        node = (meta.get("annotations") or {}).get(ANN_SELECTED_NODE)
        storage_class = self.get(STORAGE_CLASSES, "", str(spec.get("storageClassName") or ""))
        if not node or spec.get("volumeName") or storage_class is None:
            return
        provisioner = str(storage_class.get("provisioner") or "")
        if not provisioner or provisioner == NO_PROVISIONER:
            return
        volume: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": f"pvc-{meta['uid']}",
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"persistentvolumes/pvc-{meta['uid']}")),
                "annotations": {ANN_DYNAMICALLY_PROVISIONED: provisioner},
            },
            "spec": {
                "capacity": {
                    "storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")
                },
                "accessModes": list(spec.get("accessModes") or ()),
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "storageClassName": storage_class["metadata"]["name"],
                "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
            "status": {"phase": "Pending"},
        }
        terms = self._topology(node, provisioner, storage_class)
        if terms:
            volume["spec"]["nodeAffinity"] = {
                "required": {"nodeSelectorTerms": [{"matchExpressions": terms}]}
            }
        claim = copy.deepcopy(claim)
        claim["metadata"].setdefault("annotations", {})[ANN_STORAGE_PROVISIONER] = provisioner
        self._store(PERSISTENT_VOLUME_CLAIMS, claim)
        self._store(PERSISTENT_VOLUMES, volume)
        self._bind(volume, PROVISIONED)

    def _topology(
        self, node: str, provisioner: str, storage_class: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        labels = self.node_labels.get(node, {})
        keys: list[str] = []
        csi_node = self.get(CSI_NODES, "", node)
        for driver in ((csi_node or {}).get("spec") or {}).get("drivers") or ():
            if driver.get("name") == provisioner:
                keys = list(driver.get("topologyKeys") or ())
        if not keys:
            for term in storage_class.get("allowedTopologies") or ():
                keys += [
                    e["key"] for e in term.get("matchLabelExpressions") or () if e.get("key") not in keys
                ]
        return [{"key": key, "operator": "In", "values": [labels[key]]} for key in keys if key in labels]


def ephemeral_claims(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The claims the ephemeral volume controller makes for a pod's generic ephemeral volumes: named
    ``<pod>-<volume>``, from the volume's template, controlled by the pod."""
    meta = pod.get("metadata") or {}
    claims = []
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        template = (
            (volume.get("ephemeral") or {}).get("volumeClaimTemplate")
            if isinstance(volume, Mapping)
            else None
        )
        if not isinstance(template, Mapping):
            continue
        owner = {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "uid": meta.get("uid"),
                 "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        claim_meta = dict(template.get("metadata") or {})
        claim_meta.update(
            name=f"{meta.get('name')}-{volume.get('name')}",
            namespace=meta.get("namespace") or "default",
            ownerReferences=[owner],
        )
        claims.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": claim_meta,
                "spec": copy.deepcopy(template.get("spec") or {}),
            }
        )
    return claims
