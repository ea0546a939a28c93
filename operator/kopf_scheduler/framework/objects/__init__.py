"""Cluster objects beyond pods and nodes that plugins read: their kinds, parsed values and listers.

``WATCHED_KINDS`` is what the operator watches, lists at start-up and resyncs, and what ``simulate``
loads from files.
"""

from collections.abc import Callable, Mapping
from typing import Any

from kopf_scheduler.framework.objects.attachments import VOLUME_ATTACHMENTS, VolumeAttachment
from kopf_scheduler.framework.objects.device_taints import DEVICE_TAINT_RULES, DeviceTaintRule
from kopf_scheduler.framework.objects.dra import (
    DEVICE_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
)
from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key
from kopf_scheduler.framework.objects.listers import ClusterListers, NoObjects, ObjectLister
from kopf_scheduler.framework.objects.podgroups import POD_GROUPS, PodGroup
from kopf_scheduler.framework.objects.resource_slices import RESOURCE_SLICES, ResourceSlice
from kopf_scheduler.framework.objects.storage import (
    CSI_DRIVERS,
    CSI_NODES,
    CSI_STORAGE_CAPACITIES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from kopf_scheduler.framework.objects.workload_pod_groups import WORKLOAD_POD_GROUPS, WorkloadPodGroup
from kopf_scheduler.framework.objects.workloads import (
    NAMESPACES,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    SERVICES,
    STATEFUL_SETS,
    Namespace,
    ReplicationController,
    SelectorOwner,
    Service,
)

WATCHED_KINDS: tuple[ObjectKind[Any], ...] = (
    NAMESPACES,
    SERVICES,
    REPLICATION_CONTROLLERS,
    REPLICA_SETS,
    STATEFUL_SETS,
    PERSISTENT_VOLUMES,
    PERSISTENT_VOLUME_CLAIMS,
    STORAGE_CLASSES,
    CSI_NODES,
    CSI_DRIVERS,
    CSI_STORAGE_CAPACITIES,
    VOLUME_ATTACHMENTS,
    DEVICE_CLASSES,
    RESOURCE_CLAIMS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_SLICES,
    DEVICE_TAINT_RULES,
    POD_GROUPS,
    WORKLOAD_POD_GROUPS,
)

#: kinds watched only while their feature gate is on (kube-scheduler starts their informers only then)
GATED_KINDS: Mapping[ObjectKind[Any], str] = {
    DEVICE_TAINT_RULES: "DRADeviceTaintRules",
    WORKLOAD_POD_GROUPS: "GenericWorkload",
}


def watched_kinds(enabled: Callable[[str], bool]) -> tuple[ObjectKind[Any], ...]:
    """``WATCHED_KINDS`` less those whose gate (``GATED_KINDS``) is off; ``enabled``: a gate's value."""
    return tuple(kind for kind in WATCHED_KINDS if kind not in GATED_KINDS or enabled(GATED_KINDS[kind]))


__all__ = [
    "CSI_DRIVERS",
    "CSI_NODES",
    "CSI_STORAGE_CAPACITIES",
    "DEVICE_CLASSES",
    "DEVICE_TAINT_RULES",
    "GATED_KINDS",
    "NAMESPACES",
    "PERSISTENT_VOLUMES",
    "PERSISTENT_VOLUME_CLAIMS",
    "POD_GROUPS",
    "REPLICATION_CONTROLLERS",
    "REPLICA_SETS",
    "RESOURCE_CLAIMS",
    "RESOURCE_CLAIM_TEMPLATES",
    "RESOURCE_SLICES",
    "SERVICES",
    "STATEFUL_SETS",
    "STORAGE_CLASSES",
    "VOLUME_ATTACHMENTS",
    "WATCHED_KINDS",
    "WORKLOAD_POD_GROUPS",
    "CSIDriver",
    "CSINode",
    "CSIStorageCapacity",
    "ClusterListers",
    "DeviceClass",
    "DeviceTaintRule",
    "Namespace",
    "NoObjects",
    "ObjectKind",
    "ObjectLister",
    "ObjectParseError",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "PodGroup",
    "ReplicationController",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "SelectorOwner",
    "Service",
    "StorageClass",
    "VolumeAttachment",
    "WorkloadPodGroup",
    "object_key",
    "watched_kinds",
]
