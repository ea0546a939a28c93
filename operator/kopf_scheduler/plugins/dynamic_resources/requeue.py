"""The cluster events that may make a pod DynamicResources rejected schedulable, with upstream's queueing
hints (``EventsToRegister`` in ``dynamicresources.go``, queueing hints on as they are in v1.34):

- a node added, relabelled, or whose allocatable changed (no hint);
- a ResourceClaim added or changed: a claim that lost its allocation (its devices are free again: any
  pod may use them); else only a claim of the pod's, once all of the pod's claims exist, when it was
  created or its status changed (a finalizer added helps nobody);
- the pod's own update that records a claim made from a template (``resourceClaimStatuses``), once all
  of its claims exist;
- a DeviceClass or a ResourceSlice added or changed (no hint: new devices, new selectors).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, Resource
from kopf_scheduler.framework.interface import QueueingHint
from kopf_scheduler.framework.objects import ResourceClaim
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.dynamic_resources.claims import ClaimError, ClaimLister, pod_claims

QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP
_ADD_OR_UPDATE = Action.ADD | Action.UPDATE


def claim_changed(claims: ClaimLister) -> Callable[[PodInfo, Any, Any], QueueingHint]:
    def hint(pod: PodInfo, old: ResourceClaim | None, new: ResourceClaim) -> QueueingHint:
        try:
            uses = any(claim.uid == new.uid for claim in pod_claims(pod, claims))
        except ClaimError:
            return SKIP
        if old is not None and old.allocation is not None and new.allocation is None:
            return QUEUE  # deallocated: its devices may be what this pod needs
        if not uses:
            return SKIP
        if old is None:
            return QUEUE
        return SKIP if old.raw.get("status") == new.raw.get("status") else QUEUE

    return hint


def pod_changed(claims: ClaimLister) -> Callable[[PodInfo, Any, Any], QueueingHint]:
    def hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        modified = new if isinstance(new, PodInfo) else PodInfo(new)
        if modified.uid != pod.uid:
            return SKIP
        try:
            pod_claims(modified, claims)
        except ClaimError:
            return SKIP
        return QUEUE

    return hint


def events(claims: ClaimLister) -> list[ClusterEventWithHint]:
    node_actions = Action.ADD | Action.UPDATE_NODE_LABEL | Action.UPDATE_NODE_ALLOCATABLE
    return [
        ClusterEventWithHint(ClusterEvent(Resource.NODE, node_actions)),
        ClusterEventWithHint(ClusterEvent(Resource.RESOURCE_CLAIM, _ADD_OR_UPDATE), claim_changed(claims)),
        ClusterEventWithHint(
            ClusterEvent(Resource.POD, Action.UPDATE_POD_GENERATED_RESOURCE_CLAIM), pod_changed(claims)
        ),
        ClusterEventWithHint(ClusterEvent(Resource.DEVICE_CLASS, _ADD_OR_UPDATE)),
        ClusterEventWithHint(ClusterEvent(Resource.RESOURCE_SLICE, _ADD_OR_UPDATE)),
    ]
