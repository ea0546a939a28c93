"""Cluster events and queueing hints: which changes may make a rejected pod schedulable again.

A plugin that rejects pods registers ``ClusterEventWithHint`` values; when an event arrives, only pods
rejected by a plugin that registered a matching event are re-evaluated, and the hint (if any) decides
whether this particular change can help this particular pod.

Pod events come from three resources, as in kube-scheduler v1.37: ``AssignedPod`` (a pod bound to a
node), ``UnscheduledPod`` (another pending pod) and ``TargetPod`` (the pending pod's own update, seen only
by that pod, and by the pods in flight while it happened). A registration for the general ``Pod`` matches
all three. Every event has upstream's label (``ClusterEvent.Label()``): the resource followed by the
action, e.g. ``AssignedPodDelete``, ``TargetPodUpdatePodLabel``, ``NodeUpdateNodeTaint``,
``storage.k8s.io/CSINodeAdd``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.pod_info import PodInfo


class Resource(enum.Enum):
    """Upstream's ``EventResource`` strings (the kinds kube-scheduler has no events for keep their kind)."""

    #: any pod: a registration for it matches AssignedPod, UnscheduledPod and TargetPod events
    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnscheduledPod"
    TARGET_POD = "TargetPod"
    NODE = "Node"
    NAMESPACE = "Namespace"
    SERVICE = "Service"
    REPLICATION_CONTROLLER = "ReplicationController"
    REPLICA_SET = "ReplicaSet"
    STATEFUL_SET = "StatefulSet"
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "storage.k8s.io/StorageClass"
    CSI_NODE = "storage.k8s.io/CSINode"
    CSI_DRIVER = "storage.k8s.io/CSIDriver"
    CSI_STORAGE_CAPACITY = "storage.k8s.io/CSIStorageCapacity"
    VOLUME_ATTACHMENT = "storage.k8s.io/VolumeAttachment"
    DEVICE_CLASS = "resource.k8s.io/DeviceClass"
    RESOURCE_CLAIM = "resource.k8s.io/ResourceClaim"
    RESOURCE_CLAIM_TEMPLATE = "resource.k8s.io/ResourceClaimTemplate"
    RESOURCE_SLICE = "resource.k8s.io/ResourceSlice"
    #: kube-scheduler has no events of its own for it: a rule's change is a ResourceSlice update of each
    #: slice whose devices' taints it changes
    DEVICE_TAINT_RULE = "resource.k8s.io/DeviceTaintRule"
    #: scheduler-plugins' PodGroup (the GVK string its kube-scheduler names the informer's events by)
    POD_GROUP = "podgroups.v1alpha1.scheduling.x-k8s.io"
    #: the Workload API's PodGroup (``scheduling.k8s.io/v1beta1``; upstream's ``fwk.PodGroup``)
    WORKLOAD_POD_GROUP = "scheduling.k8s.io/PodGroup"
    WILDCARD = "*"


#: the pod resources a registration for ``Resource.POD`` matches
_POD_RESOURCES = frozenset({Resource.ASSIGNED_POD, Resource.UNSCHEDULED_POD, Resource.TARGET_POD})


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
    #: ``spec.podPreemptionPolicy`` changed
    UPDATE_NODE_PREEMPTION_POLICY = enum.auto()
    UPDATE_POD_LABEL = enum.auto()
    UPDATE_POD_SCALE_DOWN = enum.auto()
    UPDATE_POD_SCALE_UP = enum.auto()
    UPDATE_POD_TOLERATION = enum.auto()
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = enum.auto()
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = enum.auto()
    #: a pod update none of the specific pod actions describes (upstream's plain ``Update`` on a pod)
    UPDATE_POD_OTHER = enum.auto()
    #: any update of an object that is neither a pod nor a node (upstream's plain ``Update``)
    UPDATE = enum.auto()

    @classmethod
    def update(cls) -> Action:
        return ~(cls.ADD | cls.DELETE)

    @classmethod
    def all(cls) -> Action:
        return ~cls(0)


def action_label(action: Action) -> str:
    """Upstream's ``ActionType.String()``: a single action's name, ``Update`` for the generic updates and
    for every update at once, ``All``; empty for other combinations."""
    if action == Action.all():
        return "All"
    if action in (Action.UPDATE, Action.UPDATE_POD_OTHER, Action.update()):
        return "Update"
    name = action.name
    if name is None or "|" in name:
        return ""
    return "".join(part.capitalize() for part in name.split("_"))


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: Resource
    action: Action
    #: upstream's ``CustomLabel`` (the wildcard events'); empty: resource and action
    custom_label: str = ""

    def matches(self, incoming: ClusterEvent) -> bool:
        """Whether this registered event covers ``incoming`` (upstream's ``MatchClusterEvents``; incoming
        events carry one action each)."""
        resource = self.resource
        if (
            resource is Resource.WILDCARD
            or resource is incoming.resource
            or (resource is Resource.POD and incoming.resource in _POD_RESOURCES)
        ):
            return bool(self.action & incoming.action)
        return False

    @property
    def label(self) -> str:
        """Upstream's ``Label()``: the name in logs and in metrics' ``event`` label."""
        return self.custom_label or self.resource.value + action_label(self.action)

    def __str__(self) -> str:
        return self.label


class QueueingHint(enum.Enum):
    QUEUE = "Queue"
    SKIP = "QueueSkip"


#: hint(pod, old_object, new_object) -> QUEUE or SKIP; raising counts as QUEUE (upstream behaviour).
HintFn = Callable[[PodInfo, Any, Any], QueueingHint]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: HintFn | None = None


#: events the queue itself reacts to whatever plugins registered (upstream's ``framework/events.go``)
EVENT_FORCE_ACTIVATE = ClusterEvent(Resource.WILDCARD, Action.all(), "ForceActivate")
EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(Resource.WILDCARD, Action.all(), "UnschedulableTimeout")
EVENT_NODE_ADD = ClusterEvent(Resource.NODE, Action.ADD)
EVENT_NODE_DELETE = ClusterEvent(Resource.NODE, Action.DELETE)
EVENT_ASSIGNED_POD_ADD = ClusterEvent(Resource.ASSIGNED_POD, Action.ADD)
EVENT_ASSIGNED_POD_DELETE = ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE)
#: a new pending pod (sent to the pool only when a plugin registered it: gangs wait for their members)
EVENT_UNSCHEDULED_POD_ADD = ClusterEvent(Resource.UNSCHEDULED_POD, Action.ADD)
#: a pending pod's own update that none of the specific pod actions describes
EVENT_TARGET_POD_UPDATE = ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_OTHER)

_OBJECT_ACTIONS = (Action.ADD, Action.UPDATE, Action.DELETE)
#: the add, update and delete events of every resource other than pods and nodes (shared constants)
OBJECT_EVENTS: dict[tuple[Resource, Action], ClusterEvent] = {
    (resource, action): ClusterEvent(resource, action)
    for resource in Resource
    if resource not in _POD_RESOURCES | {Resource.POD, Resource.NODE, Resource.WILDCARD}
    for action in _OBJECT_ACTIONS
}
