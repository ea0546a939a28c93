"""Cluster objects beyond pods and nodes that plugins read: their kinds, parsed values and listers.

``WATCHED_KINDS`` is what the operator watches, lists at start-up and resyncs, and what ``simulate``
loads from files.
"""

from typing import Any

from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key
from kopf_scheduler.framework.objects.listers import ClusterListers, NoObjects, ObjectLister
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
)

__all__ = [
    "CSI_DRIVERS",
    "CSI_NODES",
    "CSI_STORAGE_CAPACITIES",
    "NAMESPACES",
    "PERSISTENT_VOLUMES",
    "PERSISTENT_VOLUME_CLAIMS",
    "REPLICATION_CONTROLLERS",
    "REPLICA_SETS",
    "SERVICES",
    "STATEFUL_SETS",
    "STORAGE_CLASSES",
    "WATCHED_KINDS",
    "CSIDriver",
    "CSINode",
    "CSIStorageCapacity",
    "ClusterListers",
    "Namespace",
    "NoObjects",
    "ObjectKind",
    "ObjectLister",
    "ObjectParseError",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ReplicationController",
    "SelectorOwner",
    "Service",
    "StorageClass",
    "object_key",
]
