"""The volume binder's decisions in the scheduling cycle (upstream's ``binder.go``): which claims of a pod
a node can satisfy (filter), and assuming the chosen node's bindings (reserve) until the binding cycle
writes them (``binding.py``).

Per node, ``find_pod_volumes`` checks that bound claims' volumes are reachable from the node, matches
unbound WaitForFirstConsumer claims to the smallest fitting available volume (claims by increasing size,
each volume used once), and checks that claims left over can be provisioned there: the class has a
provisioner, its ``allowedTopologies`` admit the node, and, when the class's CSI driver asks for it
(``CSIDriver.spec.storageCapacity``), a CSIStorageCapacity reachable from the node is large enough.
The reasons a node fails are upstream's, in upstream's order.

Bound volumes of in-tree plugins are checked as their CSI translation on nodes whose CSINode lists the
plugin as migrated (``bound.py``, ``tryTranslatePVToCSI``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kopf_scheduler.framework.objects import (
    CSI_DRIVERS,
    CSI_NODES,
    CSI_STORAGE_CAPACITIES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    ClusterListers,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
)
from kopf_scheduler.framework.objects.storage import (
    ANN_SELECTED_NODE,
    parse_persistent_volume,
    parse_persistent_volume_claim,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins._volumes import claim_class
from kopf_scheduler.plugins.volume_binding.assume_cache import AssumeError, ClaimCache, VolumeCache
from kopf_scheduler.plugins.volume_binding.bound import BoundVolume, check_bound_volumes, needs_csi_node
from kopf_scheduler.plugins.volume_binding.claims import (
    PodVolumeClaims,
    VolumeBindingError,
    pod_claims,
    pod_volume_claims,
)
from kopf_scheduler.plugins.volume_binding.matching import (
    NOT_SUPPORTED_PROVISIONER,
    bind_volume_to_claim,
    capacity_serves,
    claim_fully_bound,
    claim_on_node,
    find_matching_volume,
    topology_allows,
)

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


@dataclass(slots=True)
class StaticBinding:
    """A claim and the existing volume it gets."""

    claim: PersistentVolumeClaim
    volume: PersistentVolume


@dataclass(slots=True)
class Provision:
    """A claim whose volume a provisioner makes on the node; ``capacity``: the CSIStorageCapacity that
    showed room for it (None when the driver does not track capacity)."""

    claim: PersistentVolumeClaim
    capacity: CSIStorageCapacity | None = None


@dataclass(slots=True)
class PodVolumes:
    """What binding the pod's claims on one node takes."""

    static_bindings: list[StaticBinding] = field(default_factory=list)
    dynamic_provisions: list[Provision] = field(default_factory=list)


class VolumeBinder:
    def __init__(self, objects: ClusterListers) -> None:
        self.objects = objects
        self.claims = ClaimCache(objects.of(PERSISTENT_VOLUME_CLAIMS))
        self.volumes = VolumeCache(objects.of(PERSISTENT_VOLUMES))

    # -- pre-filter and filter -------------------------------------------------------------------------
    def pod_volume_claims(self, pod: PodInfo) -> PodVolumeClaims:
        return pod_volume_claims(pod, self.claims, self.volumes, self.objects.of(STORAGE_CLASSES))

    def find_pod_volumes(
        self, pod: PodInfo, claims: PodVolumeClaims, node_name: str, labels: Mapping[str, str]
    ) -> tuple[PodVolumes, list[str]]:
        """``FindPodVolumes``: the bindings the node would take and why it cannot (no reasons: it can);
        raises ``VolumeBindingError``."""
        found = PodVolumes()
        bound_ok, volumes_exist = self.check_bound(claims.bound_volumes, node_name, labels)
        unbound_ok, enough_space = True, True
        if claims.delay_binding:
            to_match: list[PersistentVolumeClaim] = []
            to_provision: list[PersistentVolumeClaim] = []
            for claim in claims.delay_binding:
                selected = claim.annotations.get(ANN_SELECTED_NODE)
                if selected is None:
                    to_match.append(claim)
                elif selected != node_name:  # provisioning for another node has begun
                    return found, _reasons(bound_ok, False, True, volumes_exist)
                else:
                    to_provision.append(claim)
            if to_match:
                unbound_ok, found.static_bindings, unmatched = self._match(to_match, claims, labels)
                to_provision += unmatched
            if to_provision:
                unbound_ok, enough_space, found.dynamic_provisions = self._check_provisions(
                    to_provision, labels
                )
        return found, _reasons(bound_ok, unbound_ok, enough_space, volumes_exist)

    def check_bound(
        self, volumes: Sequence[BoundVolume], node_name: str, labels: Mapping[str, str]
    ) -> tuple[bool, bool]:
        """``checkBoundClaims``: (every volume reachable from the node, every volume exists); raises
        ``VolumeBindingError`` for a volume the node needs translated that cannot be."""
        csi_node = self.objects.of(CSI_NODES).get("", node_name) if needs_csi_node(volumes) else None
        bound_ok, volumes_exist, failure = check_bound_volumes(volumes, labels, csi_node)
        if failure:
            raise VolumeBindingError(failure)
        return bound_ok, volumes_exist

    def bound_reasons(
        self, volumes: Sequence[BoundVolume], node_name: str, labels: Mapping[str, str]
    ) -> list[str]:
        """The reasons ``find_pod_volumes`` gives a node for a pod whose claims are all bound."""
        bound_ok, volumes_exist = self.check_bound(volumes, node_name, labels)
        return _reasons(bound_ok, True, True, volumes_exist)

    def _match(
        self, claims: list[PersistentVolumeClaim], pod_claims: PodVolumeClaims, labels: Mapping[str, str]
    ) -> tuple[bool, list[StaticBinding], list[PersistentVolumeClaim]]:
        """``findMatchingVolumes``: a volume per claim, smallest requests first; the claims left over."""
        chosen: set[str] = set()
        bindings: list[StaticBinding] = []
        unmatched: list[PersistentVolumeClaim] = []
        for claim in sorted(claims, key=lambda c: c.request):
            candidates = pod_claims.volumes_by_class.get(claim_class(claim), [])
            volume = find_matching_volume(claim, candidates, labels, chosen, delay_binding=True)
            if volume is None:
                unmatched.append(claim)
                continue
            chosen.add(volume.name)
            bindings.append(StaticBinding(claim, volume))
        return not unmatched, bindings, unmatched

    def _check_provisions(
        self, claims: list[PersistentVolumeClaim], labels: Mapping[str, str]
    ) -> tuple[bool, bool, list[Provision]]:
        """``checkVolumeProvisions``: (provisioning possible, enough space, the provisions)."""
        provisions: list[Provision] = []
        for claim in claims:
            name = claim_class(claim)
            if not name:
                raise VolumeBindingError(f"no class for claim {json.dumps(claim.key)}")
            storage_class = self.objects.of(STORAGE_CLASSES).get("", name)
            if storage_class is None:
                raise VolumeBindingError(f"failed to find storage class {json.dumps(name)}")
            provisioner = storage_class.provisioner
            if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
                return False, True, []
            if not topology_allows(storage_class, labels):
                return False, True, []
            sufficient, capacity = self._has_enough_capacity(provisioner, claim, name, labels)
            if not sufficient:
                return True, False, []
            provisions.append(Provision(claim, capacity))
        return True, True, provisions

    def _has_enough_capacity(
        self, provisioner: str, claim: PersistentVolumeClaim, class_name: str, labels: Mapping[str, str]
    ) -> tuple[bool, CSIStorageCapacity | None]:
        """``hasEnoughCapacity``: checked only for a CSI driver that opts in; the first capacity object
        that serves the claim."""
        if not claim.has_request:
            return True, None
        driver = self.objects.of(CSI_DRIVERS).get("", provisioner)
        if driver is None or not driver.storage_capacity:
            return True, None
        for capacity in self.objects.of(CSI_STORAGE_CAPACITIES).list():
            if capacity_serves(capacity, class_name, claim.request, labels):
                return True, capacity
        return False, None

    # -- reserve and unreserve -------------------------------------------------------------------------
    def all_bound(self, pod: PodInfo) -> bool:
        """``arePodVolumesBound``: every claim of the pod fully bound, as the cache shows it."""
        for name, _ in pod_claims(pod):
            claim = self.claims.get(pod.namespace, name)
            if claim is None or not claim_fully_bound(claim):
                return False
        return True

    def assume_pod_volumes(self, pod_volumes: PodVolumes, node_name: str) -> None:
        """``AssumePodVolumes`` (after ``all_bound`` said no): each volume assumed bound to its claim,
        each claim to provision assumed on the node; ``pod_volumes`` then holds the assumed objects.
        Raises ``VolumeBindingError`` after undoing what it assumed."""
        bindings: list[StaticBinding] = []
        provisions: list[Provision] = []
        try:
            for binding in pod_volumes.static_bindings:
                raw, dirty = bind_volume_to_claim(binding.volume, binding.claim)
                volume = parse_persistent_volume(raw)
                if dirty:
                    self.volumes.assume(volume)
                bindings.append(StaticBinding(binding.claim, volume))
            for provision in pod_volumes.dynamic_provisions:
                claim = parse_persistent_volume_claim(claim_on_node(provision.claim, node_name))
                self.claims.assume(claim)
                provisions.append(Provision(claim, provision.capacity))
        except AssumeError as e:
            self.revert(PodVolumes(bindings, provisions))
            raise VolumeBindingError(str(e)) from None
        pod_volumes.static_bindings, pod_volumes.dynamic_provisions = bindings, provisions

    def revert(self, pod_volumes: PodVolumes) -> None:
        """``RevertAssumedPodVolumes``: the cache shows the API server's objects again, but where an
        object was written (``pod_volumes`` then holds the API server's answer, at another version): the
        assumption of what was written stands until the store holds the answer."""
        for binding in pod_volumes.static_bindings:
            self.volumes.restore(binding.volume)
        for provision in pod_volumes.dynamic_provisions:
            self.claims.restore(provision.claim)


def _reasons(bound_ok: bool, unbound_ok: bool, enough_space: bool, volumes_exist: bool) -> list[str]:
    reasons = []
    if not bound_ok:
        reasons.append(ERR_REASON_NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(ERR_REASON_BIND_CONFLICT)
    if not enough_space:
        reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
    if not volumes_exist:
        reasons.append(ERR_REASON_PV_NOT_EXIST)
    return reasons
