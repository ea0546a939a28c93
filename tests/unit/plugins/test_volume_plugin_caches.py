"""The volume plugins' caches give the answers counting afresh gives: NodeVolumeLimits' per-node counts
follow pods added to and removed from a node and every change of a claim, volume, CSINode or
VolumeAttachment; one cycle's state serves every node; VolumeBinding's bound-claims fast path gives
``find_pod_volumes``' verdicts."""

from __future__ import annotations

from typing import Any

from _volume_kit import (
    VolumeHandle,
    csi_node,
    csi_pv,
    node_with,
    objects,
    pod_with_claims,
    pv,
    pvc,
    volume_attachment,
)

from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import WATCHED_KINDS
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins.node_volume_limits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED
from kopf_scheduler.plugins.node_volume_limits import new as new_limits

EXCEEDED = unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
KINDS = {kind.kind: kind for kind in WATCHED_KINDS}


def _upsert(store: ClusterObjects, raw: dict[str, Any]) -> None:
    store.store(KINDS[raw["kind"]]).upsert(raw)


def _cluster() -> ClusterObjects:
    return objects(
        csi_pv("pv-new", "d", "h-new"),
        csi_pv("pv-a", "d", "h-a"),
        csi_pv("pv-b", "d", "h-b"),
        pvc("new", volume="pv-new"),
        pvc("a", volume="pv-a"),
        pvc("b", volume="pv-b"),
        csi_node("n1", {"d": 2}),
    )


def _run(plugin: Any, node: NodeInfo, raw_pod: dict[str, Any] | None = None) -> Status | None:
    """One cycle: pre-filter, then filter (twice: the second answer comes from the caches)."""
    state, info = CycleState(), PodInfo(raw_pod or pod_with_claims("new"))
    _, pre = plugin.pre_filter(state, info, [node])
    assert pre is None
    first = plugin.filter(state, info, node)
    assert plugin.filter(state, info, node) == first
    assert plugin.filter(CycleState(), info, node) == first  # without pre-filter: the same
    return first


def test_pods_added_to_and_removed_from_the_node() -> None:
    plugin = new_limits(None, VolumeHandle(_cluster()))
    node = node_with(pod_with_claims("a", name="pa", node="n1"), name="n1")
    assert _run(plugin, node) is None
    b = PodInfo(pod_with_claims("b", name="pb", node="n1"))
    node.add_pod(b)
    assert _run(plugin, node) == EXCEEDED
    clone = node.clone()  # the snapshot's copy: the same generation, the same counts
    assert _run(plugin, clone) == EXCEEDED
    node.remove_pod(b)
    assert _run(plugin, node) is None
    assert _run(plugin, clone) == EXCEEDED  # the older copy keeps its own answer


def test_a_volume_shared_with_a_pod_on_the_node_counts_once() -> None:
    plugin = new_limits(None, VolumeHandle(_cluster()))
    node = node_with(pod_with_claims("a", name="pa", node="n1"), pod_with_claims("b", name="pb", node="n1"),
                     name="n1")  # fmt: skip
    assert _run(plugin, node_with(name="n1")) is None
    assert _run(plugin, node, pod_with_claims("new")) == EXCEEDED
    assert _run(plugin, node, pod_with_claims("a", name="q")) is None


def test_claim_and_volume_changes() -> None:
    store = _cluster()
    plugin = new_limits(None, VolumeHandle(store))
    node = node_with(pod_with_claims("a", name="pa", node="n1"), pod_with_claims("b", name="pb", node="n1"),
                     name="n1")  # fmt: skip
    assert _run(plugin, node) == EXCEEDED
    _upsert(store, pv("pv-b", hostPath={"path": "/x"}))  # b's volume no longer a CSI volume
    assert _run(plugin, node) is None
    _upsert(store, csi_pv("pv-b", "d", "h-b"))
    assert _run(plugin, node) == EXCEEDED
    _upsert(store, pvc("b", volume="pv-a"))  # b now names a's volume: one volume counted once
    assert _run(plugin, node) is None
    store.store(KINDS["PersistentVolumeClaim"]).delete("default", "b")  # a running pod's missing claim
    assert _run(plugin, node) is None
    _upsert(store, pvc("b", volume="pv-b"))
    assert _run(plugin, node) == EXCEEDED
    store.store(KINDS["PersistentVolumeClaim"]).delete("default", "new")  # the pod's own claim
    assert _run(plugin, node) == unresolvable(
        'looking up PVC default/new: persistentvolumeclaim "new" not found'
    )


def test_csi_node_changes() -> None:
    store = _cluster()
    plugin = new_limits(None, VolumeHandle(store))
    node = node_with(pod_with_claims("a", name="pa", node="n1"), name="n1")
    assert _run(plugin, node) is None
    _upsert(store, csi_node("n1", {"d": 1}))
    assert _run(plugin, node) == EXCEEDED
    _upsert(store, csi_node("n1", {"other": 1}))  # no limit for the pod's driver
    assert _run(plugin, node) is None
    store.store(KINDS["CSINode"]).delete("", "n1")  # no CSINode: no limits
    assert _run(plugin, node) is None
    _upsert(store, csi_node("n1", {"d": 1}))
    assert _run(plugin, node) == EXCEEDED


def test_volume_attachment_changes() -> None:
    store = _cluster()
    plugin = new_limits(None, VolumeHandle(store))
    node = node_with(pod_with_claims("a", name="pa", node="n1"), name="n1")
    assert _run(plugin, node) is None
    _upsert(store, volume_attachment("va-b", "n1", "d", "pv-b"))
    assert _run(plugin, node) == EXCEEDED
    _upsert(store, volume_attachment("va-b", "n2", "d", "pv-b"))  # moved to another node
    assert _run(plugin, node) is None
    _upsert(store, volume_attachment("va-a", "n1", "d", "pv-a"))  # a's volume: counted once
    assert _run(plugin, node) is None
    store.store(KINDS["VolumeAttachment"]).delete("", "va-a")
    assert _run(plugin, node) is None


def test_a_pod_on_the_node_that_cannot_be_counted_is_an_error_until_it_leaves() -> None:
    store = _cluster()
    plugin = new_limits(None, VolumeHandle(store))
    bad = PodInfo(pod_with_claims("", name="bad", node="n1"))
    node = node_with(name="n1")
    node.add_pod(bad)
    assert _run(plugin, node) == error("PersistentVolumeClaim had no name")
    node.remove_pod(bad)
    assert _run(plugin, node) is None
