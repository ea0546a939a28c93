"""NodeVolumeLimits: a node may attach at most its CSINode's ``allocatable.count`` volumes of each CSI
driver (``nodevolumelimits/csi.go``, v1.34, upstream's ``CSILimits``).

The limits come from the CSINode alone: v1.34 no longer reads the node's ``attachable-volumes-*``
allocatable, and a node without a CSINode, or a driver without a count, has no limit.

A volume is counted once per node as ``<driver>/<handle>``. A claim (``persistentVolumeClaim``, or a
generic ephemeral volume's ``<pod>-<volume>`` claim, which must be controlled by the pod) counts as its
bound volume's CSI driver and handle; an in-tree volume counts as the CSI volume it migrates to where
migration is on (``translation``); a claim not yet bound, or bound to a missing volume, counts as its
class's provisioner (translated when in-tree) with a handle unique to the claim; a claim without a
class, or of a missing class, is not counted. Inline in-tree volumes count the same way.

Filter, for a pod with such volumes: the pod's own volumes (a missing claim of the pod is
``UnschedulableAndUnresolvable`` as ``looking up PVC <ns>/<name>: persistentvolumeclaim "<name>" not
found``), minus those already counted on the node, are added per driver to the node's: the volumes of
the pods on the node (their missing claims are not counted) and the node's VolumeAttachments whose
volume is a CSI volume. Exceeding a driver's limit is ``Unschedulable`` (preemption may free volumes).
An ephemeral claim not owned by its pod, or an inline volume that cannot be translated, is an error,
as upstream. Pre-filter skips pods with no claim, ephemeral or migratable in-tree volume.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, Resource
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import (
    CSI_NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
    ClusterListers,
    CSINode,
    NoObjects,
    PersistentVolumeClaim,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, error, unresolvable, unschedulable
from kopf_scheduler.framework.volumes import VolumeParseError, ephemeral_claim_name, pod_volumes
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins._volumes import PVC_RESOURCE, claim_class, not_found
from kopf_scheduler.plugins.node_volume_limits.hints import (
    attachment_deleted,
    claim_added,
    csi_node_updated,
    pod_deleted,
)
from kopf_scheduler.plugins.node_volume_limits.translation import (
    CSI_DRIVERS,
    TranslationError,
    migratable,
    migration_on,
    translate,
)

NAME = names.NODE_VOLUME_LIMITS
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"

_NONE = ("", "")


class _Failure(Exception):
    """The filter cannot judge the node: an error status with this message."""


class _ClaimNotFound(_Failure):
    """The pod's own claim is missing: unresolvable until it is created."""


def _uid(pod: PodInfo) -> str:
    meta = pod.raw.get("metadata")
    return str(meta.get("uid") or "") if isinstance(meta, Mapping) else ""


def volume_limits(csi_node: CSINode | None) -> dict[str, int]:
    """``getVolumeLimits``: driver -> how many of its volumes the node can attach."""
    if csi_node is None:
        return {}
    return {name: d.allocatable for name, d in csi_node.drivers.items() if d.allocatable is not None}


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, handle: Any, objects: ClusterListers) -> None:
        self.handle = handle
        self.objects = objects
        # Unbound claims are counted with a handle no real volume has (upstream: rand.String(32)); drawn
        # outside the scheduler's seeded random source, which it must not disturb.
        self.unbound_prefix = secrets.token_hex(16)
        self._attached: tuple[int, dict[str, dict[str, str]]] | None = None

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        try:
            volumes = pod_volumes(pod)
        except VolumeParseError as e:
            return None, error(str(e))
        if any(v.claim_name is not None or v.ephemeral or migratable(v.disk) for v in volumes):
            return None, None
        return None, SKIP

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        try:
            if not pod_volumes(pod):
                return None
        except VolumeParseError as e:
            return error(str(e))
        csi_node = self.objects.of(CSI_NODES).get("", node.name)
        wanted: dict[str, str] = {}
        try:
            self._attachable(pod, csi_node, True, wanted)
        except _ClaimNotFound as e:
            return unresolvable(str(e))
        except (_Failure, VolumeParseError) as e:
            return error(str(e))
        if not wanted:
            return None
        limits = volume_limits(csi_node)
        if not limits:
            return None
        attached: dict[str, str] = {}
        for existing in node.pods.values():
            try:
                self._attachable(existing, csi_node, False, attached)
            except VolumeParseError as e:
                return error(f"pod {existing.key}: {e}")
            except _Failure as e:
                return error(str(e))
        counts: Counter[str] = Counter(attached.values())
        for unique in attached:
            wanted.pop(unique, None)  # already attached: counts once
        for unique, driver in self._attachments(node.name).items():
            if unique not in attached:
                counts[driver] += 1
        for driver, count in Counter(wanted.values()).items():
            limit = limits.get(driver)
            if limit is not None and counts[driver] + count > limit:
                return unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
        return None

    # -- counting --------------------------------------------------------------------------------------
    def _attachable(self, pod: PodInfo, csi_node: CSINode | None, new_pod: bool, out: dict[str, str]) -> None:
        """``filterAttachableVolumes``: adds ``<driver>/<handle> -> driver`` for the pod's volumes."""
        claims = self.objects.of(PERSISTENT_VOLUME_CLAIMS)
        for volume in pod_volumes(pod):
            if volume.claim_name is not None:
                claim_name = volume.claim_name
            elif volume.ephemeral:
                claim_name = ephemeral_claim_name(pod, volume)
            else:
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

    def _attachments(self, node_name: str) -> dict[str, str]:
        """``getNodeVolumeAttachmentInfo``: the node's attached CSI volumes, grouped once per change of
        the VolumeAttachments or PersistentVolumes."""
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

    # -- requeueing ------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Any new CSINode may bring room (no hint, as upstream).
            ClusterEventWithHint(ClusterEvent(Resource.CSI_NODE, Action.ADD)),
            ClusterEventWithHint(ClusterEvent(Resource.CSI_NODE, Action.UPDATE), csi_node_updated),
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE), pod_deleted),
            ClusterEventWithHint(ClusterEvent(Resource.POD, Action.DELETE), pod_deleted),
            ClusterEventWithHint(ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD), claim_added),
            ClusterEventWithHint(ClusterEvent(Resource.VOLUME_ATTACHMENT, Action.DELETE), attachment_deleted),
        ]


def new(args: Any, handle: Any) -> NodeVolumeLimits:
    return NodeVolumeLimits(handle, getattr(handle, "objects", None) or NoObjects())
