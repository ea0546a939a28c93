"""The cluster events that may make a pod VolumeBinding rejected schedulable, with upstream's queueing
hints (``EventsToRegister`` in ``volume_binding.go`` at v1.37, where queueing hints are always on):

- a StorageClass added, or one whose ``allowedTopologies`` changed;
- a claim the pod uses (by name, generic ephemeral ones included) added or changed;
- any PersistentVolume added or changed (no hint: every such change may help);
- a node added or relabelled (no hint);
- a CSINode added, or one whose migrated-plugins annotation changed;
- a CSIDriver of one of the pod's inline CSI volumes that stopped tracking storage capacity;
- a CSIStorageCapacity added, or one whose volume limit grew.

Deleting objects helps no pod here; assigned pods' events are not registered (their volumes are the
business of VolumeRestrictions and NodeVolumeLimits).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.objects import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolumeClaim,
    StorageClass,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.volume_binding.claims import pod_claims
from kopf_scheduler.plugins.volume_binding.matching import capacity_limit

QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP
MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
_ADD_OR_UPDATE = Action.ADD | Action.UPDATE


def _annotation(raw: Mapping[str, Any], key: str) -> str:
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(key) or "")


def storage_class_changed(pod: PodInfo, old: StorageClass | None, new: StorageClass) -> QueueingHint:
    if old is None:
        return QUEUE
    same = (old.raw.get("allowedTopologies") or []) == (new.raw.get("allowedTopologies") or [])
    return SKIP if same else QUEUE


def claim_changed(
    pod: PodInfo, old: PersistentVolumeClaim | None, new: PersistentVolumeClaim
) -> QueueingHint:
    if new.namespace != pod.namespace:
        return SKIP
    return QUEUE if any(name == new.name for name, _ in pod_claims(pod)) else SKIP


def csi_node_changed(pod: PodInfo, old: CSINode | None, new: CSINode) -> QueueingHint:
    if old is None:
        return QUEUE
    changed = _annotation(old.raw, MIGRATED_PLUGINS) != _annotation(new.raw, MIGRATED_PLUGINS)
    return QUEUE if changed else SKIP


def csi_driver_changed(pod: PodInfo, old: CSIDriver, new: CSIDriver) -> QueueingHint:
    for volume in pod.spec.get("volumes") or ():
        csi = volume.get("csi") if isinstance(volume, Mapping) else None
        if not isinstance(csi, Mapping) or csi.get("driver") != new.name:
            continue
        if old.storage_capacity and not new.storage_capacity:
            return QUEUE
    return SKIP


def capacity_changed(pod: PodInfo, old: CSIStorageCapacity | None, new: CSIStorageCapacity) -> QueueingHint:
    if old is None:
        return QUEUE
    old_limit, new_limit = capacity_limit(old), capacity_limit(new)
    if new_limit is not None and (old_limit is None or new_limit > old_limit):
        return QUEUE
    return SKIP


def events() -> list[ClusterEventWithHint]:
    return [
        ClusterEventWithHint(ClusterEvent(Resource.STORAGE_CLASS, _ADD_OR_UPDATE), storage_class_changed),
        ClusterEventWithHint(ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, _ADD_OR_UPDATE), claim_changed),
        ClusterEventWithHint(ClusterEvent(Resource.PERSISTENT_VOLUME, _ADD_OR_UPDATE)),
        ClusterEventWithHint(ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL)),
        ClusterEventWithHint(ClusterEvent(Resource.CSI_NODE, _ADD_OR_UPDATE), csi_node_changed),
        ClusterEventWithHint(ClusterEvent(Resource.CSI_DRIVER, Action.UPDATE), csi_driver_changed),
        ClusterEventWithHint(ClusterEvent(Resource.CSI_STORAGE_CAPACITY, _ADD_OR_UPDATE), capacity_changed),
    ]
