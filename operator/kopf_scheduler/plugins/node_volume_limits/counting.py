"""What NodeVolumeLimits counts (``nodevolumelimits/csi.go`` ``filterAttachableVolumes``,
``getCSIDriverInfo``, ``getNodeVolumeAttachmentInfo``, v1.37), and the caches that let the filter count
once instead of once per node and pod.

A volume is counted as ``<driver>/<handle> -> driver``. What a pod's volumes count depends on the pod, the
claim, volume and class stores, and on the node's CSINode only through ``migration_on``: whether there is
a CSINode (``profile``). So:

- the incoming pod's volumes are counted once per profile per scheduling cycle (``PodCount``, kept in the
  cycle state), not once per node;
- a node's side (its limits, the volumes its pods attach, the count per driver with its
  VolumeAttachments) is kept per node name (``NodeCounts``) and reused while the node's ``generation``
  (it changes with every pod added or removed and every node update; a clone keeps it, a changed clone
  gets a new one) and the stamp of the stores it was counted from (claims, volumes, classes,
  VolumeAttachments, CSINodes: ``STAMP_KINDS``) are unchanged. A change to any of those stores drops
  every node's counts at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import (
    CSI_NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
    ClusterListers,
    CSINode,
    PersistentVolumeClaim,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, error, unresolvable
from kopf_scheduler.framework.volumes import VolumeParseError, pod_volumes, volume_claim_name
from kopf_scheduler.plugins._csi_translation import (
    CSI_DRIVERS,
    TranslationError,
    migratable,
    migration_on,
    translate,
)
from kopf_scheduler.plugins._volumes import PVC_RESOURCE, claim_class, not_found

_NONE = ("", "")
#: the stores a count is derived from
STAMP_KINDS = (PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES, VOLUME_ATTACHMENTS, CSI_NODES)
#: node counts kept at most (names of deleted nodes otherwise stay until a store changes)
_MAX_NODES = 1 << 16

#: what the CSINode changes in a pod's count: whether there is one (in-tree volumes count only then)
Profile = bool
#: a pod's count: ``<driver>/<handle> -> driver``, or the status that stops the filter
PodCount = dict[str, str] | Status


class _Failure(Exception):
    """The filter cannot judge the node: an error status with this message."""


class _ClaimNotFound(_Failure):
    """The pod's own claim is missing: unresolvable until it is created."""


def profile(csi_node: CSINode | None) -> Profile:
    """All that ``migration_on`` reads of a CSINode."""
    return csi_node is not None


#: a CSINode of each profile: the incoming pod is counted against it instead of each node's own
_TYPICAL: dict[Profile, CSINode | None] = {False: None, True: CSINode("", {}, {}, ())}


def volume_limits(csi_node: CSINode | None) -> dict[str, int]:
    """``getVolumeLimits``: driver -> how many of its volumes the node can attach."""
    if csi_node is None:
        return {}
    return {name: d.allocatable for name, d in csi_node.drivers.items() if d.allocatable is not None}


def _uid(pod: PodInfo) -> str:
    meta = pod.raw.get("metadata")
    return str(meta.get("uid") or "") if isinstance(meta, Mapping) else ""


@dataclass(frozen=True, slots=True)
class NodeCounts:
    """A node's side of the filter, for one node generation and store stamp."""

    generation: int
    limits: Mapping[str, int]
    #: the volumes of the pods on the node (empty when ``limits`` is: then nothing is counted)
    attached: Mapping[str, str]
    #: per driver: ``attached`` plus the node's VolumeAttachments not among them
    counts: Mapping[str, int]
    #: why the pods on the node cannot be counted (upstream's error), checked after the limits
    failure: Status | None = None
    #: the counts read claims (so volumes and classes too): a pod on the node has a claim
    reads_claims: bool = True


class VolumeCounter:
    def __init__(self, objects: ClusterListers, unbound_prefix: str) -> None:
        self.objects = objects
        #: unbound claims are counted with a handle no real volume has (upstream: rand.String(32))
        self.unbound_prefix = unbound_prefix
        self._attached: tuple[int, dict[str, dict[str, str]]] | None = None
        self._attached_stamp = -1
        self._nodes: dict[str, NodeCounts] = {}
        self._nodes_stamp = -1

    def stamp(self) -> int:
        return self.objects.generation(*STAMP_KINDS)

    # -- the incoming pod ------------------------------------------------------------------------------
    def pod_count(self, pod: PodInfo, kind: Profile) -> PodCount:
        """The pod's own volumes on a node of the profile ``kind``; a missing claim is unresolvable,
        other failures are errors."""
        wanted: dict[str, str] = {}
        try:
            self._attachable(pod, _TYPICAL[kind], True, wanted)
        except _ClaimNotFound as e:
            return unresolvable(str(e))
        except (_Failure, VolumeParseError) as e:
            return error(str(e))
        return wanted

    # -- the node --------------------------------------------------------------------------------------
    def node_counts(self, node: NodeInfo, csi_node: CSINode | None, stamp: int) -> NodeCounts:
        """The node's counts (``csi_node``: its CSINode, ``stamp``: ``stamp()`` now), from the cache
        while the node and the stores are unchanged."""
        if stamp != self._nodes_stamp or len(self._nodes) >= _MAX_NODES:
            self._nodes.clear()
            self._nodes_stamp = stamp
        found = self._nodes.get(node.name)
        if found is None or found.generation != node.generation:
            found = self._nodes[node.name] = self._count_node(node, csi_node, stamp)
        return found

    def _count_node(self, node: NodeInfo, csi_node: CSINode | None, stamp: int) -> NodeCounts:
        limits = volume_limits(csi_node)
        if not limits:  # the filter passes the node before it looks at the pods on it
            return NodeCounts(node.generation, limits, {}, {}, reads_claims=False)
        attached: dict[str, str] = {}
        reads_claims = False
        for existing in node.pods.values():
            try:
                reads_claims |= self._attachable(existing, csi_node, False, attached)
            except VolumeParseError as e:
                return NodeCounts(node.generation, limits, {}, {}, error(f"pod {existing.key}: {e}"))
            except _Failure as e:
                return NodeCounts(node.generation, limits, {}, {}, error(str(e)))
        counts: dict[str, int] = {}
        for driver in attached.values():
            counts[driver] = counts.get(driver, 0) + 1
        for unique, driver in self._attachments(node.name, stamp).items():
            if unique not in attached:  # a volume a pod uses is counted once
                counts[driver] = counts.get(driver, 0) + 1
        return NodeCounts(node.generation, limits, attached, counts, reads_claims=reads_claims)

    # -- counting --------------------------------------------------------------------------------------
    def _attachable(self, pod: PodInfo, csi_node: CSINode | None, new_pod: bool, out: dict[str, str]) -> bool:
        """``filterAttachableVolumes``: adds ``<driver>/<handle> -> driver`` for the pod's volumes; whether
        it looked a claim up."""
        claims = self.objects.of(PERSISTENT_VOLUME_CLAIMS)
        looked_up = False
        for volume in pod_volumes(pod):
            claim_name = volume_claim_name(pod, volume)
            if claim_name is None:
                disk = volume.disk
                if disk is not None and migratable(disk) and migration_on(csi_node, disk.plugin):
                    try:
                        driver, handle = translate(disk)
                    except TranslationError as e:
                        raise _Failure(f"converting volume({volume.name}) from inline to csi: {e}") from None
                    out[f"{driver}/{handle}"] = driver
                continue
            if not claim_name:
                raise _Failure("PersistentVolumeClaim had no name")
            looked_up = True
            claim = claims.get(pod.namespace, claim_name)
            if claim is None:
                if new_pod:  # the pod cannot run without it
                    message = not_found(PVC_RESOURCE, claim_name)
                    raise _ClaimNotFound(f"looking up PVC {pod.namespace}/{claim_name}: {message}")
                continue  # no telling whether it belongs to the running pod
            if volume.ephemeral and claim.owner_uids[:1] != (_uid(pod),):
                raise _Failure(
                    f"PVC {claim.namespace}/{claim.name} was not created for pod {pod.namespace}/{pod.name}"
                    " (pod is not owner)"
                )
            driver, handle = self._csi_volume(csi_node, claim)
            if driver and handle:
                out[f"{driver}/{handle}"] = driver
        return looked_up

    def _csi_volume(self, csi_node: CSINode | None, claim: PersistentVolumeClaim) -> tuple[str, str]:
        """``getCSIDriverInfo``: the claim's CSI driver and volume handle, ("", "") to not count it."""
        pv = self.objects.of(PERSISTENT_VOLUMES).get("", claim.volume_name) if claim.volume_name else None
        if pv is None:  # not bound yet, or bound to a volume not created yet: its class tells
            return self._from_class(csi_node, claim)
        if pv.is_csi:
            return pv.csi_driver, pv.csi_handle
        disk = pv.in_tree
        if disk is None or not migratable(disk) or not migration_on(csi_node, disk.plugin):
            return _NONE
        try:
            return translate(disk, pv.labels)
        except TranslationError:
            return _NONE

    def _from_class(self, csi_node: CSINode | None, claim: PersistentVolumeClaim) -> tuple[str, str]:
        class_name = claim_class(claim)
        storage_class = self.objects.of(STORAGE_CLASSES).get("", class_name) if class_name else None
        if storage_class is None:  # then it binds immediately, so it is bound before it is scheduled
            return _NONE
        handle = f"{self.unbound_prefix}-{claim.namespace}/{claim.name}"
        provisioner = storage_class.provisioner
        if provisioner in CSI_DRIVERS:
            if not migration_on(csi_node, provisioner):
                return _NONE
            return CSI_DRIVERS[provisioner], handle
        return provisioner, handle

    def _attachments(self, node_name: str, stamp: int) -> dict[str, str]:
        """``getNodeVolumeAttachmentInfo``: the node's attached CSI volumes, grouped once per change of
        the VolumeAttachments or PersistentVolumes (looked at once per ``stamp``)."""
        if self._attached is not None and self._attached_stamp == stamp:
            return self._attached[1].get(node_name, {})
        self._attached_stamp = stamp
        generation = self.objects.generation(VOLUME_ATTACHMENTS, PERSISTENT_VOLUMES)
        if self._attached is None or self._attached[0] != generation:
            volumes = self.objects.of(PERSISTENT_VOLUMES)
            by_node: dict[str, dict[str, str]] = {}
            for attachment in self.objects.of(VOLUME_ATTACHMENTS).list():
                if not attachment.attacher or attachment.persistent_volume_name is None:
                    continue
                pv = volumes.get("", attachment.persistent_volume_name)
                if pv is None or not pv.is_csi:
                    continue
                node = by_node.setdefault(attachment.node_name, {})
                node[f"{attachment.attacher}/{pv.csi_handle}"] = attachment.attacher
            self._attached = (generation, by_node)
        return self._attached[1].get(node_name, {})
