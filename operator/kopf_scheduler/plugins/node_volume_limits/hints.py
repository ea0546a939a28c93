"""NodeVolumeLimits' queueing hints (``nodevolumelimits/csi.go`` ``isSchedulableAfter*``, v1.37): which
pod deletions, added claims, deleted VolumeAttachments and CSINode updates may free room for a pod the
plugin rejected."""

from __future__ import annotations

from typing import Any

from kopf_scheduler.framework.events import QueueingHint
from kopf_scheduler.framework.objects import CSINode, PersistentVolumeClaim, VolumeAttachment
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.volumes import pod_volumes, volume_claim_name
from kopf_scheduler.plugins._csi_translation import TranslationError, migratable, translate


def csi_node_updated(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue when some driver's limit went up (a driver without a count counts as 0)."""
    if not isinstance(old, CSINode) or not isinstance(new, CSINode):
        return QueueingHint.QUEUE
    before = {name: d.allocatable or 0 for name, d in old.drivers.items()}
    for name, driver in new.drivers.items():
        if (driver.allocatable or 0) > before.get(name, 0):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def pod_deleted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue when the deleted pod was on (or nominated to) a node and had a volume that may count."""
    if not isinstance(old, PodInfo):
        return QueueingHint.QUEUE
    volumes = pod_volumes(old)
    if not volumes or (not old.node_name and not old.nominated_node_name):
        return QueueingHint.SKIP
    if any(v.claim_name is not None or v.ephemeral or migratable(v.disk) for v in volumes):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def claim_added(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue when the claim is one the pod's volumes (ephemeral ones included) use."""
    if not isinstance(new, PersistentVolumeClaim):
        return QueueingHint.QUEUE
    if new.namespace != pod.namespace:
        return QueueingHint.SKIP
    named = (volume_claim_name(pod, volume) for volume in pod_volumes(pod))
    return QueueingHint.QUEUE if new.name in named else QueueingHint.SKIP


def attachment_deleted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue when the pod has a claim, or an inline in-tree volume migrating to the detached driver."""
    if not isinstance(old, VolumeAttachment):
        return QueueingHint.QUEUE
    for volume in pod_volumes(pod):
        if volume.claim_name is not None:
            return QueueingHint.QUEUE
        if volume.disk is None or not migratable(volume.disk):
            continue
        try:
            driver, _ = translate(volume.disk)
        except TranslationError:
            return QueueingHint.QUEUE  # upstream returns Queue with the error
        if driver == old.attacher:
            return QueueingHint.QUEUE
    return QueueingHint.SKIP
