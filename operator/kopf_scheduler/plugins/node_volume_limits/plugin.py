"""NodeVolumeLimits: a node may attach at most its CSINode's ``allocatable.count`` volumes of each CSI
driver (``nodevolumelimits/csi.go``, v1.37, upstream's ``CSILimits``).

The limits come from the CSINode alone (not the node's ``attachable-volumes-*`` allocatable), and a node
without a CSINode, or a driver without a count, has no limit.

A volume is counted once per node as ``<driver>/<handle>``. A claim (``persistentVolumeClaim``, or a
generic ephemeral volume's ``<pod>-<volume>`` claim, which must be controlled by the pod) counts as its
bound volume's CSI driver and handle; an in-tree volume counts as the CSI volume it migrates to where
migration is on (``translation``); a claim not yet bound, or bound to a missing volume, counts as its
class's provisioner (translated when in-tree) with a handle unique to the claim; a claim without a
class, or of a missing class, is not counted. Inline in-tree volumes count the same way.

Filter, for a pod with such volumes: the pod's own volumes are counted (a missing claim of the pod is
``UnschedulableAndUnresolvable`` as ``looking up PVC <ns>/<name>: persistentvolumeclaim "<name>" not
found``). With the VolumeLimitScaling gate on (1.37), a driver of theirs whose CSIDriver sets
``preventPodSchedulingIfMissing`` and that the node's CSINode does not list (or the node has no CSINode)
is ``Unschedulable`` as ``<driver> CSI driver is not installed on the node`` (the first such driver in the
pod's volumes; upstream picks one of several at random); a driver without a CSIDriver passes. Then the
volumes not counted on the node already are added per driver to the node's: the volumes of the pods on
the node (their missing claims are not counted) and the node's VolumeAttachments whose volume is a CSI
volume. Exceeding a driver's limit is ``Unschedulable`` (preemption may free volumes). An ephemeral claim
not owned by its pod, or an inline volume that cannot be translated, is an error, as upstream.
Pre-filter skips pods with no claim, ephemeral or migratable in-tree volume.

The vectorised filter judges a chunk of nodes at once from per-row arrays (``rows``): the pod's count
per CSINode profile is compared with each row's room per driver, less the volumes the row attaches
already; rows whose pods cannot be counted are the filter's errors (``filter_errors``). A pod with a
volume of a driver that opts in to the driver check is filtered node by node.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kopf_scheduler.framework import signers
from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
    VectorFilter,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.objects import CSI_DRIVERS, CSI_NODES, ClusterListers, CSINode
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status, error, unschedulable
from kopf_scheduler.framework.volumes import VolumeParseError, pod_volumes
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins._csi_translation import migratable
from kopf_scheduler.plugins.node_volume_limits.counting import (
    PodCount,
    Profile,
    VolumeCounter,
    profile,
    volume_limits,
)
from kopf_scheduler.plugins.node_volume_limits.hints import (
    attachment_deleted,
    claim_added,
    csi_node_updated,
    pod_deleted,
)
from kopf_scheduler.plugins.node_volume_limits.rows import PROFILES, NodeRows, refresh, synced

NAME = names.NODE_VOLUME_LIMITS
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
ERR_REASON_DRIVER_NOT_INSTALLED = "{} CSI driver is not installed on the node"
#: the feature gate of the driver check
GATE = "VolumeLimitScaling"

__all__ = [
    "ERR_REASON_DRIVER_NOT_INSTALLED",
    "ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED",
    "NAME",
    "NodeVolumeLimits",
    "new",
    "volume_limits",
]


@dataclass(slots=True)
class _State:
    """The cycle's view: the stores' stamp, and the incoming pod's count per CSINode profile (filled as
    nodes of each profile are met). The stores do not change within a cycle, so clones share it."""

    stamp: int
    counts: dict[Profile, PodCount] = field(default_factory=dict)

    def clone(self) -> _State:
        return self


_KEY: StateKey[_State] = StateKey(NAME)


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin, VectorFilter, EnqueueExtensions, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The pod's volumes but ConfigMaps and Secrets."""
        return [(signers.VOLUMES, signers.volumes(pod))]

    def __init__(self, handle: Handle, objects: ClusterListers, volume_limit_scaling: bool) -> None:
        self.handle = handle
        self.objects = objects
        #: the VolumeLimitScaling gate: drivers may refuse nodes they are not installed on
        self.volume_limit_scaling = volume_limit_scaling
        # Drawn outside the scheduler's seeded random source, which it must not disturb.
        self.counter = VolumeCounter(objects, secrets.token_hex(16))

    @property
    def unbound_prefix(self) -> str:
        return self.counter.unbound_prefix

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        try:
            volumes = pod_volumes(pod)
        except VolumeParseError as e:
            return None, error(str(e))
        if any(v.claim_name is not None or v.ephemeral or migratable(v.disk) for v in volumes):
            state.write(_KEY, _State(self.counter.stamp()))
            return None, None
        return None, SKIP

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        try:
            if not pod_volumes(pod):
                return None
        except VolumeParseError as e:
            return error(str(e))
        found = state.get(_KEY)
        if found is None:  # pre-filter did not run: count here, as upstream
            found = _State(self.counter.stamp())
        csi_node = self.objects.of(CSI_NODES).get("", node.name)
        kind = profile(csi_node)
        wanted = found.counts.get(kind)
        if wanted is None:
            wanted = found.counts[kind] = self.counter.pod_count(pod, kind)
        if isinstance(wanted, Status):
            return wanted
        if not wanted:
            return None
        if self.volume_limit_scaling:
            missing = self._missing_driver(wanted, csi_node)
            if missing is not None:
                return unschedulable(ERR_REASON_DRIVER_NOT_INSTALLED.format(missing))
        on_node = self.counter.node_counts(node, csi_node, found.stamp)
        if not on_node.limits:
            return None
        if on_node.failure is not None:
            return on_node.failure
        attached = on_node.attached
        new_counts: dict[str, int] = {}
        for unique, driver in wanted.items():
            if unique not in attached:  # a volume already attached counts once
                new_counts[driver] = new_counts.get(driver, 0) + 1
        for driver, count in new_counts.items():
            limit = on_node.limits.get(driver)
            if limit is not None and on_node.counts.get(driver, 0) + count > limit:
                return unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
        return None

    def _missing_driver(self, wanted: dict[str, str], csi_node: CSINode | None) -> str | None:
        """``checkCSIDriverOnNode``: the first driver of ``wanted`` that opts in to being required on the
        node and is not on ``csi_node``."""
        drivers = self.objects.of(CSI_DRIVERS)
        for driver in wanted.values():
            found = drivers.get("", driver)
            if found is None or not found.prevent_pod_scheduling_if_missing:
                continue
            if csi_node is None or driver not in csi_node.drivers:
                return driver
        return None

    def _opts_in(self, wanted: dict[str, str]) -> bool:
        """Whether a driver of ``wanted`` opts in to the driver check (then the filter runs per node)."""
        drivers = self.objects.of(CSI_DRIVERS)
        return any(
            (found := drivers.get("", driver)) is not None and found.prevent_pod_scheduling_if_missing
            for driver in set(wanted.values())
        )

    def filter_rows(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> np.ndarray | None:
        judged = self._judge(state, pod, table, rows)
        return None if judged is None else judged[0]

    def filter_errors(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> np.ndarray | None:
        judged = self._judge(state, pod, table, rows)
        return None if judged is None else judged[1]

    def _judge(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None] | None:
        """``filter``'s verdicts on ``rows``: (passes, fails with an error); None when the pod has a
        volume whose driver opts in to the driver check (``filter`` then judges node by node)."""
        n = len(rows)
        try:
            if not pod_volumes(pod):
                return np.ones(n, dtype=bool), None
        except VolumeParseError:
            return np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
        found = state.get(_KEY) or _State(self.counter.stamp())
        infos = self.handle.snapshot().node_infos
        if len(infos) != table.size:
            raise RuntimeError("the node table does not describe the current snapshot")
        holder: list[NodeRows | None] = table.memo((NAME, "rows", self.counter), lambda: [None])
        node_rows = holder[0] = synced(self.counter, holder[0], table.size)
        refresh(self.counter, node_rows, infos, rows, table.generation)
        kinds = node_rows.kind[rows]
        passes = np.ones(n, dtype=bool)
        failing: np.ndarray | None = None
        first = int(kinds[0]) if n else 0
        codes = [first] if n and (kinds == first).all() else np.unique(kinds).tolist()
        for code in codes:
            kind = PROFILES[code]
            wanted = found.counts.get(kind)
            if wanted is None:
                wanted = found.counts[kind] = self.counter.pod_count(pod, kind)
            mask = kinds == code
            if isinstance(wanted, Status):
                passes[mask] = False
                if wanted.code == Code.ERROR:
                    failing = np.zeros(n, dtype=bool) if failing is None else failing
                    failing[mask] = True
                continue
            if not wanted:
                continue
            if self.volume_limit_scaling and self._opts_in(wanted):
                return None
            sub = rows[mask]
            limited = node_rows.limited[sub]
            failed = limited & node_rows.failed[sub]
            passes[mask] = ~(failed | (limited & node_rows.exceeded(wanted, sub)))
            if failed.any():
                failing = np.zeros(n, dtype=bool) if failing is None else failing
                failing[mask] = failed
        return passes, failing

    # -- requeueing ------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Any new CSINode may bring room (no hint, as upstream).
            ClusterEventWithHint(ClusterEvent(Resource.CSI_NODE, Action.ADD)),
            ClusterEventWithHint(ClusterEvent(Resource.CSI_NODE, Action.UPDATE), csi_node_updated),
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE), pod_deleted),
            ClusterEventWithHint(ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD), claim_added),
            ClusterEventWithHint(ClusterEvent(Resource.VOLUME_ATTACHMENT, Action.DELETE), attachment_deleted),
        ]


def new(args: NoArgs, handle: Handle) -> NodeVolumeLimits:
    return NodeVolumeLimits(handle, handle.objects, handle.feature_gates.enabled(GATE))
