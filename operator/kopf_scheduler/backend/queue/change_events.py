"""Which cluster events an update is: kube-scheduler's ``PodSchedulingPropertiesChange`` and
``NodeSchedulingPropertiesChange`` (v1.37), over ``PodInfo`` and ``NodeInfo``.

An update is interpreted as the most specific events possible, so that only plugins that care about that
kind of change are asked whether it helps: a pod update yields one event per changed property (labels,
scale-down and scale-up of requests, scheduling gates all removed, tolerations, generated resource
claims), or the generic update when none applies; a node update yields one event per changed property and
may yield none at all (nothing that could help a pending pod changed).

A pod update's resource says whose update it is: ``AssignedPod`` for a pod bound to a node, ``TargetPod``
for a pending pod's own update (what the queue sees), ``UnscheduledPod`` for another pending pod.

Events are shared constants: comparing and hashing them is cheap, and hints may memoise on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopf_scheduler.framework.events import Action, ClusterEvent, Resource
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo

_POD_ACTIONS = (
    Action.UPDATE_POD_LABEL,
    Action.UPDATE_POD_SCALE_DOWN,
    Action.UPDATE_POD_SCALE_UP,
    Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
    Action.UPDATE_POD_TOLERATION,
    Action.UPDATE_POD_GENERATED_RESOURCE_CLAIM,
    Action.UPDATE_POD_OTHER,
)
#: the update events of each pod resource, by action
POD_UPDATE: dict[Resource, dict[Action, ClusterEvent]] = {
    resource: {action: ClusterEvent(resource, action) for action in _POD_ACTIONS}
    for resource in (Resource.ASSIGNED_POD, Resource.UNSCHEDULED_POD, Resource.TARGET_POD)
}
NODE_UPDATE = {
    action: ClusterEvent(Resource.NODE, action)
    for action in (
        Action.UPDATE_NODE_ALLOCATABLE,
        Action.UPDATE_NODE_LABEL,
        Action.UPDATE_NODE_TAINT,
        Action.UPDATE_NODE_CONDITION,
        Action.UPDATE_NODE_ANNOTATION,
        Action.UPDATE_NODE_PREEMPTION_POLICY,
        Action.UPDATE_NODE_DECLARED_FEATURE,
    )
}


# -- pods ----------------------------------------------------------------------------------------------
def _scaled_down(old: PodInfo, new: PodInfo) -> bool:
    """``extractPodScaleDown``: a request lowered or removed. It compares the requests in effect
    (``PodInfo.requests``: in-place resizes included, as upstream's ``UseStatusResources``), so a resize
    the kubelet has actuated downwards counts."""
    new_requests = new.requests
    if any(amount > new_requests.get(name, 0) for name, amount in old.requests.items()):
        return True
    # An explicit zero request that disappears is "removed" to upstream as well.
    return any(name not in new_requests and name not in new.zero_requests for name in old.zero_requests)


def _scaled_up(old: PodInfo, new: PodInfo) -> bool:
    """``extractPodScaleUp``: a request raised or added (an explicit zero request added counts)."""
    old_requests = old.requests
    if any(amount > old_requests.get(name, 0) for name, amount in new.requests.items()):
        return True
    return any(name not in old_requests and name not in old.zero_requests for name in new.zero_requests)


def _status(pod: PodInfo) -> Mapping[str, Any]:
    status = pod.raw.get("status")
    return status if isinstance(status, Mapping) else {}


def _claims_changed(old: PodInfo, new: PodInfo) -> bool:
    a, b = _status(old), _status(new)
    return (a.get("resourceClaimStatuses") or []) != (b.get("resourceClaimStatuses") or []) or (
        a.get("extendedResourceClaimStatus") or None
    ) != (b.get("extendedResourceClaimStatus") or None)


def pod_update_events(old: PodInfo, new: PodInfo, resource: Resource) -> list[ClusterEvent]:
    """The events an update of a pod is, as updates of ``resource`` (ASSIGNED_POD, UNSCHEDULED_POD or
    TARGET_POD)."""
    table = POD_UPDATE[resource]
    out: list[ClusterEvent] = []
    if old.labels != new.labels:
        out.append(table[Action.UPDATE_POD_LABEL])
    if _scaled_down(old, new):
        out.append(table[Action.UPDATE_POD_SCALE_DOWN])
    if _scaled_up(old, new):
        out.append(table[Action.UPDATE_POD_SCALE_UP])
    if old.scheduling_gates and not new.scheduling_gates:
        out.append(table[Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED])
    # The API only lets tolerations be added, so a change in their number is every change there is.
    if len(old.tolerations) != len(new.tolerations):
        out.append(table[Action.UPDATE_POD_TOLERATION])
    if _claims_changed(old, new):
        out.append(table[Action.UPDATE_POD_GENERATED_RESOURCE_CLAIM])
    if not out:
        out.append(table[Action.UPDATE_POD_OTHER])
    return out


# -- nodes ---------------------------------------------------------------------------------------------
def _section(node: NodeInfo, section: str) -> Mapping[str, Any]:
    raw = node.node or {}
    value = raw.get(section)
    return value if isinstance(value, Mapping) else {}


def _conditions(node: NodeInfo) -> dict[Any, Any]:
    return {
        c.get("type"): c.get("status")
        for c in _section(node, "status").get("conditions") or ()
        if isinstance(c, Mapping)
    }


def _taints_changed(old: NodeInfo, new: NodeInfo) -> bool:
    if old.node is None or new.node is None:
        return old.taints != new.taints
    # The raw lists, as kube-scheduler compares them: a changed ``timeAdded`` counts too.
    return (_section(old, "spec").get("taints") or []) != (_section(new, "spec").get("taints") or [])


def node_update_events(old: NodeInfo, new: NodeInfo) -> list[ClusterEvent]:
    """The events an update of a node is; empty when nothing that matters to pending pods changed.

    ``old`` must be the node as it was before the update (a distinct object from ``new``).
    """
    out: list[ClusterEvent] = []
    # Uncordoning counts as a taint change (kube-scheduler has no separate action for it); cordoning
    # cannot help any pending pod.
    if old.unschedulable and not new.unschedulable:
        out.append(NODE_UPDATE[Action.UPDATE_NODE_TAINT])
    if old.allocatable != new.allocatable or old.allowed_pod_number != new.allowed_pod_number:
        out.append(NODE_UPDATE[Action.UPDATE_NODE_ALLOCATABLE])
    if old.labels != new.labels:
        out.append(NODE_UPDATE[Action.UPDATE_NODE_LABEL])
    if _taints_changed(old, new):
        out.append(NODE_UPDATE[Action.UPDATE_NODE_TAINT])
    if _conditions(old) != _conditions(new):
        out.append(NODE_UPDATE[Action.UPDATE_NODE_CONDITION])
    old_annotations = _section(old, "metadata").get("annotations") or {}
    if old_annotations != (_section(new, "metadata").get("annotations") or {}):
        out.append(NODE_UPDATE[Action.UPDATE_NODE_ANNOTATION])
    if _section(old, "spec").get("podPreemptionPolicy") != _section(new, "spec").get("podPreemptionPolicy"):
        out.append(NODE_UPDATE[Action.UPDATE_NODE_PREEMPTION_POLICY])
    # NodeDeclaredFeatures is GA (locked on) in v1.37; the kubelet keeps the list sorted.
    old_features = _section(old, "status").get("declaredFeatures") or []
    if old_features != (_section(new, "status").get("declaredFeatures") or []):
        out.append(NODE_UPDATE[Action.UPDATE_NODE_DECLARED_FEATURE])
    return out
