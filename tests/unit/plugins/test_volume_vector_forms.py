"""Property tests: NodeVolumeLimits' and VolumeBinding's vectorised filters (``filter_rows`` and
``filter_errors``) give the per-node filter's verdicts on randomised clusters of CSINodes, CSI and in-tree
volumes, claims, attachments and pods, and keep giving them while pods come and go and the stores change
(the per-row caches follow), with the runtime's filtering equal to the per-node chain's."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
from _volume_kit import (
    VolumeHandle,
    claim_volume,
    csi_node,
    ephemeral_volume,
    node_with,
    objects,
    pod,
    pv,
    pvc,
    storage_class,
    volume_attachment,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.objects import WATCHED_KINDS
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status, error
from kopf_scheduler.plugins import node_volume_limits
from kopf_scheduler.plugins.volume_binding import Args, VolumeBinding
from kopf_scheduler.plugins.volume_binding.claims import VolumeBindingError
from kopf_scheduler.testing.framework import make_framework

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KINDS = {kind.kind: kind for kind in WATCHED_KINDS}

DRIVERS = ["d1", "d2", "ebs.csi.aws.com"]
ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
GKE_ZONE = "topology.gke.io/zone"
EBS_ZONE = "topology.ebs.csi.aws.com/zone"
ZONES = ["us-east1-a", "us-east1-b"]
MIGRATABLE = [
    "kubernetes.io/aws-ebs",
    "kubernetes.io/gce-pd",
    "kubernetes.io/azure-disk",
    "kubernetes.io/portworx-volume",
    "kubernetes.io/vsphere-volume",
]
NS = "default"
_ids = itertools.count()


# -- random objects ------------------------------------------------------------------------------------
def _affinity(draw: Any) -> dict[str, Any] | None:
    kind = draw(st.sampled_from(["none", "none", "zone", "beta", "gke", "empty"]))
    if kind == "none":
        return None
    if kind == "empty":
        return {"required": {"nodeSelectorTerms": []}}
    key = {"zone": ZONE, "beta": BETA_ZONE, "gke": GKE_ZONE}[kind]
    values = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True))
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}
    return {"required": {"nodeSelectorTerms": [term]}}


def _volume(draw: Any, i: int) -> dict[str, Any]:
    name = f"pv{i}"
    labels: dict[str, str] = {}
    if draw(st.integers(0, 2)) == 0:
        key = draw(st.sampled_from([ZONE, BETA_ZONE]))
        labels[key] = draw(st.sampled_from([*ZONES, "us-east1-a__us-east1-b", "us-east1-a__eu-west1-b", " "]))
    source = draw(st.sampled_from(SOURCES))
    if source == "csi":
        handle = draw(st.sampled_from(["shared", f"h{i}"]))
        raw = pv(name, labels, csi={"driver": draw(st.sampled_from(DRIVERS)), "volumeHandle": handle})
    elif source == "ebs":
        volume_id = draw(st.sampled_from(["aws://a/b/c", f"vol-{i}"]))
        raw = pv(name, labels, awsElasticBlockStore={"volumeID": volume_id})
    elif source == "gce":
        raw = pv(name, labels, gcePersistentDisk={"pdName": f"pd{i}"})
    elif source == "azure":
        kind = draw(st.sampled_from(["Shared", "Managed"]))
        raw = pv(name, labels, azureDisk={"diskName": "d", "diskURI": f"u{i}", "kind": kind})
    elif source == "portworx":
        raw = pv(name, labels, portworxVolume={"volumeID": f"px{i}"})
    elif source == "vsphere":
        raw = pv(name, labels, vsphereVolume={"volumePath": f"[ds] v{i}"})
    else:
        raw = pv(name, labels, hostPath={"path": "/x"})
    affinity = _affinity(draw)
    if affinity is not None:
        raw["spec"]["nodeAffinity"] = affinity
    return raw


SOURCES = ["csi"] * 5 + ["ebs", "ebs", "gce", "gce", "azure", "azure", "portworx", "vsphere", "hostPath"]
CLAIM_KINDS = ["bound"] * 8 + ["missing-volume", "wffc", "immediate", "no-class"]


def _claim(draw: Any, i: int, volumes: int) -> dict[str, Any]:
    kind = draw(st.sampled_from(CLAIM_KINDS))
    name = f"c{i}"
    if kind == "bound":
        volume = f"pv{draw(st.integers(0, max(volumes - 1, 0)))}"
        return pvc(name, volume=volume, annotations={"pv.kubernetes.io/bind-completed": "yes"})
    if kind == "missing-volume":
        return pvc(name, volume="gone", annotations={"pv.kubernetes.io/bind-completed": "yes"})
    if kind == "wffc":
        return pvc(name, storage_class="sc-wait")
    if kind == "immediate":
        return pvc(name, storage_class="sc-ebs")
    return pvc(name, storage_class="")


def _csi_node(draw: Any, node: str) -> dict[str, Any]:
    limits = {d: draw(st.sampled_from([None, 0, 1, 1, 2, 2, 3])) for d in DRIVERS if draw(st.integers(0, 2))}
    migrated = draw(st.lists(st.sampled_from(MIGRATABLE), max_size=5, unique=True))
    return csi_node(node, limits, migrated)


def _pod_volumes(draw: Any, claims: int, incoming: bool) -> list[dict[str, Any]]:
    """Mostly claims; now and then a missing claim, inline in-tree disks (an Azure disk of the default
    kind cannot be translated), an ephemeral volume (the incoming pod's: its claim does not exist), or a
    claim without a name (a pod on a node that cannot be counted)."""
    last = "ephemeral" if incoming else "no-name"
    kinds = ["claim"] * 12 + ["missing-claim", "ebs", "azure", "portworx", last]
    volumes: list[dict[str, Any]] = []
    for j in range(draw(st.integers(1 if incoming else 0, 3))):
        kind = draw(st.sampled_from(kinds))
        name = f"v{j}"
        if kind == "claim":
            claim = f"c{draw(st.integers(0, claims - 1))}"
            volumes.append({"name": name, "persistentVolumeClaim": {"claimName": claim}})
        elif kind == "missing-claim":
            volumes.append({"name": name, "persistentVolumeClaim": {"claimName": "nope"}})
        elif kind == "ebs":
            volumes.append({"name": name, "awsElasticBlockStore": {"volumeID": f"vol-inline{j}"}})
        elif kind == "azure":
            volumes.append({"name": name, "azureDisk": {"diskName": "d", "diskURI": f"u{j}"}})
        elif kind == "portworx":
            volumes.append({"name": name, "portworxVolume": {"volumeID": f"px{j}"}})
        elif kind == "ephemeral":
            volumes.append(ephemeral_volume(name))
        elif draw(st.integers(0, 3)) == 0:  # rarely: it makes every filter of its node fail
            volumes.append({"name": name, "persistentVolumeClaim": {"claimName": ""}})
    return volumes


def _bound_pod(draw: Any, node: str, claims: int) -> PodInfo:
    return PodInfo(pod(*_pod_volumes(draw, claims, False), name=f"q{next(_ids)}", namespace=NS, node=node))


def _node_labels(draw: Any) -> dict[str, str]:
    labels = {}
    for key in (ZONE, BETA_ZONE, GKE_ZONE, EBS_ZONE):
        if draw(st.booleans()):
            labels[key] = draw(st.sampled_from(ZONES))
    return labels


@st.composite
def clusters(draw: Any) -> tuple[ClusterObjects, Snapshot, PodInfo, np.ndarray, int]:
    volumes = draw(st.integers(1, 6))
    claims = draw(st.integers(1, 6))
    node_names = [f"n{i}" for i in range(draw(st.integers(1, 6)))]
    raws: list[dict[str, Any]] = [
        storage_class("sc-wait", "d1", "WaitForFirstConsumer"),
        storage_class("sc-ebs", "kubernetes.io/aws-ebs"),
    ]
    raws += [_volume(draw, i) for i in range(volumes)]
    raws += [_claim(draw, i, volumes) for i in range(claims)]
    raws += [_csi_node(draw, n) for n in node_names if draw(st.integers(0, 4)) > 0]
    for k in range(draw(st.sampled_from([0, 0, 1, 3]))):  # none: claim changes recount only some rows
        raws.append(
            volume_attachment(
                f"va{k}",
                draw(st.sampled_from(node_names)),
                draw(st.sampled_from(DRIVERS)),
                f"pv{draw(st.integers(0, volumes))}",
            )
        )
    store = objects(*raws)
    infos = []
    for name in node_names:
        info = node_with(name=name, labels=_node_labels(draw))
        for _ in range(draw(st.integers(0, 3))):
            info.add_pod(_bound_pod(draw, name, claims))
        infos.append(info)
    snapshot = Snapshot()
    snapshot.rebuild(infos)
    incoming = PodInfo(
        pod(*_pod_volumes(draw, claims, True), name="incoming", namespace=NS, uid="incoming-uid")
    )
    order = draw(st.permutations(range(len(infos))))
    rows = np.asarray(order[: draw(st.integers(1, len(order)))], dtype=np.int64)
    return store, snapshot, incoming, rows, claims


# -- checks --------------------------------------------------------------------------------------------
def _per_node(
    plugin: Any, state: CycleState, pod_info: PodInfo, snapshot: Snapshot, rows: np.ndarray
) -> list[Status | None]:
    out: list[Status | None] = []
    for row in rows.tolist():
        try:
            out.append(plugin.filter(state, pod_info, snapshot.node_infos[row]))
        except VolumeBindingError as e:  # the runtime's error status
            out.append(error(str(e)))
    return out


def _agree(
    make: Callable[[], Any], kept: Any, snapshot: Snapshot, pod_info: PodInfo, rows: np.ndarray
) -> None:
    """``kept`` (a plugin whose caches lived through earlier rounds) judges ``rows`` at once as a new
    plugin judges them node by node."""
    fresh, state, fresh_state = make(), CycleState(), CycleState()
    try:
        _, pre = kept.pre_filter(state, pod_info, snapshot.node_infos)
        _, fresh_pre = fresh.pre_filter(fresh_state, pod_info, snapshot.node_infos)
    except VolumeBindingError:
        return  # the pre-filter's error fails the attempt before any filter runs
    assert pre == fresh_pre
    if pre is not None:  # skipped, or rejected before filtering
        return
    expected = _per_node(fresh, fresh_state, pod_info, snapshot, rows)
    passes = kept.filter_rows(state, pod_info, snapshot.table, rows)
    if passes is None:  # no vector form for the pod: the runtime filters node by node
        assert isinstance(kept, VolumeBinding)
        return
    assert passes.tolist() == [s is None for s in expected]
    rejected = rows[~passes]
    wanted_errors = [s.code == Code.ERROR for s in expected if s is not None]
    if len(rejected):
        errors = kept.filter_errors(state, pod_info, snapshot.table, rejected)
        assert (errors.tolist() if errors is not None else [False] * len(rejected)) == wanted_errors
    assert _per_node(kept, state, pod_info, snapshot, rows) == expected  # its own per-node form too


def _mutate(draw: Any, store: ClusterObjects, snapshot: Snapshot, claims: int) -> None:
    """A change of the kind the caches must follow: a pod added to or removed from a node, a CSINode,
    claim, volume or attachment changed or deleted."""
    what = draw(
        st.sampled_from(["add-pod", "remove-pod", "csi-node", "claim", "volume", "attachment", "delete"])
    )
    names = [info.name for info in snapshot.node_infos]
    if what in ("add-pod", "remove-pod"):
        row = draw(st.integers(0, len(names) - 1))
        clone = snapshot.node_infos[row].clone()
        if what == "add-pod" or not clone.pods:
            clone.add_pod(_bound_pod(draw, clone.name, claims))
        else:
            clone.remove_pod(draw(st.sampled_from(sorted(clone.pods.values(), key=lambda p: p.name))))
        snapshot.replace(clone)
    elif what == "csi-node":
        store.store(KINDS["CSINode"]).upsert(_csi_node(draw, draw(st.sampled_from(names))))
    elif what == "claim":
        store.store(KINDS["PersistentVolumeClaim"]).upsert(_claim(draw, draw(st.integers(0, claims - 1)), 6))
    elif what == "volume":
        store.store(KINDS["PersistentVolume"]).upsert(_volume(draw, draw(st.integers(0, 6))))
    elif what == "attachment":
        node, driver = draw(st.sampled_from(names)), draw(st.sampled_from(DRIVERS))
        attachment = volume_attachment(
            f"va{draw(st.integers(0, 3))}", node, driver, f"pv{draw(st.integers(0, 6))}"
        )
        store.store(KINDS["VolumeAttachment"]).upsert(attachment)
    else:
        kind = draw(
            st.sampled_from(["PersistentVolumeClaim", "PersistentVolume", "CSINode", "VolumeAttachment"])
        )
        listed = store.store(KINDS[kind]).names()
        if listed:
            store.store(KINDS[kind]).delete(*draw(st.sampled_from(sorted(listed))))


def _rounds(cluster: Any, data: Any, make: Callable[[VolumeHandle], Any]) -> None:
    store, snapshot, incoming, rows, claims = cluster
    handle = VolumeHandle(store, snapshot)
    kept = make(handle)
    for _ in range(data.draw(st.integers(1, 6))):
        _agree(lambda: make(handle), kept, snapshot, incoming, rows)
        _mutate(data.draw, store, snapshot, claims)
    _agree(lambda: make(handle), kept, snapshot, incoming, rows)


@SETTINGS
@given(cluster=clusters(), data=st.data())
def test_node_volume_limits_filter_rows_agrees_with_filter(cluster: Any, data: Any) -> None:
    _rounds(cluster, data, lambda handle: node_volume_limits.new(None, handle))


@SETTINGS
@given(cluster=clusters(), data=st.data())
def test_volume_binding_filter_rows_agrees_with_filter(cluster: Any, data: Any) -> None:
    _rounds(cluster, data, lambda handle: VolumeBinding(Args(), handle))


@SETTINGS
@given(cluster=clusters(), num_to_find=st.integers(1, 6))
def test_filtering_with_the_volume_plugins_equals_the_per_node_chain(cluster: Any, num_to_find: int) -> None:
    """The runtime over both plugins (vectorised, errors included) finds what the chain finds node by
    node, and fails with the first error in examination order."""
    store, snapshot, incoming, rows, _ = cluster
    handle = VolumeHandle(store, snapshot)
    plugins = [node_volume_limits.new(None, handle), VolumeBinding(Args(), handle)]
    framework = make_framework(pre_filter=plugins, filter=plugins)
    state = CycleState()
    _, pre, _ = framework.run_pre_filter(state, incoming, snapshot.node_infos)
    if pre is not None:
        return
    outcome = framework.find_feasible(state, incoming, snapshot, rows, num_to_find)
    feasible: list[int] = []
    failure = None
    for row in rows.tolist():
        status = framework.run_filter_chain(state, incoming, snapshot.node_infos[row])
        if status is None:
            feasible.append(row)
            if len(feasible) == num_to_find:
                break
        elif status.code == Code.ERROR:
            failure = status
            break
    assert outcome.statuses.error == failure
    assert outcome.feasible.tolist() == feasible


# -- examples: the per-row counts follow the stores ----------------------------------------------------
def _vector_verdict(plugin: Any, snapshot: Snapshot, raw_pod: dict[str, Any]) -> bool:
    state, info = CycleState(), PodInfo(raw_pod)
    _, pre = plugin.pre_filter(state, info, snapshot.node_infos)
    assert pre is None
    passes = plugin.filter_rows(state, info, snapshot.table, np.arange(len(snapshot.node_infos)))
    return bool(passes[0])


def test_claim_volume_and_csi_node_changes_reach_the_counted_rows() -> None:
    """A node counted once keeps its generation; what its pods' claims and volumes are, and its limits,
    may change under it (with and without VolumeAttachments, which make every change recount)."""
    for attachments in (False, True):
        store = objects(
            pv("pv-new", csi={"driver": "d", "volumeHandle": "h-new"}),
            pv("pv-a", csi={"driver": "d", "volumeHandle": "h-a"}),
            pv("pv-b", csi={"driver": "d", "volumeHandle": "h-b"}),
            pvc("new", volume="pv-new"),
            pvc("a", volume="pv-a"),
            pvc("b", volume="pv-b"),
            csi_node("n1", {"d": 2}),
            *([volume_attachment("va", "n2", "d", "pv-a")] if attachments else []),
        )
        node = node_with(name="n1")
        for claim in ("a", "b"):
            node.add_pod(PodInfo(pod(claim_volume(claim), name=f"p{claim}", node="n1")))
        snapshot = Snapshot()
        snapshot.rebuild([node])
        plugin = node_volume_limits.new(None, VolumeHandle(store, snapshot))
        incoming = pod(claim_volume("new"), name="incoming")
        assert not _vector_verdict(plugin, snapshot, incoming)
        store.store(KINDS["PersistentVolume"]).upsert(pv("pv-b", hostPath={"path": "/x"}))
        assert _vector_verdict(plugin, snapshot, incoming)  # b's volume no longer counts
        store.store(KINDS["PersistentVolume"]).upsert(pv("pv-b", csi={"driver": "d", "volumeHandle": "h-b"}))
        assert not _vector_verdict(plugin, snapshot, incoming)
        store.store(KINDS["PersistentVolumeClaim"]).upsert(pvc("b", volume="pv-a"))
        assert _vector_verdict(plugin, snapshot, incoming)  # one volume for both pods
        store.store(KINDS["PersistentVolumeClaim"]).upsert(pvc("b", volume="pv-b"))
        assert not _vector_verdict(plugin, snapshot, incoming)
        store.store(KINDS["CSINode"]).upsert(csi_node("n1", {"d": 3}))
        assert _vector_verdict(plugin, snapshot, incoming)
        assert _vector_verdict(plugin, snapshot, pod(claim_volume("a"), name="q"))  # attached already
