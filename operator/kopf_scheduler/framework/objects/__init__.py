"""Cluster objects beyond pods and nodes that plugins read: their kinds, parsed values and listers.

``WATCHED_KINDS`` is what the operator watches, lists at start-up and resyncs, and what ``simulate``
loads from files.
"""

from typing import Any

from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key
from kopf_scheduler.framework.objects.listers import ClusterListers, NoObjects, ObjectLister
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
)

__all__ = [
    "NAMESPACES",
    "REPLICATION_CONTROLLERS",
    "REPLICA_SETS",
    "SERVICES",
    "STATEFUL_SETS",
    "WATCHED_KINDS",
    "ClusterListers",
    "Namespace",
    "NoObjects",
    "ObjectKind",
    "ObjectLister",
    "ObjectParseError",
    "ReplicationController",
    "SelectorOwner",
    "Service",
    "object_key",
]
