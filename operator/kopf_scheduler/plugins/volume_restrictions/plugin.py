"""VolumeRestrictions: a pod may not share an in-tree disk with a pod already on the node, nor use a
ReadWriteOncePod claim another pod uses (``volumerestrictions/volume_restrictions.go``, v1.37).

Disk conflicts (checked per node, against the node's pods): the same GCE PD unless both mounts are
read-only; the same AWS EBS volume ID, always; the same iSCSI IQN unless both are read-only; the same
RBD image (a shared Ceph monitor, same pool and image) unless both are read-only. A conflict is
``Unschedulable``: preempting the pod that holds the disk frees it.

ReadWriteOncePod: pre-filter reads each of the pod's ``persistentVolumeClaim`` claims (a missing one is
``UnschedulableAndUnresolvable`` with the lister's not-found text) and counts the pod's RWOP claims that
a pod on any node of the snapshot already uses. While that count is above zero every node is
``Unschedulable``; the pre-filter extensions add or remove the references of simulated pods, so
preemption can free a claim by evicting the one pod that holds it (upstream since v1.28; earlier
releases refused with an unresolvable status and another text).

Pre-filter skips a pod with neither an in-tree disk to check nor a claim in use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework import signers
from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import PERSISTENT_VOLUME_CLAIMS, ClusterListers
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, error, unresolvable, unschedulable
from kopf_scheduler.framework.volumes import InTreeDisk, VolumeParseError, claim_names, pod_volumes
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins._volumes import PVC_RESOURCE, READ_WRITE_ONCE_POD, not_found

NAME = names.VOLUME_RESTRICTIONS
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by "
    "another pod"
)

#: the in-tree sources whose disks may conflict (``needsRestrictionsCheck``)
CHECKED_SOURCES = frozenset({"gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi"})


@dataclass(slots=True)
class _PreFilterState:
    #: names of the pod's claims with the ReadWriteOncePod access mode
    rwop_claims: frozenset[str]
    #: references to those claims by pods in the snapshot (and simulated ones)
    conflicts: int

    def clone(self) -> _PreFilterState:
        return _PreFilterState(self.rwop_claims, self.conflicts)

    def update_with(self, pod: PodInfo, multiplier: int) -> None:
        refs = sum(
            1 for v in pod_volumes(pod) if v.claim_name is not None and v.claim_name in self.rwop_claims
        )
        self.conflicts += multiplier * refs


_PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)


def is_disk_conflict(disk: InTreeDisk, other: InTreeDisk) -> bool:
    """``isVolumeConflict`` for one pair of in-tree disks."""
    if disk.source != other.source or disk.source not in CHECKED_SOURCES:
        return False
    both_read_only = disk.read_only and other.read_only
    if disk.source == "awsElasticBlockStore":
        return disk.disk_id == other.disk_id
    if disk.source == "rbd":
        shared_monitor = bool(set(disk.monitors) & set(other.monitors))
        same_image = disk.pool == other.pool and disk.disk_id == other.disk_id
        return shared_monitor and same_image and not both_read_only
    return disk.disk_id == other.disk_id and not both_read_only  # GCE PD, iSCSI


def _checked_disks(pod: PodInfo) -> list[InTreeDisk]:
    return [v.disk for v in pod_volumes(pod) if v.disk is not None and v.disk.source in CHECKED_SOURCES]


def conflicts_with(disks: Sequence[InTreeDisk], pods: Any) -> bool:
    """Whether any of ``disks`` conflicts with a disk of one of ``pods``."""
    for other in pods:
        theirs = _checked_disks(other)
        if theirs and any(is_disk_conflict(d, o) for d in disks for o in theirs):
            return True
    return False


class VolumeRestrictions(PreFilterPlugin, PreFilterExtensions, FilterPlugin, EnqueueExtensions, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The pod's volumes but ConfigMaps and Secrets."""
        return [(signers.VOLUMES, signers.volumes(pod))]

    def __init__(self, handle: Handle, objects: ClusterListers) -> None:
        self.handle = handle
        self.objects = objects

    # -- pre-filter ------------------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        try:
            needs_check = bool(_checked_disks(pod))
            claims = self.objects.of(PERSISTENT_VOLUME_CLAIMS)
            rwop: set[str] = set()
            for volume in pod_volumes(pod):
                if volume.claim_name is None:
                    continue
                claim = claims.get(pod.namespace, volume.claim_name)
                if claim is None:
                    return None, unresolvable(not_found(PVC_RESOURCE, volume.claim_name))
                if READ_WRITE_ONCE_POD in claim.access_modes:
                    rwop.add(claim.name)
            in_use = self._claims_in_use(pod.namespace, rwop) if rwop else 0
        except VolumeParseError as e:
            return None, error(str(e))
        if not needs_check and in_use == 0:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, _PreFilterState(frozenset(rwop), in_use))
        return None, None

    def _claims_in_use(self, namespace: str, wanted: set[str]) -> int:
        """How many of ``wanted`` (claims of ``namespace``) a pod on a node of the snapshot uses: the
        snapshot's ``IsPVCUsedByPods``. It walks every pod, but only for pods with RWOP claims."""
        used: set[str] = set()
        for node in self.handle.snapshot().node_infos:
            for other in node.pods.values():
                if other.namespace == namespace:
                    used |= claim_names(other) & wanted
                    if len(used) == len(wanted):
                        return len(used)
        return len(used)

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        return self._update(state, to_add, 1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None:
        return self._update(state, to_remove, -1)

    def _update(self, state: CycleState, other: PodInfo, multiplier: int) -> Status | None:
        found = state.get(_PRE_FILTER_KEY)
        if found is None:
            return error(_cannot_read())
        try:
            found.update_with(other, multiplier)
        except VolumeParseError as e:
            return error(f"pod {other.key}: {e}")
        return None

    # -- filter ----------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        try:
            disks = _checked_disks(pod)
            if disks and conflicts_with(disks, node.pods.values()):
                return unschedulable(ERR_REASON_DISK_CONFLICT)
        except VolumeParseError as e:
            return error(str(e))
        found = state.get(_PRE_FILTER_KEY)
        if found is None:
            return error(_cannot_read())
        if found.conflicts > 0:
            return unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)
        return None

    # -- requeueing ------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Volumes are immutable: only a pod going away can release a disk or a claim.
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE), pod_deleted),
            # Queueing hints are always on (v1.37): upstream registers Node/Add alone.
            ClusterEventWithHint(ClusterEvent(Resource.NODE, Action.ADD)),
            # The claim must exist for its access modes to be read.
            ClusterEventWithHint(ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD), claim_added),
        ]


def _cannot_read() -> str:
    return f'cannot read "{_PRE_FILTER_KEY.name}" from cycleState'


def pod_deleted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue when the deleted pod, of the same namespace, held a disk the pod conflicts on or used one
    of the pod's claims (their access modes are not looked up, as upstream)."""
    if not isinstance(old, PodInfo):
        return QueueingHint.QUEUE
    if old.namespace != pod.namespace:
        return QueueingHint.SKIP
    disks = _checked_disks(pod)
    if disks and conflicts_with(disks, (old,)):
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE if claim_names(pod) & claim_names(old) else QueueingHint.SKIP


def claim_added(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue when the added claim is one of the pod's."""
    namespace, claim = getattr(new, "namespace", None), getattr(new, "name", None)
    if namespace is None or claim is None:
        return QueueingHint.QUEUE
    if namespace != pod.namespace:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if claim in claim_names(pod) else QueueingHint.SKIP


def new(args: NoArgs, handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle, handle.objects)
