"""Which volume a claim may bind to, and the objects the binder writes: upstream's
``component-helpers/storage/volume`` (``FindMatchingVolume``, ``CheckNodeAffinity``,
``GetBindVolumeToClaim``) and the storage-class and capacity checks of ``binder.go``.

All pure functions over the parsed values; the written objects are new dicts built from ``raw``, never
the stored ones modified.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kopf_scheduler.framework.objects import (
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from kopf_scheduler.framework.objects.storage import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
)
from kopf_scheduler.plugins._volumes import claim_class
from kopf_scheduler.plugins.volume_binding.assume_cache import volume_class

#: a class whose volumes are made by hand (local volumes): nothing provisions them
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
VOLUME_AVAILABLE = "Available"
CLAIM_LOST = "Lost"


def node_affinity_matches(volume: PersistentVolume, labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: the volume's required node affinity against a node's labels. Upstream
    builds a node with the labels only, so a ``matchFields`` term on ``metadata.name`` never matches."""
    return volume.node_affinity is None or volume.node_affinity.matches(labels, "")


def bound_to_claim(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """``IsVolumeBoundToClaim``: the volume's claimRef names the claim (and its uid, when it has one)."""
    ref = volume.claim_ref
    if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
        return False
    return not ref.uid or ref.uid == claim.uid


def claim_fully_bound(claim: PersistentVolumeClaim) -> bool:
    """``isPVCFullyBound``: a volume name and the PV controller's ``bind-completed`` annotation."""
    return bool(claim.volume_name) and ANN_BIND_COMPLETED in claim.annotations


def find_matching_volume(
    claim: PersistentVolumeClaim,
    volumes: Sequence[PersistentVolume],
    node_labels: Mapping[str, str] | None,
    excluded: Collection[str],
    delay_binding: bool,
) -> PersistentVolume | None:
    """``FindMatchingVolume`` (component-helpers v0.37.2; VolumeAttributesClass on: GA since v1.34, locked
    on since v1.36): a volume already bound to the claim if its node affinity holds, else the smallest
    available volume that fits the claim."""
    requested = claim.request
    wanted_class = claim_class(claim)
    smallest: PersistentVolume | None = None
    for volume in volumes:
        if volume.name in excluded:
            continue
        if volume.claim_ref is not None and not bound_to_claim(volume, claim):
            continue
        if volume.capacity < requested or claim.volume_mode != volume.volume_mode:
            continue
        if claim.attributes_class != volume.attributes_class or volume.deleting:
            continue
        affinity_holds = node_labels is None or node_affinity_matches(volume, node_labels)
        if bound_to_claim(volume, claim):
            return volume if affinity_holds else None
        if node_labels is None and delay_binding:
            continue  # the PV controller does not bind such claims before a node is chosen
        if volume.phase != VOLUME_AVAILABLE:
            continue
        if claim.selector is not None and not claim.selector.matches(volume.labels):
            continue
        if volume_class(volume) != wanted_class or not affinity_holds:
            continue
        if node_labels is not None and not set(claim.access_modes) <= set(volume.access_modes):
            continue
        if smallest is None or volume.capacity < smallest.capacity:
            smallest = volume
    return smallest


def topology_allows(storage_class: StorageClass, labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms`` over the class's ``allowedTopologies`` (none: every node)."""
    allowed = storage_class.allowed_topologies
    return allowed is None or allowed.matches(labels, "")


def capacity_limit(capacity: CSIStorageCapacity) -> int | None:
    """``volumeLimit``: the largest volume the capacity allows (``maximumVolumeSize``, else
    ``capacity``); None when it says neither."""
    if capacity.maximum_volume_size is not None:
        return capacity.maximum_volume_size
    return capacity.capacity


def capacity_serves(
    capacity: CSIStorageCapacity, class_name: str, size: int, labels: Mapping[str, str]
) -> bool:
    """The capacity object is for the class, reachable from the node (a nil ``nodeTopology`` reaches no
    node) and large enough for ``size`` bytes."""
    if capacity.storage_class != class_name:
        return False
    limit = capacity_limit(capacity)
    if limit is None or limit < size:
        return False
    return capacity.node_topology is not None and capacity.node_topology.matches(labels)


def _mutable(raw: Mapping[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(dict(raw))
    obj.setdefault("metadata", {})
    return obj


def bind_volume_to_claim(
    volume: PersistentVolume, claim: PersistentVolumeClaim
) -> tuple[dict[str, Any], bool]:
    """``GetBindVolumeToClaim``: the volume with a claimRef to the claim (a full object reference, with
    the claim's resourceVersion) and ``bound-by-controller: "yes"`` when the binder binds it; whether
    anything changed."""
    obj = _mutable(volume.raw)
    meta = obj["metadata"]
    dirty = False
    ref = volume.claim_ref
    if ref is None or (ref.name, ref.namespace, ref.uid) != (claim.name, claim.namespace, claim.uid):
        spec = obj.setdefault("spec", {})
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": claim.namespace,
            "name": claim.name,
            "uid": claim.uid,
            "apiVersion": "v1",
            "resourceVersion": claim.resource_version,
        }
        dirty = True
    if not bound_to_claim(volume, claim) and ANN_BOUND_BY_CONTROLLER not in (meta.get("annotations") or {}):
        meta["annotations"] = {**(meta.get("annotations") or {}), ANN_BOUND_BY_CONTROLLER: "yes"}
        dirty = True
    return obj, dirty


def claim_on_node(claim: PersistentVolumeClaim, node_name: str) -> dict[str, Any]:
    """The claim with ``volume.kubernetes.io/selected-node`` set: provisioners make its volume there."""
    obj = _mutable(claim.raw)
    meta = obj["metadata"]
    meta["annotations"] = {**(meta.get("annotations") or {}), ANN_SELECTED_NODE: node_name}
    return obj


def object_body(raw: Mapping[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """``raw`` as a PUT body: ``apiVersion`` and ``kind`` set (objects from a watch may lack them)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        **{k: v for k, v in raw.items() if k not in ("apiVersion", "kind")},
    }
