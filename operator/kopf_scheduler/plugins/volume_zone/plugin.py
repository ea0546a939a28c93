"""VolumeZone: the zone and region labels of the PersistentVolumes bound to a pod's claims must match
the node's (``volumezone/volume_zone.go``, v1.37).

Pre-filter follows each ``persistentVolumeClaim`` volume (ephemeral ones are not looked at) to its
bound volume and collects the volume's topology labels, in upstream's order:
``failure-domain.beta.kubernetes.io/zone``, ``.../region``, ``topology.kubernetes.io/zone``,
``.../region``. A label value lists zones joined by ``__``; a value with an empty entry is ignored. A
claim not yet bound is skipped when its class binds WaitForFirstConsumer; otherwise the pod cannot be
placed now. Errors are ``UnschedulableAndUnresolvable`` with upstream's texts: an empty claim name, a
missing claim, class or volume (the listers' not-found texts), an unbound claim without a class, an
unbound claim of an Immediate class (``PersistentVolume had no name``). A class read from the API
always has a binding mode (the API server defaults it to Immediate), so upstream's "VolumeBindingMode
not set" cannot occur here. Pre-filter skips pods whose volumes carry no topology label.

Filter passes a node without any of the four labels (a single-zone cluster); otherwise every label of
every volume must be on the node with one of the volume's values, a beta label on the volume also
matching the node's GA label. A mismatch is ``UnschedulableAndUnresolvable``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import (
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    ClusterListers,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, error, unresolvable
from kopf_scheduler.framework.volumes import VolumeParseError, claim_names, pod_volumes
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins._volumes import (
    PV_RESOURCE,
    PVC_RESOURCE,
    STORAGE_CLASS_RESOURCE,
    WAIT_FOR_FIRST_CONSUMER,
    claim_class,
    not_found,
)

NAME = names.VOLUME_ZONE
ERR_REASON_CONFLICT = "node(s) had no available volume zone"
ERR_NO_CLAIM_NAME = "PersistentVolumeClaim had no name"
ERR_NO_VOLUME_NOR_CLASS = "PersistentVolumeClaim had no pv name and storageClass name"
ERR_NO_VOLUME = "PersistentVolume had no name"

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
#: the labels compared, in upstream's order
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
MULTI_ZONE_DELIMITER = "__"


@dataclass(frozen=True, slots=True)
class VolumeTopology:
    volume: str
    key: str
    values: frozenset[str]


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    topologies: tuple[VolumeTopology, ...]

    def clone(self) -> _PreFilterState:  # not changed by added or removed pods
        return self


_PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)


def label_zones(value: str) -> frozenset[str] | None:
    """``volumehelpers.LabelZonesToSet``: the zones of a label value, None when an entry is empty."""
    zones = [zone.strip() for zone in value.split(MULTI_ZONE_DELIMITER)]
    return None if any(not zone for zone in zones) else frozenset(zones)


def volume_topologies(pv: PersistentVolume) -> tuple[VolumeTopology, ...]:
    """The volume's topology labels (``getPVTopologies``); its node affinity is VolumeBinding's."""
    out = []
    for key in TOPOLOGY_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        zones = label_zones(value)
        if zones is not None:
            out.append(VolumeTopology(pv.name, key, zones))
    return tuple(out)


def node_fits(labels: Mapping[str, str], topologies: Sequence[VolumeTopology]) -> bool:
    if not any(key in labels for key in TOPOLOGY_LABELS):
        return True  # a node without topology labels: a single-zone cluster
    for topology in topologies:
        value = labels.get(topology.key)
        if value is None:
            value = labels.get(_GA.get(topology.key, topology.key))
        if value is None or value not in topology.values:
            return False
    return True


class VolumeZone(PreFilterPlugin, FilterPlugin, EnqueueExtensions, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The pod's volumes but ConfigMaps and Secrets."""
        return [(signers.VOLUMES, signers.volumes(pod))]

    def __init__(self, handle: Handle, objects: ClusterListers) -> None:
        self.handle = handle
        self.objects = objects

    def _topologies(self, pod: PodInfo) -> tuple[tuple[VolumeTopology, ...], Status | None]:
        """``getPVbyPod``: the pod's volumes' topologies, or the status that stops the pod."""
        claims = self.objects.of(PERSISTENT_VOLUME_CLAIMS)
        out: list[VolumeTopology] = []
        try:
            volumes = pod_volumes(pod)
        except VolumeParseError as e:
            return (), error(str(e))
        for volume in volumes:
            if volume.claim_name is None:
                continue
            if not volume.claim_name:
                return (), unresolvable(ERR_NO_CLAIM_NAME)
            claim = claims.get(pod.namespace, volume.claim_name)
            if claim is None:
                return (), unresolvable(not_found(PVC_RESOURCE, volume.claim_name))
            if not claim.volume_name:
                class_name = claim_class(claim)
                if not class_name:
                    return (), unresolvable(ERR_NO_VOLUME_NOR_CLASS)
                storage_class = self.objects.of(STORAGE_CLASSES).get("", class_name)
                if storage_class is None:
                    return (), unresolvable(not_found(STORAGE_CLASS_RESOURCE, class_name))
                if storage_class.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER:
                    continue  # bound once a node is chosen
                return (), unresolvable(ERR_NO_VOLUME)
            pv = self.objects.of(PERSISTENT_VOLUMES).get("", claim.volume_name)
            if pv is None:
                return (), unresolvable(not_found(PV_RESOURCE, claim.volume_name))
            out.extend(volume_topologies(pv))
        return tuple(out), None

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        topologies, status = self._topologies(pod)
        if status is not None:
            return None, status
        if not topologies:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, _PreFilterState(topologies))
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not (pod.spec.get("volumes") or ()):
            return None
        found = state.get(_PRE_FILTER_KEY)
        if found is None:  # pre-filter did not run (or found nothing): work it out here, as upstream
            topologies, status = self._topologies(pod)
            if status is not None:
                return status
        else:
            topologies = found.topologies
        return None if node_fits(node.labels, topologies) else unresolvable(ERR_REASON_CONFLICT)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new WaitForFirstConsumer class lets an unbound claim be skipped (the mode is immutable).
            ClusterEventWithHint(ClusterEvent(Resource.STORAGE_CLASS, Action.ADD), storage_class_added),
            # Queueing hints are always on (v1.37): upstream registers Node/Add and UpdateNodeLabel.
            ClusterEventWithHint(ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL)),
            # A claim created, or bound to a volume.
            ClusterEventWithHint(
                ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD | Action.UPDATE), claim_changed
            ),
            # A volume created, or its topology labels changed.
            ClusterEventWithHint(
                ClusterEvent(Resource.PERSISTENT_VOLUME, Action.ADD | Action.UPDATE), volume_changed
            ),
        ]


def claim_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue when the claim is one of the pod's."""
    if not isinstance(new, PersistentVolumeClaim):
        return QueueingHint.QUEUE
    if new.namespace == pod.namespace and new.name in claim_names(pod):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def storage_class_added(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    if not isinstance(new, StorageClass):
        return QueueingHint.QUEUE
    return QueueingHint.QUEUE if new.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER else QueueingHint.SKIP


def volume_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue for a new volume, or one whose topology labels changed."""
    if not isinstance(new, PersistentVolume) or (old is not None and not isinstance(old, PersistentVolume)):
        return QueueingHint.QUEUE
    if old is None or volume_topologies(old) != volume_topologies(new):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: NoArgs, handle: Handle) -> VolumeZone:
    return VolumeZone(handle, handle.objects)
