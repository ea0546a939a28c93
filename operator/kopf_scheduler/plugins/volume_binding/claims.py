"""A pod's claims as the volume binder sorts them (upstream's ``podHasPVCs`` in ``volume_binding.go`` and
``GetPodVolumeClaims`` in ``binder.go``).

``check_pod_claims`` runs first, on what the API server said (the claim store): a claim that is missing,
lost, being deleted, or a generic ephemeral volume's claim the pod does not own makes the pod wait
(UnschedulableAndUnresolvable, upstream's words). ``pod_volume_claims`` then reads the assume cache and
sorts the claims: bound (a volume name and ``bind-completed``), unbound of a WaitForFirstConsumer class
(the scheduler picks the node), and unbound of any other class or pre-bound to a volume by name (the PV
controller binds those; the pod waits for it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from kopf_scheduler.framework.objects import (
    ObjectLister,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.volumes import ephemeral_claim_name, pod_volumes
from kopf_scheduler.plugins._volumes import (
    PVC_RESOURCE,
    WAIT_FOR_FIRST_CONSUMER,
    claim_class,
    not_found,
)
from kopf_scheduler.plugins.volume_binding.assume_cache import ClaimCache, VolumeCache
from kopf_scheduler.plugins.volume_binding.bound import BoundVolume, bound_volume
from kopf_scheduler.plugins.volume_binding.matching import CLAIM_LOST, bound_to_claim, claim_fully_bound


class VolumeBindingError(Exception):
    """A failure of the binder (not a verdict on a node); the message is upstream's."""


@dataclass(slots=True)
class PodVolumeClaims:
    bound: list[PersistentVolumeClaim] = field(default_factory=list)
    #: the volumes of ``bound``, in order, as the cache showed them at pre-filter
    bound_volumes: tuple[BoundVolume, ...] = ()
    #: unbound, of a WaitForFirstConsumer class: matched or provisioned for the node the pod gets
    delay_binding: list[PersistentVolumeClaim] = field(default_factory=list)
    #: unbound (or pre-bound by volume name) of any other class: the PV controller binds them
    immediate: list[PersistentVolumeClaim] = field(default_factory=list)
    #: the volumes of each class of ``delay_binding`` claims, as the cache showed them at pre-filter, less
    #: those whose claimRef names a claim other than these (no node can give them to the pod)
    volumes_by_class: dict[str, list[PersistentVolume]] = field(default_factory=dict)


def pod_claims(pod: PodInfo) -> Iterator[tuple[str, bool]]:
    """(claim name, generic ephemeral?) for each volume of the pod that uses a claim, in volume order."""
    for volume in pod_volumes(pod):
        if volume.claim_name is not None:
            yield volume.claim_name, False
        elif volume.ephemeral:
            yield ephemeral_claim_name(pod, volume), True


def ownership_error(pod: PodInfo, claim: PersistentVolumeClaim) -> str | None:
    """``ephemeral.VolumeIsForPod``: a generic ephemeral volume's claim must be controlled by the pod."""
    if claim.namespace != pod.namespace or pod.uid not in claim.owner_uids:
        return (
            f"PVC {claim.namespace}/{claim.name} was not created for pod {pod.namespace}/{pod.name} "
            "(pod is not owner)"
        )
    return None


def check_pod_claims(pod: PodInfo, claims: ObjectLister[PersistentVolumeClaim]) -> tuple[bool, str | None]:
    """``podHasPVCs``: whether the pod uses claims, and why it cannot be scheduled yet (None: it can)."""
    has_claims = False
    for name, ephemeral in pod_claims(pod):
        has_claims = True
        claim = claims.get(pod.namespace, name)
        if claim is None:
            if ephemeral:  # normal right after the pod is created: the ephemeral volume controller is due
                return True, (
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim "
                    f"{json.dumps(name)}"
                )
            return True, not_found(PVC_RESOURCE, name)
        if claim.phase == CLAIM_LOST:
            return True, (
                f"persistentvolumeclaim {json.dumps(claim.name)} bound to non-existent persistentvolume "
                f"{json.dumps(claim.volume_name)}"
            )
        if claim.deleting:
            return True, f"persistentvolumeclaim {json.dumps(claim.name)} is being deleted"
        if ephemeral and (problem := ownership_error(pod, claim)) is not None:
            return True, problem
    return has_claims, None


def delay_binding_mode(claim: PersistentVolumeClaim, classes: ObjectLister[StorageClass]) -> bool:
    """``IsDelayBindingMode``: the claim's class exists and binds WaitForFirstConsumer."""
    name = claim_class(claim)
    if not name:
        return False
    storage_class = classes.get("", name)
    return storage_class is not None and storage_class.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER


def pod_volume_claims(
    pod: PodInfo, claims: ClaimCache, volumes: VolumeCache, classes: ObjectLister[StorageClass]
) -> PodVolumeClaims:
    """``GetPodVolumeClaims``; raises ``VolumeBindingError``."""
    found = PodVolumeClaims()
    for name, ephemeral in pod_claims(pod):
        claim = claims.get(pod.namespace, name)
        if claim is None:
            key = f"{pod.namespace}/{name}"
            raise VolumeBindingError(
                f"error getting PVC {json.dumps(key)}: {claims.not_found(pod.namespace, name)}"
            )
        if ephemeral and (problem := ownership_error(pod, claim)) is not None:
            raise VolumeBindingError(problem)
        if claim_fully_bound(claim):
            found.bound.append(claim)
        elif delay_binding_mode(claim, classes) and not claim.volume_name:
            found.delay_binding.append(claim)
        else:
            found.immediate.append(claim)
    found.bound_volumes = tuple(bound_volume(volumes.get("", claim.volume_name)) for claim in found.bound)
    for claim in found.delay_binding:
        name = claim_class(claim)
        if name not in found.volumes_by_class:
            found.volumes_by_class[name] = [
                v for v in volumes.list_by_class(name) if _may_match(v, found.delay_binding)
            ]
    return found


def _may_match(volume: PersistentVolume, claims: list[PersistentVolumeClaim]) -> bool:
    """Whether ``find_matching_volume`` may pick the volume for one of ``claims`` on some node: not when
    it is bound (or being bound) to another claim, which it skips whatever the node. Left out once per
    pod, the filter's per-node matching looks at the volumes it could pick only, not at every volume of
    the class (upstream lists the class's volumes and skips those for each node; the result is the same,
    in the same order)."""
    return volume.claim_ref is None or any(bound_to_claim(volume, claim) for claim in claims)
