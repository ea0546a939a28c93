"""Cluster events and queueing hints: which changes may make a rejected pod schedulable again.

A plugin that rejects pods registers ``ClusterEventWithHint`` values; when an event arrives, only pods
rejected by a plugin that registered a matching event are re-evaluated, and the hint (if any) decides
whether this particular change can help this particular pod.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.pod_info import PodInfo


class Resource(enum.Enum):
    POD = "Pod"  # an unscheduled pod (the pod itself, or another pending pod)
    ASSIGNED_POD = "AssignedPod"
    NODE = "Node"
    NAMESPACE = "Namespace"
    SERVICE = "Service"
    REPLICATION_CONTROLLER = "ReplicationController"
    REPLICA_SET = "ReplicaSet"
    STATEFUL_SET = "StatefulSet"
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "StorageClass"
    CSI_NODE = "CSINode"
    CSI_DRIVER = "CSIDriver"
    CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
    VOLUME_ATTACHMENT = "VolumeAttachment"
    DEVICE_CLASS = "DeviceClass"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_CLAIM_TEMPLATE = "ResourceClaimTemplate"
    RESOURCE_SLICE = "ResourceSlice"
    POD_GROUP = "PodGroup"
    WILDCARD = "*"


class Action(enum.Flag):
    ADD = enum.auto()
    DELETE = enum.auto()
    UPDATE_NODE_ALLOCATABLE = enum.auto()
    UPDATE_NODE_LABEL = enum.auto()
    UPDATE_NODE_TAINT = enum.auto()
    UPDATE_NODE_CONDITION = enum.auto()
    UPDATE_NODE_ANNOTATION = enum.auto()
    #: ``status.declaredFeatures`` changed (upstream emits it with the NodeDeclaredFeatures gate on)
    UPDATE_NODE_DECLARED_FEATURE = enum.auto()
    UPDATE_POD_LABEL = enum.auto()
    UPDATE_POD_SCALE_DOWN = enum.auto()
    UPDATE_POD_TOLERATION = enum.auto()
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = enum.auto()
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = enum.auto()
    UPDATE_POD_OTHER = enum.auto()
    #: any update of an object that is neither a pod nor a node (upstream's plain ``Update``)
    UPDATE = enum.auto()

    @classmethod
    def update(cls) -> Action:
        return ~(cls.ADD | cls.DELETE)

    @classmethod
    def all(cls) -> Action:
        return ~cls(0)


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: Resource
    action: Action
    label: str = ""

    def matches(self, incoming: ClusterEvent) -> bool:
        """Whether this registered event covers ``incoming``."""
        if self.resource is Resource.WILDCARD:
            return bool(self.action & incoming.action)
        return self.resource is incoming.resource and bool(self.action & incoming.action)

    def __str__(self) -> str:
        return self.label or f"{self.resource.value}{self.action.name}"


class QueueingHint(enum.Enum):
    QUEUE = "Queue"
    SKIP = "QueueSkip"


#: hint(pod, old_object, new_object) -> QUEUE or SKIP; raising counts as QUEUE (upstream behaviour).
HintFn = Callable[[PodInfo, Any, Any], QueueingHint]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: HintFn | None = None


#: events the queue itself reacts to whatever plugins registered.
EVENT_UNSCHEDULED_POD_UPDATE = ClusterEvent(Resource.POD, Action.UPDATE_POD_OTHER, "UnschedulablePodUpdate")
EVENT_FORCE_ACTIVATE = ClusterEvent(Resource.WILDCARD, Action.all(), "ForceActivate")
EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(Resource.WILDCARD, Action.all(), "UnschedulableTimeout")
EVENT_NODE_ADD = ClusterEvent(Resource.NODE, Action.ADD, "NodeAdd")
EVENT_ASSIGNED_POD_ADD = ClusterEvent(Resource.ASSIGNED_POD, Action.ADD, "AssignedPodAdd")
EVENT_ASSIGNED_POD_DELETE = ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE, "AssignedPodDelete")
#: a new pending pod (sent to the pool only when a plugin registered it: gangs wait for their members)
EVENT_UNSCHEDULED_POD_ADD = ClusterEvent(Resource.POD, Action.ADD, "UnscheduledPodAdd")

_OBJECT_ACTIONS = {Action.ADD: "Add", Action.UPDATE: "Update", Action.DELETE: "Delete"}
#: the add, update and delete events of every resource other than pods and nodes (shared constants)
OBJECT_EVENTS: dict[tuple[Resource, Action], ClusterEvent] = {
    (resource, action): ClusterEvent(resource, action, resource.value + label)
    for resource in Resource
    if resource not in (Resource.POD, Resource.ASSIGNED_POD, Resource.NODE, Resource.WILDCARD)
    for action, label in _OBJECT_ACTIONS.items()
}
