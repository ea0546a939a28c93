"""The cluster events that may make a pod DynamicResources rejected schedulable, with upstream's queueing
hints (``EventsToRegister`` in ``dynamicresources.go``, v1.37):

- a node added, relabelled, or whose allocatable changed (no hint);
- a ResourceClaim added, changed or deleted: a claim that lost its allocation, or was deleted while
  allocated (its devices are free again: any pod may use them); else only a claim of the pod's, once all
  of the pod's claims exist, when it was created or its status changed (a finalizer added helps nobody);
- the pod's own update (``TargetPod``) that records a claim made from a template
  (``resourceClaimStatuses``), once all of its claims exist;
- a DeviceClass or a ResourceSlice added or changed (no hint: new devices, new selectors).

The claim hint also tells the queue up front which pods a claim event can concern (``pod_keys`` and
``event_keys``, the queue's ``KeyedHint``): a claim that was not deallocated concerns only the pods that
name it, so the queue looks those up instead of asking the hint about every waiting pod. Claims are told
apart by uid, and a uid names one claim, so a pod whose claims include ``new`` names ``new``'s key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.objects import ResourceClaim
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.dynamic_resources.claims import ClaimError, ClaimLister, claim_keys, pod_claims

QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.SKIP
_ADD_OR_UPDATE = Action.ADD | Action.UPDATE


def _deallocated(old: ResourceClaim | None, new: ResourceClaim) -> bool:
    return old is not None and old.allocation is not None and new.allocation is None


class ClaimChanged:
    """``isSchedulableAfterClaimChange``, with the keys that let the queue skip pods it cannot help."""

    __slots__ = ("claims",)

    def __init__(self, claims: ClaimLister) -> None:
        self.claims: Final = claims

    def __call__(self, pod: PodInfo, old: ResourceClaim | None, new: ResourceClaim | None) -> QueueingHint:
        if new is None:  # deleted: only an allocated claim frees devices
            return QUEUE if old is None or old.allocation is not None else SKIP
        deallocated = _deallocated(old, new)
        if not deallocated and (new.namespace, new.name) not in claim_keys(pod):
            return SKIP  # not a claim of the pod's (whether or not all of its claims exist)
        try:
            uses = any(claim.uid == new.uid for claim in pod_claims(pod, self.claims))
        except ClaimError:
            return SKIP
        if deallocated:
            return QUEUE  # deallocated: its devices may be what this pod needs
        if not uses:
            return SKIP
        if old is None:
            return QUEUE
        return SKIP if old.raw.get("status") == new.raw.get("status") else QUEUE

    def pod_keys(self, pod: PodInfo) -> frozenset[Any]:
        return claim_keys(pod)

    def event_keys(self, old: ResourceClaim | None, new: ResourceClaim | None) -> frozenset[Any] | None:
        if new is None:
            return frozenset() if old is not None and old.allocation is None else None
        if _deallocated(old, new):
            return None  # any pod may want the devices
        return frozenset(((new.namespace, new.name),))


def claim_changed(claims: ClaimLister) -> ClaimChanged:
    return ClaimChanged(claims)


def pod_changed(claims: ClaimLister) -> Callable[[PodInfo, Any, Any], QueueingHint]:
    """``isSchedulableAfterTargetPodUpdate``: all of the updated pod's claims exist now."""

    def hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        modified = new if isinstance(new, PodInfo) else PodInfo(new)
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
        ClusterEventWithHint(
            ClusterEvent(Resource.RESOURCE_CLAIM, _ADD_OR_UPDATE | Action.DELETE), claim_changed(claims)
        ),
        ClusterEventWithHint(
            ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_GENERATED_RESOURCE_CLAIM), pod_changed(claims)
        ),
        ClusterEventWithHint(ClusterEvent(Resource.DEVICE_CLASS, _ADD_OR_UPDATE)),
        ClusterEventWithHint(ClusterEvent(Resource.RESOURCE_SLICE, _ADD_OR_UPDATE)),
    ]
